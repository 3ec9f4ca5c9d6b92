// Issue 13: the op builder costs the variants of today's models: MLA's projections and their TP
// reductions, shared experts' GEMMs on MoE layers only, dense first layers, sliding-window
// attention FLOPs, and one TP reduction per parallel block; a DeepSeek-V3-shaped model planned
// with EP and PP end to end.
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "meshsim/workloads/accounting.h"
#include "meshsim/workloads/partition.h"
#include "meshsim/workloads/stack_profile.h"
#include "meshsim/workloads/step.h"
#include "temp_file.h"

namespace meshsim::workloads {
namespace {

ModelConfig from_json(const std::string& name, const std::string& json) {
  return load_model(scratch::write_temp(name + ".json", json));
}

const char* kCommon = R"("d_model": 256, "num_heads": 4, "vocab_size": 1000,
  "max_position_embeddings": 4096, "norm": "rmsnorm", "position_embedding": "rope",
  "attention_bias": false, "mlp_bias": false, "tied_embeddings": false, "dropout": false)";

// DeepSeek-V3 in miniature: MLA with Q compression, 8 routed experts (top-2) of width 64, one
// shared expert, the first layer dense, one MTP module.
ModelConfig mini_deepseek() {
  return from_json("mini-deepseek", std::string(R"({"architecture": "deepseek_v3",
    "num_layers": 4, "num_kv_heads": 4, "head_dim": 48, "d_ff": 512, "mlp": "swiglu",
    "mla": {"q_lora_rank": 64, "kv_lora_rank": 32, "qk_nope_head_dim": 32,
            "qk_rope_head_dim": 16, "v_head_dim": 32},
    "moe": {"num_experts": 8, "experts_per_token": 2, "expert_d_ff": 64,
            "num_shared_experts": 1, "router_bias": true, "first_dense_layers": 1},
    "mtp_layers": 1, )") + kCommon + "}");
}

// Compute and communication op names of one layer's forward (or backward) of microbatch 0.
std::map<std::string, const Op*> layer_ops(const Program& prog, const std::string& prefix) {
  std::map<std::string, const Op*> out;
  for (size_t i = 0; i < prog.size(); ++i) {
    const Op& op = prog.op(OpId(static_cast<uint32_t>(i)));
    if (op.name.starts_with(prefix) && op.labels.microbatch == 0) {
      out[op.name.substr(prefix.size())] = &op;
    }
  }
  return out;
}

TEST(Variants, DeepSeekShapedModelPlannedWithEpAndPp) {
  const ModelConfig m = mini_deepseek();
  ParallelPlan p;
  p.tp = 2;
  p.pp = 2;
  p.dp = 4;
  p.ep = 4;
  p.gbs = 16;
  p.seq = 256;
  p.schedule = PipelineSchedule::kOneFOneB;
  const StepPlan plan = plan_step(m, p);
  ASSERT_EQ(plan.programs.size(), 2U);
  const auto dense = layer_ops(plan.programs[0], "fwd.L0.");
  const auto moe = layer_ops(plan.programs[0], "fwd.L1.");
  // MLA's projections on every layer; its replicated down-projections beside the TP-split ones.
  for (const char* k : {"q_down", "q_up", "kv_down", "kv_up", "attention", "attn_out"}) {
    EXPECT_TRUE(dense.contains(k)) << k;
    EXPECT_TRUE(moe.contains(k)) << k;
  }
  EXPECT_TRUE(dense.contains("mlp_up"));
  EXPECT_FALSE(dense.contains("shared_up"));
  EXPECT_FALSE(dense.contains("dispatch.ep_alltoall"));
  for (const char* k :
       {"router", "shared_up", "shared_down", "dispatch.ep_alltoall", "combine.ep_alltoall"}) {
    EXPECT_TRUE(moe.contains(k)) << k;
  }
  // kv_up: [T, 32] x [32, 2 heads x (32 + 32)] on each of 2 TP ranks; T = 256 tokens.
  const auto& kv_up = std::get<ComputeWork>(moe.at("kv_up")->work);
  EXPECT_DOUBLE_EQ(kv_up.flops.count(), 2.0 * 256 * 32 * (2 * 64));
  // The latent gradients are all-reduced over TP in the backward (T x r, not T x h).
  const auto bwd = layer_ops(plan.programs[0], "bwd.L1.");
  ASSERT_TRUE(bwd.contains("kv_up.tp_allreduce"));
  EXPECT_EQ(std::get<CollectiveWork>(bwd.at("kv_up.tp_allreduce")->work).bytes,
            Bytes::of(256 * 32 * 2));
  // Shared expert: T x h x (2 x 64 / 2) per rank, the gate and up halves.
  EXPECT_DOUBLE_EQ(std::get<ComputeWork>(moe.at("shared_up")->work).flops.count(),
                   2.0 * 256 * 256 * 64);
  // The MTP module runs after the last stage's head: its projection, one MoE block, a head.
  const auto mtp = layer_ops(plan.programs[1], "fwd.mtp0.");
  for (const char* k : {"eh_proj", "kv_up", "attention", "shared_up", "dispatch.ep_alltoall",
                        "lm_head", "cross_entropy"}) {
    EXPECT_TRUE(mtp.contains(k)) << k;
  }
  EXPECT_TRUE(layer_ops(plan.programs[1], "bwd.mtp0.").contains("eh_proj.wgrad"));
  // Parameters: the stages' shares add up to the model and its MTP module (TP 2 splits the
  // column- and row-parallel weights; EP 4 the experts).
  const std::vector<StagePartition> stages = partition_stages(m, p);
  EXPECT_GT(stages[1].params.mtp, 0);
  EXPECT_EQ(stages[0].params.mtp, 0);
  EXPECT_EQ(stages[0].params.of(0).expert, 0);
  EXPECT_EQ(stages[0].params.of(1).expert, (8 / 4) * 3 * 256 * (64 / 2));
}

// The real DeepSeek-V3 config (tests/workloads/hf_configs/) planned as it was trained in shape:
// PP 16 (61 layers: 13 stages of 4, 3 of 3), EP 64 inside DP 128, ZeRO-1, full recompute.
TEST(Variants, DeepSeekV3PlansWithEp64AndPp16) {
  const ModelConfig m =
      load_model(std::string(MESHSIM_SOURCE_DIR) + "/tests/workloads/hf_configs/DeepSeek-V3.json");
  ParallelPlan p;
  p.pp = 16;
  p.dp = 128;
  p.ep = 64;
  p.zero = ZeroStage::kOptimizerStates;
  p.recompute = Recompute::kFull;
  p.gbs = 1024;
  p.seq = 4096;
  p.stage_layers = {4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 3, 3, 3};
  const StepPlan plan = plan_step(m, p);
  ASSERT_EQ(plan.programs.size(), 16U);
  const std::vector<StagePartition> stages = partition_stages(m, p);
  // Stage 0: 3 dense layers and one MoE layer (4 of 256 experts each); the last: MTP.
  EXPECT_EQ(stages[0].params.of(0).expert, 0);
  EXPECT_EQ(stages[0].params.of(3).expert, 4 * 3 * 7168 * 2048);
  EXPECT_GT(stages[15].params.mtp, 0);
  EXPECT_TRUE(layer_ops(plan.programs[15], "fwd.mtp0.").contains("dispatch.ep_alltoall"));
  for (const TrainingMemory& mem : plan.memory_estimate) {
    EXPECT_LT(mem.total(), GiB(80));  // fits an H100 (the run used H800s of 80 GB)
  }
}

// Combinations no framework runs are reported, not silently taken for a launchable plan: the
// stacks refuse them (stack_rules_test.cc), and the custom stack, which runs them, lists the
// megatron rules they break.
TEST(Variants, CombinationsNoFrameworkRunsAreFlagged) {
  const ModelConfig m = load_model("llama3-8b");
  ParallelPlan p;
  p.stack = Stack::kCustom;
  p.pp = 2;
  p.dp = 2;
  p.gbs = 4;
  p.seq = 1024;
  p.zero = ZeroStage::kOptimizerStates;
  EXPECT_TRUE(plan_caveats(m, p).empty());  // Megatron's distributed optimizer with PP
  p.zero = ZeroStage::kParameters;
  const std::vector<std::string> c = plan_caveats(m, p);
  ASSERT_EQ(c.size(), 1U);
  EXPECT_NE(c[0].find("ZeRO-2 or 3 with pipeline parallelism"), std::string::npos) << c[0];
  EXPECT_NE(c[0].find("Megatron-FSDP"), std::string::npos) << c[0];
}

// HSDP (--fsdp 4 --dp 8 with TP 2): ZeRO-3 inside groups of 4 DP ranks, which with TP innermost
// are the 8 GPUs of a node; the 2 groups replicate each other across nodes.
TEST(Variants, HsdpShardsInsideNodesAndReplicatesAcross) {
  ParallelPlan p;
  p.tp = 2;
  p.dp = 8;
  p.fsdp = 4;
  p.zero = ZeroStage::kParameters;
  p.gbs = 8;
  p.seq = 1024;
  const RankLayout layout(p);
  EXPECT_EQ(layout.shard_group(0), (std::vector<int64_t>{0, 2, 4, 6}));
  EXPECT_EQ(layout.shard_group(11), (std::vector<int64_t>{9, 11, 13, 15}));
  EXPECT_EQ(layout.replica_group(2), (std::vector<int64_t>{2, 10}));
  const ModelConfig m = load_model("llama3.2-1b");
  const StepPlan plan = plan_step(m, p, SimulationMode::kFull);
  // Every layer: gathered and reduce-scattered in its shard group, then all-reduced across.
  const auto bwd = layer_ops(plan.programs[0], "bwd.L3.");
  ASSERT_TRUE(bwd.contains("L3.fsdp_reducescatter"));
  ASSERT_TRUE(bwd.contains("L3.hsdp_allreduce"));
  const auto group_of = [&](const Op* op) {
    const uint16_t slot = std::get<CollectiveWork>(op->work).group_slot;
    return plan.groups[plan.ranks[0].groups[slot].value()].global;
  };
  EXPECT_EQ(group_of(bwd.at("L3.fsdp_reducescatter")).size(), 4U);
  EXPECT_EQ(group_of(bwd.at("L3.hsdp_allreduce")).size(), 2U);
  // The rank's (TP-split) model state is sharded 4 ways, not 8.
  const int64_t params = partition_stage(m, p, 0).params.total();
  EXPECT_EQ(training_memory(m, p).optimizer_states, Bytes::of((params * 12 + 3) / 4));
  p.fsdp = 3;
  EXPECT_THROW(validate_plan(m, p), PlanError);
}

// Recompute policies as frameworks name them: Megatron's block method recomputes the first N
// layers of each chunk; JAX's checkpoint_dots (MaxText "minimal") keeps matmul outputs and
// re-runs the norms and the activation function.
TEST(Variants, RecomputeBlockMethodAndDotsPolicy) {
  const ModelConfig m = load_model("llama3-8b");
  ParallelPlan p;
  p.pp = 2;
  p.vpp = 2;
  p.schedule = PipelineSchedule::kInterleaved;
  p.gbs = 4;
  p.seq = 2048;
  p.recompute = Recompute::kFull;
  p.recompute_num_layers = 3;  // of 8 layers per chunk
  const StagePartition s = partition_stage(m, p, 0);
  const Bytes full = layer_activations(m, p, Recompute::kFull).total();
  const Bytes none = layer_activations(m, p, Recompute::kNone).total();
  EXPECT_EQ(s.activations.saved_layers(), (full * 3 + none * 5) * 2);
  EXPECT_TRUE(s.activations.of(2).full_recompute);
  EXPECT_FALSE(s.activations.of(3).full_recompute);
  EXPECT_TRUE(s.activations.of(16 + 2).full_recompute);  // chunk 1 of stage 0: layers 16..23
  const StepPlan block = plan_step(m, p);
  EXPECT_FALSE(layer_ops(block.programs[0], "recompute.L2.").empty());
  EXPECT_TRUE(layer_ops(block.programs[0], "recompute.L3.").empty());
  p.recompute = Recompute::kDots;
  EXPECT_THROW(validate_plan(m, p), PlanError);  // a block count needs full recompute
  p.recompute_num_layers = 0;
  const Bytes dots = layer_activations(m, p, Recompute::kDots).total();
  EXPECT_LT(dots, none);
  EXPECT_GT(dots, full);
  // What dots drops: 2 norm inputs, the QKV and MLP inputs (h each), the down projection's
  // input (f), the attention kernel's output (32 heads x 128) and its fp32 statistics (4 bytes
  // per head and token); it keeps the layer input and the output projection's result (2h): the
  // down projection's result is no residual of the backward.
  EXPECT_EQ(none - dots, Bytes::of(2 * 2048 * (4 * 4096 + 14336 + 32 * 128 - 2 * 4096) +
                                   4 * 32 * 2048));
  const auto dots_bwd = layer_ops(plan_step(m, p).programs[0], "recompute.L0.");
  EXPECT_TRUE(dots_bwd.contains("attn_norm"));
  EXPECT_TRUE(dots_bwd.contains("swiglu"));
  EXPECT_TRUE(dots_bwd.contains("attention"));  // the fused kernel's forward is re-run
  EXPECT_TRUE(dots_bwd.contains("rope"));
  EXPECT_TRUE(dots_bwd.contains("residual_attn"));  // the MLP norm's input is no matmul output
  EXPECT_FALSE(dots_bwd.contains("qkv"));  // weight matmuls are not re-run
}

// One sequence of 2048 tokens over TP 2 with SP, recomputed under `r`.
ParallelPlan tp2_sp_plan(Recompute r) {
  ParallelPlan p;
  p.tp = 2;
  p.sp = true;
  p.gbs = 1;
  p.seq = 2048;
  p.recompute = r;
  return p;
}

// JAX's save_only_these_names over the attention's projections (PaxML SAVE_QKV_OUT_PROJ, MaxText
// "save_dot_except_mlp"): Q, K, V and the output projection's result are kept with the layer
// input; the backward re-runs the norms, the attention core and the MLP's up projection and
// activation, not the QKV, output or down projections.
TEST(Variants, QkvOutProjPolicyKeepsTheProjectionsAndReRunsTheMlpUpProjection) {
  const ModelConfig m = load_model("llama3-8b");
  ParallelPlan p = tp2_sp_plan(Recompute::kQkvOutProj);
  validate_plan(m, p);
  EXPECT_EQ(to_string(Recompute::kQkvOutProj), "qkv_out_proj");
  EXPECT_EQ(parse_enum<Recompute>("save_dot_except_mlp"), Recompute::kQkvOutProj);
  EXPECT_EQ(parse_enum<Recompute>("save_qkv_out_proj"), Recompute::kQkvOutProj);
  // Per rank of TP 2: Q 16 heads x 128, K and V 4 heads x 128 each over 2048 tokens; the layer
  // input and the output projection's result sequence-sharded (1024 tokens x 4096), in bf16.
  const Bytes kept = layer_activations(m, p, Recompute::kQkvOutProj).total();
  EXPECT_EQ(kept, Bytes::of(2 * (2048 * (16 + 4 + 4) * 128 + 2 * 1024 * 4096)));
  EXPECT_LT(kept, layer_activations(m, p, Recompute::kDots).total());
  EXPECT_GT(kept, layer_activations(m, p, Recompute::kFull).total());
  const StepPlan step = plan_step(m, p);
  const auto redo = layer_ops(step.programs[0], "recompute.L0.");
  EXPECT_TRUE(redo.contains("attn_norm"));
  EXPECT_TRUE(redo.contains("mlp_norm"));
  EXPECT_TRUE(redo.contains("attention"));
  EXPECT_TRUE(redo.contains("rope"));
  EXPECT_TRUE(redo.contains("mlp_up"));
  EXPECT_TRUE(redo.contains("mlp.tp_allgather"));  // its input gathered again under SP
  EXPECT_TRUE(redo.contains("swiglu"));
  EXPECT_FALSE(redo.contains("qkv"));
  EXPECT_FALSE(redo.contains("attn_out"));
  EXPECT_FALSE(redo.contains("mlp_down"));
  // The re-run up projection is the forward's GEMM again.
  const auto fwd = layer_ops(step.programs[0], "fwd.L0.");
  ASSERT_TRUE(fwd.contains("mlp_up"));
  EXPECT_EQ(std::get<ComputeWork>(redo.at("mlp_up")->work).flops,
            std::get<ComputeWork>(fwd.at("mlp_up")->work).flops);
  // Not modelled for MoE layers (their router, dispatch and experts would re-run).
  EXPECT_THROW(validate_plan(load_model("mixtral-8x7b"), p), PlanError);
}

// JAX's full remat re-runs only what the backward reads (ParallelPlan::
// recompute_skips_unread_outputs, the XLA stacks'): not the MLP's down projection, nor its TP
// reduction, nor the residual sum that ends the layer; in a parallel block not the attention's
// output projection either. torch's checkpoint (the other stacks) re-runs the whole forward.
TEST(Variants, JaxFullRematSkipsWhatTheBackwardDoesNotRead) {
  ModelConfig m = load_model("llama3-8b");
  ParallelPlan p = tp2_sp_plan(Recompute::kFull);
  const auto rerun = [&](const ModelConfig& model, const ParallelPlan& plan) {
    return layer_ops(plan_step(model, plan).programs[0], "recompute.L0.");
  };
  const auto torch = rerun(m, p);
  for (const char* op : {"qkv", "attention", "attn_out", "mlp_up", "swiglu", "mlp_down",
                         "mlp.tp_reducescatter", "residual_mlp"}) {
    EXPECT_TRUE(torch.contains(op)) << op;
  }
  p.recompute_skips_unread_outputs = true;
  const auto jax = rerun(m, p);
  for (const char* op : {"qkv", "attention", "attn_out", "residual_attn", "mlp_up", "swiglu"}) {
    EXPECT_TRUE(jax.contains(op)) << op;
  }
  for (const char* op : {"mlp_down", "mlp.tp_reducescatter", "residual_mlp"}) {
    EXPECT_FALSE(jax.contains(op)) << op;
  }
  // A parallel block's two projections both feed only the layer's output.
  m.parallel_blocks = true;
  m.norms_per_layer = 1;
  const auto parallel = rerun(m, p);
  for (const char* op : {"attn_out", "mlp_down", "residual"}) {
    EXPECT_FALSE(parallel.contains(op)) << op;
  }
  EXPECT_TRUE(parallel.contains("mlp_up"));
  EXPECT_TRUE(parallel.contains("attention"));
  // MaxText's and PaxML's profiles set it; Megatron's does not.
  EXPECT_TRUE(stack_profile(Stack::kMaxText, DeviceFamily::kTpu).recompute_skips_unread_outputs);
  EXPECT_TRUE(stack_profile(Stack::kPaxml, DeviceFamily::kHopper).recompute_skips_unread_outputs);
  EXPECT_FALSE(
      stack_profile(Stack::kMegatron, DeviceFamily::kHopper).recompute_skips_unread_outputs);
}

// MaxText's "save_qkv_proj" (save_only_these_names over the Q, K and V projections): as
// qkv_out_proj, but the output projection's result is not kept, so the backward re-runs that GEMM
// (its reduce-scatter under SP) and the residual sum before the MLP norm.
TEST(Variants, QkvProjPolicyAlsoReRunsTheOutputProjection) {
  const ModelConfig m = load_model("llama3-8b");
  ParallelPlan p = tp2_sp_plan(Recompute::kQkvProj);
  validate_plan(m, p);
  EXPECT_EQ(to_string(Recompute::kQkvProj), "qkv_proj");
  EXPECT_EQ(parse_enum<Recompute>("save_qkv_proj"), Recompute::kQkvProj);
  // One 1024 x 4096 bf16 tensor per rank less than qkv_out_proj keeps: the output projection's.
  const Bytes kept = layer_activations(m, p, Recompute::kQkvProj).total();
  EXPECT_EQ(layer_activations(m, p, Recompute::kQkvOutProj).total() - kept,
            Bytes::of(2 * 1024 * 4096));
  EXPECT_GT(kept, layer_activations(m, p, Recompute::kFull).total());
  const StepPlan step = plan_step(m, p);
  const auto redo = layer_ops(step.programs[0], "recompute.L0.");
  for (const char* op : {"attention", "attn_out", "attn_out.tp_reducescatter", "residual_attn",
                         "mlp_norm", "mlp_up", "swiglu"}) {
    EXPECT_TRUE(redo.contains(op)) << op;
  }
  EXPECT_FALSE(redo.contains("qkv"));
  EXPECT_FALSE(redo.contains("mlp_down"));
  const auto fwd = layer_ops(step.programs[0], "fwd.L0.");
  ASSERT_TRUE(fwd.contains("attn_out"));
  EXPECT_EQ(std::get<ComputeWork>(redo.at("attn_out")->work).flops,
            std::get<ComputeWork>(fwd.at("attn_out")->work).flops);
  p.recompute = Recompute::kQkvOutProj;
  EXPECT_LT(plan_step(m, p).programs[0].size(), step.programs[0].size());
  p.recompute = Recompute::kQkvProj;
  EXPECT_THROW(validate_plan(load_model("mixtral-8x7b"), p), PlanError);
}

// torchtitan's selective checkpointing by op (parallelize_llama.py @ 9dec370): the block keeps
// its matmuls' outputs but every second one (wq, wk, wv, wo, w1, w3, w2: wk, wo and w3 are not
// kept), and reduce-scatters'; the backward re-runs what it reads of the rest: the norms, wk,
// RoPE, wo and the residual sum (the MLP norm's input), w3 and the SwiGLU. Under TP with SP the
// saved reduce-scatter of wo's output spares wo.
TEST(Variants, TorchtitanSelectiveCheckpointingByOp) {
  const ModelConfig m = load_model("llama3-8b");
  ParallelPlan p;
  p.gbs = 1;
  p.seq = 2048;
  p.recompute = Recompute::kSelective;
  p.kernels = Kernels::kFused;
  const StepPlan megatron = plan_step(m, p);
  const auto core = layer_ops(megatron.programs[0], "recompute.L0.");  // Megatron's: the kernel
  EXPECT_EQ(core.size(), 1U);
  EXPECT_TRUE(core.contains("attention"));
  p.selective_by_op = true;
  const StepPlan compiled = plan_step(m, p);
  const auto redo = layer_ops(compiled.programs[0], "recompute.L0.");
  for (const char* op : {"attn_norm", "wk", "rope", "attn_out", "residual_attn", "mlp_norm",
                         "mlp_up.w3", "swiglu"}) {
    EXPECT_TRUE(redo.contains(op)) << op;
  }
  for (const char* op : {"qkv", "attention", "mlp_up", "mlp_down", "residual_mlp"}) {
    EXPECT_FALSE(redo.contains(op)) << op;
  }
  // K's projection: 2048 tokens x 4096 -> 8 KV heads x 128; w3, one half of the fused up
  // projection the forward runs.
  const auto fwd = layer_ops(compiled.programs[0], "fwd.L0.");
  ASSERT_TRUE(redo.contains("wk") && redo.contains("mlp_up.w3") && fwd.contains("mlp_up"));
  EXPECT_EQ(std::get<ComputeWork>(redo.at("wk")->work).flops.count(), 2.0 * 2048 * 4096 * 1024);
  EXPECT_EQ(std::get<ComputeWork>(redo.at("mlp_up.w3")->work).flops.count(),
            std::get<ComputeWork>(fwd.at("mlp_up")->work).flops.count() / 2);
  EXPECT_TRUE(fwd.contains("qkv") && !fwd.contains("wk"));
  ParallelPlan tp = p;
  tp.tp = 2;
  tp.sp = true;
  const StepPlan sharded = plan_step(m, tp);
  const auto tp_redo = layer_ops(sharded.programs[0], "recompute.L0.");
  EXPECT_FALSE(tp_redo.contains("attn_out"));
  EXPECT_TRUE(tp_redo.contains("residual_attn"));
  EXPECT_TRUE(tp_redo.contains("wk.tp_allgather"));  // the gathered input is no saved output
  // FP8 (torchao, current scaling): every linear's input is cast again (no cast's output is
  // saved); abs and max are kept, so no amax pass.
  p.kernels = Kernels::kFused;
  p.matmul_dtype = Dtype::kFp8;
  p.fp8_scaling = Fp8Scaling::kCurrent;
  const StepPlan fp8_step = plan_step(m, p);
  const auto fp8 = layer_ops(fp8_step.programs[0], "recompute.L0.");
  for (const char* cast : {"qkv", "attn_out", "mlp_up", "mlp_down"}) {
    EXPECT_TRUE(fp8.contains(std::string(cast) + ".input.cast_transpose")) << cast;
    EXPECT_FALSE(fp8.contains(std::string(cast) + ".input.amax")) << cast;
  }
  // What it keeps per rank (bf16): the layer input and wo's reduce-scatter under TP 2 with SP
  // (1024 tokens x 4096 each), Q (16 heads x 128) and V (4 x 128) over 2048 tokens, the attention
  // output (as Q) and its fp32 log-sum-exp per head and token, and w1's output (2048 x 7168).
  EXPECT_EQ(
      layer_activations(m, tp).total(),
      Bytes::of(2 * (2 * 1024 * 4096 + 2048 * (16 + 4 + 16) * 128 + 2048 * 7168) + 4 * 16 * 2048));
  EXPECT_LT(layer_activations(m, tp).total(), layer_activations(m, tp, Recompute::kNone).total());
  // Eager, checkpoint's cache also holds w2's output (2048 tokens x 4096 before its
  // reduce-scatter).
  ParallelPlan eager_tp = tp;
  eager_tp.kernels = Kernels::kEager;
  EXPECT_EQ(layer_activations(m, eager_tp).total() - layer_activations(m, tp).total(),
            Bytes::of(2 * 2048 * 4096));
}

// Llama-3-405B's pipeline (Dubey et al. 2024, Sec. 3.3.2): 126 layers on PP 16 with
// interleaving and one layer fewer on the first and the last virtual stage: here VP 2, 4 layers
// per virtual stage, 3 on the first and on the last.
TEST(Variants, UnevenFirstAndLastVirtualStagesWithInterleaving) {
  const ModelConfig m = load_model("llama3-405b");
  ParallelPlan p;
  p.tp = 8;
  p.pp = 16;
  p.vpp = 2;
  p.schedule = PipelineSchedule::kInterleaved;
  p.gbs = 16;
  p.seq = 4096;
  p.stage_layers.assign(32, 4);
  p.stage_layers.front() = p.stage_layers.back() = 3;
  const std::vector<StagePartition> stages = partition_stages(m, p);
  EXPECT_EQ(stages[0].chunks[0].first, 0);
  EXPECT_EQ(stages[0].chunks[0].end, 3);
  EXPECT_EQ(stages[0].chunks[1].first, 3 + 15 * 4);  // virtual stage 16
  EXPECT_EQ(stages[15].chunks[1].end, 126);
  EXPECT_EQ(stages[15].chunks[1].size(), 3);
  EXPECT_EQ(stages[7].params.layers, 8);
  EXPECT_EQ(plan_step(m, p).programs.size(), 16U);
  p.stage_layers.pop_back();  // one entry per virtual stage is expected
  EXPECT_THROW(validate_plan(m, p), PlanError);
}

// A virtual stage may hold no transformer layer: DeepSeek-V3's Megatron-Bridge layout
// "Et|(tt|)*30mL" (scripts/performance/configs/deepseek/deepseek_workload_base_configs.py) gives
// the first virtual stage the embedding and one layer, the last only the MTP module and the loss.
// The same shape on Llama-3-8B's 32 layers over PP 4 x VP 2: 1, 5 x 5, 6, 0.
TEST(Variants, AVirtualStageMayHoldOnlyTheHead) {
  const ModelConfig m = load_model("llama3-8b");
  ParallelPlan p;
  p.pp = 4;
  p.vpp = 2;
  p.dp = 1;
  p.schedule = PipelineSchedule::kInterleaved;
  p.gbs = 8;
  p.seq = 1024;
  p.stage_layers = {1, 5, 5, 5, 5, 5, 6, 0};
  validate_plan(m, p);
  const std::vector<StagePartition> stages = partition_stages(m, p);
  EXPECT_EQ(stages[0].chunks[0].size(), 1);
  EXPECT_EQ(stages[3].chunks[1].size(), 0);  // virtual stage 7: the head alone
  EXPECT_EQ(stages[3].chunks[1].first, 32);
  EXPECT_EQ(stages[3].params.layers, 5);
  EXPECT_EQ(plan_step(m, p).programs.size(), 4U);
  p.stage_layers = {1, 5, 5, 5, 5, 5, 7, -1};
  try {
    validate_plan(m, p);
    ADD_FAILURE() << "a negative layer count was accepted";
  } catch (const PlanError& e) {
    EXPECT_EQ(e.field(), PlanField::kStageLayers);
    EXPECT_NE(std::string(e.what()).find("expected a layer count >= 0"), std::string::npos);
  }
}

// A window W < s leaves 2sW - W^2 of the s^2 query-key pairs (times 2) to FlashAttention.
TEST(Variants, SlidingWindowLayersCostTheirWindow) {
  const ModelConfig m = from_json("mini-gemma2", std::string(R"({"architecture": "gemma2",
    "num_layers": 2, "num_kv_heads": 2, "head_dim": 64, "d_ff": 512, "mlp": "geglu",
    "norms_per_layer": 4, "sliding_window": {"size": 256, "pattern": [true, false]}, )") +
                                                     kCommon + "}");
  ParallelPlan p;
  p.seq = 1024;
  const StepPlan plan = plan_step(m, p);
  const auto local = layer_ops(plan.programs[0], "fwd.L0.");
  const auto global = layer_ops(plan.programs[0], "fwd.L1.");
  const double w = std::get<ComputeWork>(local.at("attention")->work).flops.count();
  const double g = std::get<ComputeWork>(global.at("attention")->work).flops.count();
  EXPECT_DOUBLE_EQ(w / g, (2.0 * 1024 * 256 - 256.0 * 256) / (1024.0 * 1024));
  // Global: Q and O widths 4 x 64 over the causal half of 1024^2 pairs, 2 FLOPs each.
  EXPECT_DOUBLE_EQ(g, 1024.0 * 1024 * (256 + 256));
  EXPECT_TRUE(local.contains("post_attn_norm"));
  EXPECT_TRUE(local.contains("post_mlp_norm"));
}

TEST(Variants, ParallelBlocksReduceOncePerLayer) {
  const ModelConfig neox = from_json("mini-neox", std::string(R"({"architecture": "gpt_neox",
    "num_layers": 2, "num_kv_heads": 4, "d_ff": 1024, "mlp": "gelu",
    "parallel_blocks": true, )") + kCommon + "}");
  ParallelPlan p;
  p.tp = 2;
  p.seq = 256;
  const StepPlan plan = plan_step(neox, p);
  const auto fwd = layer_ops(plan.programs[0], "fwd.L0.");
  int reductions = 0;
  for (const auto& [name, op] : fwd) {
    reductions += std::holds_alternative<CollectiveWork>(op->work) ? 1 : 0;
  }
  EXPECT_EQ(reductions, 1);
  EXPECT_TRUE(fwd.contains("layer.tp_allreduce"));
  EXPECT_TRUE(fwd.contains("fc1"));
}

}  // namespace
}  // namespace meshsim::workloads

