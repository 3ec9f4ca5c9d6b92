// Network: hand-computed hops and routes on tori and a DGX H100 fat tree, latencies, placements,
// and the two 2048-device builds (counts and speed).
#include "meshsim/topology/network.h"

#include <gtest/gtest.h>

#include <chrono>
#include <iostream>

#include "meshsim/sim/error.h"
#include "network_test_util.h"
#include "test_files.h"

namespace meshsim::topology {
namespace {

using testing::count_kind;
using testing::dev;
using testing::dgx_h100;
using testing::expect_walk;
using testing::preset;
using testing::torus;
using testing::vtx;

// The axis along which a link moves (the one coordinate that differs), or -1.
int changed_axis(const Network& net, LinkId l) {
  const std::vector<int64_t> a = net.torus_coords(DeviceId(net.link(l).src.value()));
  const std::vector<int64_t> b = net.torus_coords(DeviceId(net.link(l).dst.value()));
  int axis = -1;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i] != b[i]) {
      EXPECT_EQ(axis, -1) << "a link changes two coordinates";
      axis = static_cast<int>(i);
    }
  }
  return axis;
}

TEST(NetworkTorus, WrapAroundHopsOn4x4x4) {
  const Network net = Network::build(preset("tpu-v5p"));
  ASSERT_EQ(net.num_devices(), 64U);
  const DeviceId origin = net.device_at({0, 0, 0});
  EXPECT_EQ(origin, dev(0));
  EXPECT_EQ(net.device_at({1, 0, 0}), dev(1));  // x fastest
  EXPECT_EQ(net.device_at({0, 1, 0}), dev(4));
  EXPECT_EQ(net.torus_coords(dev(21)), (std::vector<int64_t>{1, 1, 1}));
  EXPECT_EQ(net.hops(origin, net.device_at({3, 0, 0})), 1);  // the wraparound link
  EXPECT_EQ(net.hops(origin, net.device_at({2, 2, 2})), 6);
  EXPECT_EQ(net.hops(origin, net.device_at({3, 3, 3})), 3);
  EXPECT_EQ(net.hops(net.device_at({1, 2, 3}), net.device_at({3, 0, 1})), 6);
}

TEST(NetworkTorus, RouteIsDimensionOrderShorterWayTiesPositive) {
  const Network net = Network::build(preset("tpu-v5p"));
  const VertexId a = net.device_vertex(net.device_at({0, 0, 0}));
  const VertexId b = net.device_vertex(net.device_at({2, 2, 2}));
  const Path p = net.route(a, b);
  ASSERT_EQ(p.size(), 6U);
  expect_walk(net, a, b, p, /*devices_forward=*/true);
  const std::vector<int> axes = {0, 0, 1, 1, 2, 2};
  for (size_t i = 0; i < p.size(); ++i) {
    EXPECT_EQ(changed_axis(net, p[i]), axes[i]) << "link " << i;
    EXPECT_EQ(net.link(p[i]).kind, LinkKind::kIci);
  }
  // Ties (2 steps either way round a ring of 4) go the positive way: x = 0 -> 1 -> 2.
  EXPECT_EQ(net.torus_coords(DeviceId(net.link(p[0]).dst.value())),
            (std::vector<int64_t>{1, 0, 0}));
  // The wrap: (0,0,0) -> (3,0,0) is one link, the negative way.
  const Path wrap = net.route(a, net.device_vertex(net.device_at({3, 0, 0})));
  ASSERT_EQ(wrap.size(), 1U);
  EXPECT_EQ(net.paths(a, b).size(), 1U);
  EXPECT_EQ(net.path_count(a, b), 1);
  EXPECT_EQ(net.path_latency(p), Microseconds(1) * 6);  // every ICI hop pays the ICI latency
  EXPECT_EQ(net.path_bandwidth(p), GBps(90));
}

