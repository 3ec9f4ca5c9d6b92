// HSDP and multi-slice in the plan search (issue 13): the search enumerates HSDP with the shard
// group inside the scale-up domain (a node; a TPU slice), the flags fix it (--fsdp, --dcn-dp), and
// the lower bound counts HSDP's data-parallel traffic (the shard group's reduce-scatters and
// gathers, the replicas' all-reduce across nodes) while staying below the simulated step.
#include <gtest/gtest.h>

#include <algorithm>

#include "meshsim/collectives/comm_model.h"
#include "meshsim/studies/plan_search.h"
#include "meshsim/scenario/step.h"
#include "meshsim/studies/step_bound.h"
#include "meshsim/topology/network.h"

namespace meshsim::studies {

using namespace meshsim::scenario;  // the step these studies run
namespace {

using workloads::ParallelPlan;
using workloads::ZeroStage;

Scenario gpu_problem(int64_t nodes, int64_t gbs, int64_t seq = 4096) {
  Scenario s;
  s.model = "llama3-8b";
  s.cluster = "dgx-h100";
  s.nodes = nodes;
  s.plan.seq = seq;
  s.plan.gbs = gbs;
  return s;
}

std::vector<ParallelPlan> hsdp_plans(const std::vector<ParallelPlan>& plans) {
  std::vector<ParallelPlan> out;
  std::copy_if(plans.begin(), plans.end(), std::back_inserter(out),
               [](const ParallelPlan& p) { return p.fsdp > 0; });
  return out;
}

TEST(HsdpSearch, ShardGroupsFillANodeAndReplicateAcross) {
  const Scenario l_base = gpu_problem(4, 64);
  const LoadedScenario l = load_inputs(l_base);
  SearchOptions o;
  o.fixed.overlap_tp = false;
  const std::vector<ParallelPlan> all = enumerate_plans(l, l_base.plan, o);
  const std::vector<ParallelPlan> hsdp = hsdp_plans(all);
  ASSERT_FALSE(hsdp.empty());
  for (const ParallelPlan& p : hsdp) {
    EXPECT_NE(p.zero, ZeroStage::kNone);
    EXPECT_EQ(p.ep, 1);
    EXPECT_EQ(p.dp % p.fsdp, 0);
    EXPECT_LT(p.fsdp, p.dp);            // else it is ZeRO over all of DP
    EXPECT_EQ(8 % (p.tp * p.cp * p.fsdp), 0);  // the shard group inside one DGX node
    EXPECT_EQ(p.tp * p.cp * p.fsdp, 8);        // the largest such group
  }
  // Every HSDP plan has its twin with ZeRO over all of DP (the search keeps both).
  const ParallelPlan& h = hsdp.front();
  EXPECT_TRUE(std::any_of(all.begin(), all.end(), [&](const ParallelPlan& p) {
    return p.fsdp == 0 && p.tp == h.tp && p.cp == h.cp && p.pp == h.pp && p.zero == h.zero &&
           p.mbs == h.mbs && p.recompute == h.recompute && p.schedule == h.schedule;
  }));
  // One node: a group of the whole node is all of DP, so no HSDP plan.
  const LoadedScenario one = load_inputs(gpu_problem(1, 16));
  EXPECT_TRUE(hsdp_plans(enumerate_plans(one, gpu_problem(1, 16).plan, o)).empty());
}

TEST(HsdpSearch, FlagsFixTheShardGroup) {
  const Scenario l_base = gpu_problem(4, 64);
  const LoadedScenario l = load_inputs(l_base);
  SearchOptions o;
  o.fixed.overlap_tp = false;
  o.fixed.fsdp = 4;
  const std::vector<ParallelPlan> fixed = enumerate_plans(l, l_base.plan, o);
  ASSERT_FALSE(fixed.empty());
  for (const ParallelPlan& p : fixed) {
    EXPECT_EQ(p.fsdp, 4);
    EXPECT_NE(p.zero, ZeroStage::kNone);
  }
  o.fixed.fsdp = 0;  // no HSDP
  EXPECT_TRUE(hsdp_plans(enumerate_plans(l, l_base.plan, o)).empty());
  o.fixed.fsdp.reset();
  o.fixed.dcn_dp = 4;  // 4 replicas: dp a multiple of 4, ZeRO plans shard over dp / 4
  const std::vector<ParallelPlan> dcn = enumerate_plans(l, l_base.plan, o);
  ASSERT_FALSE(dcn.empty());
  for (const ParallelPlan& p : dcn) {
    EXPECT_EQ(p.dp % 4, 0);
    EXPECT_EQ(p.fsdp, p.zero == ZeroStage::kNone ? 0 : p.dp / 4);
  }
}

// Two TPU v5p slices of 4x4x4 joined by DCN: HSDP's shard group is the slice (MaxText ici_fsdp x
// dcn_data_parallelism 2).
TEST(HsdpSearch, MultiSliceShardsInsideEachSlice) {
  Scenario s;
  s.model = "llama3-8b";
  s.cluster = "tpu-v5p";
  s.shape = "4x4x4";
  s.slices = 2;
  s.plan.seq = 4096;
  s.plan.gbs = 128;
  const LoadedScenario l = load_inputs(s);
  ASSERT_EQ(l.cluster.device_count(), 128);
  SearchOptions o;
  o.fixed.tp = 1;
  o.fixed.pp = 1;
  o.fixed.cp = 1;
  o.fixed.zero = ZeroStage::kParameters;
  const std::vector<ParallelPlan> plans = enumerate_plans(l, s.plan, o);
  const std::vector<ParallelPlan> hsdp = hsdp_plans(plans);
  ASSERT_FALSE(hsdp.empty());
  for (const ParallelPlan& p : hsdp) {
    EXPECT_EQ(p.fsdp, 64);
    EXPECT_EQ(p.zero_replicas(), 2);
  }
}

// The bound of HSDP plans across nodes: never above the simulated step, and set by the
// data-parallel streams where they are the busiest (ZeRO-3 with short sequences, one microbatch per
// rank: each layer's replica all-reduce crosses the NICs): there it is above the bound without
// them, and within a factor of two of the step.
TEST(HsdpSearch, BoundCountsHsdpTrafficAndStaysBelowTheStep) {
  const Scenario base = gpu_problem(4, 32, 1024);
  const LoadedScenario l = load_inputs(base);
  const topology::Network net = topology::Network::build(l.cluster);
  collectives::NetworkCommModel comm(net, topology::Placement::in_order(l.cluster.device_count()),
                                     collectives::NetworkBackend::kAnalytical);
  StepLowerBound bound(l.model, l.cluster, &comm);
  StepLowerBound compute_only(l.model, l.cluster);
  SearchOptions o;
  o.fixed.overlap_tp = false;
  o.fixed.recompute = workloads::Recompute::kNone;
  o.fixed.pp = 1;
  const std::vector<ParallelPlan> hsdp = hsdp_plans(enumerate_plans(l, base.plan, o));
  ASSERT_GE(hsdp.size(), 4U);
  size_t checked = 0;
  double tightest = 0.0;
  bool dp_binds = false;
  for (const ParallelPlan& p : hsdp) {
    Scenario s = base;
    s.plan = p;
    const StepReport r = simulate_step(s, l, StepOptions{});
    if (!r.simulated) {
      continue;
    }
    const Duration lb = bound(p);
    EXPECT_LE(lb, r.step_time) << r.plan_description << ": bound " << lb.seconds()
                               << " s, step " << r.step_time.seconds() << " s";
    if (p.zero == ZeroStage::kParameters) {
      dp_binds = dp_binds || lb > compute_only(p);
      tightest = std::max(tightest, lb / r.step_time);
    }
    ++checked;
  }
  EXPECT_GE(checked, 4U);
  EXPECT_TRUE(dp_binds);
  EXPECT_GT(tightest, 0.5);
}

}  // namespace
}  // namespace meshsim::studies
