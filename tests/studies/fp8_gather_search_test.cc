// The plan search tries FP8 parameter gathers (Megatron-Core --fp8-param-gather) where a plan can
// take them, and not elsewhere; its lower bound stays below the simulated step of such plans (the
// gathers move a byte a weight), so the ranking it proves is the exhaustive one.
#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "meshsim/collectives/comm_model.h"
#include "meshsim/scenario/step.h"
#include "meshsim/studies/plan_search.h"
#include "meshsim/studies/step_bound.h"
#include "meshsim/topology/network.h"

namespace meshsim::studies {
namespace {

using scenario::LoadedScenario;
using scenario::Scenario;
using scenario::StepOptions;
using scenario::StepReport;
using workloads::ParallelPlan;

// Llama-3-8B on four DGX H100 nodes in FP8: ZeRO's gathers cross the NICs, where halving them
// shows.
Scenario fp8_problem() {
  Scenario s;
  s.model = "llama3-8b";
  s.cluster = "dgx-h100";
  s.nodes = 4;
  s.plan.seq = 4096;
  s.plan.gbs = 64;
  s.plan.set_training_dtype(Dtype::kFp8);
  s.plan.origins.set(workloads::PlanField::kDtype, Origin::flag("--dtype"));
  return s;
}

SearchOptions options(int64_t top) {
  SearchOptions o;
  o.top = top;
  o.fixed.overlap_tp = false;
  o.fixed.recompute = workloads::Recompute::kNone;
  o.jobs = 2;
  return o;
}

TEST(Fp8GatherSearch, TriesFp8GathersExactlyWhereAPlanCanTakeThem) {
  const Scenario base = fp8_problem();
  const LoadedScenario loaded = load_inputs(base);
  const std::vector<ParallelPlan> plans = enumerate_plans(loaded, base.plan, options(5));
  int64_t with = 0;
  int64_t without_zero = 0;
  for (const ParallelPlan& p : plans) {
    if (p.fp8_param_gather) {
      ++with;
      EXPECT_FALSE(workloads::fp8_param_gather_refusal(p).has_value());
    } else if (p.zero != workloads::ZeroStage::kNone) {
      ++without_zero;
    }
  }
  EXPECT_GT(with, 0);
  // Every ZeRO plan is enumerated with and without them.
  EXPECT_EQ(with, without_zero);

  // Not in BF16 training, nor on a stack without FP8 weights.
  Scenario bf16 = base;
  bf16.plan.set_training_dtype(Dtype::kBf16);
  for (const ParallelPlan& p : enumerate_plans(load_inputs(bf16), bf16.plan, options(5))) {
    ASSERT_FALSE(p.fp8_param_gather);
  }
  Scenario fsdp = base;
  fsdp.plan.stack = workloads::Stack::kFsdp;
  fsdp.plan.origins.set(workloads::PlanField::kStack, Origin::flag("--stack"));
  for (const ParallelPlan& p : enumerate_plans(load_inputs(fsdp), fsdp.plan, options(5))) {
    ASSERT_FALSE(p.fp8_param_gather);
  }

  // Held off, none; held on, only ZeRO plans.
  SearchOptions off = options(5);
  off.fixed.fp8_param_gather = false;
  for (const ParallelPlan& p : enumerate_plans(loaded, base.plan, off)) {
    ASSERT_FALSE(p.fp8_param_gather);
  }
  SearchOptions on = options(5);
  on.fixed.fp8_param_gather = true;
  for (const ParallelPlan& p : enumerate_plans(loaded, base.plan, on)) {
    ASSERT_TRUE(p.fp8_param_gather);
  }
}

// The bound counts a gathered weight at its FP8 byte: a bound that kept 2 bytes would exceed the
// step of the plans whose gathers it cannot hide, and prune a plan of the top.
TEST(Fp8GatherSearch, TheBoundStaysBelowTheStepsOfFp8GatherPlans) {
  const Scenario base = fp8_problem();
  const LoadedScenario loaded = load_inputs(base);
  const topology::Network net = topology::Network::build(loaded.cluster);
  collectives::NetworkCommModel comm(net,
                                     topology::Placement::in_order(loaded.cluster.device_count()),
                                     collectives::NetworkBackend::kAnalytical);
  StepLowerBound bound(loaded.model, loaded.cluster, &comm);
  SearchOptions on = options(5);
  on.fixed.fp8_param_gather = true;
  const std::vector<ParallelPlan> plans = enumerate_plans(loaded, base.plan, on);
  size_t checked = 0;
  for (size_t i = 0; i < plans.size(); i += 5) {
    Scenario s = base;
    s.plan = plans[i];
    const StepReport r = simulate_step(s, loaded, StepOptions{});
    if (!r.simulated) {
      continue;
    }
    EXPECT_LE(bound(plans[i]), r.step_time) << r.plan_description;
    ++checked;
  }
  EXPECT_GE(checked, 20u);
}

// The search's proven top 3 is what simulating every plan gives, and FP8 gathers win it: the
// same plan with 16-bit gathers moves twice the bytes over the same NICs. Without pipelines or
// CP, to keep the exhaustive side to a few hundred simulations.
TEST(Fp8GatherSearch, TheProvenRankingIsTheExhaustiveOne) {
  const Scenario base = fp8_problem();
  const LoadedScenario loaded = load_inputs(base);
  SearchOptions o = options(3);
  o.fixed.pp = 1;
  o.fixed.cp = 1;
  const SearchResult found = search_plans(base, o);
  ASSERT_TRUE(found.exact);
  ASSERT_EQ(found.top.size(), 3u);
  const double usable = (1.0 - kDefaultHeadroom) * loaded.cluster.chip.hbm_capacity.as_double();
  std::vector<double> steps;
  for (const ParallelPlan& p : enumerate_plans(loaded, base.plan, o)) {
    Scenario s = base;
    s.plan = p;
    const StepReport r = simulate_step(s, loaded, StepOptions{});
    if (r.simulated && !r.oom && r.peak_memory.as_double() <= usable) {
      steps.push_back(r.step_time.seconds());
    }
  }
  std::sort(steps.begin(), steps.end());
  ASSERT_GE(steps.size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_DOUBLE_EQ(found.top[i].report.step_time.seconds(), steps[i]) << i;
  }
  const ParallelPlan& best = found.top[0].plan;
  ASSERT_NE(best.zero, workloads::ZeroStage::kNone) << found.top[0].report.plan_description;
  EXPECT_TRUE(best.fp8_param_gather) << found.top[0].report.plan_description;
}

}  // namespace
}  // namespace meshsim::studies