TEST(NetworkTorus, NoWraparoundOn8x8) {
  const ClusterSpec spec = torus("tpu-v5e", {8, 8});
  ASSERT_EQ(spec.torus_wraparound, (std::vector<bool>{false, false}));
  const Network net = Network::build(spec);
  const DeviceId a = net.device_at({0, 0});
  const DeviceId b = net.device_at({7, 7});
  EXPECT_EQ(net.hops(a, b), 14);
  EXPECT_EQ(net.hops(a, net.device_at({7, 0})), 7);  // no wrap link to take
  const Path p = net.route(net.device_vertex(a), net.device_vertex(b));
  ASSERT_EQ(p.size(), 14U);
  for (size_t i = 0; i < p.size(); ++i) {
    EXPECT_EQ(changed_axis(net, p[i]), i < 7 ? 0 : 1);
  }
  // 2 x 7 x 8 cables on an 8x8 grid.
  EXPECT_EQ(net.num_links(), 2U * 2U * 7U * 8U);
}

TEST(NetworkTorus, ExtentTwoHasOneCableAndExtentOneNone) {
  ClusterSpec spec = torus("tpu-v5p", {2, 1, 4});
  spec.torus_wraparound = {true, true, true};  // as if it wrapped: extent 2 still has one cable
  const Network net = Network::build(spec);
  // x: 4 cables (one per (y,z)); y: none; z: ring of 4 with wrap on 2 columns = 8 cables.
  EXPECT_EQ(net.num_links(), 2U * (4U + 8U));
  EXPECT_EQ(net.hops(net.device_at({0, 0, 0}), net.device_at({1, 0, 3})), 2);
}

TEST(NetworkDgx, HopCountsOnFourNodes) {
  const Network net = Network::build(dgx_h100(4));
  EXPECT_EQ(net.hops(dev(0), dev(7)), 2);   // gpu - nvswitch - gpu
  EXPECT_EQ(net.hops(dev(0), dev(8)), 4);   // same rail, same leaf: gpu - nic - leaf - nic - gpu
  EXPECT_EQ(net.hops(dev(0), dev(9)), 6);   // different rails: through a spine
  EXPECT_EQ(net.hops(dev(3), dev(27)), 4);  // rail 3 of nodes 0 and 3
  const int64_t spines = count_kind(net, VertexKind::kSpine);
  EXPECT_EQ(spines, 4);  // 8 leaves x 32 uplinks / radix 64
  EXPECT_EQ(net.path_count(vtx(0), vtx(9)), spines);
  EXPECT_EQ(net.paths(vtx(0), vtx(9)).size(), static_cast<size_t>(spines));
  EXPECT_EQ(net.path_count(vtx(0), vtx(8)), 1);
  EXPECT_EQ(net.nvswitch_of(dev(9)), net.link(net.route(vtx(9), vtx(10))[0]).dst);
}

TEST(NetworkDgx, DifferentLeavesOfOneRailGoThroughASpine) {
  const Network net = Network::build(dgx_h100(64));  // 2 leaves per rail (32 nodes each)
  EXPECT_EQ(count_kind(net, VertexKind::kLeaf), 16);
  EXPECT_EQ(net.hops(dev(0), dev(31 * 8)), 4);  // node 31: same leaf
  EXPECT_EQ(net.hops(dev(0), dev(32 * 8)), 6);  // node 32: the next leaf of rail 0
  const int64_t spines = count_kind(net, VertexKind::kSpine);
  EXPECT_EQ(spines, 8);  // 16 x 32 / 64
  EXPECT_EQ(net.path_count(vtx(0), vtx(32 * 8)), spines);
}

TEST(NetworkDgx, RoutesSpreadOverSpinesBySalt) {
  const Network net = Network::build(dgx_h100(4));
  std::vector<VertexId> spines_used;
  for (uint64_t salt = 0; salt < 4; ++salt) {
    const Path p = net.route(vtx(0), vtx(9), salt);
    ASSERT_EQ(p.size(), 6U);
    expect_walk(net, vtx(0), vtx(9), p, false);
    const std::vector<LinkKind> kinds = {LinkKind::kPcie,    LinkKind::kNetwork, LinkKind::kNetwork,
                                         LinkKind::kNetwork, LinkKind::kNetwork, LinkKind::kPcie};
    for (size_t i = 0; i < p.size(); ++i) {
      EXPECT_EQ(net.link(p[i]).kind, kinds[i]);
    }
    spines_used.push_back(net.link(p[2]).dst);
    EXPECT_EQ(net.route(vtx(0), vtx(9), salt + 4), p);  // salt mod path count
  }
  std::sort(spines_used.begin(), spines_used.end());
  EXPECT_EQ(std::unique(spines_used.begin(), spines_used.end()), spines_used.end());
}

