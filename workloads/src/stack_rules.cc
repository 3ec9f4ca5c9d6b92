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
#include "meshsim/workloads/stack_rules.h"

#include <fmt/format.h>

#include <array>

namespace meshsim::workloads {
namespace {

using F = PlanField;
using PS = PipelineSchedule;

bool zero_2_or_3(const ParallelPlan& p) {
  return p.zero == ZeroStage::kGradients || p.zero == ZeroStage::kParameters;
}
bool jax_remat(const ParallelPlan& p) {
  return p.recompute == Recompute::kDots || p.recompute == Recompute::kQkvOutProj;
}
bool microbatches_not_multiple_of_pp(const ParallelPlan& p) {
  return p.pp > 1 && p.microbatches() % p.pp != 0;
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
              [](const ModelConfig&, const ParallelPlan& p) {
                return p.pp > 1 && p.schedule != PS::kOneFOneB && p.schedule != PS::kInterleaved;
              }},
    StackRule{F::kSchedule, "interleaved 1F1B with microbatches not a multiple of pp",
              "forward_backward_pipelining_with_interleaving raises \"The number of contiguous "
              "micro-batches in a virtual pipeline stage should range in [PP, M]\" and \"The "
              "remainder of M ... divided by N ... should be 0, or larger than or equal to the "
              "pipeline-parallel size\", N being microbatch_group_size_per_vp_stage, pp by "
              "default (megatron/core/pipeline_parallel/schedules.py @ d98e8a64)",
              [](const ModelConfig&, const ParallelPlan& p) {
                return p.schedule == PS::kInterleaved && microbatches_not_multiple_of_pp(p);
              }},
    StackRule{F::kOverlapP2p, "interleaved 1F1B on 2 stages without p2p overlap",
              "validate_args asserts \"When interleaved schedule is used and p2p communication "
              "overlap is disabled, pipeline-model-parallel size should be greater than 2\" "
              "(megatron/training/arguments.py @ d98e8a64)",
              [](const ModelConfig&, const ParallelPlan& p) {
                return p.schedule == PS::kInterleaved && p.pp <= 2 && !p.overlap.pipeline_p2p;
              }},
    StackRule{F::kOffloadLayers, "activation offloading with pipeline parallelism",
              "TransformerConfig raises \"Currently there is no support for Pipeline parallelism "
              "with CPU offloading\" (megatron/core/transformer/transformer_config.py @ "
              "d98e8a64)",
              [](const ModelConfig&, const ParallelPlan& p) {
                return p.offload_layers > 0 && p.pp > 1;
              }},
    StackRule{F::kOverlapTp, "TP communication overlap without sequence parallelism",
              "validate_args asserts \"Tensor parallel communication/GEMM overlap can happen "
              "only when sequence parallelism is enabled\" (megatron/training/arguments.py @ "
              "d98e8a64)",
              [](const ModelConfig&, const ParallelPlan& p) {
                return p.overlap.tensor_parallel && !p.sp;
              }},
    StackRule{F::kRecompute, "JAX rematerialisation policies (dots, qkv_out_proj)",
              "Megatron's --recompute-granularity is full or selective (with "
              "--recompute-modules) (megatron/training/arguments.py @ d98e8a64)",
              [](const ModelConfig&, const ParallelPlan& p) { return jax_remat(p); }},
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
              [](const ModelConfig&, const ParallelPlan& p) {
                return p.zero != ZeroStage::kNone;
              }},
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
              [](const ModelConfig&, const ParallelPlan& p) {
                return p.pp > 1 && p.schedule != PS::kOneFOneB && p.schedule != PS::kInterleaved;
              }},
    StackRule{F::kPp, "interleaved 1F1B on 2 stages",
              "validate_args asserts \"pipeline-model-parallel size should be greater than 2 "
              "with interleaved schedule\" (megatron/arguments.py @ de7dc40f)",
              [](const ModelConfig&, const ParallelPlan& p) {
                return p.schedule == PS::kInterleaved && p.pp <= 2;
              }},
    StackRule{F::kSchedule, "interleaved 1F1B with microbatches not a multiple of pp",
              "\"number of microbatches is not divisible by pipeline-parallel size when using "
              "interleaved schedule\" (megatron/schedules.py @ de7dc40f)",
              [](const ModelConfig&, const ParallelPlan& p) {
                return p.schedule == PS::kInterleaved && microbatches_not_multiple_of_pp(p);
              }},
    StackRule{F::kRecompute, "recompute other than none or full",
              "Megatron-LM @ de7dc40f recomputes whole layers (--checkpoint-activations); "
              "selective recompute came in 2022",
              [](const ModelConfig&, const ParallelPlan& p) {
                return p.recompute != Recompute::kNone && p.recompute != Recompute::kFull;
              }},
    StackRule{F::kOverlapTp, "TP communication overlap",
              "Megatron-LM @ de7dc40f all-reduces TP activations after each layer's GEMMs "
              "(megatron/mpu/layers.py)",
              [](const ModelConfig&, const ParallelPlan& p) { return p.overlap.tensor_parallel; }},
    StackRule{F::kOffloadLayers, "activation offloading",
              "Megatron-LM @ de7dc40f has no CPU offloading",
              [](const ModelConfig&, const ParallelPlan& p) { return p.offload_layers > 0; }},
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
              [](const ModelConfig&, const ParallelPlan& p) {
                return p.recompute != Recompute::kNone && p.recompute != Recompute::kFull;
              }},
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
              [](const ModelConfig&, const ParallelPlan& p) {
                return p.pp > 1 && zero_2_or_3(p);
              }},
    StackRule{F::kEp, "expert parallelism",
              "ParallelDims @ 9dec370 has dp_replicate, dp_shard, cp, tp and pp "
              "(torchtitan/parallelisms/parallel_dims.py)",
              [](const ModelConfig&, const ParallelPlan& p) { return p.ep > 1; }},
    StackRule{F::kSchedule, "the single-stage zero-bubble schedule (ZB-H1)",
              "torchtitan takes its schedule from torch.distributed.pipelining's "
              "get_schedule_class (GPipe, 1F1B, Interleaved1F1B, LoopedBFS, "
              "InterleavedZeroBubble, ZBVZeroBubble; torch/distributed/pipelining/"
              "schedules.py): no single-stage ZB-H1",
              [](const ModelConfig&, const ParallelPlan& p) {
                return p.pp > 1 && p.schedule == PS::kZeroBubble;
              }},
    StackRule{F::kRecompute, "JAX rematerialisation policies (dots, qkv_out_proj)",
              "torchtitan's activation checkpointing modes are none, full and selective "
              "(_apply_ac_to_transformer_block, parallelize_llama.py @ 9dec370)",
              [](const ModelConfig&, const ParallelPlan& p) { return jax_remat(p); }},
    StackRule{F::kOffloadLayers, "activation offloading",
              "torchtitan's enable_cpu_offload is FSDP2's CPUOffloadPolicy for parameters, "
              "gradients and optimizer state (parallelize_llama.py @ 9dec370), not activations",
              [](const ModelConfig&, const ParallelPlan& p) { return p.offload_layers > 0; }},
};

