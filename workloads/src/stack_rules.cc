// The stacks' capability rules (stack_rules.h). Sources, read for this table:
//  * Megatron-LM @ d98e8a64 (2026-08): megatron/training/arguments.py (validate_args),
//    megatron/core/transformer/transformer_config.py (TransformerConfig.__post_init__),
//    megatron/core/pipeline_parallel/schedules.py, megatron/core/distributed/fsdp/
//    mcore_fsdp_adapter.py, docs/user-guide/features/megatron_fsdp.md, and the functional test
//    tests/functional_tests/test_cases/moe/gpt3_mcore_te_tp2_zp_z3_resume_torch_dist_te_
//    8experts2parallel_top2router (Megatron-FSDP ZeRO-3 with EP 2, TP 2, PP 1).
//  * Megatron-LM @ de7dc40f (2021-08, the commit of the sc21 scripts): megatron/arguments.py,
//    megatron/schedules.py.
//  * PyTorch FSDP: torch/distributed/fsdp/api.py ShardingStrategy (FULL_SHARD, SHARD_GRAD_OP,
//    NO_SHARD, HYBRID_SHARD, _HYBRID_SHARD_ZERO2); Composer composer/utils/parallelism.py
//    (ParallelismConfig: fsdp and tp) @ 008dac70.
//  * torchtitan @ 9dec370 (2024-12): torchtitan/parallelisms/parallel_dims.py and
//    parallelize_llama.py; PyTorch torch/distributed/pipelining/stage.py @ 01386103
//    (backward_maybe_with_nosync) and schedules.py (get_schedule_class).
//  * MaxText @ e591f30c (2026-08): src/maxtext/configs/types.py and base.yml, layers/pipeline.py.
//  * Megatron-LM @ cfd2e21607 (2022-04-28, the megatron-2022 profile's commit): megatron/
//    arguments.py, megatron/schedules.py, megatron/model/transformer.py, megatron/mpu/layers.py.
//  * Megatron-LM @ b90fb2685f (2023-06-28, the megatron-2023 profile's commit): megatron/
//    arguments.py, megatron/model/transformer.py, megatron/core/pipeline_parallel/schedules.py,
//    megatron/core/tensor_parallel/layers.py, megatron/optimizer/.
//  * DeepSpeed v0.3.13 (12a53b43, 2021-03-16): deepspeed/runtime/config.py, engine.py,
//    pipe/engine.py, pipe/schedule.py, pipe/topology.py, activation_checkpointing/; and fbece50b2
//    (2021-04-19, first released in v0.3.16), which turned the pipeline engine's ZeRO-2/3 caveat
//    into an assert. The model code is Megatron-LM's of 2021 (@ de7dc40f), as the profile's.
//  * PaxML @ 4a6bf20 and Praxis @ a4742bc, the last commits before the PaxML 24.03.04 container
//    (2024-02-28 and 2024-03-04) that DGX Cloud Benchmarking v24.11.1 runs: paxml/tasks/lm/
//    model_params.py, praxis/optimizers.py, praxis/layers/pipeline.py, repeats.py and
//    checkpoint_policy.py. The container's NVIDIA patches (Transformer Engine) were not read.
#include "meshsim/workloads/stack_rules.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>