TEST(NetworkDgx, LatencyConvention) {
  const Network net = Network::build(dgx_h100(4));
  const ClusterSpec& spec = net.spec();
  EXPECT_EQ(net.path_latency(net.route(vtx(0), vtx(1))), spec.scale_up_latency);
  EXPECT_EQ(net.path_latency(net.route(vtx(0), vtx(9))), spec.scale_out_latency);
  EXPECT_EQ(net.path_latency(net.route(vtx(0), vtx(8))), Microseconds(7));  // 2 of 4 hops
  EXPECT_EQ(net.path_bandwidth(net.route(vtx(0), vtx(1))), GBps(450));
  EXPECT_EQ(net.path_bandwidth(net.route(vtx(0), vtx(9))), Gbps(400));
}

TEST(NetworkDgx, FatTreeCountsAtOneFourThirtyTwoAndTwoHundredFiftySixNodes) {
  struct Case {
    int64_t nodes, leaves, spines, cables_per_pair;
  };
  for (const Case c :
       {Case{1, 8, 4, 8}, Case{4, 8, 4, 8}, Case{32, 8, 4, 8}, Case{256, 64, 32, 1}}) {
    SCOPED_TRACE(c.nodes);
    const Network net = Network::build(dgx_h100(c.nodes));
    EXPECT_EQ(count_kind(net, VertexKind::kLeaf), c.leaves);
    EXPECT_EQ(count_kind(net, VertexKind::kSpine), c.spines);
    EXPECT_EQ(count_kind(net, VertexKind::kNic), c.nodes * 8);
    EXPECT_EQ(count_kind(net, VertexKind::kNvSwitch), c.nodes);
    const NetworkSummary s = net.summary();
    EXPECT_EQ(s.links.at(LinkKind::kNvlink).count, c.nodes * 8 * 2);
    EXPECT_EQ(s.links.at(LinkKind::kPcie).count, c.nodes * 8 * 2);
    // NIC-leaf cables plus leaf-spine links (each up to 8 cables bundled).
    EXPECT_EQ(s.links.at(LinkKind::kNetwork).count, 2 * (c.nodes * 8 + c.leaves * c.spines));
    if (c.nodes > 1) {
      const Link& up = net.link(net.route(vtx(0), vtx(9), 0)[2]);  // leaf -> spine
      EXPECT_EQ(net.vertex(up.dst).kind, VertexKind::kSpine);
      EXPECT_EQ(up.cables, c.cables_per_pair);
      EXPECT_EQ(up.bandwidth, Gbps(400) * static_cast<double>(c.cables_per_pair));
    }
  }
}

TEST(NetworkBuild, TwoThousandGpusAndChipsBuildFastWithExpectedCounts) {
  using Clock = std::chrono::steady_clock;
  const ClusterSpec gpus = dgx_h100(256);
  const ClusterSpec chips = torus("tpu-v5p", {8, 16, 16});
  auto t0 = Clock::now();
  const Network fat = Network::build(gpus);
  const Network tor = Network::build(chips);
  const double build_s = std::chrono::duration<double>(Clock::now() - t0).count();
  EXPECT_EQ(fat.num_devices(), 2048U);
  EXPECT_EQ(fat.num_vertices(), 2048U + 256U + 2048U + 64U + 32U);
  EXPECT_EQ(fat.num_links(), 4096U * 4U);  // nvlink, pcie, nic-leaf, leaf-spine
  EXPECT_EQ(tor.num_devices(), 2048U);
  EXPECT_EQ(tor.num_vertices(), 2048U);
  EXPECT_EQ(tor.num_links(), 2U * 3U * 2048U);  // every axis wraps: one +1 cable per chip per axis
  EXPECT_EQ(fat.hops(dev(0), dev(2047)), 6);
  EXPECT_EQ(tor.hops(dev(0), tor.device_at({4, 8, 8})), 20);
  t0 = Clock::now();
  size_t links = 0;
  constexpr int64_t kRoutes = 100000;
  for (int64_t i = 0; i < kRoutes; ++i) {
    const auto a = static_cast<uint32_t>((i * 7919) % 2048);
    const auto b = static_cast<uint32_t>((i * 104729 + 1) % 2048);
    links += fat.route(VertexId(a), VertexId(b), static_cast<uint64_t>(i)).size();
    links += tor.route(VertexId(a), VertexId(b)).size();
  }
  const double route_us =
      std::chrono::duration<double>(Clock::now() - t0).count() * 1e6 / (2.0 * kRoutes);
  std::cout << "build both: " << build_s * 1e3 << " ms; route: " << route_us << " us per call ("
            << links << " links)\n";
  EXPECT_LT(build_s, 2.0);    // well under a second in Release; slack for sanitizer builds
  EXPECT_LT(route_us, 50.0);  // microseconds, not milliseconds
}

