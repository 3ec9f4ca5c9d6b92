// The parallel plan of a training run and the rank layout it implies.
//
// Degrees: data parallel (DP, optionally ZeRO-1/2/3 sharded), tensor parallel (TP, Megatron
// column/row; with sequence parallelism SP the TP all-reduces become reduce-scatter + all-gather
// and norms/dropout run on s/TP tokens), context parallel (CP, ring attention over the sequence),
// pipeline parallel (PP, with virtual stages VPP for the interleaved and zbv schedules), expert
// parallel (EP, carved out of DP as Megatron does: experts split over EP ranks of a DP group).
// World size = TP x CP x DP x PP.
//
// Rank layout (Megatron's default order, TP innermost): a rank's coordinates along the axes are
// mixed-radix digits of the rank in the order given by `order` (innermost first). Default
// tp, cp, dp, pp: ranks 0..TP-1 form the first TP group (one node), consecutive TP groups form a
// CP group, and so on; DP groups then stride over nodes and PP stages are the outermost blocks.
// The EP group of a rank is EP consecutive DP indices; the expert-data-parallel group the DP
// indices with the same position in their EP block. With expert TP 1 (etp, below) the EP group
// is EP consecutive ranks of the rank's pipeline stage (Megatron-Core's expert rank generator,
// order tp-ep-dp-pp with tp = etp = 1), the expert-data-parallel group the stage's ranks with the
// same position in their EP block.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "meshsim/sim/program.h"
#include "meshsim/sim/units.h"
#include "meshsim/workloads/model.h"
#include "meshsim/workloads/pipeline.h"
#include "meshsim/workloads/plan_field.h"
#include "meshsim/workloads/stack.h"

