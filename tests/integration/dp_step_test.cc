// A data-parallel training step, simulated, against its closed form: with one compute stream
// running the kernels back to back and one gradient all-reduce after the last backward kernel,
// the step is the sum of the kernel times plus the ring all-reduce time plus the optimizer.
#include <gtest/gtest.h>

#include "meshsim/collectives/ring_model.h"
#include "meshsim/sim/analysis.h"
#include "meshsim/sim/simulation.h"
#include "meshsim/topology/cluster.h"
#include "meshsim/topology/compute_model.h"
#include "meshsim/workloads/step.h"

namespace meshsim {
namespace {

struct Built {
  topology::ClusterSpec cluster;
  workloads::StepPlan plan;
};

Built build(const std::string& model, int64_t dp, int64_t gbs, int64_t seq) {
  const auto catalogue = topology::Catalogue::builtin();
  Built b{topology::load_cluster("dgx-h100", catalogue), {}};
  workloads::StepConfig c;
  c.data_parallel = dp;
  c.micro_batch = 1;
  c.global_batch = gbs;
  c.seq_len = seq;
  b.plan = workloads::plan_data_parallel_step(workloads::load_model(model), c);
  return b;
}

collectives::LinkParams nvlink(const topology::ClusterSpec& c) {
  return {c.intra_node_bandwidth(), c.intra_node_latency()};
}

struct Simulated {
  RunResult run;
  std::vector<RankBreakdown> breakdown;
};

Simulated simulate(Built& b) {
  topology::RooflineComputeModel compute(b.cluster.chip);
  const auto link = nvlink(b.cluster);
  collectives::RingAlphaBetaModel comm([link](RankId, RankId) { return link; });
  Simulation sim(compute, comm);
  const ProgramIndex prog = sim.add_program(std::move(b.plan.programs.front()));
  std::vector<RankId> members;
  for (const uint32_t r : b.plan.groups.front()) {
    members.emplace_back(r);
  }
  const GroupId dp = sim.add_group(members);
  for (size_t r = 0; r < b.plan.ranks.size(); ++r) {
    sim.add_rank(prog, {dp}, {});
  }
  Timeline tl;
  sim.record_into(tl);
  Simulated s{sim.run(), {}};
  s.breakdown = analyze(tl, sim, s.run.end);
  return s;
}

TEST(DataParallelStep, EqualsSumOfKernelsPlusRingAllReduce) {
  Built b = build("llama3.2-1b", 8, 64, 4096);
  const topology::RooflineComputeModel compute(b.cluster.chip);
  // Closed form, computed from the plan's ops with the same cost functions.
  const Program& p = b.plan.programs.front();
  Duration kernels;
  Duration allreduce;
  Bytes grad_bytes;
  for (uint32_t i = 0; i < p.size(); ++i) {
    const Op& op = p.op(OpId(i));
    if (const auto* c = std::get_if<ComputeWork>(&op.work)) {
      kernels += compute.compute_time(RankId(0), *c);
    } else {
      const auto& w = std::get<CollectiveWork>(op.work);
      grad_bytes = w.bytes;
      allreduce = collectives::ring_collective_time(CollectiveKind::kAllReduce, w.bytes, 8,
                                                    nvlink(b.cluster));
    }
  }
  // The all-reduce moves 2(p-1)/p of the bf16 gradients at 450 GB/s per direction.
  EXPECT_GT(grad_bytes, GB(2.4));
  const double expected_s = (kernels + allreduce).seconds();
  const Simulated s = simulate(b);
  EXPECT_NEAR(s.run.end.seconds(), expected_s, 1e-3 * expected_s);
  // Nothing overlaps the all-reduce (the optimizer waits for it), so all of it is exposed.
  EXPECT_NEAR(s.breakdown[0].exposed_comm.seconds(), allreduce.seconds(), 1e-9);
  // Every rank ends at the same time: the ranks are symmetric.
  for (const RankResult& r : s.run.ranks) {
    EXPECT_EQ(r.end, s.run.end);
  }
}

TEST(DataParallelStep, MemoryLedgerPeakMatchesClosedForm) {
  Built b = build("llama3.2-1b", 8, 16, 4096);
  const Bytes estimate = b.plan.memory_estimate.total();
  const Simulated s = simulate(b);
  // One microbatch in flight at a time: the ledger's peak is model state plus one microbatch of
  // saved activations, which is what the closed form counts.
  EXPECT_EQ(s.run.ranks[0].memory.peak, estimate);
  // At the peak, the activations held are exactly one microbatch's.
  EXPECT_EQ(s.run.ranks[0].memory.at_peak[static_cast<size_t>(MemoryCategory::kActivations)],
            b.plan.memory_estimate.activations);
}

}  // namespace
}  // namespace meshsim
