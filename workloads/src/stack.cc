#include <fmt/format.h>

#include "meshsim/workloads/stack_profile.h"

namespace meshsim::workloads {
namespace {

// The host's work per kernel, from component measurements (docs/model.md, "The host"):
//  * The CUDA launch path of one kernel: an eager torch.add on CUDA tensors issues one kernel per
//    6.38 and 6.95 us (validation/microbench/h200-2026-11-28/run1, run2 misc.json,
//    launch.eager_add_host_us_per_launch: torch 2.11 on the H200 machine's host; mean 6.67),
//    of which the operator's own framework work is what the same add costs on CPU tensors,
//    1.06 us (validation/microbench/host_dispatch.csv, forward_add_no_grad): 5.6 us.
//  * A GEMM's library call: an eager torch.mm of 64 x 64 issues one kernel per 9.89 and 11.59 us
//    (misc.json, eager_mm64_host_us_per_launch; mean 10.74), 4.1 us more than the add.
//  * The framework's work per kernel in a real model's code: one decoder block of the reference
//    trainer (Llama-style nn.Modules, bf16 autocast) takes 481 us of host time forward and 410 us
//    backward at a negligible width (host_dispatch.csv, llama_block_forward / _backward: torch
//    1.13, this project's 2-vCPU Xeon, thread CPU time), and the same block launches 48 kernels
//    forward and about 87 backward on a GPU (the H200 trace torch-val100m-s1024-b16: 48 per block
//    forward by its rmsnorm ranges; 1077 backward launches over 12 blocks, less the head's and
//    the embedding's): 10.0 us a forward kernel, 4.7 us a backward one.
// llm-foundry's and Megatron-Core's modules are PyTorch nn.Modules and autograd functions like the
// reference trainer's, so those eager stacks take these figures; the per-op costs of older
// PyTorch releases and CPUs were not measured (none is at hand) and are assumed the same.
// Megatron-LM's legacy layer (megatron-2021 to 2023) has its own, measured the same way:
// host_dispatch.py's replica of ParallelTransformerLayer at cfd2e21607 (its autograd Functions for
// the TP mappings and linears, the RNG tracker's fork around the attention dropout, the
// TorchScript bias-GeLU and bias-dropout-add) takes 388 us forward and 420 us backward
// (megatron_layer_forward / _backward) and launches 15 kernels forward and 34 backward on a GPU
// (counted from the code, host_dispatch.py; with TorchScript's fuser on the H200 machine, 19 and
// 35). The TorchScript functions run unfused on a CPU; with each replaced by one op the layer
// takes 252 and 294 us (megatron_layer_one_op_fusions_*).
//  * What a kernel of a real layer costs the host on a GPU, beyond the framework's work on CPU
//    tensors: both layers timed issuing real kernels at a negligible width on the H200 machine's
//    host (validation/microbench/host_gpu.py, h200-2026-11-30/: the reference block forward and
//    backward 1777 + 2239 us for 50 + 83 launches; Megatron's layer with its TorchScript functions
//    fused, 2914 us a forward and backward with its gradients zeroed, 58 launches), less the same
//    code on CPU tensors on that host (host_dispatch_h200.csv: 746 + 828 and 841 + 900 us), is
//    18.4 and 20.2 us a launch there. That host runs the framework's CPU work 1.77 and 2.16 times
//    slower than the Xeon the figures above were measured on (the same cases: 891 against 1574 us,
//    808 against 1741), so on the Xeon 10.4 and 9.4 us: 9.9, their mean, against the 5.6 of a bare
//    torch.add's launch path (allocation, autocast and library calls of real operators; cuBLAS's
//    GEMM calls are among them, so the eager stacks charge no separate GEMM call).
// meshsim's legacy layer issues the kernels Megatron's code issues around its fused ones
// (ParallelPlan::megatron_legacy_layer): 15 forward and, with biases, the async TP all-reduce and
// materialised-score attention, 28 backward (Megatron's 34 less apex's two extra layer-norm
// backward kernels each and the bias-dropout-add backward counted as one), so the layer's host
// time, its launches included, is spread over them: (388 + 15 x 9.9) / 15 = 35.7 us a forward op,
// (420 + 34 x 9.9) / 28 = 27.0 us a backward one.
constexpr double kLaunchPathUs = 5.6;
constexpr double kLayerLaunchUs = (10.4 + 9.4) / 2;
constexpr double kGemmCallUs = 4.1;
constexpr double kEagerForwardUs = 10.0;
constexpr double kEagerBackwardUs = 4.7;
constexpr double kMegatronLegacyForwardOpUs = (387.7 + 15 * kLayerLaunchUs) / 15;
constexpr double kMegatronLegacyBackwardOpUs = (420.0 + 34 * kLayerLaunchUs) / 28;
// An optimizer kernel: an eager op without autograd, the measured eager add on CUDA (6.67 us).
constexpr double kOptimizerKernelUs = 6.67;
// A CUDA graph's launch (cudaGraphLaunch) is taken as one kernel launch's host path: its own cost
// was not measured here (an assumption; a graph of many kernels costs the host one call).

// PyTorch eager (Megatron, FSDP, llm-foundry): each kernel issued from Python, then launched.
HostDispatch eager_host() {
  HostDispatch h;
  h.issue = HostIssue::kEager;
  h.forward_kernel = Microseconds(kEagerForwardUs + kLayerLaunchUs);
  h.backward_kernel = Microseconds(kEagerBackwardUs + kLayerLaunchUs);
  h.gemm_call = Microseconds(0);  // within kLayerLaunchUs, a real layer's mean
  h.optimizer_kernel = Microseconds(kOptimizerKernelUs);
  h.graph_launch = Microseconds(kLaunchPathUs);
  return h;
}

// torch.compile: Inductor's wrapper launches each kernel (its GEMMs still through cuBLAS).
HostDispatch compiled_host() {
  HostDispatch h;
  h.issue = HostIssue::kCompiled;
  h.forward_kernel = Microseconds(kLaunchPathUs);
  h.backward_kernel = Microseconds(kLaunchPathUs);
  h.gemm_call = Microseconds(kGemmCallUs);
  h.optimizer_kernel = Microseconds(kLaunchPathUs);
  h.graph_launch = Microseconds(kLaunchPathUs);
  return h;
}

// Megatron's host synchronisations (stack.h HostDispatch): gradient clipping reads the norm
// (megatron/core/optimizer/clip_grads.py: total_norm.item()), and batched pipeline sends and
// receives end in torch.cuda.synchronize() (megatron/core/pipeline_parallel/
// p2p_communication.py: `if config.batch_p2p_comm and config.batch_p2p_sync`; batch_p2p_sync
// defaults to True, model_parallel_config.py; batch_p2p_comm = not overlap_p2p_comm,
// training/argument_utils.py; NVIDIA/Megatron-LM @ d98e8a64).
HostDispatch megatron_host() {
  HostDispatch h = eager_host();
  h.sync_host_reads = true;
  h.sync_after_p2p = P2pSync::kWhenBatched;
  return h;
}

// Megatron-LM's legacy layers (megatron-2021 to 2023): the measured layer's host time per op.
HostDispatch megatron_legacy_host() {
  HostDispatch h = megatron_host();
  h.forward_kernel = Microseconds(kMegatronLegacyForwardOpUs);
  h.backward_kernel = Microseconds(kMegatronLegacyBackwardOpUs);
  return h;
}

// Transformer Engine's DotProductAttention backend on the family (TE
// transformer_engine/pytorch/attention/dot_product_attention/utils.py, get_attention_backend:
// "Disabling FlashAttention to give FusedAttention preference on Hopper+ for performance
// reasons"; on Ampere, FlashAttention-2 from the flash-attn package the NGC containers ship).
AttentionKernel transformer_engine_attention(DeviceFamily family) {
  return family == DeviceFamily::kAmpere ? AttentionKernel::kFlash : AttentionKernel::kCudnn;
}

StackProfile megatron(DeviceFamily family) {
  StackProfile p;
  p.stack = Stack::kMegatron;
  p.basis =
      "Megatron-Core (core_r0.8 and later) with Transformer Engine, as NeMo 2.0 and "
      "Megatron-Bridge run it: TE's fused LayerNorm/RMSNorm in LayerNormLinear, fused RoPE and "
      "bias-SwiGLU, vocabulary-parallel cross entropy, TE DotProductAttention (cuDNN "
      "FusedAttention on Hopper and later, FlashAttention-2 on Ampere), Apex/TE FusedAdam, "
      "gradient clipping at 1.0 (megatron/training/arguments.py --clip-grad default), FP8 by TE "
      "with delayed scaling (NeMo's fp8_recipe default; Megatron-Bridge's FP8-CS is current "
      "scaling)";
  p.kernels = Kernels::kFused;
  p.optimizer = OptimizerKernels::kFused;
  p.attention = transformer_engine_attention(family);
  p.fp8 = Fp8Scaling::kDelayed;
  p.step.grad_norm = true;
  p.fp8_saves_quantized_inputs = true;
  p.fp8_gathers_quantized_inputs = true;
  p.fp8_fprop_fast_accumulation = true;
  // args.accumulate_allreduce_grads_in_fp32 forced on for bf16 (megatron/training/arguments.py
  // @ core_r0.8.0) and passed as DDP's grad_reduce_in_fp32 (training.py); NeMo 2.0's bf16_mixed
  // and bf16_with_fp8_mixed keep grad_reduce_in_fp32=True (nemo/collections/llm/recipes/
  // precision/mixed_precision.py @ v2.2.0).
  p.bf16_grads_in_fp32 = true;
  // --cross-entropy-loss-fusion (NeMo's and Megatron-Bridge's GPT configs turn it on) runs
  // Megatron-Core's own fused loss: cross_entropy_fusion_impl defaults to "native"
  // (megatron/core/model_parallel_config.py), which Megatron-Bridge's performance scripts keep
  // until 26.04 (scripts/performance/utils/overrides.py sets "te" from 26.04-alpha.rc1 on).
  p.fused_cross_entropy = FusedCrossEntropy::kMegatronCore;
  p.host = megatron_host();
  return p;
}

StackProfile megatron_2021() {
  StackProfile p;
  p.stack = Stack::kMegatron2021;
  // "bfloat16 requires gradient accumulation and all-reduce to be done in fp32"
  // (megatron/arguments.py @ 83c4d95, 2021-05: accumulate_allreduce_grads_in_fp32 forced on).
  p.bf16_grads_in_fp32 = true;
  // post_language_model_processing: vocab_parallel_cross_entropy(output.float(), labels) unless
  // --fp16-lm-cross-entropy (megatron/model/gpt_model.py @ 83c4d95); no fused loss before
  // Megatron-Core's --cross-entropy-loss-fusion (2024).
  p.cross_entropy_fusion = false;
  p.basis =
      "Megatron-LM as of Narayanan et al. 2021 (examples/sc21, NVIDIA/Megatron-LM @ f2e72c8a): "
      "Apex fused LayerNorm, fused bias-GeLU and bias-dropout-add, fused scale-mask-softmax over "
      "materialised scores (no flash attention), the TP input-gradient all-reduce after the "
      "linear layer's backward (no async TP all-reduce), Apex FusedAdam, fp16 with loss "
      "scaling, gradient clipping at 1.0, the local DDP's gradient all-reduce after the "
      "backward (--DDP-impl torch, which overlaps it, only without a pipeline)";
  p.kernels = Kernels::kFused;
  p.optimizer = OptimizerKernels::kFused;
  p.attention = AttentionKernel::kNaive;
  p.step.grad_norm = true;
  // ColumnParallelLinear's input gradient is all-reduced by copy_to_tensor_model_parallel_region's
  // backward, an autograd node after the linear's (megatron/mpu/layers.py @ de7dc40f, the sc21
  // scripts' commit): after both GEMMs, blocking. The async all-reduce beside the weight gradient
  // came in September 2021 (--async-tensor-model-parallel-allreduce, 16c90445e).
  p.tp_backward_async = false;
  // The same synchronisations, and every microbatch's get_batch ends in .cpu() on the broadcast
  // sizes (megatron/mpu/data.py _build_key_size_numel_dictionaries: sizes_cuda.cpu(), called by
  // pretrain_gpt.py's get_batch on every stage; the pipeline's torch.cuda.synchronize() in
  // megatron/p2p_communication.py _communicate, unconditional; NVIDIA/Megatron-LM @ de7dc40f).
  p.host = megatron_legacy_host();
  p.host.sync_after_p2p = P2pSync::kAlways;
  p.host.sync_per_microbatch = BatchSync::kEveryStage;
  // megatron/p2p_communication.py _communicate @ 6985e589: "reqs =
  // torch.distributed.batch_isend_irecv(ops)", "req.wait()", then "torch.cuda.synchronize()":
  // the schedule issues the next kernel only after the transfer.
  p.pipeline_p2p_blocking = true;
  // megatron/arguments.py @ 6985e589: --no-scatter-gather-tensors-in-pipeline (dest
  // scatter_gather_tensors_in_pipeline, on unless given): _communicate sends
  // mpu.split_tensor_into_1d_equal_chunks(tensor) and the receiver calls
  // mpu.gather_split_1d_tensor, an all-gather over the tensor-parallel group.
  p.pipeline_scatter_gather = true;
  // Linear layers are F.linear under autograd (megatron/mpu/layers.py @ 6985e589; no fused
  // gradient accumulation until --gradient-accumulation-fusion, 83b1e42f30 of 2022-02-13), and
  // examples/sc21 does not set --use-contiguous-buffers-in-ddp: each microbatch's weight gradients
  // reach .grad through torch's AccumulateGrad, which adds them in place after the first
  // (torch/csrc/autograd/functions/accumulate_grad.h: variable_grad += new_grad).
  p.wgrad_accumulation_fused = false;
  // ParallelTransformerLayer's kernels besides the fused ones (ParallelPlan::megatron_legacy_layer;
  // read at 6985e589 and cfd2e21607: transformer.py's split_tensor_along_last_dim, permute(2, 0, 1,
  // 3).contiguous() and bias.expand_as(residual); mpu/layers.py's bias add and grad_bias).
  // Its MixedFusedLayerNorm (megatron/model/fused_layer_norm.py @ 6985e589) runs Megatron's own
  // copy of apex's two-stage kernel (megatron/fused_kernels/layer_norm_cuda_kernel.cu:
  // cuComputePartGradGammaBeta, cuComputeGradGammaBeta, cuComputeGradInput); no persistent kernel
  // before cfd2e21607's.
  p.megatron_legacy_layer = true;
  // --DDP-impl defaults to local (megatron/arguments.py @ de7dc40f, cfd2e21607 and b90fb2685f),
  // whose gradients train_step all-reduces after forward_backward_func returns
  // (megatron/training.py: "if args.DDP_impl == 'local': ... model_module.allreduce_gradients()";
  // @ b90fb2685f through optimizer.reduce_model_grads). --DDP-impl torch overlaps them in
  // PyTorch's DDP buckets, which Megatron allows without a pipeline only (stack_rules.cc).
  p.reduces_grads_after_backward = true;
  return p;
}

StackProfile megatron_2022() {
  // The host's work and synchronisations are 2021's: get_batch still broadcasts its sizes through
  // megatron/mpu/data.py's broadcast_data and p2p_communication.py still synchronises.
  StackProfile p = megatron_2021();
  p.stack = Stack::kMegatron2022;
  p.basis =
      "Megatron-LM as of Korthikanti et al. 2022 (NVIDIA/Megatron-LM @ cfd2e21607, 2022-04-28, "
      "which adds --sequence-parallel): the kernels of 2021 (Apex fused LayerNorm, fused "
      "bias-GeLU and bias-dropout-add, fused scale-mask-softmax over materialised scores: no "
      "flash attention until --use-flash-attn, d693034ecf of 2022-12-08, and no Transformer "
      "Engine until 3499542edd of 2022-12-21), with the TP input-gradient all-reduce beside the "
      "weight gradient (--no-async-tensor-model-parallel-allreduce: on by default since "
      "16c90445e) and the weight gradients accumulated inside their GEMM "
      "(--no-gradient-accumulation-fusion: on by default since 83b1e42f30); pipeline transfers "
      "still synchronise (p2p_communication.py _communicate: batch_isend_irecv, then "
      "torch.cuda.synchronize()); the local DDP's gradient all-reduce after the backward "
      "(--DDP-impl torch, which overlaps it, only without a pipeline)";
  // megatron/arguments.py @ cfd2e21607: --no-async-tensor-model-parallel-allreduce and
  // --no-gradient-accumulation-fusion are store_false flags, on unless given.
  p.tp_backward_async = true;
  p.wgrad_accumulation_fused = true;
  // MixedFusedLayerNorm takes apex.contrib's persistent FastLayerNormFN for the hidden sizes in
  // persist_ln_hidden_sizes unless --no-persist-layer-norm, which megatron/arguments.py forces
  // below PyTorch 1.11 (NGC 22.01 and later ship 1.11 or newer; megatron/model/
  // fused_layer_norm.py @ cfd2e21607 and b90fb2685f).
  p.persistent_layer_norm = true;
  return p;
}

// Megatron-DeepSpeed as BigScience trained BLOOM with it (bigscience-workshop/Megatron-DeepSpeed
// @ 0f23a729, 2022-07-20), on DeepSpeed's pipeline engine (microsoft/DeepSpeed @ v0.6.5). Its
// layers are Megatron-LM's of 2021: ColumnParallelLinear all-reduces its input gradient through
// copy_to_tensor_model_parallel_region around a plain F.linear (megatron/mpu/layers.py: no async
// all-reduce, no fused gradient accumulation), ParallelAttention materialises the scores with
// torch.baddbmm under FusedScaleMaskSoftmax and dropout (megatron/model/transformer.py), and
// get_batch_pipe broadcasts the batch through mpu.broadcast_data, whose sizes end in .cpu()
// (pretrain_gpt.py, megatron/mpu/data.py). What DeepSpeed changes:
//  * the pipeline: GPTModelPipe is a PipelineModule run by PipelineEngine's TrainSchedule, whose
//    steps alternate one forward and one backward per stage (deepspeed/runtime/pipe/schedule.py:
//    1F1B's order and bubble); send and recv are blocking dist.send / dist.recv (pipe/p2p.py, no
//    torch.cuda.synchronize) and a tensor-parallel rank sends its 1/TP slice, which the next
//    stage all-gathers (engine.py: is_pipe_partitioned = is_model_parallel, PartitionedTensor);
//  * the data-parallel step: the schedule's last step runs ReduceTiedGrads, ReduceGrads and
//    OptimizerStep after the last backward (schedule.py TrainSchedule.steps), so nothing of it
//    overlaps compute; bf16 runs BF16_Optimizer, which all-reduces the fp32 gradients
//    (engine.py _bf16_reduce_grads over get_grads_for_reduction), updates its partition of the
//    fp32 weights and Adam state, and all-gathers the bf16 weights (runtime/bf16_optimizer.py).
StackProfile megatron_deepspeed_2022() {
  StackProfile p = megatron_2021();
  p.stack = Stack::kMegatronDeepSpeed2022;
  p.bf16_grads_in_fp32 = false;  // DeepSpeed's engine keeps the gradients (BF16_Optimizer below)
  p.basis =
      "Megatron-DeepSpeed as BigScience ran BLOOM (bigscience-workshop/Megatron-DeepSpeed @ "
      "0f23a729, 2022-07) on DeepSpeed v0.6.5's pipeline engine: Megatron-LM 2021's layers "
      "(Apex fused LayerNorm, fused bias-GeLU and bias-dropout-add, fused scale-mask-softmax "
      "over materialised scores, the TP input-gradient all-reduce after the linear's backward), "
      "DeepSpeed's 1F1B TrainSchedule with blocking sends of 1/TP slices, gradients reduced "
      "after the last backward, ZeRO 0 or 1 (bf16: BF16_Optimizer, fp32 gradients all-reduced)";
  p.host.sync_after_p2p = P2pSync::kNone;
  // PipelineEngine loads microbatches on the first and last stages only (schedule.py
  // TrainSchedule: LoadMicroBatch "if self.stage_id == 0 or self.stage_id == self.stages - 1").
  p.host.sync_per_microbatch = BatchSync::kFirstAndLastStages;
  p.reduces_grads_after_backward = true;
  p.bf16_optimizer_all_reduces_fp32_grads = true;
  return p;
}

// Megatron-LM between Transformer Engine's integration (3499542edd, 2022-12-21) and TE becoming
// the default (e7b74a4b7e, 2024-04-02: "Change default `transformer_impl` to
// `transformer_engine` instead of `local`"), read at b90fb2685f (2023-06-28). Its default
// --transformer-impl local runs the legacy ParallelTransformerLayer of megatron/model/
// transformer.py, the kernels of 2022; FlashAttention only with --use-flash-attn (store_true);
// the local DDP all-reduces the gradients after the backward (--DDP-impl default local); the
// distributed optimizer (megatron/optimizer/distrib_optimizer.py) only with
// --use-distributed-optimizer. get_batch still broadcasts its sizes through
// tensor_parallel.broadcast_data (pretrain_gpt.py @ b90fb2685f; get_batch_on_this_tp_rank, which
// does not read them back, replaced it in 8127d2a9d9 of 2023-11-07), and p2p_communication.py
// still synchronises after batched transfers.
StackProfile megatron_2023() {
  StackProfile p = megatron_2022();
  p.stack = Stack::kMegatron2023;
  p.basis =
      "Megatron-LM of 2023 (NVIDIA/Megatron-LM @ b90fb2685f, 2023-06-28), before Transformer "
      "Engine became the default implementation (e7b74a4b7e, 2024-04): the legacy "
      "--transformer-impl local layers with the kernels of 2022 (Apex fused LayerNorm, fused "
      "bias-GeLU and bias-dropout-add, fused scale-mask-softmax over materialised scores; "
      "FlashAttention with --use-flash-attn), the async TP all-reduce, gradient accumulation "
      "fused into the weight-gradient GEMM, the local DDP's gradient all-reduce after the "
      "backward (--DDP-impl torch, which overlaps it, only without a pipeline or the "
      "distributed optimizer), the distributed optimizer with --use-distributed-optimizer "
      "(zero 1: reduce-scatter after the backward, weight gather after the step)";
  // ParallelAttention.forward @ b90fb2685f: `if not self.use_flash_attn: if
  // self.checkpoint_core_attention: context_layer = self._checkpointed_attention_forward(...)`;
  // the FlashSelfAttention branch runs outside the checkpoint.
  p.fused_attention_checkpointed = false;
  return p;
}

// DeepSpeed's ZeRO-3 as Narayanan et al. 2021 compared it (Table 2: ZeRO-3 without model
// parallelism on Megatron-LM's GPT), at DeepSpeed v0.3.13 (2021-03-16), the release of that
// paper's time. deepspeed/runtime/zero/constants.py @ v0.3.13: stage3_prefetch_bucket_size
// 50000000, stage3_param_persistence_threshold 100000, stage3_max_live_parameters 1e9,
// reduce_bucket_size 500000000, overlap_comm True for stage 3 (ZERO3_OPTIMIZATION_OVERLAP_COMM_
// DEFAULT). stage3.py @ v0.3.13: fetch_sub_module all-gathers a submodule's parameters (one
// all_gather per parameter, partition_parameters.py _all_gather) before its forward and
// release_sub_module frees them after; prefetch_next_sub_modules gathers the parameters that come
// next in the traced order, up to stage3_prefetch_bucket_size elements (at least one parameter),
// when no prefetch is in flight; a recomputed forward runs the submodules' hooks again, so a
// checkpointed layer's parameters are gathered for the recompute and again for the backward.
StackProfile deepspeed_zero3_2021() {
  // The host as Megatron-LM 2021's (its get_batch and training loop, eager PyTorch); ZeRO-3's
  // per-submodule Python hooks are not charged beyond the eager per-op cost.
  StackProfile p = megatron_2021();
  p.stack = Stack::kDeepSpeedZero3_2021;
  p.bf16_grads_in_fp32 = false;  // DeepSpeed's engine keeps the gradients, in the 16-bit dtype
  p.basis =
      "DeepSpeed ZeRO-3 at v0.3.13 (2021-03) on Megatron-LM's GPT of 2021 (its fused kernels and "
      "materialised-score softmax): parameters gathered per submodule before its forward and "
      "released after it, the next parameters prefetched (stage3_prefetch_bucket_size 5e7 "
      "elements) on a stream of their own (overlap_comm, True for stage 3), gathered again for "
      "a recomputed forward and again for the backward; gradients reduce-scattered as they are "
      "produced (reduce_bucket_size 5e8); FusedAdam on the partitions; fp16 with loss scaling";
  p.backward_prefetch = BackwardPrefetch::kPre;
  p.zero3_regather_for_recompute = true;
  // The engine reduces the gradients through its own hooks as they are produced (overlap_comm),
  // not through Megatron's DDP.
  p.reduces_grads_after_backward = false;
  return p;
}

StackProfile fsdp() {
  StackProfile p;
  p.stack = Stack::kFsdp;
  p.basis =
      "PyTorch FSDP in eager mode as MosaicML Composer / llm-foundry run it "
      "(scripts/train/benchmarking @ 8c8dd48f, torch 2.1): PyTorch eager kernels (one per tensor "
      "operation, autograd's backward), flash-attn 2 (attn_impl: flash, the gpu-flash2 extra), "
      "Composer's DecoupledAdamW (a Python loop over the parameters: "
      "composer/optim/decoupled_weight_decay.py), gradient clipping by norm (the yamls' "
      "gradient_clipping), FP8 through Transformer Engine (delayed scaling)";
  p.kernels = Kernels::kEager;
  p.optimizer = OptimizerKernels::kPerTensor;
  p.attention = AttentionKernel::kFlash;
  p.fp8 = Fp8Scaling::kDelayed;
  p.step.grad_norm = true;
  p.fp8_saves_quantized_inputs = true;  // te.Linear
  p.fp8_fprop_fast_accumulation = true;  // te.Linear
  // llm-foundry's flash_attn_fn (llmfoundry/models/layers/attention.py @ 5e85bd62d, and v0.3.0's)
  // unpads Q, K and V with flash-attn's bert_padding.unpad_input for flash_attn_varlen_func, and
  // pads the output back with pad_input, even when no token is padding.
  p.attention_unpads = true;
  p.host = eager_host();
  return p;
}

// llm-foundry v0.3.0 as its benchmark tables of 2023 ran (scripts/train/benchmarking/
// submit_benchmarks.py @ b2a43a147): the same FSDP eager stack as fsdp() with the attention the
// script and the pretrain yamls chose then.
StackProfile llm_foundry_2023() {
  StackProfile p = fsdp();
  p.stack = Stack::kLlmFoundry2023;
  p.basis =
      "MosaicML Composer / llm-foundry v0.3.0 as scripts/train/benchmarking/submit_benchmarks.py "
      "@ b2a43a147 (2023-10) ran the MPT benchmark tables: the pretrain yamls' and the script's "
      "attn_impl: triton (FlashAttention's Triton port, llmfoundry/models/layers/"
      "flash_attn_triton.py on triton-pre-mlir), low_precision_layernorm, PyTorch FSDP eager "
      "(torch 2.1 image), Composer's DecoupledAdamW, gradient clipping by norm (the yamls' "
      "gradient_clipping), FP8 through Transformer Engine v0.10 te.Linear (fc_type te; delayed "
      "scaling)";
  p.attention = AttentionKernel::kTriton;
  // Composer's FSDPConfig default (composer/utils/parallelism.py), which the benchmark yamls'
  // fsdp_config keeps.
  p.backward_prefetch = BackwardPrefetch::kPost;
  return p;
}

StackProfile fsdp_compile() {
  StackProfile p;
  p.stack = Stack::kFsdpCompile;
  p.basis =
      "torchtitan (FSDP2 and torch.compile, pytorch/torchtitan @ 9dec370, torch nightly of "
      "2024-12): compiled (fused) memory-bound kernels, SDPA's flash backend (FlashAttention-2), "
      "AdamW's multi-tensor path, gradient clipping (max_norm 1.0), torchao float8 (tensorwise: "
      "current scaling), selective activation checkpointing by op (the train configs' "
      "selective_ac_option 'op')";
  p.kernels = Kernels::kFused;
  p.optimizer = OptimizerKernels::kForEach;
  p.attention = AttentionKernel::kFlash;
  p.fp8 = Fp8Scaling::kCurrent;
  p.step.grad_norm = true;
  p.fp8_fprop_fast_accumulation = true;  // torchao float8's output GEMM
  p.fp8_gathers_quantized_inputs = true;  // Float8ColwiseParallel (tensorwise; stack_profile.h)
  // train_configs/llama3_{8b,70b,405b}.toml @ 9dec370: [activation_checkpoint] mode 'selective',
  // selective_ac_option 'op' (_apply_ac_to_transformer_block, parallelisms/parallelize_llama.py).
  p.selective_by_op = true;
  // FSDP2's reduce_dtype is training.mixed_precision_reduce, default (and only choice) float32:
  // the gradients are cast to fp32 for the reduce-scatter and kept sharded in fp32
  // (torchtitan/config_manager.py and parallelisms/parallelize_llama.py apply_fsdp @ ba24697).
  p.bf16_grads_in_fp32 = true;
  p.host = compiled_host();
  return p;
}

StackProfile maxtext(DeviceFamily family) {
  StackProfile p;
  p.stack = Stack::kMaxText;
  p.basis =
      "MaxText on XLA (AI-Hypercomputer/maxtext): XLA-fused memory-bound kernels, optax AdamW "
      "fused into the step, global-norm gradient clipping (gradient_clipping_threshold 1.0); "
      "attention: the Pallas flash/splash kernels on TPU (attention: flash), cuDNN flash "
      "attention through Transformer Engine on GPU (attention: cudnn_flash_te, NVIDIA's "
      "dgxc-benchmarking MaxText recipes)";
  p.kernels = Kernels::kFused;
  p.optimizer = OptimizerKernels::kFused;
  p.attention = family == DeviceFamily::kTpu ? AttentionKernel::kSplash
                                             : transformer_engine_attention(family);
  p.fp8 = Fp8Scaling::kDelayed;
  p.step.grad_norm = true;
  p.host.issue = HostIssue::kXla;  // one executable per step: no per-kernel host time
  p.recompute_skips_unread_outputs = true;  // nn.remat is jax.checkpoint (parallel.h)
  return p;
}

// PaxML/Praxis on GPU as NVIDIA's DGX Cloud Benchmarking v24.11.1 ran it (paxml/configure.sh @
// 35a9aec, the PaxML 24.03.04 container; paxml/contrib/gpu/scripts_gpu/configs.py GPT5B and
// GPT175B): XLA's fused kernels and cuBLAS GEMMs (--xla_gpu_enable_triton_gemm=false), attention
// through Transformer Engine's fused (cuDNN) attention (ENABLE_TE=1, NVTE_FUSED_ATTN=1; XLA's own
// cuDNN fMHA off: --xla_gpu_enable_cudnn_fmha=false), FP8 through Transformer Engine (ENABLE_FP8),
// collectives asynchronous under the latency-hiding scheduler (--xla_gpu_enable_async_all_gather,
// _reduce_scatter, _all_reduce; pipelined all-gather and reduce-scatter), the layers one scanned
// while loop (USE_REPEATED_LAYER = True), no CUDA graphs (--xla_gpu_graph_level=0).
StackProfile paxml(DeviceFamily family) {
  StackProfile p = maxtext(family);  // the same XLA fusions, Pallas attention on TPU
  p.stack = Stack::kPaxml;
  p.basis =
      "PaxML/Praxis on XLA as DGX Cloud Benchmarking v24.11.1 runs it (paxml/configure.sh @ "
      "35a9aec; paxml/contrib/gpu/scripts_gpu/configs.py): XLA-fused memory-bound kernels and "
      "cuBLAS GEMMs, Transformer Engine's fused attention (cuDNN) and FP8 (delayed scaling), "
      "optax Adam fused into the step, asynchronous collectives under XLA's latency-hiding "
      "scheduler; on TPU the Pallas flash kernels";
  return p;
}

// Megatron's kernel set, without capability checks (stack_rules.h).
StackProfile custom(DeviceFamily family) {
  StackProfile p = megatron(family);
  p.stack = Stack::kCustom;
  p.basis =
      "Megatron-Core's kernel set with Transformer Engine, without any framework's checks: "
      "meshsim simulates combinations no framework it knows of runs (its report lists the "
      "megatron rules the plan breaks as caveats)";
  return p;
}

}  // namespace

StackProfile stack_profile(Stack stack, DeviceFamily family) {
  if (family == DeviceFamily::kTpu && stack != Stack::kMaxText && stack != Stack::kPaxml) {
    throw PlanError(PlanField::kStack, fmt::format("{} does not run on TPUs (expected maxtext or "
                                                   "paxml)",
                                                   to_string(stack)));
  }
  switch (stack) {
    case Stack::kMegatron:
      return megatron(family);
    case Stack::kMegatron2021:
      return megatron_2021();
    case Stack::kMegatron2022:
      return megatron_2022();
    case Stack::kMegatron2023:
      return megatron_2023();
    case Stack::kDeepSpeedZero3_2021:
      return deepspeed_zero3_2021();
    case Stack::kMegatronDeepSpeed2022:
      return megatron_deepspeed_2022();
    case Stack::kPaxml:
      return paxml(family);
    case Stack::kFsdp:
      return fsdp();
    case Stack::kLlmFoundry2023:
      return llm_foundry_2023();
    case Stack::kFsdpCompile:
      return fsdp_compile();
    case Stack::kMaxText:
      return maxtext(family);
    case Stack::kCustom:
      return custom(family);
  }
  return megatron(family);
}

Stack default_stack(DeviceFamily family) {
  return family == DeviceFamily::kTpu ? Stack::kMaxText : Stack::kMegatron;
}

void apply_stack(ParallelPlan& plan, const StackProfile& profile, const StackOverrides& given) {
  plan.stack = profile.stack;
  if (!given.kernels) {
    plan.kernels = profile.kernels;
  }
  if (!given.optimizer_kernels) {
    plan.optimizer_kernels = profile.optimizer;
  }
  if (!given.attention) {
    plan.attention = profile.attention;
  }
  if (!given.fp8_recipe) {
    plan.fp8_scaling = profile.fp8;
  }
  plan.step_work = profile.step;
  plan.backward_prefetch = profile.backward_prefetch;
  plan.fp8_saves_quantized_inputs = profile.fp8_saves_quantized_inputs;
  plan.fp8_gathers_quantized_inputs = profile.fp8_gathers_quantized_inputs;
  plan.fp8_fprop_fast_accumulation = profile.fp8_fprop_fast_accumulation;
  plan.tp_backward_async = profile.tp_backward_async;
  plan.attention_unpads = profile.attention_unpads;
  plan.selective_by_op = profile.selective_by_op;
  plan.fused_attention_checkpointed = profile.fused_attention_checkpointed;
  plan.recompute_skips_unread_outputs = profile.recompute_skips_unread_outputs;
  plan.host = profile.host;
  plan.pipeline_scatter_gather = profile.pipeline_scatter_gather;
  plan.wgrad_accumulation_fused = profile.wgrad_accumulation_fused;
  plan.megatron_legacy_layer = profile.megatron_legacy_layer;
  plan.persistent_layer_norm = profile.persistent_layer_norm;
  plan.zero3_regather_for_recompute = profile.zero3_regather_for_recompute;
  if (profile.pipeline_p2p_blocking) {
    plan.overlap.pipeline_p2p = false;
  }
  if (profile.reduces_grads_after_backward) {
    plan.overlap.grad_reduce = given.overlap_grad_reduce && plan.overlap.grad_reduce;
    plan.overlap.param_gather = given.overlap_param_gather && plan.overlap.param_gather;
  }
  if (!given.cross_entropy_fusion) {
    plan.cross_entropy_fusion = profile.cross_entropy_fusion;
  }
  plan.fused_cross_entropy = profile.fused_cross_entropy;
  if (!given.grad_reduce_fp32) {
    plan.grad_reduce_fp32 = profile.bf16_grads_in_fp32 &&
                            (plan.matmul_dtype == Dtype::kBf16 || plan.matmul_dtype == Dtype::kFp8);
  }
  // Not keyed on the ZeRO stage, which the plan search changes after binding a template: what
  // the optimizer keeps does not depend on it.
  plan.optimizer_all_reduces_grads =
      profile.bf16_optimizer_all_reduces_fp32_grads && plan.matmul_dtype == Dtype::kBf16;
  if (plan.optimizer_all_reduces_grads) {
    // BF16_Optimizer's fp32 gradients, reduced as they are kept: the framework has no 16-bit path.
    if (given.grad_reduce_fp32 && !plan.grad_reduce_fp32) {
      throw PlanError(PlanField::kGradReduceFp32,
                      fmt::format("the {} stack trains bf16 through DeepSpeed's BF16_Optimizer, "
                                  "which keeps and all-reduces fp32 gradients: it has no 16-bit "
                                  "gradient reduction",
                                  to_string(profile.stack)));
    }
    plan.grad_reduce_fp32 = true;
  }
}

}  // namespace meshsim::workloads
