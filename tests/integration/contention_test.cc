// Issue 12: communication as a shared resource the engine advances (sim/comm_model.h) with the
// network model behind it (collectives/comm_model.h):
//  * when nothing overlaps, a collective or a send lasts exactly what the model gives it alone;
//  * two collectives on a shared link each get their max-min share, and the survivor speeds up;
//  * DP and PP traffic sharing a NIC slow each other by what the NIC's bandwidth implies;
//  * a 4:1 oversubscribed fabric changes a DP-heavy step by what the spines' bandwidth implies,
//    and k flows leaving a leaf share its uplinks by their count;
//  * SimGrid's parallel tasks agree with the analytical model within 5% on those cases.
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <map>

#include "collective_test_util.h"
#include "meshsim/scenario/comm_setup.h"
#include "meshsim/collectives/comm_model.h"
#include "meshsim/sim/simulation.h"
#include "meshsim/topology/compute_model.h"
#include "meshsim/workloads/model.h"
#include "meshsim/workloads/plan_loader.h"
#include "meshsim/workloads/step.h"

namespace meshsim {
namespace {

using collectives::NetworkBackend;
using collectives::NetworkCommModel;

using collectives::testing::two_leaves;

topology::ClusterSpec dgx(int64_t nodes) { return collectives::testing::dgx_h100(nodes); }

// 16 DGX H100 on radix-8 switches in 3 tiers, so that a rail's 16 NICs span several leaves.
topology::ClusterSpec dp_fabric(double oversubscription) {
  auto spec = dgx(16);
  spec.fat_tree->switch_radix = 8;
  spec.fat_tree->tiers = 3;
  topology::FabricOverrides o;
  o.oversubscription = oversubscription;
  return topology::override_fabric(spec, o);
}

collectives::CollectiveOptions ring_simple() {
  collectives::CollectiveOptions o;
  o.algorithm = collectives::Algorithm::kRing;
  o.protocol = collectives::NcclProtocol::kSimple;
  return o;
}

class NoCompute : public ComputeCostModel {
 public:
  Duration compute_time(RankId, const ComputeWork&) const override { return Duration::zero(); }
};

Op collective(CollectiveKind kind, Bytes bytes, uint16_t slot, uint8_t stream = 1) {
  Op op;
  op.name = "collective";
  op.stream = stream;
  op.work = CollectiveWork{kind, bytes, slot};
  return op;
}

Op peer(bool send, Bytes bytes, uint8_t stream) {
  Op op;
  op.name = send ? "send" : "recv";
  op.stream = stream;
  op.is_send = send;
  op.work = PeerWork{0, bytes, 0};
  return op;
}

std::vector<RankId> ranks(std::initializer_list<uint32_t> r) {
  return {r.begin(), r.end()};
}

NetworkCommModel model_on(const topology::Network& net, NetworkBackend b,
                          collectives::CollectiveOptions o = {}) {
  return NetworkCommModel(
      net, topology::Placement::in_order(static_cast<int64_t>(net.num_devices())), b, o);
}

// Runs one program per simulated rank (given with its global rank, group slots and peers) and
// returns every op's record.
struct Rank {
  RankId global;
  std::vector<std::vector<RankId>> groups;  // by slot: (simulated members, global members)
  std::vector<std::vector<RankId>> group_globals;
  std::vector<RankId> peers;
  Program program;
};

Timeline run(std::vector<Rank> rs, CommModel& comm) {
  NoCompute compute;
  Simulation sim(compute, comm);
  Timeline tl;
  sim.record_into(tl);
  std::map<std::pair<std::vector<RankId>, std::vector<RankId>>, GroupId> made;
  for (Rank& r : rs) {
    std::vector<GroupId> slots;
    for (size_t s = 0; s < r.groups.size(); ++s) {
      const auto key = std::make_pair(r.groups[s], r.group_globals[s]);
      auto it = made.find(key);
      if (it == made.end()) {
        it = made.emplace(key, sim.add_group(r.groups[s], r.group_globals[s])).first;
      }
      slots.push_back(it->second);
    }
    sim.add_rank(sim.add_program(std::move(r.program)), slots, r.peers, r.global);
  }
  sim.run();
  return tl;
}

Duration span(const OpRecord& r) { return r.end - r.start; }

TEST(Contention, AloneAnOpLastsWhatTheModelGivesIt) {
  // Two simulated ranks (representative of two 8-GPU TP groups on two nodes): a TP all-reduce
  // each, then a send from one to the other; nothing shares a link with anything else.
  const auto net = topology::Network::build(dgx(2));
  auto engine_model = model_on(net, NetworkBackend::kAnalytical);
  auto idle = model_on(net, NetworkBackend::kAnalytical);
  const std::vector<RankId> tp0 = ranks({0, 1, 2, 3, 4, 5, 6, 7});
  const std::vector<RankId> tp1 = ranks({8, 9, 10, 11, 12, 13, 14, 15});
  std::vector<Rank> rs(2);
  for (uint32_t i = 0; i < 2; ++i) {
    rs[i].global = RankId(8 * i);
    rs[i].groups = {{RankId(i)}};
    rs[i].group_globals = {i == 0 ? tp0 : tp1};
    rs[i].peers = {RankId(1 - i)};
    const OpId ar = rs[i].program.add(collective(CollectiveKind::kAllReduce, MiB(64), 0));
    const OpId p2p = rs[i].program.add(peer(i == 0, MB(100), 1));
    rs[i].program.add_dependency(ar, p2p);
  }
  const Timeline tl = run(std::move(rs), engine_model);
  ASSERT_EQ(tl.ops.size(), 4u);
  const Duration ar0 = idle.collective_time(CollectiveKind::kAllReduce, MiB(64), tp0);
  const Duration ar1 = idle.collective_time(CollectiveKind::kAllReduce, MiB(64), tp1);
  const Duration send = idle.p2p_time(RankId(0), RankId(8), MB(100));
  EXPECT_EQ(ar0, ar1);
  for (const OpRecord& r : tl.ops) {
    EXPECT_EQ(span(r), r.stream == 1 && r.start == SimTime::zero() ? ar0 : send);
  }
}

// Two all-gathers of `a` and `b` bytes over the pairs, started together; their records' ends.
std::pair<SimTime, SimTime> two_pairs(Bytes a, Bytes b, NetworkBackend backend) {
  const auto net = topology::Network::build(two_leaves());
  collectives::CollectiveOptions ring;
  ring.algorithm = collectives::Algorithm::kRing;
  auto m = model_on(net, backend, ring);
  std::vector<Rank> rs(4);
  const std::vector<std::vector<RankId>> pairs = {ranks({0, 2}), ranks({1, 3})};
  for (uint32_t i = 0; i < 4; ++i) {
    const auto& pair = pairs[i % 2];
    rs[i].global = RankId(i);
    rs[i].groups = {pair};
    rs[i].group_globals = {pair};
    rs[i].program.add(collective(CollectiveKind::kAllGather, i % 2 == 0 ? a : b, 0));
  }
  const Timeline tl = run(std::move(rs), m);
  std::map<uint32_t, SimTime> end;
  for (const OpRecord& r : tl.ops) {
    end[r.rank.value()] = r.end;
  }
  return {end.at(0), end.at(1)};  // pair (0, 2) and pair (1, 3)
}

TEST(Contention, TwoCollectivesOnASharedLinkEachGetTheirMaxMinShare) {
  const auto net = topology::Network::build(two_leaves());
  collectives::CollectiveOptions ring;
  ring.algorithm = collectives::Algorithm::kRing;
  auto idle = model_on(net, NetworkBackend::kAnalytical, ring);
  const Duration alone = idle.collective_time(CollectiveKind::kAllGather, MB(100), ranks({0, 2}));
  const Duration latency = idle.last_shape().latency;
  // Each rank of a pair sends half the buffer over the cable (0.96 x 10 GB/s for network links).
  EXPECT_EQ(alone, latency + MB(50) / GBps(9.6));
  // Equal buffers: half the cable each, both end together.
  const auto [e1, e2] = two_pairs(MB(100), MB(100), NetworkBackend::kAnalytical);
  EXPECT_EQ(e1, e2);
  EXPECT_EQ(e1 - SimTime::zero(), latency + MB(50) / GBps(4.8));
  // 100 MB and 50 MB: half each until the smaller ends (25 MB at 4.8 GB/s), then the larger alone.
  const auto [f1, f2] = two_pairs(MB(100), MB(50), NetworkBackend::kAnalytical);
  const SimTime small_end = SimTime::zero() + latency + MB(25) / GBps(4.8);
  EXPECT_EQ(std::min(f1, f2), small_end);
  EXPECT_NEAR((std::max(f1, f2) - small_end).seconds(), (MB(25) / GBps(9.6)).seconds(), 1e-9);
  // SimGrid's parallel tasks: the same within 5%.
  const auto [g1, g2] = two_pairs(MB(100), MB(50), NetworkBackend::kSimGrid);
  EXPECT_NEAR(std::min(g1, g2).seconds(), small_end.seconds(), 0.05 * small_end.seconds());
  EXPECT_NEAR(std::max(g1, g2).seconds(), std::max(f1, f2).seconds(),
              0.05 * std::max(f1, f2).seconds());
}

// The utilisation the trace's counters show is what the model assigned: while both pairs run, each
// gets half of the cable's bytes (4.8 GB/s), i.e. 9.6 GB/s of progress with half a byte on each of
// its 6 network links; over the 10 directed network links' capacity (8 x 96 + 2 x 9.6 GB/s).
TEST(Contention, UtilisationIsWhatTheModelAssigned) {
  const auto net = topology::Network::build(two_leaves());
  collectives::CollectiveOptions ring;
  ring.algorithm = collectives::Algorithm::kRing;
  auto m = model_on(net, NetworkBackend::kAnalytical, ring);
  std::vector<collectives::LinkUtilisation> seen;
  m.on_utilisation([&seen](const collectives::LinkUtilisation& u) {
    if (u.kind == topology::LinkKind::kNetwork) {
      seen.push_back(u);
    }
  });
  const auto a =
      m.start_collective(SimTime::zero(), CollectiveKind::kAllGather, MB(100), ranks({0, 2}));
  const auto b =
      m.start_collective(SimTime::zero(), CollectiveKind::kAllGather, MB(100), ranks({1, 3}));
  const CommAdvance done = m.advance(SimTime::max());
  EXPECT_EQ(done.finished, (std::vector<TransferId>{std::min(a, b), std::max(a, b)}));
  ASSERT_FALSE(seen.empty());
  double peak = 0;
  for (const auto& u : seen) {
    peak = std::max(peak, u.fraction);
  }
  EXPECT_NEAR(peak, 57.6 / (8 * 96 + 2 * 9.6), 1e-9);
  EXPECT_DOUBLE_EQ(seen.back().fraction, 0.0);  // idle at the end
  EXPECT_EQ(seen.back().from, done.time);
}

// Rank 0 (node 0, GPU 0) all-reduces over {0, 8} (DP across the two nodes, rail 0) and sends to
// rank 8 (PP, the same rail): both leave node 0 through GPU 0's NIC. `overlap` puts them on two
// streams at once; otherwise the send waits for the all-reduce. Returns the last end.
SimTime dp_and_pp(bool overlap, Bytes dp, Bytes pp, NetworkBackend backend) {
  const auto net = topology::Network::build(dgx(2));
  const collectives::CollectiveOptions ring = ring_simple();
  auto m = model_on(net, backend, ring);
  std::vector<Rank> rs(2);
  for (uint32_t i = 0; i < 2; ++i) {
    rs[i].global = RankId(8 * i);
    rs[i].groups = {ranks({0, 1})};
    rs[i].group_globals = {ranks({0, 8})};
    rs[i].peers = {RankId(1 - i)};
    const OpId ar = rs[i].program.add(collective(CollectiveKind::kAllReduce, dp, 0, 1));
    const OpId p2p = rs[i].program.add(peer(i == 0, pp, 2));
    if (!overlap) {
      rs[i].program.add_dependency(ar, p2p);
    }
  }
  SimTime end;
  for (const OpRecord& r : run(std::move(rs), m).ops) {
    end = std::max(end, r.end);
  }
  return end;
}

TEST(Contention, DpAndPpSharingANicSlowEachOtherByTheNicsBandwidth) {
  const auto net = topology::Network::build(dgx(2));
  const collectives::CollectiveOptions ring = ring_simple();
  auto idle = model_on(net, NetworkBackend::kAnalytical, ring);
  const Bytes dp = MB(96);
  const Bytes pp = MB(48);
  const Duration t_dp = idle.collective_time(CollectiveKind::kAllReduce, dp, ranks({0, 8}));
  const Duration t_pp = idle.p2p_time(RankId(0), RankId(8), pp);
  const Duration pp_latency = Microseconds(8.4 + 14);  // NCCL's Simple base and network hop
  // One after the other: the sum.
  EXPECT_EQ(dp_and_pp(false, dp, pp, NetworkBackend::kAnalytical) - SimTime::zero(), t_dp + t_pp);
  // At once: the NIC (0.96 x 50 GB/s) is busy from the send's first byte to the last byte of
  // both, the all-reduce putting its whole buffer on it once (2 ranks: 2(p-1)/p = 1): the end is
  // the send's latency + both buffers at 48 GB/s, later than either alone, sooner than the sum.
  const SimTime together = dp_and_pp(true, dp, pp, NetworkBackend::kAnalytical);
  const Duration want = pp_latency + (dp + pp) / GBps(48);
  EXPECT_NEAR((together - SimTime::zero()).seconds(), want.seconds(), 1e-9);
  EXPECT_GT(together - SimTime::zero(), std::max(t_dp, t_pp));
  EXPECT_LT(together - SimTime::zero(), t_dp + t_pp);
  // SimGrid: within 5%.
  const SimTime sg = dp_and_pp(true, dp, pp, NetworkBackend::kSimGrid);
  EXPECT_NEAR(sg.seconds(), together.seconds(), 0.05 * together.seconds());
}

// A DP-heavy step: Llama 3.2 1B, DP 128 over 16 nodes of 8 GPUs, the gradients all-reduced
// (NCCL's NVLS-tree: NVLS in each node, binary trees between the nodes' NICs) after the backward,
// not overlapped (every DP collective on the critical path), on radix-8 switches so that a rail's
// 16 NICs span several leaves and the trees cross the spines. (Rings, which NCCL runs for
// reduce-scatter and all-gather, cross leaves only at the ring's few boundaries: they barely feel
// the spines on a rail-optimized fabric, nor does this model make them.)
struct Step {
  SimTime end;
  Duration dp;  // the DP collectives of simulated rank 0, summed
};

Step dp_heavy(double oversubscription, NetworkBackend backend) {
  const auto spec = dp_fabric(oversubscription);
  workloads::ParallelPlan p;
  p.dp = 128;
  p.mbs = 1;
  p.gbs = 128;
  p.seq = 2048;
  p.overlap.grad_reduce = false;
  p.overlap.param_gather = false;
  workloads::StepPlan plan = workloads::plan_step(workloads::load_model("llama3.2-1b"), p);
  topology::RooflineComputeModel compute(spec.chip);
  scenario::CommOptions options;
  options.backend = backend;
  scenario::CommSetup setup(spec, plan, options);
  Simulation sim(compute, setup.model());
  Timeline tl;
  sim.record_into(tl);
  workloads::load_plan(sim, plan);
  Step s;
  s.end = sim.run().end;
  for (const OpRecord& r : tl.ops) {
    const Op& op = sim.program_of(r.rank).op(r.op);
    if (r.rank == RankId(0) &&
        op.labels.category == workloads::category_of(workloads::CommKind::kData)) {
      s.dp += span(r);
    }
  }
  return s;
}

TEST(Contention, OversubscribedSpinesSlowADpHeavyStepByTheirBandwidth) {
  const Step full = dp_heavy(1.0, NetworkBackend::kAnalytical);
  const Step thin = dp_heavy(4.0, NetworkBackend::kAnalytical);
  // The DP collectives cross the spines: a quarter of the uplinks slows them markedly, and the
  // whole change of the step is theirs (nothing else crosses the fabric, nothing overlaps them).
  EXPECT_GT(thin.dp / full.dp, 1.2);
  EXPECT_NEAR((thin.end - full.end).seconds(), (thin.dp - full.dp).seconds(),
              0.01 * (thin.dp - full.dp).seconds());
  // SimGrid: the same step within 5%.
  const Step sg = dp_heavy(4.0, NetworkBackend::kSimGrid);
  EXPECT_NEAR(sg.end.seconds(), thin.end.seconds(), 0.05 * thin.end.seconds());
  EXPECT_NEAR(sg.dp.seconds(), thin.dp.seconds(), 0.05 * thin.dp.seconds());
}

// k pairs of rail-0 GPUs, nodes i and i + 6 (i < k <= 6), each all-reducing `bytes` over its pair,
// all started at once on the DP-heavy fabric with `oversubscription`; the last end.
SimTime pairs_across_leaves(double oversubscription, Bytes bytes, NetworkBackend backend,
                            int64_t pairs) {
  const auto spec = dp_fabric(oversubscription);
  const auto net = topology::Network::build(spec);
  const collectives::CollectiveOptions ring = ring_simple();
  auto m = model_on(net, backend, ring);
  for (int64_t i = 0; i < pairs; ++i) {
    const auto a = static_cast<uint32_t>(8 * i);
    m.start_collective(SimTime::zero(), CollectiveKind::kAllReduce, bytes, ranks({a, a + 48}));
  }
  SimTime end;
  while (m.in_flight() > 0) {
    end = m.advance(SimTime::max()).time;
  }
  return end;
}

TEST(Contention, AnOversubscribedLeafSharesItsUplinksAmongItsNics) {
  // Radix-8 leaves (network_fat_tree.cc): at 4:1 a leaf has 6 NIC ports and 2 uplinks at the NIC's
  // bandwidth, so rail 0 of nodes 0-5 and of nodes 6-11 sit on two leaves, and k all-reduces
  // between node i and node i + 6 (2 ranks: each sends its whole buffer once) share 2 uplinks: each
  // runs at the NIC's 0.96 x 50 GB/s while k <= 2, at 2/k of it beyond. Non-blocking (4 down,
  // 4 up) no leaf carries more flows than it has uplinks, so all 6 run as fast as one alone.
  const Bytes n = MB(480);
  const auto net = topology::Network::build(dp_fabric(1.0));
  const collectives::CollectiveOptions ring = ring_simple();
  auto idle = model_on(net, NetworkBackend::kAnalytical, ring);
  const Duration alone = idle.collective_time(CollectiveKind::kAllReduce, n, ranks({0, 48}));
  const Duration latency = idle.last_shape().latency;
  EXPECT_NEAR(alone.seconds(), (latency + n / GBps(48)).seconds(), 1e-12);
  EXPECT_EQ(pairs_across_leaves(1.0, n, NetworkBackend::kAnalytical, 6) - SimTime::zero(), alone);
  for (const int64_t k : {2, 4, 6}) {
    SCOPED_TRACE(k);
    const double share = std::min(1.0, 2.0 / static_cast<double>(k));
    const SimTime thin = pairs_across_leaves(4.0, n, NetworkBackend::kAnalytical, k);
    EXPECT_NEAR(thin.seconds(), (latency + n / GBps(48 * share)).seconds(), 1e-9);
    const SimTime sg = pairs_across_leaves(4.0, n, NetworkBackend::kSimGrid, k);
    EXPECT_NEAR(sg.seconds(), thin.seconds(), 0.05 * thin.seconds());
  }
}

}  // namespace
}  // namespace meshsim
