// TopologyCommModel: placement, the automatic choice, concurrent families, memoization, p2p.
#include <gtest/gtest.h>

#include "collective_test_util.h"
#include "meshsim/sim/error.h"

namespace meshsim::collectives {
namespace {

using namespace testing;  // NOLINT

std::vector<RankId> ranks(uint32_t first, uint32_t count) {
  std::vector<RankId> out;
  for (uint32_t i = 0; i < count; ++i) {
    out.push_back(RankId(first + i));
  }
  return out;
}

TopologyCommModel model(const topology::Network& net, Algorithm a = Algorithm::kAuto) {
  return TopologyCommModel(net,
                           topology::Placement::in_order(static_cast<int64_t>(net.num_devices())),
                           std::make_unique<AnalyticalBackend>(net), a);
}

TEST(TopologyCommModel, RepeatedQueriesAreAnsweredFromTheMemo) {
  const auto net = topology::Network::build(dgx_h100(2));
  auto m = model(net);
  const auto g = ranks(0, 8);
  const Duration first = m.collective_time(CollectiveKind::kAllReduce, MiB(64), g);
  EXPECT_EQ(m.evaluations(), 1);
  EXPECT_EQ(m.collective_time(CollectiveKind::kAllReduce, MiB(64), g), first);
  EXPECT_EQ(m.evaluations(), 1);
  EXPECT_EQ(m.queries(), 2);
  m.collective_time(CollectiveKind::kAllReduce, MiB(32), g);  // another size: evaluated
  EXPECT_EQ(m.evaluations(), 2);
  m.collective_time(CollectiveKind::kAllGather, MiB(64), g);  // another kind: evaluated
  EXPECT_EQ(m.evaluations(), 3);
  EXPECT_EQ(m.collective_time(CollectiveKind::kAllReduce, MiB(64), ranks(0, 1)), Duration::zero());
  EXPECT_EQ(m.evaluations(), 3);
}

TEST(TopologyCommModel, AutoPicksByTopologyAndSize) {
  const auto net = topology::Network::build(dgx_h100(4));
  auto m = model(net);
  m.collective_time(CollectiveKind::kAllReduce, GiB(1), ranks(0, 8));
  EXPECT_EQ(m.last_algorithm(), Algorithm::kNvls);
  // Four nodes: the ring's 8 channels keep every NIC and NVLink busy at once (busbw ~340 GB/s);
  // the hierarchical phases run one after the other.
  const Duration ring = m.collective_time(CollectiveKind::kAllReduce, GiB(1), ranks(0, 32));
  EXPECT_EQ(m.last_algorithm(), Algorithm::kRing);
  EXPECT_GT(busbw_gb_per_s(CollectiveKind::kAllReduce, GiB(1), 32, ring), 300.0);
  // Tiny buffers: latency decides; NVLS's one trip (or halving-doubling's log2 p steps) beats the
  // ring's p - 1.
  m.collective_time(CollectiveKind::kAllGather, KiB(1), ranks(0, 8));
  EXPECT_NE(m.last_algorithm(), Algorithm::kRing);

  // 32 nodes: the ring's 2 x 255 network latencies outweigh the hierarchical phases.
  const auto big = topology::Network::build(dgx_h100(32));
  auto b = model(big);
  b.collective_time(CollectiveKind::kAllReduce, GiB(1), ranks(0, 256));
  EXPECT_EQ(b.last_algorithm(), Algorithm::kHierarchical);

  const auto tpu = topology::Network::build(preset("tpu-v5p"));
  auto t = model(tpu);
  t.collective_time(CollectiveKind::kAllReduce, GiB(1), ranks(0, 64));
  EXPECT_EQ(t.last_algorithm(), Algorithm::kTorusRings);
}

TEST(TopologyCommModel, FamilyIsTimedTogetherOnceAndContends) {
  // Ranks placed so that two TP-like pairs cross the same 10 GB/s cable (see the backend test's
  // two-leaf graph): alone a pair gets the cable, as a family they share it.
  auto spec = dgx_h100(1);
  spec.devices_per_node = 4;
  topology::GraphSpec g;
  g.switches = {{"a", "leaf"}, {"b", "leaf"}};
  for (const char* d : {"gpu0", "gpu1"}) {
    g.links.push_back({d, "a", "network", GBps(100), Microseconds(1)});
  }
  for (const char* d : {"gpu2", "gpu3"}) {
    g.links.push_back({d, "b", "network", GBps(100), Microseconds(1)});
  }
  g.links.push_back({"a", "b", "network", GBps(10), Microseconds(1)});
  spec.graph = g;
  const auto net = topology::Network::build(spec);
  const std::vector<std::vector<RankId>> pairs = {{RankId(0), RankId(2)}, {RankId(1), RankId(3)}};

  auto alone = model(net, Algorithm::kRing);
  const Duration t_alone = alone.collective_time(CollectiveKind::kAllGather, MB(100), pairs[0]);

  auto fam = model(net, Algorithm::kRing);
  fam.add_concurrent_family(pairs);
  const Duration t0 = fam.collective_time(CollectiveKind::kAllGather, MB(100), pairs[0]);
  const Duration t1 = fam.collective_time(CollectiveKind::kAllGather, MB(100), pairs[1]);
  EXPECT_EQ(t0, t1);
  EXPECT_EQ(fam.evaluations(), 1);  // one evaluation answers every member
  EXPECT_EQ(t_alone, Microseconds(3) + MB(50) / GBps(10));
  EXPECT_EQ(t0, Microseconds(3) + MB(50) / GBps(5));
  EXPECT_THROW(fam.add_concurrent_family({pairs[0]}), InternalError);
}

TEST(TopologyCommModel, P2pIsOneFlowAndMemoized) {
  const auto net = topology::Network::build(dgx_h100(2));
  auto m = model(net);
  const Bytes n = MB(100);
  // Same node: NVLink at NCCL's effective 370.8 GB/s; across nodes: the 50 GB/s NIC, over the
  // path's latency (GPU 0 of both nodes: one rail, one leaf).
  EXPECT_LT(
      relative_error(m.p2p_time(RankId(0), RankId(1), n), Microseconds(3.4) + n / GBps(370.8)),
      1e-6);
  const auto path = net.route(net.device_vertex(DeviceId(0)), net.device_vertex(DeviceId(8)));
  EXPECT_EQ(m.p2p_time(RankId(0), RankId(8), n), net.path_latency(path) + n / GBps(50));
  EXPECT_EQ(m.evaluations(), 2);
  m.p2p_time(RankId(0), RankId(8), n);
  EXPECT_EQ(m.evaluations(), 2);
  EXPECT_EQ(m.p2p_time(RankId(3), RankId(3), n), Duration::zero());
}

TEST(TopologyCommModel, PlacementMapsRanksToDevices) {
  const auto net = topology::Network::build(dgx_h100(2));
  // Rank i on device 15 - i: ranks 0..7 sit on node 1.
  topology::Placement reversed;
  for (uint32_t i = 0; i < 16; ++i) {
    reversed.device_of_rank.push_back(DeviceId(15 - i));
  }
  TopologyCommModel m(net, reversed, std::make_unique<AnalyticalBackend>(net));
  auto plain = model(net);
  EXPECT_EQ(m.collective_time(CollectiveKind::kAllReduce, MiB(64), ranks(0, 8)),
            plain.collective_time(CollectiveKind::kAllReduce, MiB(64), ranks(8, 8)));
  EXPECT_EQ(m.p2p_time(RankId(0), RankId(8), MB(1)), plain.p2p_time(RankId(15), RankId(7), MB(1)));
}

TEST(TopologyCommModel, ForcedAlgorithm) {
  const auto net = topology::Network::build(dgx_h100(2));
  auto ring = model(net, Algorithm::kRing);
  ring.collective_time(CollectiveKind::kAllReduce, GiB(1), ranks(0, 8));
  EXPECT_EQ(ring.last_algorithm(), Algorithm::kRing);
  // NVLS has no broadcast: the automatic choice answers it.
  auto nvls = model(net, Algorithm::kNvls);
  nvls.collective_time(CollectiveKind::kBroadcast, MiB(1), ranks(0, 8));
  EXPECT_NE(nvls.last_algorithm(), Algorithm::kNvls);
  // ... but an all-reduce across nodes is an error on the algorithm option (the edge locates it).
  try {
    nvls.collective_time(CollectiveKind::kAllReduce, MiB(1), ranks(0, 16));
    FAIL() << "NVLS across nodes";
  } catch (const CommError& e) {
    EXPECT_EQ(e.field(), CommField::kAlgorithm);
  }
}

}  // namespace
}  // namespace meshsim::collectives
