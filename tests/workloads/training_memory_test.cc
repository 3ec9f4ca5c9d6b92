// Activation memory against Korthikanti et al. 2022, and model state under TP/PP/EP/ZeRO.
#include "meshsim/workloads/training_memory.h"

#include <gtest/gtest.h>

#include "meshsim/sim/error.h"
#include "meshsim/workloads/accounting.h"
#include "meshsim/workloads/analytic.h"

namespace meshsim::workloads {
namespace {

// GPT-3 175B is the paper's own example (h = 12288, a = 96, 4h GeLU MLP, dropout).
constexpr int64_t kS = 2048;
constexpr int64_t kB = 2;
constexpr double kH = 12288;
constexpr double kA = 96;
constexpr double kSbh = static_cast<double>(kS * kB) * kH;

// The paper's microbatch (s = 2048, b = 2) on `t` TP ranks, with or without SP.
ParallelPlan gpt3(AttentionKernel kernel, Recompute recompute = Recompute::kNone, int64_t t = 1,
                  bool sp = false) {
  ParallelPlan p;
  p.seq = kS;
  p.mbs = kB;
  p.gbs = kB;
  p.attention = kernel;
  p.recompute = recompute;
  p.tp = t;
  p.sp = sp;
  return p;
}

ParallelPlan tp(int64_t t, bool sp) { return gpt3(AttentionKernel::kFlash, Recompute::kNone, t, sp); }

double without_norm_stats(const LayerActivations& a) {
  return (a.total() - a.norm_statistics).as_double();
}

// Korthikanti et al. 2022, Table 2: the activations of one layer per TP degree t and SP, without
// recompute, as multiples of sbh.
struct KorthikantiRow {
  const char* name;
  int64_t t;
  bool sp;
  double sbh;  // the paper's formula
};

void PrintTo(const KorthikantiRow& row, std::ostream* os) { *os << row.name; }

class Korthikanti : public ::testing::TestWithParam<KorthikantiRow> {};

TEST_P(Korthikanti, LayerActivationsMatchThePaper) {
  const ModelConfig m = load_model("gpt3-175b");
  const KorthikantiRow& row = GetParam();
  const LayerActivations a =
      layer_activations(m, gpt3(AttentionKernel::kNaive, Recompute::kNone, row.t, row.sp));
  const double paper = kSbh * row.sbh;
  EXPECT_DOUBLE_EQ(without_norm_stats(a), paper);
  EXPECT_NEAR(a.total().as_double() / paper, 1.0, 0.01);
}

constexpr double kScores = 5.0 * kA * kS / kH;  // the attention scores' term at t = 1
INSTANTIATE_TEST_SUITE_P(
    Activations, Korthikanti,
    ::testing::Values(KorthikantiRow{"NoParallelism", 1, false, 34.0 + kScores},
                      KorthikantiRow{"TensorParallel", 8, false, 10.0 + 24.0 / 8 + kScores / 8},
                      KorthikantiRow{"TensorAndSequenceParallel", 8, true, 34.0 / 8 + kScores / 8}),
    [](const ::testing::TestParamInfo<KorthikantiRow>& p) { return std::string(p.param.name); });

TEST(Activations, SelectiveRecomputeDropsTheScoreTerm) {
  const ModelConfig m = load_model("gpt3-175b");
  const LayerActivations a =
      layer_activations(m, gpt3(AttentionKernel::kNaive, Recompute::kSelective, 8, true));
  EXPECT_DOUBLE_EQ(without_norm_stats(a), kSbh * 34.0 / 8.0);
}

TEST(Activations, FlashDropsTheScoreTermAndKeepsSoftmaxStatistics) {
  const ModelConfig m = load_model("gpt3-175b");
  const LayerActivations a = layer_activations(m, gpt3(AttentionKernel::kFlash));
  EXPECT_EQ(a.softmax_output, Bytes::zero());
  EXPECT_EQ(a.attention_dropout, Bytes::zero());  // flash regenerates the mask from the seed
  EXPECT_EQ(a.softmax_statistics.count(), 4 * 96 * kS * kB);  // fp32 log-sum-exp per row, head
  EXPECT_DOUBLE_EQ(without_norm_stats(a) - a.softmax_statistics.as_double(), kSbh * 34.0);
  // Nothing quadratic is left: doubling s doubles the memory.
  ParallelPlan twice = gpt3(AttentionKernel::kFlash);
  twice.seq = 2 * kS;
  EXPECT_EQ(layer_activations(m, twice).total(), a.total() * 2);
}

// FP8 through Transformer Engine: the QKV, up (fc1) and down (fc2) projections save their inputs
// as FP8 casts, 1 byte per element instead of 2 (h, h and 4h per token for GPT-3's MLP: 12 of the
// 34 sbh drop to 6); the output projection's FP8 cast of the attention output is saved beside the
// 16-bit copy the attention's backward reads (+1 sbh): 29 sbh. A stack without TE's FP8 (torchao,
// XLA) saves 16 bits, and a BF16 run is unchanged.
TEST(Activations, TransformerEngineSavesFp8InputsOfTheLinearLayers) {
  const ModelConfig m = load_model("gpt3-175b");
  ParallelPlan bf16 = gpt3(AttentionKernel::kFlash);
  bf16.fp8_saves_quantized_inputs = true;
  ParallelPlan fp8 = bf16;
  fp8.set_training_dtype(Dtype::kFp8);
  const LayerActivations a16 = layer_activations(m, bf16);
  const LayerActivations a8 = layer_activations(m, fp8);
  EXPECT_EQ(a8.qkv_input, a16.qkv_input / 2);
  EXPECT_EQ(a8.mlp_input, a16.mlp_input / 2);
  EXPECT_EQ(a8.mlp_down_input, a16.mlp_down_input / 2);
  EXPECT_EQ(a8.attention_output, a16.attention_output + a16.attention_output / 2);
  EXPECT_DOUBLE_EQ(without_norm_stats(a8) - a8.softmax_statistics.as_double(),
                   kSbh * (34.0 - 6.0 + 1.0));
  fp8.fp8_saves_quantized_inputs = false;
  EXPECT_EQ(layer_activations(m, fp8).total(), a16.total());
}

TEST(Activations, FullRecomputeKeepsOnlyTheLayerInput) {
  const ModelConfig m = load_model("gpt3-175b");
  const auto full = [](int64_t t, bool sp) {
    return gpt3(AttentionKernel::kFlash, Recompute::kFull, t, sp);
  };
  EXPECT_DOUBLE_EQ(layer_activations(m, full(1, false)).total().as_double(), 2.0 * kSbh);
  EXPECT_DOUBLE_EQ(layer_activations(m, full(8, true)).total().as_double(), 2.0 * kSbh / 8);
  EXPECT_DOUBLE_EQ(layer_activations(m, full(8, false)).total().as_double(), 2.0 * kSbh);
  // The policy can be asked for apart from the plan's: what full recompute re-materialises.
  EXPECT_EQ(layer_activations(m, full(8, true), Recompute::kNone).total(),
            layer_activations(m, tp(8, true)).total());
}

// A plan of `seq` tokens per microbatch on one device (ZeRO and degrees set by the tests).
ParallelPlan plan_of(int64_t seq) {
  ParallelPlan p;
  p.seq = seq;
  return p;
}

TEST(Activations, Llama3_70bPerTensorWithGqaAndSwiglu) {
  const ModelConfig m = load_model("llama3-70b");
  const LayerActivations a = layer_activations(m, plan_of(4096));
  const int64_t sbh = 4096LL * 8192;
  EXPECT_EQ(a.norm_inputs.count(), 4 * sbh);
  EXPECT_EQ(a.norm_statistics.count(), 2 * 4 * 4096);  // RMSNorm: fp32 rstd per row
  EXPECT_EQ(a.q.count(), 2 * sbh);
  EXPECT_EQ(a.k.count(), 2 * 4096 * 1024);                  // 8 KV heads of 128
  EXPECT_EQ(a.mlp_hidden.count(), 2 * 2 * 4096LL * 28672);  // gate and up outputs
  EXPECT_EQ(a.mlp_down_input.count(), 2 * 4096LL * 28672);
  EXPECT_EQ(a.dropout_masks, Bytes::zero());
  // 4 + 2 + 2 + 2 + 0.25 + 0.25 + 2 + 14 + 7 = 33.5 bytes per s*b*h, plus O(s) statistics.
  EXPECT_EQ((a.total() - a.norm_statistics - a.softmax_statistics).count(), sbh * 67 / 2);
}

TEST(Activations, MoeScalesExpertTermsByTopK) {
  const ModelConfig m = load_model("mixtral-8x7b");
  const LayerActivations a = layer_activations(m, plan_of(4096));
  EXPECT_EQ(a.mlp_hidden.count(), 2 * 2 * 2 * 4096LL * 14336);
  EXPECT_EQ(a.expert_inputs.count(), 2 * 2 * 4096LL * 4096);
  EXPECT_EQ(a.router_logits.count(), 4 * 4096 * 8);
}

// A context-parallel rank holds the activations of its s / CP tokens.
TEST(Activations, ContextParallelRanksHoldTheirShare) {
  const ModelConfig m = load_model("llama3-70b");
  ParallelPlan cp = plan_of(8192);
  cp.cp = 2;
  EXPECT_EQ(layer_activations(m, cp).total(), layer_activations(m, plan_of(4096)).total());
}

// The same rules as the planner's, as a PlanError on the field (validate_sharding).
TEST(Activations, LayoutsThatCannotSplitAreRejected) {
  const ModelConfig m = load_model("llama3-70b");
  ParallelPlan p = plan_of(4096);
  p.tp = 3;
  EXPECT_THROW(layer_activations(m, p), PlanError);
  p = plan_of(4097);
  p.tp = 8;
  p.sp = true;
  try {
    (void)layer_activations(m, p);
    ADD_FAILURE() << "SP over 8 ranks of 4097 tokens";
  } catch (const PlanError& e) {
    EXPECT_EQ(e.field(), PlanField::kSeq);
  }
}

// DeepSeek-V3's multi-token-prediction projection (eh_proj, 2h -> h) is column-parallel: TP
// must divide d_model (with d_model 1 over TP 2 it had reached the GEMM model as an empty shape).
TEST(Activations, MtpNeedsTpToDivideDModel) {
  ModelConfig m =
      load_model(std::string(MESHSIM_SOURCE_DIR) + "/tests/workloads/hf_configs/DeepSeek-V3.json");
  ASSERT_GT(m.mtp_layers, 0);
  m.d_model = 7169;
  ParallelPlan p = plan_of(4096);
  p.tp = 2;
  try {
    (void)layer_activations(m, p);
    ADD_FAILURE() << "MTP over tp 2 of d_model 7169";
  } catch (const PlanError& e) {
    EXPECT_EQ(e.field(), PlanField::kTp);
    EXPECT_NE(std::string(e.what()).find("multi-token-prediction"), std::string::npos);
  }
  m.mtp_layers = 0;
  EXPECT_NO_THROW((void)layer_activations(m, p));
}

TEST(ModelState, Zero3IsSixteenBytesPerParamOverDp) {
  const ModelConfig m = load_model("llama3-70b");
  const int64_t n = total_parameters(m);
  ParallelPlan p = plan_of(4096);
  p.dp = 64;
  p.gbs = 64;
  p.zero = ZeroStage::kParameters;
  const TrainingMemory mem = training_memory(m, p);
  EXPECT_EQ(mem.model_state(), fsdp_model_state_bytes_per_device(n, 16, 64));
  EXPECT_EQ(mem.model_state().count(), 16 * n / 64);
}

TEST(ModelState, ZeroStagesShardProgressively) {
  const ModelConfig m = load_model("llama3-8b");
  const int64_t n = total_parameters(m);
  ParallelPlan p = plan_of(4096);
  p.dp = 8;
  p.gbs = 8;
  const int64_t expected[] = {16 * n, 4 * n + 12 * n / 8, 2 * n + 14 * n / 8, 16 * n / 8};
  for (int stage = 0; stage <= 3; ++stage) {
    p.zero = static_cast<ZeroStage>(stage);
    EXPECT_EQ(training_memory(m, p).model_state().count(), expected[stage]) << "ZeRO-" << stage;
  }
}

TEST(ModelState, TensorAndPipelineShardsAddUpToTheModel) {
  const ModelConfig m = load_model("llama3-70b");
  ParallelPlan p = tp(8, true);
  p.gbs = 2;  // one microbatch of two sequences
  p.pp = 4;
  int64_t sum = 0;
  for (int64_t stage = 0; stage < 4; ++stage) {
    const StageParameters r = partition_stage(m, p, stage).params;
    EXPECT_EQ(r.layers, 20);
    sum += r.total() * 8;
  }
  // Norms are replicated over the 8 TP ranks; everything else is split exactly.
  const int64_t norms = 80 * 2 * 8192 + 8192;
  EXPECT_EQ(sum, total_parameters(m) + 7 * norms);
}

TEST(ModelState, ExpertsSplitOverExpertParallel) {
  const ModelConfig m = load_model("mixtral-8x7b");
  ParallelPlan p = plan_of(4096);
  p.dp = 8;
  p.gbs = 8;
  p.ep = 8;
  const StageParameters r = partition_stage(m, p, 0).params;
  EXPECT_EQ(r.expert(), 32LL * 3 * 4096 * 14336);  // one expert per layer
  EXPECT_EQ(r.dense() + 8 * r.expert(), total_parameters(m));
}

TEST(TrainingMemory, OneFOneBStageZeroHoldsPpMicrobatches) {
  const ModelConfig m = load_model("llama3-70b");
  ParallelPlan p = tp(8, true);
  p.seq = 8192;
  p.mbs = 1;
  p.gbs = 4;
  p.pp = 4;
  const TrainingMemory mem = training_memory(m, p);
  const Bytes layer = layer_activations(m, p).total();
  const Bytes outside = outside_layer_activations(m, p, true, false).total();
  EXPECT_EQ(mem.activations, (layer * 20 + outside) * 4);
  // The last stage holds one microbatch and the logits.
  const Bytes last_outside = outside_layer_activations(m, p, false, true).total();
  EXPECT_EQ(last_outside.count(), 2 * (2 * 8192 * 8192 / 8) + 4 * 8192LL * 128256 / 8);
  EXPECT_EQ(training_memory(m, p, 3).activations, layer * 20 + last_outside);
}

}  // namespace
}  // namespace meshsim::workloads
