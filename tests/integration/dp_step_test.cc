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

// With overlap off and one bucket, the gradients are all-reduced once, after the backward pass:
// the step the first version of meshsim planned, whose closed form is checked below.
Built build(const std::string& model, int64_t dp, int64_t gbs, int64_t seq,
            bool overlap = false) {
  const auto catalogue = topology::Catalogue::builtin();
  Built b{topology::load_cluster("dgx-h100", catalogue), {}};
  workloads::ParallelPlan p;
  p.dp = dp;
  p.mbs = 1;
  p.gbs = gbs;
  p.seq = seq;
  p.overlap.grad_reduce = overlap;
  p.grad_bucket = overlap ? MB(80) : GB(1000);
  b.plan = workloads::plan_step(workloads::load_model(model), p, workloads::SimulationMode::kFull);
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
  collectives::RingAlphaBetaModel ring([link](RankId, RankId) { return link; });
  IsolatedCommModel comm = ring.comm_model();
  Simulation sim(compute, comm);
  const ProgramIndex prog = sim.add_program(std::move(b.plan.programs.front()));
  std::vector<RankId> members;
  for (uint32_t r = 0; r < b.plan.ranks.size(); ++r) {
    members.emplace_back(r);
  }
  // The plan's DP group is slot 1 (see stage_program.h); the other slots are single ranks.
  const GroupId dp = sim.add_group(members);
  for (size_t r = 0; r < b.plan.ranks.size(); ++r) {
    const GroupId self = sim.add_group({RankId(static_cast<uint32_t>(r))});
    sim.add_rank(prog, {self, dp, self, self}, {RankId(static_cast<uint32_t>(r))});
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

// Bucketed reduction during the last backward hides part of the all-reduce: the step shrinks, but
// never below the kernels alone.
TEST(DataParallelStep, OverlappedBucketsHideCommunication) {
  Built serial = build("llama3.2-1b", 8, 64, 4096, false);
  Built overlapped = build("llama3.2-1b", 8, 64, 4096, true);
  const topology::RooflineComputeModel compute(serial.cluster.chip);
  Duration kernels;
  const Program& p = serial.plan.programs.front();
  for (uint32_t i = 0; i < p.size(); ++i) {
    if (const auto* c = std::get_if<ComputeWork>(&p.op(OpId(i)).work)) {
      kernels += compute.compute_time(RankId(0), *c);
    }
  }
  const Simulated a = simulate(serial);
  const Simulated b = simulate(overlapped);
  EXPECT_LT(b.run.end, a.run.end);
  EXPECT_GE(b.run.end.since_start(), kernels);
  EXPECT_LT(b.breakdown[0].exposed_comm, a.breakdown[0].exposed_comm);
}

TEST(DataParallelStep, MemoryLedgerPeakMatchesClosedForm) {
  Built b = build("llama3.2-1b", 8, 16, 4096);
  const Bytes estimate = b.plan.memory_estimate.front().total();
  const Simulated s = simulate(b);
  // One microbatch in flight at a time: the ledger's peak is model state plus one microbatch of
  // saved activations, which is what the closed form counts.
  EXPECT_EQ(s.run.ranks[0].memory.peak, estimate);
  // At the peak, the activations held are exactly one microbatch's.
  EXPECT_EQ(s.run.ranks[0].memory.at_peak[static_cast<size_t>(MemoryCategory::kActivations)],
            b.plan.memory_estimate.front().activations);
}

}  // namespace
}  // namespace meshsim