// MaxText on XLA (maxtext).
constexpr std::array kMaxText = {
    StackRule{F::kZero, "ZeRO-2",
              "MaxText shards over its data axis (zero 0, with shard_optimizer_over_data: "
              "\"ZeRO-1 optimizer sharding over the data axis\") or its fsdp axis (zero 3) "
              "(src/maxtext/configs/types.py @ e591f30c): no gradient-only sharding",
              [](const ModelConfig&, const ParallelPlan& p) {
                return p.zero == ZeroStage::kGradients;
              }},
    StackRule{F::kSchedule, "a pipeline schedule other than GPipe",
              "MaxText's pipeline (src/maxtext/layers/pipeline.py @ e591f30c) runs every "
              "microbatch's forward through a scanned loop and the backward by autodiff of the "
              "loop: GPipe's order (its circular repeats are not modelled)",
              [](const ModelConfig&, const ParallelPlan& p) {
                return p.pp > 1 && (p.schedule != PS::kGpipe || p.vpp > 1);
              }},
    StackRule{F::kMbs, "a pipeline whose microbatches are not a multiple of pp",
              "types.py asserts \"The number of microbatches ... must be divisible by the number "
              "of stages\" (src/maxtext/configs/types.py @ e591f30c)",
              [](const ModelConfig&, const ParallelPlan& p) {
                return microbatches_not_multiple_of_pp(p);
              }},
    StackRule{F::kRecompute, "Megatron's selective recompute",
              "MaxText's remat_policy names JAX checkpoint policies (full, minimal, "
              "save_dot_except_mlp, ...; src/maxtext/configs/base.yml @ e591f30c)",
              [](const ModelConfig&, const ParallelPlan& p) {
                return p.recompute == Recompute::kSelective || !p.recompute_modules.empty();
              }},
    StackRule{F::kOffloadLayers, "Megatron-Core's activation offloading",
              "MaxText offloads activations through remat policies (qkv_proj_offloaded, "
              "minimal_offloaded; base.yml @ e591f30c), not per layer",
              [](const ModelConfig&, const ParallelPlan& p) { return p.offload_layers > 0; }},
};

}  // namespace

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
    // The stacks of published runs (megatron-2022, deepspeed-zero3-2021, paxml) set the kernels
    // and host costs of their time; their frameworks' argument checks have not been read into
    // rules yet, so they refuse nothing (a plan is taken as given, as with custom).
    case Stack::kMegatron2022:
    case Stack::kDeepSpeedZero3_2021:
    case Stack::kPaxml:
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
