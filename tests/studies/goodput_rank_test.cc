// Goodput-aware plan ranking (issue 16): who writes a plan's checkpoint (replicated state by one
// DP replica's nodes, sharded state by all), and a plan with sharded state outranking a slightly
// faster-stepping plan whose replicated checkpoint funnels through few nodes on slow storage,
// from Daly's closed form.
#include <gtest/gtest.h>

#include <cmath>

#include "meshsim/studies/goodput.h"

namespace meshsim::studies {
namespace {

constexpr double kHour = 3600.0;
constexpr int64_t kParams = 70'000'000'000;  // a 70 B model: 14 bytes of state per parameter

workloads::ParallelPlan plan(int64_t tp, int64_t pp, int64_t dp, workloads::ZeroStage zero) {
  workloads::ParallelPlan p;
  p.tp = tp;
  p.pp = pp;
  p.dp = dp;
  p.zero = zero;
  return p;
}

// One interruption per job every 5 hours (a pure exponential model).
FailureTable every_five_hours() {
  nlohmann::json doc = {
      {"source", "test"},
      {"observed", {{"days", 1}, {"gpus", 1}, {"nodes", 1}, {"switches", 1}, {"source", "test"}}},
      {"categories",
       {{{"name", "any"}, {"component", "job"}, {"count", 24.0 / 5.0}, {"source", "test"}}}}};
  return FailureTable::parse(doc, "test.json");
}

GoodputModel model(const CheckpointSetup& setup, double work_s) {
  const FailureTable t = every_five_hours();
  GoodputModel m;
  m.work_s = work_s;
  m.costs = checkpoint_costs(setup);
  m.categories = t.categories;
  m.rates = failure_rates(t, {512, 64, 1});
  return m;
}

TEST(CheckpointWriters, ReplicatedStateByOneReplicaShardedByAll) {
  // 512 GPUs on 64 nodes of 8. TP 8, PP 4, DP 16 without ZeRO: all 14 bytes per parameter are
  // replicated over DP and written by the 4 nodes of one replica.
  const CheckpointWriters z0 =
      checkpoint_writers(kParams, plan(8, 4, 16, workloads::ZeroStage::kNone), 8, 64);
  EXPECT_EQ(z0.replicated.count(), kParams * 14);
  EXPECT_EQ(z0.sharded.count(), 0);
  EXPECT_EQ(z0.replica_nodes, 4);
  EXPECT_EQ(z0.busiest_node().count(), kParams * 14 / 4);
  // ZeRO-1: the 12 bytes of optimizer state are sharded over all 64 nodes; the weights are not.
  const CheckpointWriters z1 =
      checkpoint_writers(kParams, plan(8, 4, 16, workloads::ZeroStage::kOptimizerStates), 8, 64);
  EXPECT_EQ(z1.replicated.count(), kParams * 2);
  EXPECT_EQ(z1.busiest_node().count(), kParams * 2 / 4 + kParams * 12 / 64);
  // ZeRO-3 (FSDP): everything sharded. TP 2 x PP 1 sits on one node.
  const CheckpointWriters z3 =
      checkpoint_writers(kParams, plan(2, 1, 256, workloads::ZeroStage::kParameters), 8, 64);
  EXPECT_EQ(z3.replicated.count(), 0);
  EXPECT_EQ(z3.replica_nodes, 1);
  EXPECT_EQ(z3.busiest_node().count(), kParams * 14 / 64);
}

// Plan A (TP 8, PP 4, DP 16, no ZeRO) steps 2 % faster than plan B (ZeRO-3), but on storage
// that gives each node 1 GB/s its 980 GB checkpoint goes through 4 nodes: 245 s per checkpoint,
// against 15.3 s for B's. With M = 5 h and a 10-minute relaunch, Daly's goodput at each optimum
// puts B ahead; with only the aggregate bandwidth (no per-node limit) A wins, by its step.
TEST(GoodputRanking, ShardedCheckpointsOutrankASlightlyFasterStepOnSlowStorage) {
  CheckpointSetup base;
  base.state = checkpoint_bytes(kParams, 2, 12);
  base.storage_bandwidth = GBps(1000);
  base.relaunch = Seconds(600);
  const double work_a = 1000.0 * kHour;
  const double work_b = work_a * 1.02;
  CheckpointSetup a = base;
  CheckpointSetup b = base;
  a.node_bandwidth = b.node_bandwidth = GBps(1);
  a.writers = checkpoint_writers(kParams, plan(8, 4, 16, workloads::ZeroStage::kNone), 8, 64);
  b.writers =
      checkpoint_writers(kParams, plan(2, 1, 256, workloads::ZeroStage::kParameters), 8, 64);
  const PlanGoodput ga = plan_goodput(model(a, work_a));
  const PlanGoodput gb = plan_goodput(model(b, work_b));
  // The write times: the busiest node's bytes over its bandwidth (above the aggregate's 0.98 s).
  EXPECT_NEAR(ga.costs.write.seconds(), 14.0 * 70.0 / 4.0, 1e-6);
  EXPECT_NEAR(gb.costs.write.seconds(), 14.0 * 70.0 / 64.0, 1e-6);
  EXPECT_NEAR(ga.costs.restart.seconds(), 600.0 + 245.0, 1e-6);
  // Daly's closed form at each plan's interval, computed here.
  const double m = 5.0 * kHour;
  const auto daly = [m](double tau, double delta, double restart) {
    return tau / (m * std::exp(restart / m) * (std::exp((tau + delta) / m) - 1.0));
  };
  EXPECT_NEAR(ga.goodput, daly(ga.interval_s, 245.0, 845.0), 1e-12);
  EXPECT_NEAR(gb.goodput, daly(gb.interval_s, 15.3125, 615.3125), 1e-12);
  EXPECT_NEAR(ga.days, work_a / 86400.0 / ga.goodput, 1e-9);
  EXPECT_LT(gb.days, ga.days);  // B wins, despite its slower step
  // Without the per-node limit both write at the aggregate rate and the faster step wins.
  a.node_bandwidth.reset();
  b.node_bandwidth.reset();
  EXPECT_LT(plan_goodput(model(a, work_a)).days, plan_goodput(model(b, work_b)).days);
}

}  // namespace
}  // namespace meshsim::studies
