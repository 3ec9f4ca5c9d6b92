// The plan search against exhaustive simulation (issue 14): on a small problem it finds the same
// best plans, and neither its memory pruning nor its bound drops a plan that would have ranked in
// the top N; and the lower bound never exceeds the simulated step.
#include "meshsim/studies/plan_search.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>
#include <tuple>

#include "meshsim/collectives/comm_model.h"
#include "meshsim/scenario/step.h"
#include "meshsim/studies/step_bound.h"
#include "meshsim/topology/network.h"
#include "meshsim/workloads/stack_rules.h"

namespace meshsim::studies {

using namespace meshsim::scenario;  // the step these studies run
namespace {

using workloads::ParallelPlan;

// Llama-3-8B on one DGX H100 node, sequence 4096, 16 sequences per step: large enough that some
// plans do not fit in 80 GB and pipelines, TP, CP and ZeRO all compete, small enough to simulate
// every plan. TP overlap is held off to halve the space.
Scenario small_problem() {
  Scenario s;
  s.model = "llama3-8b";
  s.cluster = "dgx-h100";
  s.nodes = 1;
  s.plan.seq = 4096;
  s.plan.gbs = 16;
  return s;
}

SearchOptions small_options(int64_t top) {
  SearchOptions o;
  o.top = top;
  o.fixed.overlap_tp = false;
  o.jobs = 2;
  return o;
}

struct Exhaustive {
  std::vector<std::pair<double, ParallelPlan>> fitting;  // (step seconds, plan), best first
  std::vector<ParallelPlan> oom;  // out of memory, or within the default headroom
};

// Every plan simulated; those that keep the default headroom free ranked by step time, equal
// times by their peak memory (the search's tie-break: more memory left first), then enumeration
// order.
Exhaustive simulate_all(const Scenario& base, const std::vector<ParallelPlan>& plans) {
  const LoadedScenario loaded = load_inputs(base);
  const double usable = (1.0 - kDefaultHeadroom) * loaded.cluster.chip.hbm_capacity.as_double();
  Exhaustive e;
  std::vector<std::tuple<double, int64_t, size_t>> keys;
  for (size_t i = 0; i < plans.size(); ++i) {
    Scenario s = base;
    s.plan = plans[i];
    const StepReport r = simulate_step(s, loaded, StepOptions{});
    if (r.oom || r.peak_memory.as_double() > usable) {
      e.oom.push_back(plans[i]);
    } else {
      keys.emplace_back(r.step_time.seconds(), r.peak_memory.count(), i);
    }
  }
  std::sort(keys.begin(), keys.end());
  for (const auto& [step, peak, i] : keys) {
    e.fitting.emplace_back(step, plans[i]);
  }
  return e;
}

// Every plan of the small problem simulated once (the costly part, under the sanitizers above all),
// against two searches: the top 5 and the top 10.
TEST(PlanSearch, FindsTheBestPlansOfExhaustiveSimulation) {
  const Scenario base = small_problem();
  const SearchOptions o = small_options(5);
  const SearchResult found = search_plans(base, o);
  ASSERT_TRUE(found.exact);
  ASSERT_EQ(found.top.size(), 5u);
  // The search simulated a small share of the valid plans.
  const std::vector<ParallelPlan> all = enumerate_plans(load_inputs(base), base.plan, o);
  EXPECT_LT(found.simulated * 4, static_cast<int64_t>(all.size()));

  const Exhaustive e = simulate_all(base, all);
  ASSERT_GE(e.fitting.size(), 10u);
  ASSERT_FALSE(e.oom.empty()) << "the problem should have plans that do not fit";
  for (size_t i = 0; i < 5; ++i) {
    // Same step times in the same order (ties may swap plans of equal time).
    EXPECT_DOUBLE_EQ(found.top[i].report.step_time.seconds(), e.fitting[i].first) << i;
  }
  EXPECT_EQ(found.top[0].report.plan_description,
            [&] {
              Scenario s = base;
              s.plan = e.fitting[0].second;
              return simulate_step(s, StepOptions{}).plan_description;
            }());
  // Counts add up: every considered plan is refused by its stack, invalid, pruned or simulated.
  int64_t invalid = 0;
  for (const auto& [field, n] : found.invalid) {
    invalid += n;
  }
  for (const auto& [what, n] : found.refused) {
    invalid += n;
  }
  EXPECT_EQ(found.considered, invalid + found.pruned_memory + found.pruned_headroom +
                                  found.pruned_bound + found.not_simulated + found.simulated);

  // The bound never drops a plan of the top N: with N = 10, the top 10 is what simulating every
  // plan that fits gives (the top N does not change which plans are enumerated).
  const SearchOptions o10 = small_options(10);
  ASSERT_EQ(enumerate_plans(load_inputs(base), base.plan, o10).size(), all.size());
  const SearchResult found10 = search_plans(base, o10);
  ASSERT_EQ(found10.top.size(), 10u);
  EXPECT_GT(found10.pruned_bound, 0);
  for (size_t i = 0; i < 10; ++i) {
    EXPECT_DOUBLE_EQ(found10.top[i].report.step_time.seconds(), e.fitting[i].first) << i;
  }
}

// The small problem on four nodes in FP8 training: ZeRO's gathers cross the NICs, where gathering
// the weights in FP8 (Megatron-Core --fp8-param-gather) shows.
Scenario fp8_problem() {
  Scenario s = small_problem();
  s.nodes = 4;
  s.plan.gbs = 64;
  s.plan.set_training_dtype(Dtype::kFp8);
  s.plan.origins.set(workloads::PlanField::kDtype, Origin::flag("--dtype"));
  return s;
}

SearchOptions fp8_options(int64_t top) {
  SearchOptions o = small_options(top);
  o.fixed.recompute = workloads::Recompute::kNone;
  return o;
}

// TP plans take sequence parallelism where the stack runs it and whole-activation TP where it does
// not: Megatron-LM 2021 (and DeepSpeed's stacks) refuse --sequence-parallel, and before this the
// search offered them no TP plan at all ("no plan fits" for GPT-3 175B on 128 A100s).
TEST(PlanSearch, TensorParallelPlansTakeSequenceParallelismWhereTheStackRunsIt) {
  for (const auto stack : {workloads::Stack::kMegatron, workloads::Stack::kMegatron2021}) {
    Scenario s = small_problem();
    s.plan.stack = stack;
    s.plan.origins.set(workloads::PlanField::kStack, Origin::flag("--stack"));
    s.plan.set_training_dtype(Dtype::kFp16);
    s.plan.origins.set(workloads::PlanField::kDtype, Origin::flag("--dtype"));
    const bool sp = workloads::runs_sequence_parallelism(stack);
    EXPECT_EQ(sp, stack == workloads::Stack::kMegatron);
    int tensor_parallel = 0;
    for (const ParallelPlan& p : enumerate_plans(load_inputs(s), s.plan, small_options(5))) {
      if (p.tp > 1) {
        ++tensor_parallel;
        EXPECT_EQ(p.sp, sp) << to_string(stack);
      }
    }
    EXPECT_GT(tensor_parallel, 0) << to_string(stack);
  }
}

// On a TPU slice the default stack is MaxText's, and the search offers JAX's remat policies
// (dots, save_dot_except_mlp, save_qkv_proj) beside none and full; Megatron's plans keep none,
// selective (with materialised scores) and full.
TEST(PlanSearch, XlaStacksSearchJaxRematPolicies) {
  const auto policies = [](const Scenario& s) {
    std::set<workloads::Recompute> seen;
    for (const ParallelPlan& p : enumerate_plans(load_inputs(s), s.plan, small_options(5))) {
      seen.insert(p.recompute);
    }
    return seen;
  };
  Scenario tpu = small_problem();
  tpu.cluster = "tpu-v5e";
  tpu.nodes.reset();
  tpu.shape = "2x2";
  using R = workloads::Recompute;
  EXPECT_EQ(policies(tpu),
            (std::set<R>{R::kNone, R::kFull, R::kDots, R::kQkvOutProj, R::kQkvProj}));
  EXPECT_EQ(policies(small_problem()), (std::set<R>{R::kNone, R::kFull}));  // cuDNN attention
  tpu.plan.stack = workloads::Stack::kPaxml;  // Praxis has no Q, K, V-only policy
  tpu.plan.origins.set(workloads::PlanField::kStack, Origin::flag("--stack"));
  EXPECT_EQ(policies(tpu), (std::set<R>{R::kNone, R::kFull, R::kDots, R::kQkvOutProj}));
}

TEST(PlanSearch, TriesFp8ParameterGathersExactlyWhereAPlanCanTakeThem) {
  const Scenario base = fp8_problem();
  const LoadedScenario loaded = load_inputs(base);
  int64_t with = 0;
  int64_t zero_without = 0;
  for (const ParallelPlan& p : enumerate_plans(loaded, base.plan, fp8_options(5))) {
    if (p.fp8_param_gather) {
      ++with;
      EXPECT_FALSE(workloads::fp8_param_gather_refusal(p).has_value());
    } else if (p.zero != workloads::ZeroStage::kNone) {
      ++zero_without;
    }
  }
  EXPECT_GT(with, 0);
  EXPECT_EQ(with, zero_without);  // every ZeRO plan, with and without them

  // Not in BF16 training, nor on a stack without FP8 weights.
  Scenario bf16 = base;
  bf16.plan.set_training_dtype(Dtype::kBf16);
  Scenario fsdp = base;
  fsdp.plan.stack = workloads::Stack::kFsdp;
  fsdp.plan.origins.set(workloads::PlanField::kStack, Origin::flag("--stack"));
  for (const Scenario& s : {bf16, fsdp}) {
    for (const ParallelPlan& p : enumerate_plans(load_inputs(s), s.plan, fp8_options(5))) {
      ASSERT_FALSE(p.fp8_param_gather) << to_string(s.plan.stack);
    }
  }
  // Held off, none; held on, only plans with them (validate_plan refuses the rest).
  for (const bool held : {false, true}) {
    SearchOptions o = fp8_options(5);
    o.fixed.fp8_param_gather = held;
    for (const ParallelPlan& p : enumerate_plans(loaded, base.plan, o)) {
      ASSERT_EQ(p.fp8_param_gather, held);
    }
  }
}

// The search's proven top 3 is what simulating every plan gives, and FP8 gathers win it: the same
// plan with 16-bit gathers moves twice the bytes over the same NICs. Without pipelines or CP, to
// keep the exhaustive side to a few hundred simulations.
TEST(PlanSearch, Fp8GathersRankAsExhaustiveSimulationRanksThem) {
  const Scenario base = fp8_problem();
  SearchOptions o = fp8_options(3);
  o.fixed.pp = 1;
  o.fixed.cp = 1;
  const SearchResult found = search_plans(base, o);
  ASSERT_TRUE(found.exact);
  ASSERT_EQ(found.top.size(), 3u);
  const Exhaustive e = simulate_all(base, enumerate_plans(load_inputs(base), base.plan, o));
  ASSERT_GE(e.fitting.size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_DOUBLE_EQ(found.top[i].report.step_time.seconds(), e.fitting[i].first) << i;
  }
  const ParallelPlan& best = found.top[0].plan;
  ASSERT_NE(best.zero, workloads::ZeroStage::kNone) << found.top[0].report.plan_description;
  EXPECT_TRUE(best.fp8_param_gather) << found.top[0].report.plan_description;
}

TEST(PlanSearch, MemoryPruningDropsOnlyPlansThatDoNotFit) {
  // The memory bound never exceeds the ledger's simulated peak, so every plan it prunes is out of
  // memory in the simulation too. (The closed form, workloads::estimate_step_memory, exceeds the
  // ledger on interleaved and full-recompute plans: it would not do.)
  const Scenario base = small_problem();
  const LoadedScenario loaded = load_inputs(base);
  const std::vector<ParallelPlan> all = enumerate_plans(loaded, base.plan, small_options(5));
  int64_t pruned = 0;
  int64_t checked = 0;
  for (size_t i = 0; i < all.size(); i += 3) {
    const ParallelPlan& p = all[i];
    Scenario s = base;
    s.plan = p;
    const StepReport r = simulate_step(s, loaded, StepOptions{});
    const Bytes bound = memory_lower_bound(loaded.model, p);
    if (r.simulated) {
      EXPECT_LE(bound, r.peak_memory) << r.plan_description;
      ++checked;
    }
    if (bound > loaded.cluster.chip.hbm_capacity) {
      ++pruned;
      EXPECT_TRUE(r.oom) << r.plan_description;
    }
  }
  EXPECT_GT(pruned, 5);
  EXPECT_GT(checked, 150);
}

TEST(PlanSearch, TheCapSaysTheResultMayNotBeExact) {
  const Scenario base = small_problem();
  SearchOptions o = small_options(5);
  o.max_simulations = 4;
  const SearchResult r = search_plans(base, o);
  EXPECT_FALSE(r.exact);
  EXPECT_TRUE(r.capped);
  EXPECT_GT(r.not_simulated, 0);
  // The cap counts the simulations of plans that fit, with the headroom left free.
  EXPECT_EQ(r.simulated - r.simulated_oom - r.simulated_headroom, 4);
}

TEST(PlanSearch, FixedFieldsAndConstraintsHold) {
  const Scenario base = small_problem();
  SearchOptions o = small_options(5);
  o.fixed.tp = 2;
  o.max_tp = 8;
  o.min_headroom = 0.25;
  const SearchResult r = search_plans(base, o);
  ASSERT_FALSE(r.top.empty());
  EXPECT_GT(r.pruned_headroom, 0);
  for (const RankedPlan& p : r.top) {
    EXPECT_EQ(p.plan.tp, 2);
    EXPECT_LE(p.report.peak_memory.as_double(),
              0.75 * p.report.memory_capacity.as_double());
  }
}

// Offloading held (--offload-layers): every ranked plan offloads that many layers per chunk,
// without recompute (Megatron-Core refuses the pair); plans whose chunks are not longer are
// invalid by that field; the bound, which drops the host copies, stays below each step; and the
// offloaded activations lower the peak against the same plan without offloading.
TEST(PlanSearch, HeldOffloadingRunsOnEveryRankedPlan) {
  const Scenario base = small_problem();
  SearchOptions o = small_options(3);
  o.fixed.offload_layers = 4;
  const SearchResult r = search_plans(base, o);
  ASSERT_FALSE(r.top.empty());
  // Megatron-Core: "no support for Pipeline parallelism with CPU offloading" (pp 8's chunks of 4
  // layers, too short to offload 4, were invalid before the rule).
  EXPECT_GT(r.refused.at("activation offloading with pipeline parallelism"), 0);
  for (const RankedPlan& p : r.top) {
    EXPECT_EQ(p.plan.pp, 1);
    EXPECT_EQ(p.plan.offload_layers, 4);
    EXPECT_EQ(p.plan.recompute, workloads::Recompute::kNone);
    EXPECT_LE(p.lower_bound, p.report.step_time);
  }
  Scenario without = base;
  without.plan = r.top.front().plan;
  without.plan.offload_layers = 0;
  const StepReport kept = simulate_step(without, load_inputs(without), StepOptions{});
  EXPECT_LT(r.top.front().report.peak_memory, kept.peak_memory);
}

}  // namespace
}  // namespace meshsim::studies