namespace meshsim::workloads {
namespace {

// Megatron's selective recompute of the attention core: its checkpoint keeps Q, K and V and
// re-runs the core before its backward. Materialised (Megatron-LM @ cfd2e21607,
// _checkpointed_attention_forward): the score GEMM, softmax, dropout and context GEMM, the scores
// not kept; fused under Megatron-Core (attention.py @ core_r0.8.0): the kernel, its statistics
// not kept; fused under Megatron-LM's legacy layer (transformer.py @ b90fb2685f, the flash branch
// outside the checkpoint): nothing.
TEST(Variants, SelectiveRecomputeReRunsTheAttentionCore) {
  ModelConfig m = load_model("gpt3-175b");
  m.num_layers = 2;
  ParallelPlan p;
  p.gbs = 1;
  p.seq = 2048;
  p.tp = 8;
  p.sp = true;
  p.kernels = Kernels::kFused;
  p.attention = AttentionKernel::kNaive;
  p.recompute = Recompute::kSelective;
  const StepPlan naive = plan_step(m, p);
  const auto fwd = layer_ops(naive.programs[0], "fwd.L0.");
  const auto redo = layer_ops(naive.programs[0], "recompute.L0.");
  for (const char* op :
       {"attention.scores", "attention.softmax", "attention.dropout", "attention.context"}) {
    ASSERT_TRUE(redo.contains(op) && fwd.contains(op)) << op;
    EXPECT_EQ(std::get<ComputeWork>(redo.at(op)->work).flops,
              std::get<ComputeWork>(fwd.at(op)->work).flops)
        << op;
  }
  EXPECT_EQ(redo.size(), 4U);
  EXPECT_EQ(layer_activations(m, p).softmax_output, Bytes::zero());

  p.attention = AttentionKernel::kFlash;
  const StepPlan flash = plan_step(m, p);
  const auto fused = layer_ops(flash.programs[0], "recompute.L0.");
  ASSERT_EQ(fused.size(), 1U);
  ASSERT_TRUE(fused.contains("attention"));
  EXPECT_EQ(
      std::get<ComputeWork>(fused.at("attention")->work).flops,
      std::get<ComputeWork>(layer_ops(flash.programs[0], "fwd.L0.").at("attention")->work).flops);
  const LayerActivations kept = layer_activations(m, p);
  EXPECT_EQ(kept.softmax_statistics, Bytes::zero());
  ParallelPlan none = p;
  none.recompute = Recompute::kNone;
  const LayerActivations all = layer_activations(m, none);
  EXPECT_EQ(all.total() - kept.total(), all.softmax_statistics);
  EXPECT_GT(all.softmax_statistics, Bytes::zero());

  p.fused_attention_checkpointed = false;
  EXPECT_TRUE(layer_ops(plan_step(m, p).programs[0], "recompute.L0.").empty());
  EXPECT_EQ(layer_activations(m, p).total(), all.total());
}

// Megatron-Core's selective recompute_modules on the miniature DeepSeek (layer 0 dense, layers
// 1-3 MoE; TP 1): each module drops what its forward would keep and re-runs that forward before
// the layer's backward; core_attn alone is the default selective recompute.
TEST(Variants, RecomputeModulesDropAndReRunTheirForward) {
  const ModelConfig m = mini_deepseek();
  ParallelPlan p;
  p.gbs = 2;
  p.dp = 1;
  p.seq = 256;
  p.recompute = Recompute::kSelective;
  const LayerActivations base0 = layer_activations(m, p, Recompute::kNone, 0);
  const LayerActivations base1 = layer_activations(m, p, Recompute::kNone, 1);
  // core_attn: the fused kernel's statistics go (its output is the output projection's input).
  EXPECT_EQ(base1.total() - layer_activations(m, p, Recompute::kSelective, 1).total(),
            base1.softmax_statistics);
  p.recompute_modules = {RecomputeModule::kCoreAttn};
  EXPECT_EQ(base1.total() - layer_activations(m, p, Recompute::kSelective, 1).total(),
            base1.softmax_statistics);
  const auto core = layer_ops(plan_step(m, p).programs[0], "recompute.L1.");
  EXPECT_EQ(core.size(), 1U);
  EXPECT_TRUE(core.contains("attention"));

  // mla_up_proj: Q (4 heads x 48), K (4 x 48) and V (4 x 32) of 256 tokens in bf16 go.
  p.recompute_modules = {RecomputeModule::kMlaUpProj};
  EXPECT_EQ(base1.total() - layer_activations(m, p, Recompute::kSelective, 1).total(),
            Bytes::of(2 * 256 * (4 * 48 + 4 * 48 + 4 * 32)));
  const auto up = layer_ops(plan_step(m, p).programs[0], "recompute.L1.");
  for (const char* k : {"q_up", "kv_up", "q_latent_norm", "kv_latent_norm", "rope"}) {
    EXPECT_TRUE(up.contains(k)) << k;
  }
  EXPECT_FALSE(up.contains("q_down"));  // the latents were kept
  EXPECT_FALSE(up.contains("attention"));

  // mlp: the dense layer's SwiGLU hidden (2 x 512) and its product (512) go; MoE layers keep.
  p.recompute_modules = {RecomputeModule::kMlp};
  EXPECT_EQ(base0.total() - layer_activations(m, p, Recompute::kSelective, 0).total(),
            Bytes::of(2 * 256 * (2 * 512 + 512)));
  EXPECT_EQ(layer_activations(m, p, Recompute::kSelective, 1).total(), base1.total());
  const StepPlan mlp = plan_step(m, p);
  EXPECT_TRUE(layer_ops(mlp.programs[0], "recompute.L0.").contains("mlp_up"));
  EXPECT_TRUE(layer_ops(mlp.programs[0], "recompute.L0.").contains("mlp_down"));
  EXPECT_TRUE(layer_ops(mlp.programs[0], "recompute.L1.").empty());

  // moe_act: the routed experts' activation output (top-2 copies of 256 tokens x 64) goes; the
  // shared expert's stays.
  p.recompute_modules = {RecomputeModule::kMoeAct};
  EXPECT_EQ(base1.total() - layer_activations(m, p, Recompute::kSelective, 1).total(),
            Bytes::of(2 * 2 * 256 * 64));
  const auto act = layer_ops(plan_step(m, p).programs[0], "recompute.L1.");
  EXPECT_TRUE(act.contains("swiglu"));
  EXPECT_FALSE(act.contains("mlp_up"));

  // Both of Megatron-Bridge's DeepSeek-V3 modules: the dense layer re-runs its MLP and its
  // up-projections, an MoE layer its up-projections only.
  p.recompute_modules = {RecomputeModule::kMlaUpProj, RecomputeModule::kMlp};
  const StepPlan both = plan_step(m, p);
  EXPECT_TRUE(layer_ops(both.programs[0], "recompute.L0.").contains("mlp_up"));
  EXPECT_TRUE(layer_ops(both.programs[0], "recompute.L0.").contains("kv_up"));
  EXPECT_TRUE(layer_ops(both.programs[0], "recompute.L1.").contains("kv_up"));
  EXPECT_FALSE(layer_ops(both.programs[0], "recompute.L1.").contains("mlp_up"));
}

TEST(Variants, RecomputeModulesAreCheckedAgainstThePlanAndModel) {
  const auto field_of = [](const ModelConfig& m, const ParallelPlan& p) {
    try {
      validate_plan(m, p);
    } catch (const PlanError& e) {
      return std::string(to_string(e.field()));
    }
    return std::string("none");
  };
  ParallelPlan p;
  p.gbs = 2;
  p.seq = 256;
  p.recompute_modules = {RecomputeModule::kMlp};
  EXPECT_EQ(field_of(mini_deepseek(), p), "recompute_modules");  // recompute none
  p.recompute = Recompute::kSelective;
  EXPECT_EQ(field_of(mini_deepseek(), p), "none");
  p.recompute_modules = {RecomputeModule::kMlp, RecomputeModule::kMlp};
  EXPECT_EQ(field_of(mini_deepseek(), p), "recompute_modules");  // listed twice
  p.recompute_modules = {RecomputeModule::kMlaUpProj};
  EXPECT_EQ(field_of(load_model("llama3-8b"), p), "recompute_modules");  // no MLA
  p.recompute_modules = {RecomputeModule::kMoeAct};
  EXPECT_EQ(field_of(load_model("llama3-8b"), p), "recompute_modules");  // no MoE
}

}  // namespace
}  // namespace meshsim::workloads
