// Each stack's capability table against the framework rules it cites (workloads/stack_rules.h):
// every rule refuses the combination its source refuses and accepts its nearest neighbour that the
// source accepts; the custom stack refuses nothing and reports the megatron rules as caveats.
#include <gtest/gtest.h>

#include <string>

#include "meshsim/sim/error.h"
#include "meshsim/workloads/model.h"
#include "meshsim/workloads/stack_rules.h"

namespace meshsim::workloads {
namespace {

using PS = PipelineSchedule;

// Llama-3-8B (32 layers) on 64 ranks: TP 2, PP 4, DP 8, one microbatch of 1 per DP rank and step.
ParallelPlan plan_for(Stack stack) {
  ParallelPlan p;
  p.stack = stack;
  p.tp = 2;
  p.sp = true;
  p.pp = 4;
  p.dp = 8;
  p.mbs = 1;
  p.gbs = 64;  // 8 microbatches
  p.seq = 4096;
  p.attention = AttentionKernel::kCudnn;
  return p;
}

const ModelConfig& dense() {
  static const ModelConfig m = load_model("llama3-8b");
  return m;
}
const ModelConfig& moe() {
  static const ModelConfig m = load_model("mixtral-8x7b");
  return m;
}

// The same 64 ranks without pipelining: PP 1, DP 32, still one microbatch of 1 per DP rank.
void unpipeline(ParallelPlan& p) {
  p.pp = 1;
  p.dp = 32;
  p.gbs = 32;
}

// Data parallelism alone over the 64 ranks: no TP (nor SP), no PP, DP 64.
void data_parallel_only(ParallelPlan& p) {
  p.tp = 1;
  p.sp = false;
  p.pp = 1;
  p.dp = 64;
}

// CP 2 carved out of DP: half the DP ranks and half the global batch, so that the microbatches
// per pipeline stay as they were.
void split_context(ParallelPlan& p) {
  p.cp = 2;
  p.dp /= 2;
  p.gbs /= 2;
}

// Megatron-LM before Transformer Engine, as its profile runs: the scores through baddbmm and
// FusedScaleMaskSoftmax, (2021, and Megatron-DeepSpeed's fork of it) no sequence parallelism, and
// the local DDP's gradient reduction after the backward.
ParallelPlan legacy_megatron(Stack stack) {
  ParallelPlan p = plan_for(stack);
  p.attention = AttentionKernel::kNaive;
  p.sp = stack != Stack::kMegatron2021 && stack != Stack::kMegatronDeepSpeed2022;
  p.overlap.grad_reduce = false;
  p.overlap.param_gather = false;
  return p;
}

// Mixtral routed to one expert per token, as a Switch Transformer.
ModelConfig switch_moe() {
  ModelConfig m = moe();
  m.moe->experts_per_token = 1;
  return m;
}

// The field of the rule that refuses `p` (nullopt: the stack runs it).
std::optional<PlanField> refused_on(const ParallelPlan& p, const ModelConfig& m = dense()) {
  const StackRule* rule = stack_refusal(m, p);
  return rule != nullptr ? std::optional(rule->field) : std::nullopt;
}

// Megatron-LM's --DDP-impl torch overlaps the gradient reduction with the backward, which its
// setup_model_and_optimizer allows without a pipeline only.
void expect_torch_ddp_without_pipeline_only(Stack stack) {
  ParallelPlan p = legacy_megatron(stack);
  p.overlap.grad_reduce = true;
  EXPECT_EQ(refused_on(p), PlanField::kOverlapGradReduce) << to_string(stack);  // PP 4
  unpipeline(p);
  EXPECT_EQ(refused_on(p), std::nullopt) << to_string(stack);
}

TEST(StackRules, EveryRuleNamesItsSource) {
  for (const Stack s : enum_values<Stack>()) {
    for (const StackRule& rule : stack_rules(s)) {
      EXPECT_FALSE(rule.what.empty());
      // A file of the framework (or its configuration) and, for source checks, a commit.
      const std::string says(rule.says);
      EXPECT_TRUE(says.find(".py") != std::string::npos || says.find(".md") != std::string::npos ||
                  says.find(".yml") != std::string::npos || says.find("@") != std::string::npos)
          << to_string(s) << ": " << rule.what;
    }
  }
  EXPECT_TRUE(stack_rules(Stack::kCustom).empty());
}

// Megatron-LM @ d98e8a64: ZeRO-2/3 is Megatron-FSDP, which has no PP; the distributed optimizer
// (ZeRO-1) has; Megatron-FSDP ZeRO-3 runs with EP (the functional test gpt3_mcore_te_tp2_zp_z3_
// resume_torch_dist_te_8experts2parallel_top2router: TP 2, EP 2, PP 1).
TEST(StackRules, MegatronShardsWithPipelinesThroughTheDistributedOptimizerOnly) {
  ParallelPlan p = plan_for(Stack::kMegatron);
  for (const ZeroStage z : {ZeroStage::kGradients, ZeroStage::kParameters}) {
    p.zero = z;
    EXPECT_EQ(refused_on(p), PlanField::kZero);
  }
  p.zero = ZeroStage::kOptimizerStates;
  EXPECT_EQ(refused_on(p), std::nullopt);
  unpipeline(p);
  p.zero = ZeroStage::kParameters;
  EXPECT_EQ(refused_on(p), std::nullopt);
  p.ep = 8;
  EXPECT_EQ(refused_on(p, moe()), std::nullopt) << "Megatron-FSDP runs ZeRO-3 with EP";
}

TEST(StackRules, MegatronSchedulesAreOneFOneBAndInterleaved) {
  ParallelPlan p = plan_for(Stack::kMegatron);
  for (const PS s : {PS::kGpipe, PS::kZeroBubble, PS::kZeroBubbleV}) {
    p.schedule = s;
    p.vpp = s == PS::kZeroBubbleV ? 2 : 1;
    EXPECT_EQ(refused_on(p), PlanField::kSchedule) << to_string(s);
  }
  p.schedule = PS::kInterleaved;
  p.vpp = 2;
  EXPECT_EQ(refused_on(p), std::nullopt);  // 8 microbatches over 4 stages
  p.gbs = 48;                               // 6: not a multiple of pp 4
  EXPECT_EQ(refused_on(p), PlanField::kSchedule);
  // Without pipelining the schedule field means nothing: not refused.
  ParallelPlan q = plan_for(Stack::kMegatron);
  unpipeline(q);
  q.schedule = PS::kGpipe;
  EXPECT_EQ(refused_on(q), std::nullopt);
}

TEST(StackRules, MegatronOffloadTpOverlapRecomputeAndAttention) {
  ParallelPlan p = plan_for(Stack::kMegatron);
  p.offload_layers = 2;
  EXPECT_EQ(refused_on(p), PlanField::kOffloadLayers);  // "no support for Pipeline parallelism"
  unpipeline(p);
  EXPECT_EQ(refused_on(p), std::nullopt);
  p.offload_layers = 0;
  p.sp = false;
  p.overlap.tensor_parallel = true;
  EXPECT_EQ(refused_on(p), PlanField::kOverlapTp);  // "only when sequence parallelism"
  p.sp = true;
  EXPECT_EQ(refused_on(p), std::nullopt);
  for (const Recompute jax : {Recompute::kDots, Recompute::kQkvOutProj, Recompute::kQkvProj}) {
    p.recompute = jax;
    EXPECT_EQ(refused_on(p), PlanField::kRecompute) << to_string(jax);
  }
  p.recompute = Recompute::kSelective;
  EXPECT_EQ(refused_on(p), std::nullopt);
  p.attention = AttentionKernel::kSplash;
  EXPECT_EQ(refused_on(p), PlanField::kAttention);
}

// Megatron-LM @ de7dc40f: no distributed optimizer, CP, SP or MoE; interleaving needs pp > 2.
TEST(StackRules, Megatron2021HasTensorPipelineAndPlainDataParallelism) {
  ParallelPlan p = legacy_megatron(Stack::kMegatron2021);
  EXPECT_EQ(refused_on(p), std::nullopt);
  p.zero = ZeroStage::kOptimizerStates;
  EXPECT_EQ(refused_on(p), PlanField::kZero);
  p.zero = ZeroStage::kNone;
  p.sp = true;
  EXPECT_EQ(refused_on(p), PlanField::kSp);
  p.sp = false;
  split_context(p);
  EXPECT_EQ(refused_on(p), PlanField::kCp);
  p = legacy_megatron(Stack::kMegatron2021);
  p.pp = 2;
  p.dp = 16;
  p.gbs = 64;
  p.schedule = PS::kInterleaved;
  p.vpp = 2;
  EXPECT_EQ(refused_on(p), PlanField::kPp);  // "greater than 2 with interleaved schedule"
  EXPECT_EQ(refused_on(legacy_megatron(Stack::kMegatron2021), moe()), PlanField::kStack);
  // Scores through baddbmm and the fused softmax; no FP8 before Transformer Engine.
  ParallelPlan a = legacy_megatron(Stack::kMegatron2021);
  a.attention = AttentionKernel::kFlash;
  EXPECT_EQ(refused_on(a), PlanField::kAttention);
  a.attention = AttentionKernel::kNaive;
  EXPECT_EQ(refused_on(a), std::nullopt);
  a.set_training_dtype(Dtype::kFp8);
  EXPECT_EQ(refused_on(a), PlanField::kDtype);
  expect_torch_ddp_without_pipeline_only(Stack::kMegatron2021);
}

// Megatron-LM @ cfd2e21607: 2021's parallelisms plus sequence parallelism and selective
// recompute of the core attention; still no distributed optimizer, CP, fused attention or FP8.
TEST(StackRules, Megatron2022AddsSequenceParallelismAndSelectiveRecompute) {
  ParallelPlan p = legacy_megatron(Stack::kMegatron2022);
  EXPECT_EQ(refused_on(p), std::nullopt);  // TP 2 with SP, PP 4, DP 8
  p.zero = ZeroStage::kOptimizerStates;
  EXPECT_EQ(refused_on(p), PlanField::kZero);  // no distributed optimizer yet
  p.zero = ZeroStage::kNone;
  split_context(p);
  EXPECT_EQ(refused_on(p), PlanField::kCp);
  p = legacy_megatron(Stack::kMegatron2022);
  p.recompute = Recompute::kSelective;
  EXPECT_EQ(refused_on(p), std::nullopt);
  p.recompute_modules = {RecomputeModule::kCoreAttn};
  EXPECT_EQ(refused_on(p), std::nullopt);
  p.recompute_modules = {RecomputeModule::kCoreAttn, RecomputeModule::kMlp};
  EXPECT_EQ(refused_on(p), PlanField::kRecomputeModules);  // core attention only
  p.recompute_modules.clear();
  p.recompute = Recompute::kDots;
  EXPECT_EQ(refused_on(p), PlanField::kRecompute);
  p.recompute = Recompute::kFull;
  EXPECT_EQ(refused_on(p), std::nullopt);
  p.overlap.tensor_parallel = true;
  EXPECT_EQ(refused_on(p), PlanField::kOverlapTp);  // SP's all-gather precedes the GEMM
  p.overlap.tensor_parallel = false;
  p.offload_layers = 1;
  EXPECT_EQ(refused_on(p), PlanField::kOffloadLayers);
  p.offload_layers = 0;
  p.attention = AttentionKernel::kFlash;
  EXPECT_EQ(refused_on(p), PlanField::kAttention);  // --use-flash-attn: December 2022
  p.attention = AttentionKernel::kNaive;
  p.set_training_dtype(Dtype::kFp8);
  EXPECT_EQ(refused_on(p), PlanField::kDtype);
  p.set_training_dtype(Dtype::kBf16);
  EXPECT_EQ(refused_on(p), std::nullopt);
  expect_torch_ddp_without_pipeline_only(Stack::kMegatron2022);
}

// Megatron-LM @ b90fb2685f (2023-06-28), its default legacy layers: 2022's plus the distributed
// optimizer (zero 1 only) and --use-flash-attn; still no CP, no expert parallelism, and FP8 only
// through Transformer Engine's layers (the megatron stack).
TEST(StackRules, Megatron2023AddsTheDistributedOptimizerAndFlashAttention) {
  ParallelPlan p = legacy_megatron(Stack::kMegatron2023);
  EXPECT_EQ(refused_on(p), std::nullopt);  // TP 2 with SP, PP 4, DP 8
  p.zero = ZeroStage::kOptimizerStates;
  EXPECT_EQ(refused_on(p), std::nullopt);  // --use-distributed-optimizer
  unpipeline(p);
  p.overlap.grad_reduce = true;
  EXPECT_EQ(refused_on(p), PlanField::kOverlapGradReduce);  // it asserts the local DDP
  p.overlap.grad_reduce = false;
  p.overlap.param_gather = true;
  EXPECT_EQ(refused_on(p), PlanField::kOverlapParamGather);  // gathered after the step
  p = legacy_megatron(Stack::kMegatron2023);
  expect_torch_ddp_without_pipeline_only(Stack::kMegatron2023);
  p.zero = ZeroStage::kGradients;
  EXPECT_EQ(refused_on(p), PlanField::kZero);
  p.zero = ZeroStage::kNone;
  p.attention = AttentionKernel::kFlash;
  EXPECT_EQ(refused_on(p), std::nullopt);  // --use-flash-attn
  p.attention = AttentionKernel::kCudnn;
  EXPECT_EQ(refused_on(p), PlanField::kAttention);
  p.attention = AttentionKernel::kNaive;
  split_context(p);
  EXPECT_EQ(refused_on(p), PlanField::kCp);
  p = legacy_megatron(Stack::kMegatron2023);
  p.set_training_dtype(Dtype::kFp8);
  EXPECT_EQ(refused_on(p), PlanField::kDtype);
  p.set_training_dtype(Dtype::kBf16);
  p.overlap.tensor_parallel = true;
  EXPECT_EQ(refused_on(p), PlanField::kOverlapTp);
  p.overlap.tensor_parallel = false;
  p.schedule = PS::kGpipe;
  EXPECT_EQ(refused_on(p), PlanField::kSchedule);
  const ModelConfig top1 = switch_moe();
  p.schedule = PS::kOneFOneB;
  EXPECT_EQ(refused_on(p, top1), std::nullopt);  // SwitchMLP
  p.ep = 2;
  EXPECT_EQ(refused_on(p, top1), PlanField::kEp);
}

TEST(StackRules, Megatron2022SchedulesAreOneFOneBAndInterleavedOnMoreThanTwoStages) {
  ParallelPlan p = legacy_megatron(Stack::kMegatron2022);
  p.schedule = PS::kGpipe;
  EXPECT_EQ(refused_on(p), PlanField::kSchedule);
  p.schedule = PS::kInterleaved;
  p.vpp = 2;
  EXPECT_EQ(refused_on(p), std::nullopt);  // 8 microbatches over 4 stages
  p.gbs = 48;                              // 6: "not divisible by pipeline-model-parallel-size"
  EXPECT_EQ(refused_on(p), PlanField::kSchedule);
  p.gbs = 64;
  p.pp = 2;
  p.dp = 16;
  EXPECT_EQ(refused_on(p), PlanField::kPp);  // "greater than 2 with interleaved schedule"
  p.schedule = PS::kOneFOneB;
  p.vpp = 1;
  EXPECT_EQ(refused_on(p), std::nullopt);
}

// SwitchMLP @ cfd2e21607: top-1 routing in every layer, every expert on every rank and split over
// TP like the dense MLP, no capacity.
TEST(StackRules, Megatron2022RunsSwitchTransformersOnly) {
  ParallelPlan p = legacy_megatron(Stack::kMegatron2022);
  EXPECT_EQ(refused_on(p, moe()), PlanField::kStack);  // Mixtral routes to 2 experts
  const ModelConfig top1 = switch_moe();
  EXPECT_EQ(refused_on(p, top1), std::nullopt);
  p.ep = 2;
  EXPECT_EQ(refused_on(p, top1), PlanField::kEp);
  p.ep = 1;
  p.etp = 1;
  EXPECT_EQ(refused_on(p, top1), PlanField::kEtp);
  p.etp = 2;
  EXPECT_EQ(refused_on(p, top1), std::nullopt);
  p.moe_drop_tokens = true;
  EXPECT_EQ(refused_on(p, top1), PlanField::kMoeDropTokens);
  p.moe_drop_tokens = false;
  ModelConfig shared = top1;
  shared.moe->num_shared_experts = 1;
  shared.moe->shared_expert_d_ff = shared.moe->expert_d_ff;
  EXPECT_EQ(refused_on(p, shared), PlanField::kStack);
}

// DeepSpeed's pipeline engine under Megatron-LM 2021's layers, from a plan it runs: TrainSchedule
// (1F1B, no virtual stages), PipeModelDataParallelTopology's pipe, data and model axes (no context
// parallelism), whole-activation TP all-reduces (no sequence parallelism, no TP overlap).
void expect_pipeline_engine_limits(ParallelPlan p) {
  ASSERT_EQ(refused_on(p), std::nullopt);
  p.schedule = PS::kGpipe;
  EXPECT_EQ(refused_on(p), PlanField::kSchedule);
  p.schedule = PS::kInterleaved;
  p.vpp = 2;
  EXPECT_EQ(refused_on(p), PlanField::kSchedule);  // TrainSchedule has no virtual stages
  p.schedule = PS::kOneFOneB;
  p.vpp = 1;
  p.sp = true;
  EXPECT_EQ(refused_on(p), PlanField::kSp);
  p.sp = false;
  p.overlap.tensor_parallel = true;
  EXPECT_EQ(refused_on(p), PlanField::kOverlapTp);
  p.overlap.tensor_parallel = false;
  split_context(p);
  EXPECT_EQ(refused_on(p), PlanField::kCp);
}

// DeepSpeed v0.3.13 on Megatron-LM 2021's GPT: ZeRO in fp16 over the whole data-parallel group,
// ZeRO-1 at most with the pipeline engine's 1F1B, whole-layer recompute.
TEST(StackRules, DeepSpeed2021ShardsInFp16OverTheWholeDataParallelGroup) {
  ParallelPlan p = plan_for(Stack::kDeepSpeedZero3_2021);
  data_parallel_only(p);
  p.zero = ZeroStage::kParameters;
  p.recompute = Recompute::kFull;
  p.attention = AttentionKernel::kNaive;
  p.set_training_dtype(Dtype::kFp16);
  EXPECT_EQ(refused_on(p), std::nullopt);  // Narayanan et al.'s ZeRO-3 runs
  for (const Dtype d : {Dtype::kBf16, Dtype::kFp8}) {
    p.set_training_dtype(d);
    EXPECT_EQ(refused_on(p), PlanField::kDtype) << to_string(d);
  }
  p.set_training_dtype(Dtype::kFp32);
  EXPECT_EQ(refused_on(p), PlanField::kDtype);  // "ZeRO is only supported if fp16 is enabled"
  p.zero = ZeroStage::kNone;
  EXPECT_EQ(refused_on(p), std::nullopt);
  p.zero = ZeroStage::kParameters;
  p.set_training_dtype(Dtype::kFp16);
  p.fsdp = 8;
  EXPECT_EQ(refused_on(p), PlanField::kFsdp);
  p.fsdp = 64;
  EXPECT_EQ(refused_on(p), std::nullopt);
  p.fsdp = 0;
  p.recompute = Recompute::kSelective;
  EXPECT_EQ(refused_on(p), PlanField::kRecompute);
  p.recompute = Recompute::kNone;
  EXPECT_EQ(refused_on(p), std::nullopt);
  p.offload_layers = 1;
  EXPECT_EQ(refused_on(p), PlanField::kOffloadLayers);
  p.offload_layers = 0;
  p.attention = AttentionKernel::kFlash;
  EXPECT_EQ(refused_on(p), PlanField::kAttention);
  p.attention = AttentionKernel::kNaive;
  EXPECT_EQ(refused_on(p, moe()), PlanField::kStack);
}

TEST(StackRules, DeepSpeed2021PipelinesWithZero1AndOneFOneB) {
  ParallelPlan p = plan_for(Stack::kDeepSpeedZero3_2021);
  p.sp = false;
  p.attention = AttentionKernel::kNaive;
  p.set_training_dtype(Dtype::kFp16);
  p.zero = ZeroStage::kOptimizerStates;
  EXPECT_EQ(refused_on(p), std::nullopt);  // TP 2, PP 4, DP 8
  for (const ZeroStage z : {ZeroStage::kGradients, ZeroStage::kParameters}) {
    p.zero = z;
    EXPECT_EQ(refused_on(p), PlanField::kZero);  // "incompatible with pipeline parallelism"
  }
  p.zero = ZeroStage::kOptimizerStates;
  expect_pipeline_engine_limits(p);
}

// Megatron-DeepSpeed @ 0f23a729 on DeepSpeed v0.6.5's pipeline engine: ZeRO-1 at most, bf16
// always through BF16_Optimizer's sharded state, 1F1B without virtual stages, Megatron-LM 2021's
// layers, the data-parallel step after the backward.
TEST(StackRules, MegatronDeepSpeedPipelinesWithZero1AndReducesAfterTheBackward) {
  const auto bloom_like = [] {  // BLOOM's layout in shape: TP, PP, ZeRO-1, bf16, full recompute
    ParallelPlan p = legacy_megatron(Stack::kMegatronDeepSpeed2022);
    p.overlap.grad_reduce = false;
    p.overlap.param_gather = false;
    p.recompute = Recompute::kFull;
    p.zero = ZeroStage::kOptimizerStates;
    return p;
  };
  ParallelPlan p = bloom_like();
  expect_pipeline_engine_limits(p);
  for (const ZeroStage z : {ZeroStage::kGradients, ZeroStage::kParameters}) {
    p.zero = z;
    EXPECT_EQ(refused_on(p), PlanField::kZero) << static_cast<int>(z);
    unpipeline(p);
    EXPECT_EQ(refused_on(p), PlanField::kZero);  // GPTModelPipe is a PipelineModule at PP 1 too
    p = bloom_like();
  }
  p.zero = ZeroStage::kNone;
  EXPECT_EQ(refused_on(p), PlanField::kZero);  // bf16: BF16_Optimizer shards whatever the stage
  p.set_training_dtype(Dtype::kFp16);
  EXPECT_EQ(refused_on(p), std::nullopt);  // fp16 without ZeRO: the engine's all-reduce
  p.set_training_dtype(Dtype::kFp8);
  EXPECT_EQ(refused_on(p), PlanField::kDtype);
  p = bloom_like();
  p.overlap.grad_reduce = true;
  EXPECT_EQ(refused_on(p), PlanField::kOverlapGradReduce);  // ReduceGrads after the backward
  p.overlap.grad_reduce = false;
  p.overlap.param_gather = true;
  EXPECT_EQ(refused_on(p), PlanField::kOverlapParamGather);  // gathered inside OptimizerStep
  p.zero = ZeroStage::kNone;
  p.set_training_dtype(Dtype::kFp16);
  EXPECT_EQ(refused_on(p), std::nullopt);  // nothing to gather without ZeRO
  p = bloom_like();
  p.attention = AttentionKernel::kFlash;
  EXPECT_EQ(refused_on(p), PlanField::kAttention);
  p.attention = AttentionKernel::kNaive;
  p.recompute = Recompute::kSelective;
  EXPECT_EQ(refused_on(p), PlanField::kRecompute);
  p.recompute = Recompute::kFull;
  p.fsdp = 4;
  EXPECT_EQ(refused_on(p), PlanField::kFsdp);
  p.fsdp = 0;
  EXPECT_EQ(refused_on(p, moe()), PlanField::kStack);
}

// PaxML @ 4a6bf20 / Praxis @ a4742bc: Adam's state sharded as its weights (zero 0 or 3, HSDP as
// DGX Cloud Benchmarking ran it), JAX remat policies for the whole stack, GPipe-order pipelines of
// equal stages, no sequence axis.
TEST(StackRules, PaxmlShardsAsFsdpAndRematsTheWholeStack) {
  ParallelPlan p = plan_for(Stack::kPaxml);
  data_parallel_only(p);
  p.zero = ZeroStage::kParameters;
  p.fsdp = 8;
  p.recompute = Recompute::kDots;
  p.set_training_dtype(Dtype::kFp8);
  EXPECT_EQ(refused_on(p), std::nullopt);  // the dgxc2411 GPT-5B plan, at 64 GPUs
  for (const ZeroStage z : {ZeroStage::kOptimizerStates, ZeroStage::kGradients}) {
    p.zero = z;
    EXPECT_EQ(refused_on(p), PlanField::kZero) << static_cast<int>(z);
  }
  p.zero = ZeroStage::kNone;
  p.fsdp = 0;
  EXPECT_EQ(refused_on(p), std::nullopt);
  p.zero = ZeroStage::kParameters;
  p.recompute = Recompute::kSelective;
  EXPECT_EQ(refused_on(p), PlanField::kRecompute);
  p.recompute = Recompute::kQkvOutProj;
  EXPECT_EQ(refused_on(p), std::nullopt);
  p.recompute = Recompute::kQkvProj;  // MaxText's save_qkv_proj: Praxis has no such policy
  EXPECT_EQ(refused_on(p), PlanField::kRecompute);
  p.recompute = Recompute::kFull;
  p.recompute_num_layers = 4;
  EXPECT_EQ(refused_on(p), PlanField::kRecomputeNumLayers);
  p.recompute_num_layers = 0;
  EXPECT_EQ(refused_on(p), std::nullopt);
  p.offload_layers = 1;
  EXPECT_EQ(refused_on(p), PlanField::kOffloadLayers);
  p.offload_layers = 0;
  split_context(p);
  EXPECT_EQ(refused_on(p), PlanField::kCp);
}

TEST(StackRules, PaxmlPipelinesInGpipeOrderOverEqualStages) {
  ParallelPlan p = plan_for(Stack::kPaxml);
  EXPECT_EQ(refused_on(p), PlanField::kSchedule);  // 1F1B
  p.schedule = PS::kGpipe;
  EXPECT_EQ(refused_on(p), std::nullopt);
  p.vpp = 2;  // CircularLayerwiseShardablePipelined: not modelled
  EXPECT_EQ(refused_on(p), PlanField::kSchedule);
  p.vpp = 1;
  p.stage_layers = {10, 6, 8, 8};
  EXPECT_EQ(refused_on(p), PlanField::kStageLayers);
  p.stage_layers = {8, 8, 8, 8};
  EXPECT_EQ(refused_on(p), std::nullopt);
}

// PyTorch FSDP's sharding strategies (no optimizer-only sharding); Composer has FSDP and TP only.
TEST(StackRules, FsdpShardsLikeFsdpAndHasNoPipelineOrContextParallelism) {
  for (const Stack s : {Stack::kFsdp, Stack::kLlmFoundry2023}) {
    ParallelPlan p = plan_for(s);
    unpipeline(p);
    for (const ZeroStage z : {ZeroStage::kNone, ZeroStage::kGradients, ZeroStage::kParameters}) {
      p.zero = z;
      EXPECT_EQ(refused_on(p), std::nullopt) << static_cast<int>(z);
    }
    p.zero = ZeroStage::kOptimizerStates;
    EXPECT_EQ(refused_on(p), PlanField::kZero);
    p.zero = ZeroStage::kParameters;
    p.recompute = Recompute::kSelective;
    EXPECT_EQ(refused_on(p), PlanField::kRecompute);
    p.recompute = Recompute::kFull;
    EXPECT_EQ(refused_on(p), std::nullopt);
    split_context(p);
    EXPECT_EQ(refused_on(p), PlanField::kCp);
    ParallelPlan q = plan_for(s);
    q.zero = ZeroStage::kParameters;
    EXPECT_EQ(refused_on(q), PlanField::kPp);
  }
}

// torchtitan @ 9dec370: DDP only alone; FSDP2 is ZeRO-3, or under PP (no resharding, gradients
// reduced on the last backward) ZeRO-1; no EP; no single-stage zero-bubble schedule.
TEST(StackRules, TorchtitanDataParallelismIsFsdp2) {
  ParallelPlan p = plan_for(Stack::kFsdpCompile);
  EXPECT_EQ(refused_on(p), PlanField::kZero);  // DDP with TP and PP: "> 1D parallelism"
  p.zero = ZeroStage::kOptimizerStates;
  EXPECT_EQ(refused_on(p), std::nullopt);
  p.zero = ZeroStage::kParameters;
  EXPECT_EQ(refused_on(p), PlanField::kZero);
  p.zero = ZeroStage::kOptimizerStates;
  p.schedule = PS::kZeroBubble;
  EXPECT_EQ(refused_on(p), PlanField::kSchedule);
  p.schedule = PS::kZeroBubbleV;
  p.vpp = 2;
  EXPECT_EQ(refused_on(p), std::nullopt);
  ParallelPlan q = plan_for(Stack::kFsdpCompile);
  data_parallel_only(q);                   // gbs 64: one microbatch per DP rank
  EXPECT_EQ(refused_on(q), std::nullopt);  // plain DDP alone
  q.zero = ZeroStage::kGradients;
  EXPECT_EQ(refused_on(q), PlanField::kZero);
  q.zero = ZeroStage::kParameters;
  EXPECT_EQ(refused_on(q), std::nullopt);
  q.ep = 8;
  EXPECT_EQ(refused_on(q, moe()), PlanField::kEp);
  // Its selective checkpointing counts the matmuls of the Llama block, which has no MoE.
  q.ep = 1;
  q.recompute = Recompute::kSelective;
  EXPECT_EQ(refused_on(q), std::nullopt);
  EXPECT_EQ(refused_on(q, moe()), PlanField::kRecompute);
}

// MaxText @ e591f30c: data (0), shard_optimizer_over_data (1), fsdp (3); a GPipe-order pipeline
// whose microbatches are a multiple of the stages.
TEST(StackRules, MaxTextShardingAndPipeline) {
  ParallelPlan p = plan_for(Stack::kMaxText);
  p.attention = AttentionKernel::kSplash;
  EXPECT_EQ(refused_on(p), PlanField::kSchedule);  // 1F1B
  p.schedule = PS::kGpipe;
  EXPECT_EQ(refused_on(p), std::nullopt);
  p.gbs = 48;  // 6 microbatches over 4 stages
  EXPECT_EQ(refused_on(p), PlanField::kMbs);
  p.gbs = 64;
  p.zero = ZeroStage::kGradients;
  EXPECT_EQ(refused_on(p), PlanField::kZero);
  p.zero = ZeroStage::kParameters;
  EXPECT_EQ(refused_on(p), std::nullopt);
  p.recompute = Recompute::kSelective;
  EXPECT_EQ(refused_on(p), PlanField::kRecompute);
  p.recompute = Recompute::kDots;
  EXPECT_EQ(refused_on(p), std::nullopt);
  p.recompute = Recompute::kQkvProj;  // remat_policy save_qkv_proj
  EXPECT_EQ(refused_on(p), std::nullopt);
}

TEST(StackRules, TheCustomStackRunsWhatMegatronRefusesAndSaysSo) {
  ParallelPlan p = plan_for(Stack::kMegatron);
  p.zero = ZeroStage::kGradients;
  try {
    check_stack_runs(dense(), p);
    FAIL() << "megatron refuses ZeRO-2 with PP";
  } catch (const PlanError& e) {
    EXPECT_EQ(e.field(), PlanField::kZero);
    EXPECT_NE(std::string(e.what()).find("Megatron-FSDP"), std::string::npos) << e.what();
  }
  p.stack = Stack::kCustom;
  EXPECT_NO_THROW(check_stack_runs(dense(), p));
  const std::vector<std::string> caveats = plan_caveats(dense(), p);
  ASSERT_FALSE(caveats.empty());
  EXPECT_NE(caveats.front().find("megatron stack does not run ZeRO-2 or 3"), std::string::npos)
      << caveats.front();
}

}  // namespace
}  // namespace meshsim::workloads
