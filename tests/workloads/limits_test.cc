// Issue 15: upper bounds on models and plans, each named in its error with the field, and the
// checked accounting behind them. Before, sizes had no upper bound and the accounting wrapped:
// negative parameter counts in calc, negative KV caches and activations, internal errors in run.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <functional>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>

#include "meshsim/sim/error.h"
#include "meshsim/workloads/accounting.h"
#include "meshsim/workloads/model.h"
#include "meshsim/workloads/parallel.h"
#include "meshsim/workloads/step.h"
#include "meshsim/workloads/training_memory.h"
#include "thrown.h"

namespace meshsim::workloads {
namespace {

using ::testing::HasSubstr;

nlohmann::json llama() {
  return nlohmann::json::parse(R"({"architecture": "llama", "num_layers": 2, "d_model": 256,
      "num_heads": 8, "num_kv_heads": 2, "d_ff": 512, "vocab_size": 1000,
      "max_position_embeddings": 128, "mlp": "swiglu", "norm": "rmsnorm",
      "position_embedding": "rope", "attention_bias": false, "mlp_bias": false,
      "tied_embeddings": false, "dropout": false})");
}

InputError model_error(const std::function<void(nlohmann::json&)>& mutate) {
  nlohmann::json doc = llama();
  mutate(doc);
  try {
    parse_model(doc, "m.json");
  } catch (const InputError& e) {
    return e;
  }
  ADD_FAILURE() << "expected an InputError";
  return InputError("", "", "");
}

TEST(ModelLimits, EverySizeHasAStatedBound) {
  const struct {
    const char* field;
    int64_t value;
  } cases[] = {{"num_layers", int64_t{1} << 30},
               {"d_model", 8192000000},
               {"num_heads", int64_t{1} << 40},
               {"head_dim", int64_t{1} << 40},
               {"d_ff", int64_t{1} << 50},
               {"vocab_size", int64_t{1} << 40},
               {"max_position_embeddings", int64_t{1} << 62}};
  for (const auto& c : cases) {
    SCOPED_TRACE(c.field);
    const InputError e = model_error([&](auto& d) {
      d[c.field] = c.value;
      if (std::string(c.field) == "num_heads") {
        d["num_kv_heads"] = c.value;
        d["head_dim"] = 32;
      }
    });
    EXPECT_EQ(e.location(), std::string("/") + c.field);
    EXPECT_THAT(e.message(), HasSubstr("is above the limit of 2^"));
  }
}

TEST(ModelLimits, ParametersPerLayerAndPerTableAreBounded) {
  // Each size within its bound, the layer not: 2^20 x 2^22 x 3 (SwiGLU) = 1.3e13 parameters.
  const InputError layer = model_error([](auto& d) {
    d["d_model"] = 1 << 20;
    d["d_ff"] = 1 << 22;
    d["num_heads"] = 1024;
    d["num_kv_heads"] = 1024;
  });
  EXPECT_EQ(layer.location(), "/d_ff");
  EXPECT_THAT(layer.message(), HasSubstr("parameters per layer; expected at most 2^40"));
  const InputError table = model_error([](auto& d) {
    d["d_model"] = 1 << 20;  // a thin layer (one head of one dimension, d_ff 1), a wide table
    d["num_heads"] = 1;
    d["num_kv_heads"] = 1;
    d["head_dim"] = 1;
    d["d_ff"] = 1;
    d["vocab_size"] = 1 << 24;
  });
  EXPECT_EQ(table.location(), "/vocab_size");
  EXPECT_THAT(table.message(), HasSubstr("a token embedding of 17592186044416 parameters"));
}

TEST(ModelLimits, ModelsAtTheBoundsCountWithoutOverflow) {
  nlohmann::json doc = llama();
  doc["num_layers"] = ModelLimits::kLayers;
  doc["d_model"] = 1 << 18;
  doc["num_heads"] = 256;
  doc["num_kv_heads"] = 256;
  doc["d_ff"] = 1 << 18;
  doc["vocab_size"] = 1 << 21;
  const ModelConfig m = parse_model(doc, "m.json");
  const ParameterCounts c = count_parameters(m);
  EXPECT_LE(c.layer.total(), ModelLimits::kLayerParameters);
  EXPECT_GT(c.total(), int64_t{1} << 50);  // positive: no wrap
  EXPECT_GT(matmul_weights_per_token(m), 0);
}

TEST(ModelLimits, HfConfigGpt2DefaultInnerSizeDoesNotWrap) {
  // n_inner absent: 4 x n_embd, which wrapped for n_embd near 2^62.
  const nlohmann::json hf = {{"model_type", "gpt2"}, {"n_embd", int64_t{1} << 62},
                             {"n_layer", 2},         {"n_head", 1},
                             {"vocab_size", 100},    {"n_positions", 64}};
  try {
    parse_model(hf, "config.json");
    ADD_FAILURE() << "accepted";
  } catch (const InputError& e) {
    EXPECT_EQ(e.location(), "/n_embd") << e.what();
  }
}

std::string plan_error(const ParallelPlan& p) {
  return meshsim::testing::what_thrown<PlanError>(
      [&] { validate_plan(load_model("llama3-8b"), p); }, "<no error>");
}

TEST(PlanLimits, EverySizeHasAStatedBound) {
  ParallelPlan p;
  p.seq = 4096;
  p.mbs = int64_t{1} << 62;
  p.gbs = int64_t{1} << 62;
  EXPECT_THAT(plan_error(p), HasSubstr("mbs: 4611686018427387904 is above the limit of 1048576"));
  p.mbs = 1;
  p.gbs = 1;
  p.seq = int64_t{1} << 62;
  EXPECT_THAT(plan_error(p), HasSubstr("seq: 4611686018427387904 is above the limit of 16777216"));
  p.seq = 4096;
  p.tp = int64_t{1} << 32;
  EXPECT_THAT(plan_error(p), HasSubstr("tp: 4294967296 is above the limit of 131072"));
  // Each degree within its bound, their product past it: before, it wrapped (to 0, here).
  p.tp = 1 << 15;
  p.dp = 1 << 15;
  p.gbs = 1 << 15;
  EXPECT_THAT(plan_error(p), HasSubstr("is more than 131072 ranks"));
  p = ParallelPlan{};
  p.seq = 4096;
  p.vpp = int64_t{1} << 40;
  EXPECT_THAT(plan_error(p), HasSubstr("vpp: 1099511627776 is above the limit of 4096"));
}

TEST(PlanLimits, StageLayersSummingPast2To63AreReportedNotWrapped) {
  ParallelPlan p;
  p.seq = 4096;
  p.pp = 2;
  p.stage_layers = {std::numeric_limits<int64_t>::max(), std::numeric_limits<int64_t>::max()};
  EXPECT_THAT(plan_error(p), HasSubstr("the stages hold more than 2^63 layers in total"));
}

TEST(PlanLimits, MicrobatchesTimesLayersAreBounded) {
  ParallelPlan p;
  p.seq = 4096;
  p.gbs = 1 << 20;  // 2^20 microbatches x 32 layers
  EXPECT_THAT(plan_error(p), HasSubstr("gbs: 1048576 microbatches per pipeline x 32 layers"));
  p.gbs = 1 << 15;  // 2^15 x 32 = 2^20: at the bound, accepted
  EXPECT_EQ(plan_error(p), "<no error>");
}

// Within the microbatch-layer bound (2^16 microbatches x Llama-3.2 1B's 16 layers = 2^20), eager
// kernels make a program of tens of millions of ops: refused once its first passes say so, not
// after gigabytes of ops were built (before: about a minute and 5 GiB for such a step).
TEST(PlanLimits, AProgramBoundToPassItsOpLimitIsRefusedEarly) {
  ParallelPlan p;
  p.seq = 512;
  p.gbs = 1 << 16;
  p.kernels = Kernels::kEager;
  const std::string what = testing::what_thrown<LimitError>(
      [&] { (void)plan_step(load_model("llama3.2-1b"), p); }, "<no LimitError>");
  EXPECT_THAT(what, HasSubstr("passes of about"));
  EXPECT_THAT(what, HasSubstr("(2^24)"));
}

TEST(CheckedAccounting, ActivationsPast2To63AreALimitError) {
  // Within every bound, naive attention's a x s^2 x b scores pass 2^63 bytes.
  ParallelPlan p;
  p.seq = PlanLimits::kSeq;
  p.mbs = 1024;
  p.gbs = 1024;
  p.attention = AttentionKernel::kNaive;
  const ModelConfig m = load_model("llama3-8b");
  EXPECT_THROW((void)layer_activations(m, p), LimitError);
  EXPECT_THROW((void)kv_cache_bytes(m, int64_t{1} << 40, int64_t{1} << 20, 2), LimitError);
  EXPECT_EQ(kv_cache_bytes(m, 1, 1, 2).count(), 2 * 32 * 8 * 128 * 2);
}

TEST(StepPlanning, GroupsAreBuiltOncePerGroupNotPerRank) {
  // Data parallelism over 32,768 ranks: computing each rank's group from scratch was quadratic
  // (minutes); the groups are now shared, and the plan is built in well under a second.
  ParallelPlan p;
  p.seq = 1024;
  p.dp = 1 << 15;
  p.gbs = 1 << 15;
  p.zero = ZeroStage::kOptimizerStates;
  const StepPlan plan = plan_step(load_model("llama3.2-1b"), p);
  ASSERT_FALSE(plan.groups.empty());
  size_t largest = 0;
  for (const PlannedGroup& g : plan.groups) {
    largest = std::max(largest, g.global.size());
  }
  EXPECT_EQ(largest, size_t{1} << 15);
  EXPECT_EQ(plan.ranks.size(), 1u);  // representative: one rank
}

}  // namespace
}  // namespace meshsim::workloads
