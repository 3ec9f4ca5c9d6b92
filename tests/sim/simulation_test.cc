#include "meshsim/sim/simulation.h"

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <map>

#include "meshsim/sim/analysis.h"
#include "meshsim/sim/error.h"
#include "meshsim/sim/event_queue.h"
#include "meshsim/sim/heterogeneity.h"
#include "meshsim/sim/rng.h"
#include "test_models.h"
#include "thrown.h"

namespace meshsim {
namespace {

using testing::collective_op;
using testing::compute_op;
using testing::peer_op;
using testing::PsCommModel;
using testing::PsComputeModel;
using testing::PsSimulation;

TEST(Program, RejectsBackwardDependencies) {
  Program p;
  const OpId a = p.add(compute_op("a", 1));
  const OpId b = p.add(compute_op("b", 1));
  p.add_dependency(a, b);
  EXPECT_THROW(p.add_dependency(b, a), InternalError);
  EXPECT_EQ(p.topological_order(), (std::vector<OpId>{a, b}));
}

// One rank, a chain on the compute stream: ops run back to back.
TEST(Simulation, ChainRunsBackToBack) {
  PsSimulation sim;
  Program p;
  const OpId a = p.add(compute_op("a", 10));
  const OpId b = p.add(compute_op("b", 20));
  p.add_dependency(a, b);
  const auto prog = sim.add_program(std::move(p));
  sim.add_rank(prog, {}, {});
  Timeline tl;
  sim.record_into(tl);
  const RunResult r = sim.run();
  EXPECT_EQ(r.end.ps(), 30);
  ASSERT_EQ(tl.ops.size(), 2u);
  EXPECT_EQ(tl.ops[1].start.ps(), 10);
}

// Ops on one stream serialize in program order even without a dependency.
TEST(Simulation, StreamIsInOrder) {
  PsSimulation sim;
  Program p;
  p.add(compute_op("a", 10));
  p.add(compute_op("b", 5));
  sim.add_rank(sim.add_program(std::move(p)), {}, {});
  Timeline tl;
  sim.record_into(tl);
  EXPECT_EQ(sim.run().end.ps(), 15);
  EXPECT_EQ(tl.ops[0].op, OpId(0));
  EXPECT_EQ(tl.ops[1].start.ps(), 10);
}

// Runs `p` on two ranks of one group over the picosecond models.
std::pair<RankBreakdown, SimTime> run_on_two_ranks(Program p) {
  PsSimulation sim;
  return testing::run_on_two_ranks(sim, std::move(p));
}

// A communication op on its own stream overlaps independent compute.
TEST(Simulation, CommunicationOverlapsComputeAcrossStreams) {
  Program p;
  const OpId g = p.add(compute_op("grad", 10));
  const OpId ar = p.add(collective_op("allreduce", 15));  // 15 B * 2 ranks = 30 ps
  p.add(compute_op("more", 40));                            // independent of the all-reduce
  p.add_dependency(g, ar);
  const auto [b, end] = run_on_two_ranks(std::move(p));
  // compute: 0-10 grad, 10-50 more; all-reduce 10-40, entirely hidden.
  EXPECT_EQ(end.ps(), 50);
  EXPECT_EQ(b.compute.ps(), 50);
  EXPECT_EQ(b.comm.ps(), 30);
  EXPECT_EQ(b.exposed_comm.ps(), 0);
}

// A compute model that records the context of every op it costs, by op flops.
class ContextRecorder : public PsComputeModel {
 public:
  Duration compute_time_in(RankId rank, const ComputeWork& w,
                           const ComputeContext& c) const override {
    seen.emplace_back(static_cast<int64_t>(w.flops.count()), c.collectives_in_flight);
    return compute_time(rank, w);
  }
  mutable std::vector<std::pair<int64_t, int32_t>> seen;
};

// Runs `build(rank)`'s program on two ranks of one group: what the compute model was told of the
// collectives in flight, by op flops (kernels started with nothing in flight take the program's
// compute_time, asked once per op, and are not asked again with a context).
std::map<int64_t, int32_t> contexts_on_two_ranks(const std::function<Program(int)>& build) {
  ContextRecorder cm;
  PsCommModel nm;
  Simulation sim(cm, nm);
  const GroupId grp = sim.add_group({RankId(0), RankId(1)});
  for (int rank = 0; rank < 2; ++rank) {
    sim.add_rank(sim.add_program(build(rank)), {grp}, {});
  }
  sim.run();
  return {cm.seen.begin(), cm.seen.end()};
}

// The engine tells the compute model how many collectives its rank has in flight when a kernel
// starts (issue 11: interference): one launched at the same instant counts, one waiting for a
// late peer counts (NCCL's kernel is already spinning on the SMs), a finished one does not.
TEST(Simulation, ComputeSeesTheCollectivesInFlight) {
  const auto ctx = contexts_on_two_ranks([](int rank) {
    Program p;
    const OpId first = p.add(compute_op("first", rank == 0 ? 10 : 30));
    const OpId ar = p.add(collective_op("ar", 10));  // 10 B * 2 ranks = 20 ps once both arrive
    const OpId beside = p.add(compute_op("beside", 5 + rank));  // starts with the all-reduce
    const OpId after = p.add(compute_op("after", 100 + rank));
    p.add_dependency(first, ar);
    p.add_dependency(first, beside);
    p.add_dependency(ar, after);
    return p;
  });
  EXPECT_EQ(ctx.count(10), 0u);   // rank 0's first kernel: nothing in flight yet
  EXPECT_EQ(ctx.at(5), 1);        // rank 0 arrived at 10 and waits for rank 1 (until 30)
  EXPECT_EQ(ctx.at(6), 1);        // rank 1: the all-reduce starts with it, at 30
  EXPECT_EQ(ctx.count(100), 0u);  // after the all-reduce
  EXPECT_EQ(ctx.count(101), 0u);
}

// A transfer on the copy engines (CollectiveWork::holds_sms false: Transformer Engine's
// ring-exchange gathers) holds no SMs: a kernel beside it sees nothing in flight, and one beside
// both it and an NCCL collective sees only the NCCL one.
TEST(Simulation, ComputeDoesNotSeeTransfersOnTheCopyEngines) {
  const auto ctx = contexts_on_two_ranks([](int) {
    Program p;
    const OpId first = p.add(compute_op("first", 10));
    Op ce = collective_op("ce", 20);  // 10-50
    std::get<CollectiveWork>(ce.work).holds_sms = false;
    const OpId exchange = p.add(std::move(ce));
    const OpId beside = p.add(compute_op("beside", 5));      // 10-15: only the exchange
    const OpId nccl = p.add(collective_op("ar", 10, 0, 2));  // 15-35, on its own stream
    const OpId both = p.add(compute_op("both", 7));          // 15-22: the exchange and the ar
    p.add_dependency(first, exchange);
    p.add_dependency(first, beside);
    p.add_dependency(beside, nccl);
    p.add_dependency(beside, both);
    return p;
  });
  EXPECT_EQ(ctx.count(5), 0u);  // nothing that holds SMs in flight: the program's time
  EXPECT_EQ(ctx.at(7), 1);      // the all-reduce only
}

// grad (0-10), then a collective labelled `category` (10-40) and one on its own stream (10-20,
// labelled `second` if given), and optionally a compute op overlapping them (10-22).
RankBreakdown labelled_step(OpCategory category, std::optional<OpCategory> second,
                            bool overlap) {
  Program p;
  const OpId g = p.add(compute_op("grad", 10));
  Op labelled = collective_op("labelled", 15);
  labelled.labels.category = category;
  Op other = collective_op("other", 5, 0, 2);
  other.labels.category = second;
  for (Op* op : {&labelled, &other}) {
    p.add_dependency(g, p.add(std::move(*op)));
  }
  if (overlap) {
    p.add_dependency(g, p.add(compute_op("overlapping", 12)));
  }
  return run_on_two_ranks(std::move(p)).first;
}

// Exposed communication by the caller's categories: a labelled collective counts in its category
// only; an unlabelled one only in the total; categories never used read as zero.
TEST(Analysis, ExposedCommunicationByCategory) {
  const RankBreakdown breakdown = labelled_step(OpCategory(3), std::nullopt, false);
  EXPECT_EQ(breakdown.exposed_comm.ps(), 30);
  EXPECT_EQ(breakdown.exposed_in(OpCategory(3)).ps(), 30);
  EXPECT_EQ(breakdown.exposed_in(OpCategory(0)).ps(), 0);
  EXPECT_EQ(breakdown.exposed_in(OpCategory(7)).ps(), 0);
}

// Issue 16: categories past the online sweep's inline ones (8) are kept too, and a compute op
// overlapping them hides them only while it runs (the online breakdown is checked against the
// offline one in run_on_two_ranks).
TEST(Analysis, ManyCategoriesOnlineAndOffline) {
  const RankBreakdown breakdown = labelled_step(OpCategory(11), OpCategory(2), true);
  EXPECT_EQ(breakdown.exposed_comm.ps(), 18);
  EXPECT_EQ(breakdown.exposed_in(OpCategory(11)).ps(), 18);
  EXPECT_EQ(breakdown.exposed_in(OpCategory(2)).ps(), 0);
  EXPECT_EQ(breakdown.exposed_by_category.size(), 12u);
}

// A collective starts only when the last member arrives; everyone ends together.
TEST(Simulation, CollectiveRendezvous) {
  PsSimulation sim;
  const GroupId grp = sim.add_group({RankId(0), RankId(1), RankId(2)});
  for (int i = 0; i < 3; ++i) {
    Program p;
    const OpId c = p.add(compute_op("work", 10.0 * (i + 1)));  // ranks arrive at 10, 20, 30
    const OpId ar = p.add(collective_op("ar", 2));             // 2 B * 3 = 6 ps
    p.add_dependency(c, ar);
    sim.add_rank(sim.add_program(std::move(p)), {grp}, {});
  }
  Timeline tl;
  sim.record_into(tl);
  const RunResult r = sim.run();
  EXPECT_EQ(r.end.ps(), 36);
  int collectives = 0;
  for (const OpRecord& rec : tl.ops) {
    if (rec.op == OpId(1)) {
      ++collectives;
      EXPECT_EQ(rec.start.ps(), 30);
      EXPECT_EQ(rec.end.ps(), 36);
      EXPECT_EQ(rec.ready.ps(), 10 * (rec.rank.value() + 1));
    }
  }
  EXPECT_EQ(collectives, 3);
  EXPECT_EQ(sim.nm.collective_calls, 1);  // one question per collective, not per rank
}

TEST(Simulation, SendMatchesReceive) {
  PsSimulation sim;
  Program sender;
  const OpId c = sender.add(compute_op("fwd", 100));
  const OpId s = sender.add(peer_op("send", true, 7));
  sender.add_dependency(c, s);
  Program receiver;
  const OpId rcv = receiver.add(peer_op("recv", false, 7));
  const OpId use = receiver.add(compute_op("fwd", 1));
  receiver.add_dependency(rcv, use);
  sim.add_rank(sim.add_program(std::move(sender)), {}, {RankId(1)});
  sim.add_rank(sim.add_program(std::move(receiver)), {}, {RankId(0)});
  const RunResult r = sim.run();
  EXPECT_EQ(r.ranks[0].end.ps(), 107);
  EXPECT_EQ(r.ranks[1].end.ps(), 108);
}

TEST(Simulation, MissingMemberIsReportedNotHung) {
  PsSimulation sim;
  const GroupId grp = sim.add_group({RankId(0), RankId(1)});
  Program waits;
  waits.add(collective_op("ar", 4));
  Program skips;
  skips.add(compute_op("c", 1));
  sim.add_rank(sim.add_program(std::move(waits)), {grp}, {});
  sim.add_rank(sim.add_program(std::move(skips)), {grp}, {});
  EXPECT_THAT(testing::what_thrown<InternalError>([&] { sim.run(); },
                                                  "expected a deadlock report, and the run ended"),
              ::testing::HasSubstr("rank 0 stream 1 waits in 'ar'"));
}

TEST(Simulation, MemoryLedgerTracksPeakAndBreakdown) {
  PsSimulation sim;
  Program p;
  p.set_initial_memory(MemoryCategory::kWeights, Bytes::of(1000));
  Op fwd = compute_op("fwd", 10);
  fwd.memory.push_back({MemoryCategory::kActivations, Bytes::of(300), false});
  Op bwd = compute_op("bwd", 20);
  bwd.memory.push_back({MemoryCategory::kGradients, Bytes::of(100), false});
  bwd.memory.push_back({MemoryCategory::kActivations, Bytes::of(-300), true});
  const OpId f = p.add(std::move(fwd));
  const OpId b = p.add(std::move(bwd));
  p.add_dependency(f, b);
  sim.add_rank(sim.add_program(std::move(p)), {}, {});
  Timeline tl;
  sim.record_into(tl);
  const RunResult r = sim.run();
  const MemoryPeak& peak = r.ranks[0].memory;
  EXPECT_EQ(peak.peak.count(), 1400);
  EXPECT_EQ(peak.when.ps(), 10);
  EXPECT_EQ(peak.at_peak[static_cast<size_t>(MemoryCategory::kActivations)].count(), 300);
  ASSERT_FALSE(tl.memory.empty());
  EXPECT_EQ(tl.memory.back().total_after.count(), 1100);
  EXPECT_EQ(tl.memory.back().time.ps(), 30);
}

// Builds a small DP-like scenario; used twice to check determinism.
Timeline run_scenario(int ranks) {
  PsSimulation sim;
  std::vector<RankId> members;
  for (int i = 0; i < ranks; ++i) {
    members.emplace_back(static_cast<uint32_t>(i));
  }
  const GroupId g = sim.add_group(members);
  Program p;
  OpId prev = p.add(compute_op("f0", 3));
  for (int l = 1; l < 20; ++l) {
    const OpId c = p.add(compute_op(fmt::format("f{}", l), 3 + l % 4));
    p.add_dependency(prev, c);
    if (l % 5 == 0) {
      const OpId ar = p.add(collective_op(fmt::format("ar{}", l), l));
      p.add_dependency(c, ar);
    }
    prev = c;
  }
  const auto prog = sim.add_program(std::move(p));
  for (int i = 0; i < ranks; ++i) {
    sim.add_rank(prog, {g}, {});
  }
  Timeline tl;
  sim.record_into(tl);
  sim.run();
  return tl;
}

TEST(Simulation, DeterministicTimeline) {
  const Timeline a = run_scenario(8);
  const Timeline b = run_scenario(8);
  ASSERT_EQ(a.ops.size(), b.ops.size());
  for (size_t i = 0; i < a.ops.size(); ++i) {
    EXPECT_EQ(a.ops[i].rank, b.ops[i].rank);
    EXPECT_EQ(a.ops[i].op, b.ops[i].op);
    EXPECT_EQ(a.ops[i].start, b.ops[i].start);
    EXPECT_EQ(a.ops[i].end, b.ops[i].end);
  }
}

TEST(Analysis, UnionAndDifference) {
  auto t = [](int64_t a, int64_t b) { return std::make_pair(SimTime::from_ps(a), SimTime::from_ps(b)); };
  EXPECT_EQ(union_length({t(0, 10), t(5, 15), t(20, 30)}).ps(), 25);
  EXPECT_EQ(difference_length({t(0, 10), t(20, 30)}, {t(5, 25)}).ps(), 10);
  EXPECT_EQ(difference_length({t(0, 10)}, {}).ps(), 10);
}

}  // namespace
}  // namespace meshsim