TEST(NetworkSummaryText, DgxH100At256NodesAndV5p8x16x16) {
  const Network fat = Network::build(dgx_h100(256));
  const NetworkSummary fs = fat.summary();
  EXPECT_EQ(fs.devices, 2048);
  EXPECT_EQ(fs.nics, 2048);
  EXPECT_EQ(fs.switches, 256 + 64 + 32);
  EXPECT_EQ(fs.bisection_bandwidth, GBps(51200));  // 1024 NICs x 50 GB/s = 32 leaves x 32 x 50
  EXPECT_EQ(fs.diameter_hops, 6);
  const std::string text = format_summary(fat.spec(), fs);
  std::cout << text << "\n";
  EXPECT_NE(text.find("bisection  51200 GB/s per direction"), std::string::npos) << text;
  EXPECT_NE(text.find("diameter   6 hops"), std::string::npos) << text;
  EXPECT_NE(text.find("2048 x h100-sxm"), std::string::npos) << text;
  EXPECT_NE(text.find("leaf <-> spine"), std::string::npos) << text;

  const Network tor = Network::build(torus("tpu-v5p", {8, 16, 16}));
  const NetworkSummary ts = tor.summary();
  EXPECT_EQ(ts.bisection_bandwidth, GBps(23040));  // 2 x (2048 / 16) x 90 GB/s
  EXPECT_EQ(ts.diameter_hops, 4 + 8 + 8);
  EXPECT_EQ(ts.links.at(LinkKind::kIci).count, 12288);
  EXPECT_EQ(ts.links.at(LinkKind::kIci).bandwidth, GBps(90));
  const std::string ttext = format_summary(tor.spec(), ts);
  std::cout << ttext << "\n";
  EXPECT_NE(ttext.find("bisection  23040 GB/s per direction = 2 x 128 ICI links"),
            std::string::npos)
      << ttext;
}

TEST(Placement, InOrderIsValid) {
  const ClusterSpec spec = dgx_h100(2);
  const Placement p = Placement::in_order(16);
  ASSERT_EQ(p.device_of_rank.size(), 16U);
  EXPECT_EQ(p.device_of_rank[13], dev(13));
  EXPECT_NO_THROW(p.validate(spec, "scenario.json"));
  EXPECT_NO_THROW(p.validate(spec, "scenario.json", 16));
}

TEST(Placement, BadPlacementsNameSourceFieldAndExpectation) {
  using testing::capture_input_error;
  using testing::expect_error;
  const ClusterSpec spec = dgx_h100(1);
  Placement p = Placement::in_order(4);
  p.device_of_rank[3] = dev(8);  // the cluster has devices 0..7
  expect_error(capture_input_error([&] { p.validate(spec, "scenario.json"); }), "scenario.json",
               "/placement/3", "expected a device 0 .. 7");
  p.device_of_rank[3] = dev(1);  // rank 1 is there already
  expect_error(capture_input_error([&] { p.validate(spec, "scenario.json"); }), "scenario.json",
               "/placement/3", "expected one rank per device");
  p = Placement::in_order(4);
  expect_error(capture_input_error([&] { p.validate(spec, "--placement", 6); }), "--placement",
               "/placement/4", "rank 4 is on no device");
  expect_error(capture_input_error([&] { Placement{}.validate(spec, "scenario.json"); }),
               "scenario.json", "/placement", "expected one device per rank");
}

}  // namespace
}  // namespace meshsim::topology