namespace meshsim::workloads {

enum class Axis : uint8_t { kTensor, kContext, kData, kPipeline };
inline constexpr int kNumAxes = 4;
constexpr auto enum_names(Axis) {
  return std::to_array<EnumName<Axis>>({{Axis::kTensor, "tp"},
                                        {Axis::kContext, "cp"},
                                        {Axis::kData, "dp"},
                                        {Axis::kPipeline, "pp"}});
}

// What a communication op is for; reported as exposed communication by kind. Communication ops
// carry it as their OpLabels::category (category_of), so that the engine's analysis can sum their
// exposed time without knowing about parallelism.
enum class CommKind : uint8_t { kTensor, kContext, kData, kPipeline, kExpert };
constexpr auto enum_names(CommKind) {
  return std::to_array<EnumName<CommKind>>({{CommKind::kTensor, "tp"},
                                            {CommKind::kContext, "cp"},
                                            {CommKind::kData, "dp"},
                                            {CommKind::kPipeline, "pp"},
                                            {CommKind::kExpert, "ep"}});
}
constexpr OpCategory category_of(CommKind kind) { return OpCategory(static_cast<uint32_t>(kind)); }

// The attention kernel: a fused one, by implementation (kFlash: FlashAttention-2, the flash-attn
// package and PyTorch SDPA's flash backend; kFlash3: FlashAttention-3; kCudnn: cuDNN's fused
// attention, Transformer Engine's FusedAttention; kSplash: JAX's Pallas flash/splash kernels on
// TPU; kTriton: FlashAttention's Triton port, the FlashAttention-1 algorithm that llm-foundry's
// attn_impl triton runs), or kNaive: the scores materialised through memory (batched GEMMs and a
// softmax).
enum class AttentionKernel { kFlash, kFlash3, kCudnn, kSplash, kTriton, kNaive };
constexpr auto enum_names(AttentionKernel) {
  return std::to_array<EnumName<AttentionKernel>>({{AttentionKernel::kFlash, "flash"},
                                                   {AttentionKernel::kFlash3, "flash3"},
                                                   {AttentionKernel::kCudnn, "cudnn"},
                                                   {AttentionKernel::kSplash, "splash"},
                                                   {AttentionKernel::kTriton, "triton"},
                                                   {AttentionKernel::kNaive, "naive"}});
}
// The fused implementation of `k` (std::nullopt for naive attention).
std::optional<AttentionImpl> fused_attention(AttentionKernel k);
// Activation recompute, as frameworks name it: none; Megatron's selective (the attention core);
// full (each layer keeps its input and re-runs its forward in the backward; Megatron's
// --recompute-granularity full, with recompute_num_layers for its block method); dots (JAX's
// checkpoint_dots, MaxText remat_policy "minimal": the outputs of the matmuls are saved, the
// norms and activation functions between them are recomputed in the backward); qkv_out_proj
// (JAX's save_only_these_names over the attention's projections: PaxML's CHECKPOINT_POLICY
// SAVE_QKV_OUT_PROJ, praxis/layers/checkpoint_policy.py, and MaxText's remat_policy
// "save_dot_except_mlp", layers/decoders.py: the Q, K, V and output projections' results are
// saved with the layer input; the norms, the attention core and the MLP up to its down
// projection re-run in the backward); qkv_proj (MaxText's remat_policy "save_qkv_proj",
// MaxText/layers/models.py get_remat_policy: save_only_these_names over query_proj, key_proj,
// value_proj and qkv_proj: Q, K and V are saved with the layer input; the output projection
// re-runs as well).
enum class Recompute { kNone, kSelective, kFull, kDots, kQkvOutProj, kQkvProj };
constexpr auto enum_names(Recompute) {
  return std::to_array<EnumName<Recompute>>({{Recompute::kNone, "none"},
                                             {Recompute::kSelective, "selective"},
                                             {Recompute::kFull, "full"},
                                             {Recompute::kDots, "dots"},
                                             {Recompute::kDots, "minimal"},
                                             {Recompute::kQkvOutProj, "qkv_out_proj"},
                                             {Recompute::kQkvOutProj, "save_qkv_out_proj"},
                                             {Recompute::kQkvOutProj, "save_dot_except_mlp"},
                                             {Recompute::kQkvProj, "qkv_proj"},
                                             {Recompute::kQkvProj, "save_qkv_proj"}});
}
// JAX's policies (dots, qkv_out_proj, qkv_proj): what the backward re-runs before each layer's
// backward is recompute_jax_policy's, not a whole forward.
constexpr bool jax_policy(Recompute r) {
  return r == Recompute::kDots || r == Recompute::kQkvOutProj || r == Recompute::kQkvProj;
}
// The policies that keep named projections (save_only_these_names): Q, K and V, with or without
// the output projection.
constexpr bool keeps_named_projections(Recompute r) {
  return r == Recompute::kQkvOutProj || r == Recompute::kQkvProj;
}
// Megatron-Core's recompute_modules under recompute_granularity "selective"
// (megatron/core/transformer/transformer_config.py; its default is {core_attn}): each listed
// module keeps its input and re-runs its forward in the backward. core_attn: the attention core
// (its materialised scores, or a fused kernel's output and statistics: ParallelPlan::
// fused_attention_checkpointed); mla_up_proj: MLA's Q and KV
// up-projections, whose outputs core attention would otherwise keep (the latents stay); mlp: a
// dense layer's MLP (MoE layers are the "moe" module); moe_act: the routed experts' activation
// function (its output is dropped, the up-projections' output stays).
enum class RecomputeModule { kCoreAttn, kMlaUpProj, kMlp, kMoeAct };
constexpr auto enum_names(RecomputeModule) {
  return std::to_array<EnumName<RecomputeModule>>({{RecomputeModule::kCoreAttn, "core_attn"},
                                                   {RecomputeModule::kMlaUpProj, "mla_up_proj"},
                                                   {RecomputeModule::kMlp, "mlp"},
                                                   {RecomputeModule::kMoeAct, "moe_act"}});
}
enum class ZeroStage { kNone = 0, kOptimizerStates = 1, kGradients = 2, kParameters = 3 };

// How MoE tokens reach their experts. kAllToAll: one all-to-all over the EP group, a copy per
// (token, expert) pair (Megatron-Core's alltoall dispatcher). kFlex: Megatron-Core's flex
// dispatcher (moe_token_dispatcher_type "flex", backends DeepEP and HybridEP): a token crosses
// the network once per destination node, to the GPU of the same local index (DeepEP's internode
// kernels: one RDMA copy per node, then NVLink forwarding to the GPUs of its experts), so the
// network carries at most min(k, nodes, the routing groups' bound) copies of it and NVLink the
// k. Both dispatch in 16 bits: Megatron-Core's HybridEP path has "fp8_dispatch = False # Currently,
// we do not support fp8 dispatch" and its DeepEP path sends the bf16 hidden states
// (megatron/core/transformer/moe/fused_a2a.py @ 02ad939b).
enum class MoeDispatcher : uint8_t { kAllToAll, kFlex };
constexpr auto enum_names(MoeDispatcher) {
  return std::to_array<EnumName<MoeDispatcher>>(
      {{MoeDispatcher::kAllToAll, "alltoall"}, {MoeDispatcher::kFlex, "flex"}});
}

// Bytes of model state per parameter (see training_memory.h).
struct ModelStateBytes {
  int64_t weight = 2;
  int64_t gradient = 2;
  int64_t optimizer = 12;
};

struct OverlapOptions {
  bool grad_reduce = true;     // bucketed gradient reduction during the last backward
  bool param_gather = true;    // FSDP / ZeRO all-gather of the next layer's parameters ahead of use
  bool pipeline_p2p = true;    // pipeline sends and receives on their own stream
  bool tensor_parallel = false;  // TP communication hidden behind split GEMMs (else exposed)
};

// How the framework runs the memory-bound parts of a layer (norms, RoPE, activation functions,
// softmax, the loss, layout copies); workloads/src/layer_ops.h lists the kernels of each.
//  kFused: one kernel per part, as Megatron-LM with Transformer Engine and XLA run them (fused
//          RMSNorm, fused RoPE, fused SwiGLU, flash or fused softmax attention, fused cross
//          entropy).
//  kEager: PyTorch eager mode, one kernel per tensor operation, with autograd's backward kernels:
//          the implementation of Hugging Face transformers' Llama with attn_implementation
//          "eager" (and "sdpa" with flash attention), which validation/reference_trainer's
//          PyTorch twin follows.
enum class Kernels : uint8_t { kFused, kEager };
constexpr auto enum_names(Kernels) {
  return std::to_array<EnumName<Kernels>>({{Kernels::kFused, "fused"}, {Kernels::kEager, "eager"}});
}

// How a fused cross entropy (ParallelPlan::cross_entropy_fusion) runs.
//  kOnePass:      one kernel reads the 16-bit logits and writes their gradient (Transformer
//                 Engine's and Liger-Kernel's Triton kernels, XLA's fusion).
//  kMegatronCore: Megatron-Core's fused_vocab_parallel_cross_entropy: four compiled functions
//                 (torch.compile, torch.jit.script before torch 2.2) over an fp32 copy of the
//                 logits (megatron/core/fusions/fused_cross_entropy.py and jit.py @ core_r0.8.0,
//                 --cross-entropy-fusion-impl native, the default to this day).
enum class FusedCrossEntropy : uint8_t { kOnePass, kMegatronCore };

// How the AdamW step runs.
//  kFused:     one pass over the parameters' state (Megatron's and Apex's fused Adam,
//              torch.optim.AdamW(fused=True), optax under XLA).
//  kForEach:   torch.optim.AdamW's multi-tensor path (the default on CUDA in torch 2): each of its
//              nine element-wise updates is one pass over all parameters.
//  kPerTensor: torch.optim.AdamW(foreach=False), the default on CPU: the nine updates per
//              parameter tensor, plus the step-count update and a host read of it.
enum class OptimizerKernels : uint8_t { kFused, kForEach, kPerTensor };
constexpr auto enum_names(OptimizerKernels) {
  return std::to_array<EnumName<OptimizerKernels>>({{OptimizerKernels::kFused, "fused"},
                                                    {OptimizerKernels::kForEach, "foreach"},
                                                    {OptimizerKernels::kPerTensor, "per-tensor"}});
}

// THE plan of a training run: every consumer (the checks, the stage partition, the kernel
// lowering, the stage builder, the memory closed forms, the cli's report) reads it, and derived
// facts are computed from it once (partition.h). It holds no strings: choices are enums, read and
// printed through their enum_names tables. `origins` remembers where each user-set field came
// from; libraries never read it (they throw PlanError), the edge fills it and reads it.
struct ParallelPlan {
  int64_t dp = 1;
  ZeroStage zero = ZeroStage::kNone;
  int64_t tp = 1;
  bool sp = false;
  int64_t cp = 1;
  int64_t pp = 1;
  int64_t vpp = 1;
  PipelineSchedule schedule = PipelineSchedule::kOneFOneB;
  int64_t ep = 1;
  // Expert tensor parallelism (Megatron-Core's expert_tensor_parallel_size): the TP degree of the
  // routed experts, 1 or tp. 0 (unset) is tp, Megatron-Core's default (ModelParallelConfig:
  // "If None, will be set to tensor_model_parallel_size"). With etp == tp the experts are split
  // over the TP group and see its gathered tokens, and EP is carved out of DP; with etp 1 (and
  // SP) each rank routes its own s/TP tokens to whole experts, and EP is carved out of
  // TP x CP x DP (EP x ETP x EDP x PP = world, parallel_state.py's expert rank generator).
  int64_t etp = 0;
  MoeDispatcher moe_dispatcher = MoeDispatcher::kAllToAll;
  // Ranks per node (the scale-up domain: NVSwitch box, NVL72 rack), rank r on node r / node_ranks:
  // set by the composition root from the cluster (workloads knows no hardware); the flex
  // dispatcher needs it. 0: unknown.
  int64_t node_ranks = 0;
  int64_t mbs = 1;
  int64_t gbs = 1;
  int64_t seq = 0;
  Recompute recompute = Recompute::kNone;
  // Full recompute only for the first N layers of each model chunk (Megatron's
  // --recompute-method block --recompute-num-layers N); the others keep their activations. 0: all.
  int64_t recompute_num_layers = 0;
  // With selective recompute, the modules recomputed (empty: Megatron-Core's default, core_attn).
  std::vector<RecomputeModule> recompute_modules;
  // Activation offloading (Megatron-Core's cpu_offloading_num_layers through Transformer Engine's
  // CPU offload context): the saved activations of the first N layers of each model chunk go to
  // host memory after the layer's forward and come back before its backward, on copy streams
  // over the device's host link. 0: none. Megatron-Core refuses it with activation recompute.
  int64_t offload_layers = 0;
  Dtype matmul_dtype = Dtype::kBf16;
  // Bytes per activation element: 2 in bf16 mixed precision (also with fp8 GEMMs), 4 when
  // training in fp32 or tf32. set_training_dtype keeps it consistent with matmul_dtype and state.
  int64_t activation_bytes = 2;
  Kernels kernels = Kernels::kFused;
  OptimizerKernels optimizer_kernels = OptimizerKernels::kFused;
  AttentionKernel attention = AttentionKernel::kFlash;
  // The software stack (stack.h): the edge applies its profile (stack_profile.h) to the kernels,
  // attention and optimizer fields the user did not set, and sets the two below from it.
  Stack stack = Stack::kMegatron;
  Fp8Scaling fp8_scaling = Fp8Scaling::kDelayed;  // FP8 runs: how tensors are scaled
  CudaGraphs cuda_graphs = CudaGraphs::kNone;      // what the host launches as CUDA graphs
  // Megatron-Core's --fp8-param-gather: the layers' weights kept in FP8 (Transformer Engine's
  // Float8Tensor) and all-gathered as such, 1 byte a parameter, by the distributed optimizer's
  // and FSDP's parameter gathers; the embedding and head stay in 16 bits. FP8 training with
  // ZeRO 1-3 only (validate_plan).
  bool fp8_param_gather = false;
  // The data-parallel gradients accumulated, kept and reduced in fp32 when the parameters are 16
  // bits: Megatron-LM's --accumulate-allreduce-grads-in-fp32, which it forces on for bf16
  // (megatron/arguments.py since 2021, megatron/training/arguments.py: "bfloat16 requires
  // gradient accumulation and all-reduce to be done in fp32"; Megatron-Core's DDP
  // grad_reduce_in_fp32), NeMo's bf16_mixed (grad_reduce_in_fp32=True) and torchtitan's FSDP2
  // reduce_dtype (training.mixed_precision_reduce, float32). The stack's profile sets it for bf16
  // and fp8 training unless the user did (stack_profile.h); model_state() applies it.
  bool grad_reduce_fp32 = false;
  // The LM head's cross entropy as one fused pass over the 16-bit logits (Megatron-Core's
  // --cross-entropy-loss-fusion, on in NeMo's and Megatron-Bridge's recipes; XLA's fusion;
  // torch.compile's); false: Megatron-LM's VocabParallelCrossEntropy as PyTorch ops over an fp32
  // copy of the logits, Megatron-LM's own default (megatron/core/tensor_parallel/cross_entropy.py
  // @ core_r0.8.0; megatron/mpu/cross_entropy.py in 2021). Fused-kernel plans only: eager plans
  // cost PyTorch's own loss ops. The stack's profile sets it unless the user did.
  bool cross_entropy_fusion = true;
  // Which kernels the fused cross entropy runs (the stack's profile sets it).
  FusedCrossEntropy fused_cross_entropy = FusedCrossEntropy::kOnePass;
  StepWork step_work;                             // per-step work outside the layers
  BackwardPrefetch backward_prefetch = BackwardPrefetch::kPre;  // ZeRO-3's backward gathers
  // TP: a column-parallel layer's input gradient is reduced while its weight gradient is computed
  // (Megatron's async TP all-reduce, Megatron-Core's default); false: after both GEMMs, blocking
  // the compute stream (Megatron-LM 2021). The stack's profile sets it (stack_profile.h).
  bool tp_backward_async = true;
  // FlashAttention through llm-foundry's flash path (eager kernels): Q, K and V unpadded to
  // flash-attn's varlen layout and the output padded back, copies each way (stack_profile.h).
  bool attention_unpads = false;
  // Selective recompute as torchtitan's op policy (selective_ac_option "op"): the backward re-runs
  // the forward ops whose outputs the policy does not save and the backward needs (norms, RoPE,
  // the MLP's activation, every second matmul of the block: layer_ops.h
  // recompute_torchtitan_ops), instead of Megatron's attention core, and keeps what the policy
  // saves (layer_activations); the stack's profile sets it.
  bool selective_by_op = false;
  // Selective recompute of the attention core (the core_attn module) wraps a fused attention
  // kernel too: its output and statistics are dropped and its forward re-runs before its backward
  // (Megatron-Core: Attention._checkpointed_attention_forward runs core_attention, TE's
  // DotProductAttention, under tensor_parallel.checkpoint whenever recompute_granularity is
  // selective, megatron/core/transformer/attention.py @ core_r0.8.0). false: a fused kernel is
  // called outside the checkpoint and nothing re-runs (Megatron-LM's legacy ParallelAttention
  // checkpoints only its materialising CoreAttention, `if not self.use_flash_attn: if
  // self.checkpoint_core_attention:`, megatron/model/transformer.py @ b90fb2685f). Materialised
  // scores are always re-made. The stack's profile sets it.
  bool fused_attention_checkpointed = true;
  // A fully recomputed layer re-runs only what its backward reads: JAX's remat re-traces the
  // layer and keeps, of the re-run, only what the linearised backward uses (remat_partial_eval
  // DCEs the staged jaxpr to the unknown outputs, jax/_src/ad_checkpoint.py @ cec06d11), so the
  // dense MLP's down projection (with its TP reduction) and the residual sum after it, whose
  // outputs no backward op reads, do not re-run (in a parallel block, nor does the attention's
  // output projection). false: the whole forward re-runs (torch.utils.checkpoint and Megatron's
  // CheckpointFunction call the layer's forward again). The stack's profile sets it.
  bool recompute_skips_unread_outputs = false;
  // Without SP, each TP rank sends 1/TP of the activation (or its gradient) to the next stage and
  // the receiver all-gathers the pieces over its TP group before using them (Megatron-LM's
  // --scatter-gather-tensors-in-pipeline, on by default until sequence parallelism; the stack's
  // profile sets it).
  bool pipeline_scatter_gather = false;
  // Weight gradients accumulate over the microbatches inside the GEMM that computes them
  // (Megatron-Core's gradient_accumulation_fusion, XLA's fused accumulation). false: PyTorch
  // autograd's AccumulateGrad adds each microbatch's weight gradient to the parameter's .grad after
  // the first, one element-wise pass per layer reading both and writing the sum (the stack's
  // profile sets it).
  bool wgrad_accumulation_fused = true;
  // The layer is Megatron-LM's legacy ParallelTransformerLayer (megatron/model/transformer.py and
  // megatron/mpu/layers.py, 2021 to 2023), which issues plain PyTorch kernels around its fused
  // ones: the QKV linear's bias add (ColumnParallelLinear adds its bias after the GEMM) and the
  // biases' gradients as reductions over the tokens (LinearWithGradAccumulation's
  // grad_output.sum(dim=0), the sums behind bias.expand_as(residual) and the bias-GeLU's bias),
  // the context's permute(2, 0, 1, 3).contiguous() copy (with FlashAttention, the rearranges of
  // Q, K, V and of the context), the concatenation of the Q, K and V gradients
  // (split_tensor_along_last_dim's backward), baddbmm's multiplies of dQ and dK by alpha, the
  // second accumulation of the residual stream's gradient, and, with the async TP all-reduce, the
  // one-element "delay" kernel after each column linear's input gradient. The stack's profile
  // sets it.
  // Its LayerNorm's backward is apex's two-stage kernel (Megatron-LM's copy in megatron/
  // fused_kernels/layer_norm_cuda_kernel.cu until 2022, apex's fused_layer_norm_cuda after; apex
  // csrc/layer_norm_cuda_kernel.cu HostLayerNormGradient): cuComputePartGradGammaBeta reads the
  // input and the output gradient for the weight's and bias's partial sums, then
  // cuComputeGradInput reads both again and writes the input gradient, five passes where a fused
  // backward makes three.
  bool megatron_legacy_layer = false;
  // The legacy layer's LayerNorm takes apex.contrib's persistent FastLayerNormFN, three passes,
  // for a hidden size in Megatron-LM's list (megatron/model/fused_layer_norm.py
  // persist_ln_hidden_sizes @ cfd2e21607). The stack's profile sets it.
  bool persistent_layer_norm = false;
  // The host's time per framework operation relative to the CPU the stacks' host costs were
  // measured on (validation/microbench/host_dispatch.csv: 2026's Intel Xeon, PyTorch 1.13): every
  // op's host cost (HostDispatch) is multiplied by it. 2 for a host that runs the same framework
  // code twice as slowly (the H200 machine's, h200-2026-11-30/host_dispatch_h200.csv: 1.8 to 2.2).
  double host_time_scale = 1.0;
  // ZeRO-3 with full recompute: the layer's parameters are gathered for the recomputed forward,
  // released after it, and gathered again for the backward (DeepSpeed's per-submodule fetch and
  // release hooks); false: one gather serves both (FSDP). The stack's profile sets it.
  bool zero3_regather_for_recompute = false;
  // The optimizer keeps fp32 gradients whole (grad_reduce_fp32) and all-reduces them; under ZeRO-1
  // each rank then updates its shard of the optimizer state (DeepSpeed's BF16_Optimizer), where
  // other ZeRO-1 optimizers reduce-scatter. The stack's profile sets it, for bf16 training.
  bool optimizer_all_reduces_grads = false;
  // FP8 runs: the linear layers save their inputs as FP8 casts (Transformer Engine; the stack's
  // profile sets it, stack_profile.h).
  bool fp8_saves_quantized_inputs = false;
  // FP8 runs with SP: a column-parallel layer all-gathers its sequence-sharded input as the FP8
  // cast (1 byte per element), forward and for the weight gradient (the stack's profile sets it,
  // stack_profile.h); per-row scales (Fp8Scaling::kRowwise) gather in 16 bits.
  bool fp8_gathers_quantized_inputs = false;
  // FP8 runs: the linear layers' forward GEMMs (and their recompute) use the library's fast
  // accumulation, the backward ones do not (ComputeWork::fast_accumulation; stack_profile.h).
  bool fp8_fprop_fast_accumulation = false;
  // The host's work per op and its synchronisations (stack.h; the stack's profile sets it).
  HostDispatch host;
  double capacity_factor = 1.0;        // MoE: expert capacity / balanced share (>= 1)
  // MoE routing (expert_load.h): absent, every expert gets its balanced share; sigma >= 0, a
  // seeded draw with lognormal(sigma) expert popularity (0: a uniform router's sampling noise).
  std::optional<double> moe_load_skew;
  bool moe_drop_tokens = false;  // tokens beyond the capacity factor skip the expert
  int64_t moe_seed = 0;          // seeds the draw of moe_load_skew
  // HSDP / hybrid sharding (PyTorch HSDP, MaxText ici_fsdp x dcn_data_parallelism): ZeRO shards
  // over groups of `fsdp` consecutive DP ranks (inside a node when TP x CP x fsdp fits one), and
  // the dp / fsdp groups replicate each other, all-reducing the sharded gradients across. 0: ZeRO
  // shards over all of DP x CP. dp stays the total data-parallel degree.
  int64_t fsdp = 0;
  // Layers per pipeline stage, or with vpp > 1 per virtual stage in virtual-stage order
  // (pipeline.h's virtual_stage: v = c * pp + s, or zbv's V), each >= 0 (a virtual stage may
  // hold only the embedding or the head); empty = even split.
  std::vector<int64_t> stage_layers;
  std::array<Axis, kNumAxes> order = {Axis::kTensor, Axis::kContext, Axis::kData, Axis::kPipeline};
  OverlapOptions overlap;
  // Gradient bucket, when set; else the stack's rule (the stage builder's grad_bucket_bytes:
  // Megatron-Core's max(40M, 1M x DP) parameters, one bucket without overlap; 80 MB otherwise).
  std::optional<Bytes> grad_bucket;
  ModelStateBytes state;
  Provenance<PlanField> origins;