namespace meshsim {
namespace {

// Symmetric mode: one representative rank whose collective is costed over the full group gives
// the same step as simulating every rank of the group.
TEST(Simulation, RepresentativeMatchesFullSimulation) {
  auto program = [] {
    Program p;
    const OpId c = p.add(testing::compute_op("work", 10));
    const OpId ar = p.add(testing::collective_op("ar", 5));  // 5 B * 4 ranks = 20 ps
    const OpId d = p.add(testing::compute_op("after", 7));
    p.add_dependency(c, ar);
    p.add_dependency(ar, d);
    return p;
  };
  testing::PsComputeModel cm;
  testing::PsCommModel full_comm;
  Simulation full(cm, full_comm);
  const auto fp = full.add_program(program());
  const GroupId g = full.add_group({RankId(0), RankId(1), RankId(2), RankId(3)});
  for (int i = 0; i < 4; ++i) {
    full.add_rank(fp, {g}, {});
  }
  testing::PsCommModel rep_comm;
  Simulation rep(cm, rep_comm);
  const auto rp = rep.add_program(program());
  const GroupId rg = rep.add_group({RankId(0)}, {RankId(0), RankId(1), RankId(2), RankId(3)});
  rep.add_rank(rp, {rg}, {}, RankId(0));
  EXPECT_EQ(full.run().end, rep.run().end);
  EXPECT_EQ(rep.global_rank(RankId(0)), RankId(0));
}

TEST(Simulation, MatchIdsTieCollectiveMembersAndSendReceivePairs) {
  testing::PsSimulation sim;
  const GroupId g = sim.add_group({RankId(0), RankId(1)});
  Program a;
  a.add(testing::collective_op("ar", 3));
  a.add(testing::peer_op("send", true, 4, 0, 2));
  Program b;
  b.add(testing::collective_op("ar", 3));
  b.add(testing::peer_op("recv", false, 4, 0, 2));
  sim.add_rank(sim.add_program(std::move(a)), {g}, {RankId(1)});
  sim.add_rank(sim.add_program(std::move(b)), {g}, {RankId(0)});
  Timeline tl;
  sim.record_into(tl);
  sim.run();
  std::map<uint64_t, int> members;
  for (const OpRecord& r : tl.ops) {
    ASSERT_NE(r.match, 0u);
    ++members[r.match];
  }
  ASSERT_EQ(members.size(), 2u);  // one collective, one send/recv pair
  for (const auto& [id, n] : members) {
    EXPECT_EQ(n, 2) << id;
  }
}

}  // namespace
}  // namespace meshsim