namespace meshsim::workloads {
namespace {

using F = PlanField;
using PS = PipelineSchedule;

bool zero_2_or_3(const ParallelPlan& p) {
  return p.zero == ZeroStage::kGradients || p.zero == ZeroStage::kParameters;
}
bool microbatches_not_multiple_of_pp(const ParallelPlan& p) {
  return p.pp > 1 && p.microbatches() % p.pp != 0;
}
// A fused attention kernel (FlashAttention, cuDNN, ...) where the stack had only the naive one.
bool fused_attention_kernel(const ModelConfig&, const ParallelPlan& p) {
  return p.attention != AttentionKernel::kNaive;
}
// Megatron-LM 2022's SwitchMLP: a router's top-1 choice among experts in every layer's MLP.
bool switch_mlp_cannot_express(const ModelConfig& m) {
  return m.moe && (m.moe->experts_per_token != 1 || m.moe->num_shared_experts > 0 ||
                   m.moe->first_dense_layers > 0);
}
// The layers of each stage, when stated, differ from stage to stage.
bool uneven_stage_layers(const ParallelPlan& p) {
  for (const int64_t l : p.stage_layers) {
    if (l != p.stage_layers.front()) {
      return true;
    }
  }
  return false;
}

// A pipeline schedule other than 1F1B and interleaved 1F1B.
bool schedule_not_1f1b_or_interleaved(const ModelConfig&, const ParallelPlan& p) {
  return p.pp > 1 && p.schedule != PS::kOneFOneB && p.schedule != PS::kInterleaved;
}
// Interleaved 1F1B with microbatches not a multiple of pp.
bool interleaved_microbatches_not_multiple_of_pp(const ModelConfig&, const ParallelPlan& p) {
  return p.schedule == PS::kInterleaved && microbatches_not_multiple_of_pp(p);
}
// Recompute other than none or full.
bool recompute_not_none_or_full(const ModelConfig&, const ParallelPlan& p) {
  return p.recompute != Recompute::kNone && p.recompute != Recompute::kFull;
}
// Interleaved 1F1B on 2 stages (or fewer).
bool interleaved_on_two_stages(const ModelConfig&, const ParallelPlan& p) {
  return p.schedule == PS::kInterleaved && p.pp <= 2;
}
// FP8 GEMMs.
bool fp8_training(const ModelConfig&, const ParallelPlan& p) {
  return p.matmul_dtype == Dtype::kFp8;
}
// A pipeline schedule other than GPipe (one model chunk a stage).
bool schedule_not_gpipe(const ModelConfig&, const ParallelPlan& p) {
  return p.pp > 1 && (p.schedule != PS::kGpipe || p.vpp > 1);
}
// The weight gather of ZeRO-1 overlapped with compute.
bool param_gather_overlap_under_zero1(const ModelConfig&, const ParallelPlan& p) {
  return p.overlap.param_gather && p.zero == ZeroStage::kOptimizerStates;
}
// Megatron-LM 2021-2023: PyTorch's DDP (--DDP-impl torch), the only path that overlaps the
// gradient reduction, is refused with a pipeline.
constexpr StackRule kLocalDdpWithAPipeline{
    F::kOverlapGradReduce, "gradient reduction overlapped with a pipelined backward",
    "setup_model_and_optimizer asserts args.DDP_impl == 'local' (\"We only support local DDP "
    "with multiple micro-batches\") when the pipeline has more than one stage, and the local DDP "
    "reduces after the backward (megatron/training.py @ de7dc40f, cfd2e21607 and b90fb2685f)",
    [](const ModelConfig&, const ParallelPlan& p) { return p.overlap.grad_reduce && p.pp > 1; }};

// Megatron's selective recompute (of the default modules or of named ones).
bool selective_recompute(const ModelConfig&, const ParallelPlan& p) {
  return p.recompute == Recompute::kSelective || !p.recompute_modules.empty();
}

// The rules of several tables, in order, as one table (stacks that share rules list them once).
template <size_t... N>
constexpr auto concat(const std::array<StackRule, N>&... parts) {
  std::array<StackRule, (N + ...)> out{};
  size_t at = 0;
  ((std::copy(parts.begin(), parts.end(), out.begin() + static_cast<std::ptrdiff_t>(at)), at += N),
   ...);
  return out;
}

// Megatron-Core with Transformer Engine (the megatron stack).
constexpr std::array kMegatron = {
    StackRule{
        F::kZero, "ZeRO-2 or 3 with pipeline parallelism",
        "Megatron-LM's ZeRO-2 and 3 are Megatron-FSDP's --data-parallel-sharding-strategy "
        "optim_grads and optim_grads_params, documented with TP, CP and EP, not PP "
        "(docs/user-guide/features/megatron_fsdp.md; PP support is the open request "
        "NVIDIA/Megatron-LM#1455); Megatron-FSDP v2 raises \"MFSDP v2 does not currently "
        "support: ... pipeline_model_parallel_size\" (mcore_fsdp_adapter.py _validate_config) "
        "and torch FSDP2 asserts \"--use-torch-fsdp2 is not supported with pipeline "
        "parallelism\" (arguments.py validate_args), both @ d98e8a64. With PP, Megatron shards "
        "through the distributed optimizer: zero 1",
        [](const ModelConfig&, const ParallelPlan& p) { return p.pp > 1 && zero_2_or_3(p); }},
    StackRule{F::kSchedule, "a pipeline schedule other than 1F1B or interleaved 1F1B",
              "Megatron-Core's get_forward_backward_func returns forward_backward_no_pipelining, "
              "forward_backward_pipelining_without_interleaving (1F1B) or "
              "forward_backward_pipelining_with_interleaving (megatron/core/pipeline_parallel/"
              "schedules.py @ d98e8a64): no GPipe and no zero-bubble schedule",
              schedule_not_1f1b_or_interleaved},
    StackRule{F::kSchedule, "interleaved 1F1B with microbatches not a multiple of pp",
              "forward_backward_pipelining_with_interleaving raises \"The number of contiguous "
              "micro-batches in a virtual pipeline stage should range in [PP, M]\" and \"The "
              "remainder of M ... divided by N ... should be 0, or larger than or equal to the "
              "pipeline-parallel size\", N being microbatch_group_size_per_vp_stage, pp by "
              "default (megatron/core/pipeline_parallel/schedules.py @ d98e8a64)",
              interleaved_microbatches_not_multiple_of_pp},
    StackRule{F::kOverlapP2p, "interleaved 1F1B on 2 stages without p2p overlap",
              "validate_args asserts \"When interleaved schedule is used and p2p communication "
              "overlap is disabled, pipeline-model-parallel size should be greater than 2\" "
              "(megatron/training/arguments.py @ d98e8a64)",
              [](const ModelConfig&, const ParallelPlan& p) {
                return p.schedule == PS::kInterleaved && p.pp <= 2 && !p.overlap.pipeline_p2p;
              }},
    StackRule{
        F::kOffloadLayers, "activation offloading with pipeline parallelism",
        "TransformerConfig raises \"Currently there is no support for Pipeline parallelism "
        "with CPU offloading\" (megatron/core/transformer/transformer_config.py @ "
        "d98e8a64)",
        [](const ModelConfig&, const ParallelPlan& p) { return p.offload_layers > 0 && p.pp > 1; }},
    StackRule{F::kOverlapTp, "TP communication overlap without sequence parallelism",
              "validate_args asserts \"Tensor parallel communication/GEMM overlap can happen "
              "only when sequence parallelism is enabled\" (megatron/training/arguments.py @ "
              "d98e8a64)",
              [](const ModelConfig&, const ParallelPlan& p) {
                return p.overlap.tensor_parallel && !p.sp;
              }},
    StackRule{F::kRecompute, "JAX rematerialisation policies (dots, qkv_out_proj, qkv_proj)",
              "Megatron's --recompute-granularity is full or selective (with "
              "--recompute-modules) (megatron/training/arguments.py @ d98e8a64)",
              [](const ModelConfig&, const ParallelPlan& p) { return jax_policy(p.recompute); }},
    StackRule{F::kAttention, "Pallas splash or Triton attention",
              "Megatron-Core's attention is Transformer Engine's DotProductAttention (cuDNN fused "
              "or flash-attn 2/3) or its unfused local implementation "
              "(--attention-backend, megatron/training/arguments.py @ d98e8a64)",
              [](const ModelConfig&, const ParallelPlan& p) {
                return p.attention == AttentionKernel::kSplash ||
                       p.attention == AttentionKernel::kTriton;
              }},
};

// Megatron-LM as of the sc21 scripts (megatron-2021).
constexpr std::array kMegatron2021 = {
    StackRule{F::kZero, "ZeRO sharding",
              "Megatron-LM @ de7dc40f has no distributed optimizer: its data parallelism is "
              "--DDP-impl local or torch (megatron/arguments.py)",
              [](const ModelConfig&, const ParallelPlan& p) { return p.zero != ZeroStage::kNone; }},
    StackRule{F::kCp, "context parallelism",
              "Megatron-LM @ de7dc40f has tensor, pipeline and data parallelism only "
              "(megatron/arguments.py _add_distributed_args)",
              [](const ModelConfig&, const ParallelPlan& p) { return p.cp > 1; }},
    StackRule{F::kSp, "sequence parallelism",
              "Megatron-LM @ de7dc40f has no --sequence-parallel (it came with Korthikanti et "
              "al. 2022)",
              [](const ModelConfig&, const ParallelPlan& p) { return p.sp; }},
    StackRule{F::kStack, "a mixture-of-experts model",
              "Megatron-LM @ de7dc40f has no mixture-of-experts layers",
              [](const ModelConfig& m, const ParallelPlan&) { return m.moe.has_value(); }},
    StackRule{F::kSchedule, "a pipeline schedule other than 1F1B or interleaved 1F1B",
              "megatron/schedules.py @ de7dc40f has forward_backward_pipelining_without_"
              "interleaving and forward_backward_pipelining_with_interleaving",
              schedule_not_1f1b_or_interleaved},
    StackRule{F::kPp, "interleaved 1F1B on 2 stages",
              "validate_args asserts \"pipeline-model-parallel size should be greater than 2 "
              "with interleaved schedule\" (megatron/arguments.py @ de7dc40f)",
              interleaved_on_two_stages},
    StackRule{F::kSchedule, "interleaved 1F1B with microbatches not a multiple of pp",
              "\"number of microbatches is not divisible by pipeline-parallel size when using "
              "interleaved schedule\" (megatron/schedules.py @ de7dc40f)",
              interleaved_microbatches_not_multiple_of_pp},
    StackRule{F::kRecompute, "recompute other than none or full",
              "Megatron-LM @ de7dc40f recomputes whole layers (--checkpoint-activations); "
              "selective recompute came in 2022",
              recompute_not_none_or_full},
    StackRule{F::kOverlapTp, "TP communication overlap",
              "Megatron-LM @ de7dc40f all-reduces TP activations after each layer's GEMMs "
              "(megatron/mpu/layers.py)",
              [](const ModelConfig&, const ParallelPlan& p) { return p.overlap.tensor_parallel; }},
    StackRule{F::kOffloadLayers, "activation offloading",
              "Megatron-LM @ de7dc40f has no CPU offloading",
              [](const ModelConfig&, const ParallelPlan& p) { return p.offload_layers > 0; }},
    StackRule{F::kAttention, "a fused (flash) attention kernel",
              "ParallelAttention computes the scores with torch.baddbmm and normalises them with "
              "FusedScaleMaskSoftmax (megatron/model/transformer.py @ de7dc40f); flash attention "
              "came with --use-flash-attn (d693034ecf, 2022-12-08)",
              fused_attention_kernel},
    StackRule{F::kDtype, "FP8 training",
              "megatron/arguments.py @ de7dc40f trains in --fp16, --bf16 or fp32; FP8 came with "
              "Transformer Engine (3499542edd, 2022-12-21)",
              fp8_training},
    kLocalDdpWithAPipeline,
};

// Megatron-LM's legacy layers and schedules as Korthikanti et al. 2022 ran them (@ cfd2e21607)
// and as they still were in 2023 (@ b90fb2685f, the legacy --transformer-impl local): what
// megatron-2022 and megatron-2023 share.
constexpr std::array kLegacyMegatronShared = {
    StackRule{F::kEp, "expert parallelism",
              "SwitchMLP (megatron/model/transformer.py @ cfd2e21607 and b90fb2685f) builds all "
              "--num-experts experts on every rank and runs them one after another on the "
              "tokens routed to each: no expert-parallel group",
              [](const ModelConfig&, const ParallelPlan& p) { return p.ep > 1; }},
    StackRule{
        F::kStack, "a mixture-of-experts model other than top-1 experts in every layer",
        "SwitchMLP (megatron/model/transformer.py @ cfd2e21607 and b90fb2685f) sends each token "
        "to the argmax of its router's softmax (top-1) and replaces the MLP of every layer "
        "(ParallelTransformerLayer: \"if args.num_experts is not None\"), with no shared "
        "experts",
        [](const ModelConfig& m, const ParallelPlan&) { return switch_mlp_cannot_express(m); }},
    StackRule{
        F::kEtp, "experts not split over the tensor-parallel group",
        "SwitchMLP's experts are ParallelMLPs, column- and row-parallel over the "
        "tensor-parallel group like the dense MLP (megatron/model/transformer.py @ "
        "cfd2e21607 and b90fb2685f)",
        [](const ModelConfig& m, const ParallelPlan& p) { return m.moe && !p.experts_tp_split(); }},
    StackRule{
        F::kMoeDropTokens, "dropping tokens beyond an expert capacity",
        "SwitchMLP runs each expert on every token routed to it (local_indices = (max_ind "
        "== expert_num).nonzero()), with no capacity (megatron/model/transformer.py @ "
        "cfd2e21607 and b90fb2685f)",
        [](const ModelConfig& m, const ParallelPlan& p) { return m.moe && p.moe_drop_tokens; }},
    StackRule{F::kSchedule, "a pipeline schedule other than 1F1B or interleaved 1F1B",
              "get_forward_backward_func returns forward_backward_no_pipelining, "
              "forward_backward_pipelining_without_interleaving or "
              "forward_backward_pipelining_with_interleaving (megatron/schedules.py @ "
              "cfd2e21607; megatron/core/pipeline_parallel/schedules.py @ b90fb2685f)",
              schedule_not_1f1b_or_interleaved},
    StackRule{F::kPp, "interleaved 1F1B on 2 stages",
              "validate_args asserts \"pipeline-model-parallel size should be greater than 2 "
              "with interleaved schedule\" (megatron/arguments.py @ cfd2e21607 and b90fb2685f)",
              interleaved_on_two_stages},
    StackRule{F::kSchedule, "interleaved 1F1B with microbatches not a multiple of pp",
              "the interleaved schedule asserts \"number of microbatches ... is not divisible "
              "by pipeline-model-parallel-size ... when using interleaved schedule\" "
              "(megatron/schedules.py @ cfd2e21607; megatron/core/pipeline_parallel/"
              "schedules.py @ b90fb2685f)",
              interleaved_microbatches_not_multiple_of_pp},
    StackRule{F::kRecompute, "JAX rematerialisation policies (dots, qkv_out_proj, qkv_proj)",
              "--checkpoint-granularity (@ cfd2e21607), later --recompute-granularity (@ "
              "b90fb2685f), takes full or selective (megatron/arguments.py)",
              [](const ModelConfig&, const ParallelPlan& p) { return jax_policy(p.recompute); }},
    StackRule{F::kRecomputeModules, "selective recompute of modules other than core_attn",
              "selective granularity checkpoints the core attention only "
              "(ParallelAttention.checkpoint_core_attention, megatron/model/transformer.py @ "
              "cfd2e21607 and b90fb2685f)",
              [](const ModelConfig&, const ParallelPlan& p) {
                for (const RecomputeModule r : p.recompute_modules) {
                  if (r != RecomputeModule::kCoreAttn) {
                    return true;
                  }
                }
                return false;
              }},
    StackRule{F::kOverlapTp, "TP communication overlap",
              "LinearWithGradAccumulationAndAsyncCommunication all-gathers the sequence-parallel "
              "input before its GEMM and overlaps only the backward's input-gradient "
              "reduction with the weight gradient (megatron/mpu/layers.py @ cfd2e21607; "
              "megatron/core/tensor_parallel/layers.py @ b90fb2685f): no split GEMMs "
              "(Transformer Engine's userbuffers are the megatron stack's)",
              [](const ModelConfig&, const ParallelPlan& p) { return p.overlap.tensor_parallel; }},
    StackRule{F::kOffloadLayers, "activation offloading",
              "megatron/arguments.py @ cfd2e21607 and b90fb2685f has no CPU offloading option",
              [](const ModelConfig&, const ParallelPlan& p) { return p.offload_layers > 0; }},
    kLocalDdpWithAPipeline,
};

// Megatron-LM as of Korthikanti et al. 2022 (megatron-2022, @ cfd2e21607).
constexpr auto kMegatron2022 = concat(
    std::array{
        StackRule{
            F::kZero, "ZeRO sharding",
            "Megatron-LM @ cfd2e21607 has no distributed optimizer (329fe5820f, where it "
            "began, is not in its history): data parallelism is --DDP-impl local or torch "
            "(megatron/arguments.py), the optimizer Float16OptimizerWithFloat16Params or "
            "FP32Optimizer (megatron/optimizer/__init__.py)",
            [](const ModelConfig&, const ParallelPlan& p) { return p.zero != ZeroStage::kNone; }},
        StackRule{F::kCp, "context parallelism",
                  "megatron/arguments.py @ cfd2e21607 sizes tensor, pipeline (and virtual "
                  "pipeline) and data parallelism only (_add_distributed_args)",
                  [](const ModelConfig&, const ParallelPlan& p) { return p.cp > 1; }}},
    kLegacyMegatronShared,
    std::array{
        StackRule{F::kAttention, "a fused (flash) attention kernel",
                  "CoreAttention computes the scores with torch.baddbmm and normalises them with "
                  "FusedScaleMaskSoftmax (megatron/model/transformer.py @ cfd2e21607); "
                  "--use-flash-attn came with d693034ecf (2022-12-08)",
                  fused_attention_kernel},
        StackRule{F::kDtype, "FP8 training",
                  "megatron/arguments.py @ cfd2e21607 trains in --fp16, --bf16 or fp32; FP8 came "
                  "with Transformer Engine (3499542edd, 2022-12-21)",
                  fp8_training}});

// Megatron-LM of 2023 (megatron-2023, @ b90fb2685f, 2023-06-28), its default legacy layers
// (--transformer-impl local).
constexpr auto kMegatron2023 = concat(
    std::array{StackRule{F::kZero, "ZeRO-2 or 3",
                         "Megatron-LM @ b90fb2685f shards the optimizer state only: "
                         "--use-distributed-optimizer (megatron/optimizer/distrib_optimizer.py) is "
                         "zero 1; --DDP-impl is local or torch (megatron/arguments.py)",
                         [](const ModelConfig&, const ParallelPlan& p) { return zero_2_or_3(p); }},
               StackRule{F::kCp, "context parallelism",
                         "megatron/arguments.py @ b90fb2685f sizes tensor, pipeline (and virtual "
                         "pipeline) and data parallelism only (_add_distributed_args); "
                         "--context-parallel-size came with Megatron-Core's Transformer Engine "
                         "attention",
                         [](const ModelConfig&, const ParallelPlan& p) { return p.cp > 1; }},
               StackRule{F::kOverlapGradReduce,
                         "gradient reduction overlapped with the backward under ZeRO-1",
                         "validate_args asserts args.DDP_impl == 'local' with "
                         "--use-distributed-optimizer (megatron/arguments.py @ b90fb2685f), and "
                         "the distributed optimizer reduce-scatters after the backward "
                         "(megatron/optimizer/distrib_optimizer.py reduce_model_grads)",
                         [](const ModelConfig&, const ParallelPlan& p) {
                           return p.overlap.grad_reduce && p.zero == ZeroStage::kOptimizerStates;
                         }},
               StackRule{F::kOverlapParamGather, "the weight gather overlapped with compute",
                         "train_step gathers the updated weights after the optimizer step "
                         "(optimizer.gather_model_params, megatron/training.py @ b90fb2685f); "
                         "--overlap-param-gather came with f048bf8c08 (2023-11-17)",
                         param_gather_overlap_under_zero1}},
    kLegacyMegatronShared,
    std::array{
        StackRule{F::kAttention, "attention other than materialised scores or FlashAttention",
                  "CoreAttention (torch.baddbmm, FusedScaleMaskSoftmax) or, with "
                  "--use-flash-attn, FlashSelfAttention (flash_attn_unpadded_func) "
                  "(megatron/model/transformer.py @ b90fb2685f)",
                  [](const ModelConfig&, const ParallelPlan& p) {
                    return p.attention != AttentionKernel::kNaive &&
                           p.attention != AttentionKernel::kFlash;
                  }},
        StackRule{F::kDtype, "FP8 training",
                  "ParallelTransformer builds its FP8 recipe from "
                  "transformer_engine.common.recipe, imported only with --transformer-impl "
                  "transformer_engine (megatron/model/transformer.py @ b90fb2685f): FP8 runs "
                  "Transformer Engine's layers, the megatron stack",
                  fp8_training}});

// DeepSpeed v0.3.13 on Megatron-LM 2021's GPT (deepspeed-zero3-2021).
constexpr std::array kDeepSpeedZero3_2021 = {
    StackRule{F::kDtype, "bf16 or FP8 training",
              "DeepSpeed v0.3.13's mixed precision is its fp16 section or Apex amp "
              "(deepspeed/runtime/config.py get_fp16_enabled, amp): no bf16 or FP8",
              [](const ModelConfig&, const ParallelPlan& p) {
                return p.matmul_dtype == Dtype::kBf16 || p.matmul_dtype == Dtype::kFp8;
              }},
    StackRule{F::kDtype, "ZeRO without fp16",
              "_do_error_check asserts \"DeepSpeedConfig: ZeRO is only supported if fp16 is "
              "enabled\" (deepspeed/runtime/config.py @ v0.3.13)",
              [](const ModelConfig&, const ParallelPlan& p) {
                return p.zero != ZeroStage::kNone && p.matmul_dtype != Dtype::kFp16;
              }},
    StackRule{F::kZero, "ZeRO-2 or 3 with pipeline parallelism",
              "PipelineEngine @ v0.3.13 reduces gradients itself and patches ZeRO-2 in only "
              "\"enough to run a demo\" (_exec_reduce_tied_grads, deepspeed/runtime/pipe/"
              "engine.py); fbece50b2 (v0.3.16) made it assert \"ZeRO-2 and ZeRO-3 are "
              "incompatible with pipeline parallelism\". With PP, ZeRO is stage 1",
              [](const ModelConfig&, const ParallelPlan& p) { return p.pp > 1 && zero_2_or_3(p); }},
    StackRule{
        F::kFsdp, "ZeRO sharded over part of the data-parallel group",
        "_configure_zero_optimizer partitions over the whole data-parallel group "
        "(dp_process_group=self.data_parallel_group, deepspeed/runtime/engine.py @ "
        "v0.3.13): no hybrid sharding",
        [](const ModelConfig&, const ParallelPlan& p) { return p.fsdp > 0 && p.fsdp != p.dp; }},
    StackRule{F::kSchedule, "a pipeline schedule other than 1F1B",
              "PipelineEngine.train_batch runs TrainSchedule, one forward and one backward in "
              "turn on each stage, without virtual stages (deepspeed/runtime/pipe/schedule.py "
              "@ v0.3.13)",
              [](const ModelConfig&, const ParallelPlan& p) {
                return p.pp > 1 && (p.schedule != PS::kOneFOneB || p.vpp > 1);
              }},
    StackRule{F::kCp, "context parallelism",
              "PipeModelDataParallelTopology's axes are pipe, data and model (deepspeed/runtime/"
              "pipe/topology.py @ v0.3.13)",
              [](const ModelConfig&, const ParallelPlan& p) { return p.cp > 1; }},
    StackRule{F::kSp, "sequence parallelism",
              "PipeModelDataParallelTopology's axes are pipe, data and model (deepspeed/runtime/"
              "pipe/topology.py @ v0.3.13), and Megatron-LM's tensor parallelism of 2021 "
              "all-reduces whole activations (megatron/mpu/layers.py @ de7dc40f)",
              [](const ModelConfig&, const ParallelPlan& p) { return p.sp; }},
    StackRule{F::kStack, "a mixture-of-experts model",
              "DeepSpeed v0.3.13 has no mixture-of-experts layers (deepspeed/moe came in "
              "v0.5.0, 2021-08), nor has Megatron-LM @ de7dc40f",
              [](const ModelConfig& m, const ParallelPlan&) { return m.moe.has_value(); }},
    StackRule{F::kRecompute, "recompute other than none or full",
              "deepspeed.checkpointing.checkpoint(function, *args) recomputes what the model "
              "wraps (deepspeed/runtime/activation_checkpointing/checkpointing.py @ v0.3.13), and "
              "Megatron-LM's GPT of 2021 wraps whole layers (--checkpoint-activations, "
              "megatron/model/transformer.py @ de7dc40f)",
              recompute_not_none_or_full},
    StackRule{F::kOffloadLayers, "Megatron-Core's activation offloading",
              "DeepSpeed v0.3.13 offloads optimizer state and ZeRO-3 parameters (zero_"
              "optimization cpu_offload, cpu_offload_params: deepspeed/runtime/zero/constants.py) "
              "and, with partition_activations, the checkpointed layer inputs (cpu_checkpointing: "
              "activation_checkpointing/config.py), not a layer's saved activations",
              [](const ModelConfig&, const ParallelPlan& p) { return p.offload_layers > 0; }},
    StackRule{F::kOverlapTp, "TP communication overlap",
              "Megatron-LM @ de7dc40f all-reduces TP activations after each layer's GEMMs "
              "(megatron/mpu/layers.py)",
              [](const ModelConfig&, const ParallelPlan& p) { return p.overlap.tensor_parallel; }},
    StackRule{F::kAttention, "a fused (flash) attention kernel",
              "Megatron-LM 2021's ParallelAttention computes the scores with torch.baddbmm and "
              "normalises them with FusedScaleMaskSoftmax (megatron/model/transformer.py @ "
              "de7dc40f)",
              fused_attention_kernel},
};

// Megatron-DeepSpeed on DeepSpeed's pipeline engine (megatron-deepspeed-2022), as BigScience ran
// BLOOM: bigscience-workshop/Megatron-DeepSpeed @ 0f23a729 on microsoft/DeepSpeed @ v0.6.5.
constexpr std::array kMegatronDeepSpeed2022 = {
    StackRule{F::kZero, "ZeRO-2 or 3",
              "PipelineEngine asserts \"ZeRO-2 and ZeRO-3 are incompatible with pipeline "
              "parallelism\" (deepspeed/runtime/pipe/engine.py @ v0.6.5), and GPTModelPipe is a "
              "PipelineModule at every pipeline size (megatron/model/gpt_model.py @ 0f23a729)",
              [](const ModelConfig&, const ParallelPlan& p) { return zero_2_or_3(p); }},
    StackRule{F::kZero, "bf16 with unsharded optimizer state (zero 0)",
              "DeepSpeed trains bf16 through BF16_Optimizer, which partitions the fp32 weights "
              "and Adam state over the data-parallel group whatever the config's ZeRO stage "
              "(engine.py _configure_bf16_optimizer, runtime/bf16_optimizer.py @ v0.6.5): zero 1",
              [](const ModelConfig&, const ParallelPlan& p) {
                return p.matmul_dtype == Dtype::kBf16 && p.zero == ZeroStage::kNone &&
                       p.dense_grad_group() > 1;
              }},
    StackRule{
        F::kFsdp, "ZeRO sharded over part of the data-parallel group",
        "BF16_Optimizer and ZeRO-1 partition over the whole data-parallel group "
        "(real_dp_process_group, dp_process_group: runtime/bf16_optimizer.py, "
        "runtime/zero/stage_1_and_2.py @ v0.6.5)",
        [](const ModelConfig&, const ParallelPlan& p) { return p.fsdp > 0 && p.fsdp != p.dp; }},
    StackRule{F::kDtype, "FP8 training",
              "Megatron-DeepSpeed @ 0f23a729 trains in --fp16 or --bf16 (megatron/arguments.py)",
              fp8_training},
    StackRule{F::kSchedule, "a pipeline schedule other than 1F1B",
              "PipelineEngine.train_batch runs TrainSchedule, one forward and one backward in turn "
              "on each stage, without virtual stages (deepspeed/runtime/pipe/schedule.py @ "
              "v0.6.5)",
              [](const ModelConfig&, const ParallelPlan& p) {
                return p.pp > 1 && (p.schedule != PS::kOneFOneB || p.vpp > 1);
              }},
    StackRule{F::kCp, "context parallelism",
              "PipeModelDataParallelTopology's axes are pipe, data and model (deepspeed/runtime/"
              "pipe/topology.py @ v0.6.5)",
              [](const ModelConfig&, const ParallelPlan& p) { return p.cp > 1; }},
    StackRule{F::kSp, "sequence parallelism",
              "Megatron-DeepSpeed @ 0f23a729 all-reduces whole activations over the TP group "
              "(megatron/mpu/mappings.py) and has no --sequence-parallel",
              [](const ModelConfig&, const ParallelPlan& p) { return p.sp; }},
    StackRule{F::kStack, "a mixture-of-experts model",
              "GPTModelPipe stacks ParallelTransformerLayerPipe layers with dense MLPs "
              "(megatron/model/gpt_model.py, megatron/model/transformer.py @ 0f23a729)",
              [](const ModelConfig& m, const ParallelPlan&) { return m.moe.has_value(); }},
    StackRule{F::kRecompute, "recompute other than none or full",
              "--checkpoint-activations checkpoints whole layers (PipelineModule's "
              "activation_checkpoint_interval, megatron/model/gpt_model.py @ 0f23a729)",
              recompute_not_none_or_full},
    StackRule{F::kOffloadLayers, "activation offloading",
              "DeepSpeed @ v0.6.5 moves optimizer state and, with partition_activations, "
              "checkpointed layer inputs to the host (cpu_checkpointing), not a layer's saved "
              "activations",
              [](const ModelConfig&, const ParallelPlan& p) { return p.offload_layers > 0; }},
    StackRule{F::kOverlapTp, "TP communication overlap",
              "ColumnParallelLinear all-reduces its input gradient through "
              "copy_to_tensor_model_parallel_region around F.linear (megatron/mpu/layers.py @ "
              "0f23a729)",
              [](const ModelConfig&, const ParallelPlan& p) { return p.overlap.tensor_parallel; }},
    StackRule{F::kAttention, "a fused (flash) attention kernel",
              "ParallelAttention computes the scores with torch.baddbmm and normalises them with "
              "FusedScaleMaskSoftmax (megatron/model/transformer.py @ 0f23a729)",
              fused_attention_kernel},
    StackRule{F::kOverlapGradReduce, "gradient reduction overlapped with the backward",
              "TrainSchedule's last step runs ReduceTiedGrads, ReduceGrads and OptimizerStep "
              "after the last backward (deepspeed/runtime/pipe/schedule.py @ v0.6.5)",
              [](const ModelConfig&, const ParallelPlan& p) { return p.overlap.grad_reduce; }},
    StackRule{F::kOverlapParamGather, "the weight gather overlapped with compute",
              "the optimizer all-gathers the updated 16-bit weights inside OptimizerStep "
              "(BF16_Optimizer.step: update_lp_params, all_gather_dp_groups; ZeRO-1's step: "
              "all_gather_dp_groups, @ v0.6.5)",
              param_gather_overlap_under_zero1},
};

// PyTorch FSDP (FSDP1) through Composer / llm-foundry (fsdp, llm-foundry-2023).
constexpr std::array kFsdp = {
    StackRule{F::kZero, "ZeRO-1",
              "PyTorch FSDP's ShardingStrategy is FULL_SHARD (ZeRO-3), SHARD_GRAD_OP (ZeRO-2), "
              "NO_SHARD or the hybrid forms of the first two (torch/distributed/fsdp/api.py): "
              "no optimizer-only sharding",
              [](const ModelConfig&, const ParallelPlan& p) {
                return p.zero == ZeroStage::kOptimizerStates;
              }},
    StackRule{F::kPp, "pipeline parallelism",
              "Composer's ParallelismConfig has fsdp and tp only (composer/utils/parallelism.py "
              "@ 008dac70)",
              [](const ModelConfig&, const ParallelPlan& p) { return p.pp > 1; }},
    StackRule{F::kCp, "context parallelism",
              "Composer's ParallelismConfig has fsdp and tp only (composer/utils/parallelism.py "
              "@ 008dac70)",
              [](const ModelConfig&, const ParallelPlan& p) { return p.cp > 1; }},
    StackRule{F::kEp, "expert parallelism",
              "Composer's ParallelismConfig has fsdp and tp only (composer/utils/parallelism.py "
              "@ 008dac70); llm-foundry's MegaBlocks experts are not the EP meshsim models",
              [](const ModelConfig&, const ParallelPlan& p) { return p.ep > 1; }},
    StackRule{F::kRecompute, "recompute other than none or full",
              "Composer's FSDPConfig.activation_checkpointing wraps whole blocks (composer/"
              "utils/parallelism.py @ 008dac70)",
              recompute_not_none_or_full},
    StackRule{F::kOffloadLayers, "Megatron-Core's activation offloading",
              "Composer offloads activations only inside activation checkpointing "
              "(FSDPConfig.activation_cpu_offload, composer/utils/parallelism.py @ 008dac70), "
              "not Megatron-Core's per-layer offload",
              [](const ModelConfig&, const ParallelPlan& p) { return p.offload_layers > 0; }},
    StackRule{F::kOverlapTp, "TP communication overlap",
              "Composer's TPConfig applies PyTorch's parallelize_module layer plan "
              "(composer/utils/parallelism.py @ 008dac70), without split GEMMs",
              [](const ModelConfig&, const ParallelPlan& p) { return p.overlap.tensor_parallel; }},
};

// torchtitan: FSDP2, TP, CP, torch.distributed.pipelining, torch.compile (fsdp-compile).
constexpr std::array kFsdpCompile = {
    StackRule{F::kZero, "plain data parallelism (zero 0) with TP, CP or PP",
              "parallelize_llama raises \"DDP has not supported > 1D parallelism\" "
              "(torchtitan/parallelisms/parallelize_llama.py @ 9dec370): with other "
              "parallelisms, data parallelism is FSDP2",
              [](const ModelConfig&, const ParallelPlan& p) {
                return p.zero == ZeroStage::kNone && p.dp > 1 &&
                       (p.tp > 1 || p.cp > 1 || p.pp > 1);
              }},
    StackRule{F::kZero, "ZeRO-1 or 2 without pipeline parallelism",
              "torchtitan's apply_fsdp shards with FSDP2 and reshards after each block's forward "
              "(ZeRO-3) unless PP is on (torchtitan/parallelisms/parallelize_llama.py @ "
              "9dec370): without PP its stages are zero 0 and 3",
              [](const ModelConfig&, const ParallelPlan& p) {
                return p.pp == 1 && (p.zero == ZeroStage::kOptimizerStates ||
                                     p.zero == ZeroStage::kGradients);
              }},
    StackRule{F::kZero, "ZeRO-2 or 3 with pipeline parallelism",
              "with PP, apply_fsdp does not reshard after forward \"to avoid per-microbatch "
              "all-gathers\" (parallelize_llama.py @ 9dec370), and torch.distributed.pipelining "
              "sets set_reshard_after_backward(False) and set_requires_gradient_sync(False) "
              "until the last backward (torch/distributed/pipelining/stage.py "
              "backward_maybe_with_nosync @ 01386103): parameters gathered and gradients "
              "reduced once per step, optimizer state sharded: zero 1",
              [](const ModelConfig&, const ParallelPlan& p) { return p.pp > 1 && zero_2_or_3(p); }},
    StackRule{F::kEp, "expert parallelism",
              "ParallelDims @ 9dec370 has dp_replicate, dp_shard, cp, tp and pp "
              "(torchtitan/parallelisms/parallel_dims.py)",
              [](const ModelConfig&, const ParallelPlan& p) { return p.ep > 1; }},
    StackRule{F::kRecompute, "selective recompute of MoE, MLA or parallel-block layers",
              "torchtitan's selective checkpointing counts the matmuls of its Llama blocks "
              "(parallelize_llama.py and models/llama/model.py @ 9dec370, which has no MoE, MLA "
              "or parallel blocks); meshsim models that policy on such blocks only",
              [](const ModelConfig& m, const ParallelPlan& p) {
                return p.recompute == Recompute::kSelective && !op_checkpointing_fits(m);
              }},
    StackRule{F::kSchedule, "the single-stage zero-bubble schedule (ZB-H1)",
              "torchtitan takes its schedule from torch.distributed.pipelining's "
              "get_schedule_class (GPipe, 1F1B, Interleaved1F1B, LoopedBFS, "
              "InterleavedZeroBubble, ZBVZeroBubble; torch/distributed/pipelining/"
              "schedules.py): no single-stage ZB-H1",
              [](const ModelConfig&, const ParallelPlan& p) {
                return p.pp > 1 && p.schedule == PS::kZeroBubble;
              }},
    StackRule{F::kRecompute, "JAX rematerialisation policies (dots, qkv_out_proj, qkv_proj)",
              "torchtitan's activation checkpointing modes are none, full and selective "
              "(_apply_ac_to_transformer_block, parallelize_llama.py @ 9dec370)",
              [](const ModelConfig&, const ParallelPlan& p) { return jax_policy(p.recompute); }},
    StackRule{F::kOffloadLayers, "activation offloading",
              "torchtitan's enable_cpu_offload is FSDP2's CPUOffloadPolicy for parameters, "
              "gradients and optimizer state (parallelize_llama.py @ 9dec370), not activations",
              [](const ModelConfig&, const ParallelPlan& p) { return p.offload_layers > 0; }},
};

// MaxText on XLA (maxtext).
constexpr std::array kMaxText = {
    StackRule{
        F::kZero, "ZeRO-2",
        "MaxText shards over its data axis (zero 0, with shard_optimizer_over_data: "
        "\"ZeRO-1 optimizer sharding over the data axis\") or its fsdp axis (zero 3) "
        "(src/maxtext/configs/types.py @ e591f30c): no gradient-only sharding",
        [](const ModelConfig&, const ParallelPlan& p) { return p.zero == ZeroStage::kGradients; }},
    StackRule{F::kSchedule, "a pipeline schedule other than GPipe",
              "MaxText's pipeline (src/maxtext/layers/pipeline.py @ e591f30c) runs every "
              "microbatch's forward through a scanned loop and the backward by autodiff of the "
              "loop: GPipe's order (its circular repeats are not modelled)",
              schedule_not_gpipe},
    StackRule{F::kMbs, "a pipeline whose microbatches are not a multiple of pp",
              "types.py asserts \"The number of microbatches ... must be divisible by the number "
              "of stages\" (src/maxtext/configs/types.py @ e591f30c)",
              [](const ModelConfig&, const ParallelPlan& p) {
                return microbatches_not_multiple_of_pp(p);
              }},
    StackRule{F::kRecompute, "Megatron's selective recompute",
              "MaxText's remat_policy names JAX checkpoint policies (full, minimal, "
              "save_dot_except_mlp, ...; src/maxtext/configs/base.yml @ e591f30c)",
              selective_recompute},
    StackRule{F::kOffloadLayers, "Megatron-Core's activation offloading",
              "MaxText offloads activations through remat policies (qkv_proj_offloaded, "
              "minimal_offloaded; base.yml @ e591f30c), not per layer",
              [](const ModelConfig&, const ParallelPlan& p) { return p.offload_layers > 0; }},
};

// PaxML/Praxis on XLA (paxml), as the PaxML 24.03.04 container ran it.
constexpr std::array kPaxml = {
    StackRule{F::kZero, "ZeRO-1 or 2",
              "Praxis's Adam keeps its moments sharded as the variable they update "
              "(opt_state_sharding_spec: \"m and v simply share the same sharding\", "
              "praxis/optimizers.py @ a4742bc): replicated (zero 0), or with the weights sharded "
              "over the data axis, FSDP (zero 3)",
              [](const ModelConfig&, const ParallelPlan& p) {
                return p.zero == ZeroStage::kOptimizerStates || p.zero == ZeroStage::kGradients;
              }},
    StackRule{F::kCp, "context parallelism",
              "PaxML's LM meshes have the axes replica, data and mdl (set_sharding_annotations_"
              "v1), and stage before them for pipelines (paxml/tasks/lm/model_params.py @ "
              "4a6bf20): no sequence axis",
              [](const ModelConfig&, const ParallelPlan& p) { return p.cp > 1; }},
    StackRule{F::kSchedule, "a pipeline schedule other than GPipe",
              "LayerwiseShardablePipelined runs every microbatch's forward through a loop of "
              "num_microbatches + num_stages - 1 iterations and the backward by autodiff of the "
              "loop (praxis/layers/pipeline.py @ a4742bc): GPipe's order (the circular repeats "
              "of CircularLayerwiseShardablePipelined are not modelled)",
              schedule_not_gpipe},
    StackRule{F::kStageLayers, "pipeline stages of different layer counts",
              "the pipelined LM asserts \"self.NUM_LAYERS % (self.NUM_STAGES * "
              "self.CIRCULAR_REPEAT) == 0\" (paxml/tasks/lm/model_params.py @ 4a6bf20) and "
              "vmaps one stage body over the stages (praxis/layers/pipeline.py @ a4742bc)",
              [](const ModelConfig&, const ParallelPlan& p) {
                return p.pp > 1 && uneven_stage_layers(p);
              }},
    StackRule{F::kRecompute, "Megatron's selective recompute",
              "PaxML's CHECKPOINT_POLICY names JAX checkpoint policies (save_nothing, "
              "save_dot_only, save_qkv_out_proj, ...; AutodiffCheckpointType, praxis/layers/"
              "checkpoint_policy.py @ a4742bc)",
              selective_recompute},
    StackRule{F::kRecompute, "the Q, K and V projections kept without the output projection",
              "AutodiffCheckpointType has no such policy: SAVE_QKV_OUT_PROJ and "
              "SAVE_QKV_OUT_PROJ_SEPARATE keep the output projection too (praxis/layers/"
              "checkpoint_policy.py @ a4742bc)",
              [](const ModelConfig&, const ParallelPlan& p) {
                return p.recompute == Recompute::kQkvProj;
              }},
    StackRule{F::kRecomputeNumLayers, "recompute of only some layers",
              "Repeat applies one checkpoint_policy to the scanned body of every layer "
              "(nn.remat inside nn.scan, praxis/layers/repeats.py @ a4742bc)",
              [](const ModelConfig&, const ParallelPlan& p) { return p.recompute_num_layers > 0; }},
    StackRule{F::kOffloadLayers, "activation offloading",
              "Praxis's AutodiffCheckpointType policies save or recompute each residual; none "
              "moves it to host memory (praxis/layers/checkpoint_policy.py @ a4742bc)",
              [](const ModelConfig&, const ParallelPlan& p) { return p.offload_layers > 0; }},
};

}  // namespace

namespace {

// Whether none of `probe.stack`'s rules on `field` refuses `probe` (a dense model: the rules
// asked about here read the plan alone).
bool no_rule_on_field_refuses(PlanField field, const ParallelPlan& probe) {
  const ModelConfig dense;
  const auto rules = stack_rules(probe.stack);
  return std::none_of(rules.begin(), rules.end(), [&](const StackRule& r) {
    return r.field == field && r.refuses(dense, probe);
  });
}

}  // namespace

bool runs_sequence_parallelism(Stack stack) {
  ParallelPlan probe;
  probe.stack = stack;
  probe.tp = 2;
  probe.sp = true;
  return no_rule_on_field_refuses(PlanField::kSp, probe);
}

bool runs_recompute(Stack stack, Recompute recompute) {
  ParallelPlan probe;
  probe.stack = stack;
  probe.recompute = recompute;
  return no_rule_on_field_refuses(PlanField::kRecompute, probe);
}

std::span<const StackRule> stack_rules(Stack stack) {
  switch (stack) {
    case Stack::kMegatron:
      return kMegatron;
    case Stack::kMegatron2021:
      return kMegatron2021;
    case Stack::kFsdp:
    case Stack::kLlmFoundry2023:
      return kFsdp;
    case Stack::kFsdpCompile:
      return kFsdpCompile;
    case Stack::kMaxText:
      return kMaxText;
    case Stack::kMegatron2022:
      return kMegatron2022;
    case Stack::kMegatron2023:
      return kMegatron2023;
    case Stack::kMegatronDeepSpeed2022:
      return kMegatronDeepSpeed2022;
    case Stack::kDeepSpeedZero3_2021:
      return kDeepSpeedZero3_2021;
    case Stack::kPaxml:
      return kPaxml;
    case Stack::kCustom:
      break;
  }
  return {};
}

const StackRule* stack_refusal(const ModelConfig& model, const ParallelPlan& plan) {
  for (const StackRule& rule : stack_rules(plan.stack)) {
    if (rule.refuses(model, plan)) {
      return &rule;
    }
  }
  return nullptr;
}

std::string refusal_text(Stack stack, const StackRule& rule) {
  return fmt::format("the {} stack does not run {}: {}", to_string(stack), rule.what, rule.says);
}

void check_stack_runs(const ModelConfig& model, const ParallelPlan& plan) {
  if (const StackRule* rule = stack_refusal(model, plan)) {
    throw PlanError(rule->field, refusal_text(plan.stack, *rule));
  }
}

}  // namespace meshsim::workloads