  int64_t world() const { return dp * tp * cp * pp; }
  // The training precision: kBf16, kFp16 or kFp8 (mixed precision: 16-bit activations, weights
  // and gradients, fp32 master weights and Adam moments, 16 bytes of state per parameter; fp16
  // with dynamic loss scaling; kFp8: FP8 GEMMs in the linear layers, bf16 otherwise) or kFp32 /
  // kTf32 (fp32 activations, weights and gradients, fp32 Adam moments, also 16 bytes per
  // parameter). Sets matmul_dtype, activation_bytes and state.
  void set_training_dtype(Dtype dtype);
  int64_t microbatches() const { return gbs / (dp * mbs); }
  // The pipeline schedule's input (pipeline.h).
  PipelineConfig pipeline() const { return {schedule, pp, microbatches(), vpp}; }
  // Ranks that reduce (and, with ZeRO, shard) the dense gradients: DP x CP, as Megatron does (CP
  // ranks hold the same parameters); and the expert gradients: the DP / EP ranks with the same
  // experts.
  int64_t dense_grad_group() const { return dp * cp; }
  // Ranks the ZeRO-sharded dense state is split over: the HSDP shard group x CP, or DP x CP.
  int64_t zero_shard_group() const { return (fsdp > 0 ? fsdp : dp) * cp; }
  // Bytes a layer's parameter takes in the ZeRO/FSDP parameter gathers: 1 where the weights are
  // kept in FP8 (fp8_param_gather), else the 16-bit weight's.
  int64_t layer_gather_bytes() const { return fp8_param_gather ? 1 : state.weight; }
  // Bytes of model state per parameter as the run keeps them: `state`, with 4-byte gradients
  // where they are reduced in fp32 (grad_reduce_fp32). Everything that sizes or moves gradients
  // reads this, not `state`.
  ModelStateBytes model_state() const {
    ModelStateBytes s = state;
    if (grad_reduce_fp32) {
      s.gradient = std::max<int64_t>(s.gradient, 4);
    }
    return s;
  }
  // Replicas of the sharded state (HSDP), whose gradients are all-reduced across: dp / fsdp.
  int64_t zero_replicas() const { return fsdp > 0 ? dp / fsdp : 1; }
  int64_t expert_tp() const { return etp > 0 ? etp : tp; }
  // Tokens one rank routes per microbatch: its CP chunk (gathered over TP when etp == tp), or
  // with etp 1 its s/TP sequence-parallel share.
  int64_t moe_tokens() const {
    const int64_t chunk = mbs * seq / cp;
    return experts_tp_split() ? chunk : chunk / tp;
  }
  // Whether the routed experts are split over TP (etp == tp) rather than whole on each rank.
  bool experts_tp_split() const { return expert_tp() == tp; }
  // Ranks holding the same experts: DP / EP, or with etp 1 (and TP > 1) TP x CP x DP / EP.
  int64_t expert_grad_group() const { return experts_tp_split() ? dp / ep : tp * cp * dp / ep; }
  // Whether pipeline tensors travel in 1/TP slices (pipeline_scatter_gather, which needs TP > 1
  // and no SP), and the bytes of one such tensor on one rank's wire.
  bool scatters_pipeline_tensors() const { return pipeline_scatter_gather && tp > 1 && !sp; }
  Bytes pipeline_wire_bytes(Bytes tensor) const {
    return scatters_pipeline_tensors() ? tensor / tp : tensor;
  }
};

// Upper bounds on a plan, checked with its other rules (validate_plan, validate_sharding); each
// error states its bound. Far above any training run, they keep the products the planner and the
// accounting form (ranks, tokens, microbatches x layers) inside 64 bits and a step's simulation
// within about a minute.
struct PlanLimits {
  // dp, tp, cp, pp, ep and their product: the largest cluster meshsim simulates has 131,072
  // devices (topology::kMaxDevices).
  static constexpr int64_t kRanks = int64_t{1} << 17;
  static constexpr int64_t kVpp = ModelLimits::kLayers;  // one layer per virtual stage at most
  static constexpr int64_t kSeq = int64_t{1} << 24;      // 16.8 M tokens (longest trained: ~1 M)
  static constexpr int64_t kMbs = int64_t{1} << 20;      // sequences per microbatch
  static constexpr int64_t kGbs = int64_t{1} << 30;      // sequences per step (Llama 3: 2,048)
  // Microbatches per pipeline x layers: each pair is a few dozen ops of every simulated rank
  // (thousands with eager kernels); the default step has 8 x 80.
  static constexpr int64_t kMicrobatchLayers = int64_t{1} << 20;
};

// One size of a plan, alone: positive and within its PlanLimits bound (kRanks for the degrees),
// or PlanError naming `field`. For values a search holds before it forms any plan from them.
void check_plan_size(PlanField field, int64_t value);

// Checks the plan against the model; throws PlanError naming the field at fault and what was
// expected: sizes positive and within PlanLimits; TP dividing the query heads, the KV heads (or KV
// heads dividing TP, then replicated) and d_ff; SP only with TP > 1 and the tokens of a CP rank
// divisible by TP; CP with 2*CP dividing the sequence (load-balanced causal chunks); PP dividing
// the layers unless stage_layers states the split (one entry >= 0 per stage, or with VPP > 1 per
// virtual stage, summing to the layers); VPP only with the interleaved schedule (or 2 with zbv),
// dividing the layers per stage unless stage_layers states them; EP only on MoE models, dividing
// DP and the experts; the global batch a multiple of DP x MBS; microbatches x layers within
// PlanLimits; the pipeline schedule's own rules (pipeline.h). Whether the degrees fit the cluster
// is the composition root's check (workloads knows no hardware).
// Whether selective recompute `recompute` under `plan` re-runs `module`'s forward (false for any
// other recompute).
bool recomputes(const ParallelPlan& plan, Recompute recompute, RecomputeModule module);
// Whether the backward re-runs the attention core's forward under `recompute` (the plan's own, or
// a layer's: layer_activations): Megatron's selective recompute of core_attn, the materialised
// scores or a fused kernel under ParallelPlan::fused_attention_checkpointed; torchtitan's op
// policy saves the attention output instead. What it re-runs, its checkpoint does not keep.
bool reruns_core_attention(const ParallelPlan& plan, Recompute recompute);
// Whether `model`'s blocks are like torchtitan's Llama ones (dense, no MLA, attention then MLP),
// the only ones its selective checkpointing by op (ParallelPlan::selective_by_op) is modelled for;
// its stack refuses selective recompute on the others.
bool op_checkpointing_fits(const ModelConfig& model);

// The gradient bucket of the plan's stack. Megatron-Core's DDP: max(40M, 1M x the data-parallel
// size) parameters, so that a bucket's shard stays bandwidth-bound at large DP
// (megatron/core/distributed/distributed_data_parallel.py: ddp_config.bucket_size =
// max(40000000, 1000000 * dp_group.size()); NVIDIA/Megatron-LM @ d98e8a64), one bucket without
// overlap. Megatron-LM 2021-2023: one bucket (the local DDP), or PyTorch DDP's 25 MiB where the
// reduction overlaps. DeepSpeed's pipeline engine: 500M elements. Others: 80 MB. The plan's
// grad_bucket, when set, overrides them.
Bytes grad_bucket_bytes(const ParallelPlan& p);
// Why the plan cannot gather its parameters in FP8 (ParallelPlan::fp8_param_gather), whether or
// not it asks to: it does not train in FP8, has no ZeRO, or is not on Megatron-Core. None: it can.
// validate_plan refuses fp8_param_gather with this reason; the published-run mapper applies a
// record's FP8 gathers only where there is none.
std::optional<std::string> fp8_param_gather_refusal(const ParallelPlan& plan);
void validate_plan(const ModelConfig& model, const ParallelPlan& plan);
// Caveats on a plan meshsim simulates, each as one sentence naming the frameworks (empty when there
// is none): under the custom stack, the megatron rules the plan breaks (stack_rules.h; the other
// stacks refuse such plans); fused-kernel features older stacks lack. Reports print them, so that
// a plan nobody could launch is not taken for one that somebody can.
std::vector<std::string> plan_caveats(const ModelConfig& model, const ParallelPlan& plan);
// The part of validate_plan that decides how the model splits over the ranks (what partition.h
// needs): sizes, TP, SP, CP, PP, VPP, EP and the schedule's rules, without the rules on
// combinations (precision, recompute with zb, eager kernels with CP, ZeRO without DP, learned
// positions).
void validate_split(const ModelConfig& model, const ParallelPlan& plan);
// The part of validate_split that decides how one layer splits: TP, CP, sequence and microbatch
// positive; the TP, SP and CP rules.
void validate_sharding(const ModelConfig& model, const ParallelPlan& plan);

struct RankCoords {
  int64_t tp = 0;
  int64_t cp = 0;
  int64_t dp = 0;
  int64_t pp = 0;
};

class RankLayout {
 public:
  explicit RankLayout(const ParallelPlan& plan);
  int64_t world() const { return world_; }
  RankCoords coords(int64_t rank) const;
  int64_t rank(const RankCoords& c) const;
  // The ranks varying only along `axis` from `rank` (in axis order).
  std::vector<int64_t> group_along(int64_t rank, Axis axis) const;
  // Ranks sharing everything but the DP and CP coordinates: the gradient reduction group of
  // non-expert parameters (CP ranks hold the same parameters).
  std::vector<int64_t> dp_cp_group(int64_t rank) const;
  std::vector<int64_t> expert_group(int64_t rank) const;       // EP consecutive DP indices
  std::vector<int64_t> expert_dp_group(int64_t rank) const;    // same EP position, other blocks
  // The flex dispatcher's two hops (plan.node_ranks nodes; the EP group itself under the
  // all-to-all dispatcher or without node_ranks): the EP group's ranks of the same local index
  // on every node it spans (the network hop), and its ranks on the rank's node (NVLink).
  std::vector<int64_t> expert_rail_group(int64_t rank) const;
  std::vector<int64_t> expert_node_group(int64_t rank) const;
  // HSDP (plan.fsdp > 0): the ZeRO shard group, fsdp consecutive DP indices (x CP), and the
  // replica group, the ranks at the same position of the other shard groups. Without HSDP both
  // are the DP x CP group (ZeRO shards over all of it, and there is no replica group).
  std::vector<int64_t> shard_group(int64_t rank) const;
  std::vector<int64_t> replica_group(int64_t rank) const;

 private:
  std::array<int64_t, kNumAxes> size_{};
  std::array<int64_t, kNumAxes> stride_{};
  int64_t digit(int64_t rank, Axis axis) const;  // the rank's coordinate along `axis`
  // The ranks an EP group is carved from, in rank order (as Megatron-Core enumerates them): the
  // DP group, or with etp 1 the stage's (every DP x CP x TP rank). Members differ from `rank`
  // only in the pool's axes, so a member's position in that order is a mixed-radix number of
  // those digits, and the member at a position follows from `rank` without listing the pool.
  std::vector<Axis> pool_axes_;  // the pool's axes in layout order (increasing stride)
  int64_t pool_size() const;
  int64_t pool_position(int64_t rank) const;
  int64_t pool_rank(int64_t rank, int64_t position) const;
  int64_t ep_ = 1;
  bool experts_tp_split_ = true;
  int64_t node_ranks_ = 0;  // 0: the flex hops are the EP group
  int64_t fsdp_ = 0;
  int64_t world_ = 1;
};

}  // namespace meshsim::workloads