namespace meshsim {
namespace {

// Four ranks in lockstep: compute 100 ps, an all-reduce over all four (1 B x 4 = 4 ps), compute
// 50 ps. Returns the step's end; `slow` slows one rank.
int64_t synchronous_step(std::optional<std::pair<uint32_t, double>> slow, double jitter_cv = 0,
                         uint64_t seed = 0) {
  PsSimulation sim;
  Program p;
  const OpId a = p.add(compute_op("fwd-bwd", 100));
  const OpId ar = p.add(collective_op("allreduce", 1));
  const OpId b = p.add(compute_op("optimizer", 50));
  p.add_dependency(a, ar);
  p.add_dependency(ar, b);
  const auto prog = sim.add_program(std::move(p));
  const GroupId g = sim.add_group({RankId(0), RankId(1), RankId(2), RankId(3)});
  for (int i = 0; i < 4; ++i) {
    sim.add_rank(prog, {g}, {});
  }
  if (slow) {
    sim.set_compute_slowdown(RankId(slow->first), slow->second);
  }
  if (jitter_cv > 0) {
    sim.set_kernel_jitter(jitter_cv, seed);
  }
  return sim.run().end.ps();
}

// Issue 16: a single straggler slows a synchronous step by its factor: everyone waits for it at
// the all-reduce, and it alone runs its optimizer slower after.
TEST(Heterogeneity, StragglerSlowsSynchronousStepByItsFactor) {
  EXPECT_EQ(synchronous_step(std::nullopt), 100 + 4 + 50);
  EXPECT_EQ(synchronous_step(std::make_pair(2u, 1.5)), 150 + 4 + 75);
  EXPECT_EQ(synchronous_step(std::make_pair(0u, 1.0)), 154);  // a factor of 1 is exact
}

TEST(Heterogeneity, JitterIsSeededAndOrderIndependent) {
  const int64_t a = synchronous_step(std::nullopt, 0.1, 42);
  EXPECT_EQ(a, synchronous_step(std::nullopt, 0.1, 42));
  EXPECT_NE(a, 154);
  EXPECT_NE(a, synchronous_step(std::nullopt, 0.1, 43));
  // The step waits for the slowest of four draws, so jitter lengthens it on average.
  double sum = 0;
  for (uint64_t seed = 0; seed < 200; ++seed) {
    sum += static_cast<double>(synchronous_step(std::nullopt, 0.1, seed));
  }
  EXPECT_GT(sum / 200, 154.0);
}

TEST(Heterogeneity, StragglerDistributionIsSeededAndStable) {
  Heterogeneity h;
  h.seed = 7;
  h.stragglers = {0.05, 1.1, 1.3};
  const std::vector<double> a = h.slowdowns(4096);
  EXPECT_EQ(a, h.slowdowns(4096));
  size_t slow = 0;
  for (const double f : a) {
    EXPECT_TRUE(f == 1.0 || (f >= 1.1 && f <= 1.3)) << f;
    slow += f != 1.0 ? 1u : 0u;
  }
  EXPECT_GT(slow, 150u);  // 5 % of 4096 = 205 expected
  EXPECT_LT(slow, 260u);
  // Growing the world keeps who is slow.
  const std::vector<double> b = h.slowdowns(8192);
  EXPECT_TRUE(std::equal(a.begin(), a.end(), b.begin()));
  h.slow_ranks = {{RankId(3), 2.0}};
  EXPECT_EQ(h.slowdowns(4096)[3], 2.0 * a[3]);
  EXPECT_FALSE(h.is_uniform());
  EXPECT_TRUE(Heterogeneity{}.is_uniform());
  Heterogeneity fast;  // stragglers that are faster than nominal still break the symmetry
  fast.stragglers = {0.5, 0.8, 1.0};
  EXPECT_FALSE(fast.is_uniform());
  fast.stragglers = {0.5, 1.0, 1.0};
  EXPECT_TRUE(fast.is_uniform());
  h.slow_ranks = {{RankId(5000), 2.0}};
  EXPECT_THROW(h.slowdowns(4096), InternalError);
}

}  // namespace
}  // namespace meshsim
