// Every fabric against graph search and max-flow: on small clusters of each kind, for every pair
// of devices the structure-aware routes equal the shortest paths a breadth-first search finds
// (or, on tori, are one of them), the summary's diameter equals the longest of them, and the
// summary's bisection equals the Boost max-flow across the corresponding cut.
#include <gtest/gtest.h>

#include <algorithm>
#include <limits>
#include <string>
#include <vector>

#include "meshsim/topology/network.h"
#include "network_test_util.h"

namespace meshsim::topology {
namespace {

using testing::dev;
using testing::dgx_h100;
using testing::expect_walk;
using testing::halves;
using testing::preset;
using testing::sorted;
using testing::torus;
using testing::vtx;

struct GpuCase {
  std::string name;
  ClusterSpec spec;
};

ClusterSpec shrink(ClusterSpec spec, int64_t nodes, int64_t devices_per_node, int64_t radix,
                   int64_t tiers, double oversubscription) {
  spec.nodes = nodes;
  spec.devices_per_node = devices_per_node;
  spec.fat_tree->switch_radix = radix;
  spec.fat_tree->tiers = tiers;
  spec.fat_tree->oversubscription = oversubscription;
  return spec;
}

std::vector<GpuCase> gpu_cases() {
  std::vector<GpuCase> cases;
  for (const int64_t nodes : {1, 2, 3, 4, 64}) {
    cases.push_back({"dgx-h100 x" + std::to_string(nodes), dgx_h100(nodes)});
  }
  ClusterSpec two_nics = dgx_h100(4);
  two_nics.fat_tree->nics_per_device = 2;
  cases.push_back({"two NICs per GPU", two_nics});
  ClusterSpec flat = dgx_h100(8);
  flat.fat_tree->rail_optimized = false;
  cases.push_back({"not rail-optimized", flat});
  ClusterSpec one_tier = dgx_h100(4);
  one_tier.fat_tree->tiers = 1;
  cases.push_back({"one tier", one_tier});
  cases.push_back({"oversubscribed 3:1", shrink(dgx_h100(1), 12, 2, 8, 2, 3.0)});
  cases.push_back({"three tiers, 3 pods", shrink(preset("dgx-a100"), 24, 2, 8, 3, 1.0)});
  cases.push_back({"three tiers 3:1, 2 pods", shrink(preset("dgx-a100"), 24, 2, 8, 3, 3.0)});
  cases.push_back({"three tiers, one pod", resize_nodes(preset("dgx-a100"), 2)});
  cases.push_back({"nvl72 x2", resize_nodes(preset("gb200-nvl72"), 36)});
  return cases;
}

TEST(NetworkFabrics, GpuRoutesAreExactlyTheShortestSwitchPaths) {
  for (const GpuCase& c : gpu_cases()) {
    SCOPED_TRACE(c.name);
    const Network net = Network::build(c.spec);
    const auto n = static_cast<int64_t>(net.num_devices());
    const int64_t stride = n > 160 ? 7 : 1;  // sample sources on the larger cases
    int64_t longest = 0;
    for (int64_t a = 0; a < n; a += stride) {
      for (int64_t b = 0; b < n; ++b) {
        if (a == b) {
          continue;
        }
        const std::vector<Path> found = net.search_paths(vtx(a), vtx(b));
        ASSERT_FALSE(found.empty()) << a << " cannot reach " << b;
        const std::vector<Path> routed = net.paths(vtx(a), vtx(b));
        ASSERT_EQ(sorted(routed), sorted(found)) << a << " -> " << b;
        ASSERT_EQ(net.path_count(vtx(a), vtx(b)), static_cast<int64_t>(found.size()));
        ASSERT_EQ(net.hops(dev(a), dev(b)), static_cast<int64_t>(found.front().size()));
        expect_walk(net, vtx(a), vtx(b), net.route(vtx(a), vtx(b), static_cast<uint64_t>(a)),
                    false);
        longest = std::max<int64_t>(longest, net.hops(dev(a), dev(b)));
      }
    }
    EXPECT_EQ(net.summary().diameter_hops, longest);
  }
}

TEST(NetworkFabrics, GpuBisectionEqualsMaxFlowBetweenTheHalves) {
  for (const GpuCase& c : gpu_cases()) {
    SCOPED_TRACE(c.name);
    const Network net = Network::build(c.spec);
    const auto [first, second] = halves(net);
    const NetworkSummary s = net.summary();
    EXPECT_DOUBLE_EQ(s.bisection_bandwidth.value(), net.cut_bandwidth(first, second).value())
        << s.bisection_formula;
  }
}

TEST(NetworkFabrics, GpuBisectionByHand) {
  const auto bisection = [](const ClusterSpec& spec) {
    return Network::build(spec).summary().bisection_bandwidth;
  };
  EXPECT_EQ(bisection(dgx_h100(1)), GBps(4 * 450 + 4 * 50));  // the node is split
  EXPECT_EQ(bisection(dgx_h100(2)), GBps(8 * 50));            // one node's NICs
  EXPECT_EQ(bisection(dgx_h100(3)), GBps(4 * 450 + 12 * 50));
  EXPECT_EQ(bisection(dgx_h100(64)), GBps(256 * 50));  // = 8 leaves x 32 uplinks x 50 GB/s
  // 3:1, radix 8: leaves have 6 down / 2 up; half the devices sit under 2 leaves -> 2 x 2 x 50.
  EXPECT_EQ(bisection(shrink(dgx_h100(1), 12, 2, 8, 2, 3.0)), GBps(200));
}

TEST(NetworkFabrics, ThreeTierLayout) {
  const Network net = Network::build(shrink(preset("dgx-a100"), 24, 2, 8, 3, 1.0));
  // radix 8: leaves 4 down / 4 up; 2 rails x 6 leaf groups = 12 leaves in 3 pods of 4; 4 spines
  // per pod; core groups of 2 (smallest divisor of 4 >= ceil(3 / 2)), 2 cables per spine-core.
  EXPECT_EQ(testing::count_kind(net, VertexKind::kLeaf), 12);
  EXPECT_EQ(testing::count_kind(net, VertexKind::kSpine), 12);
  EXPECT_EQ(testing::count_kind(net, VertexKind::kCore), 8);
  EXPECT_EQ(net.hops(dev(0), dev(2)), 4);   // nodes 0 and 1, rail 0, same leaf
  EXPECT_EQ(net.hops(dev(0), dev(8)), 6);   // node 4: next leaf of rail 0, same pod
  EXPECT_EQ(net.hops(dev(0), dev(16)), 8);  // node 8: pod 1
  EXPECT_EQ(net.path_count(vtx(0), vtx(16)), 4 * 2);
  EXPECT_EQ(net.path_latency(net.route(vtx(0), vtx(8))), net.spec().scale_out_latency);
}

TEST(NetworkFabrics, SuperPodOnThreeTiers) {
  // 140 DGX A100 (1120 GPUs), radix 40: leaves 20 down / 20 up; 8 rails x 7 = 56 leaves in 3
  // pods of 20 with 20 spines each; core groups of 2 (smallest divisor of 20 >= ceil(3 / 2)),
  // 10 cables per spine-core pair.
  const Network net = Network::build(resize_nodes(preset("dgx-a100"), 140));
  EXPECT_EQ(testing::count_kind(net, VertexKind::kLeaf), 56);
  EXPECT_EQ(testing::count_kind(net, VertexKind::kSpine), 60);
  EXPECT_EQ(testing::count_kind(net, VertexKind::kCore), 40);
  EXPECT_EQ(net.hops(dev(0), dev(8 * 20)), 6);  // node 20: rail 0, next leaf, same pod
  EXPECT_EQ(net.hops(dev(0), dev(8 * 60)), 8);  // node 60: group 3, leaf 24, pod 1
  EXPECT_EQ(net.path_count(vtx(0), vtx(8 * 60)), 20 * 2);
  const NetworkSummary s = net.summary();
  EXPECT_EQ(s.diameter_hops, 8);
  const auto [first, second] = halves(net);
  EXPECT_DOUBLE_EQ(s.bisection_bandwidth.value(), net.cut_bandwidth(first, second).value())
      << s.bisection_formula;
  EXPECT_EQ(s.bisection_bandwidth, Gbps(200) * 560.0);  // non-blocking: every NIC of a half
}

// InfiniBand's fat-tree routing gives each destination port its own up-ports: flows with one salt
// (the destination node, as the collectives choose it) from the 8 GPUs of a node to the 8 GPUs of
// a node in another pod, one per rail, cross the cores on 8 different spine -> core links, not
// all on one (which made every rail-aligned ring across pods share a single link).
TEST(NetworkFabrics, OneNodesRailsCrossPodsOnDifferentCores) {
  const Network net = Network::build(resize_nodes(preset("dgx-h100"), 1344));
  const int64_t other = 8 * 128 * 8;  // node 1024: another pod (128 nodes a pod at radix 64)
  ASSERT_EQ(net.hops(dev(0), dev(other)), 8);
  std::vector<std::pair<VertexId, VertexId>> up_to_core;
  for (int64_t rail = 0; rail < 8; ++rail) {
    const Path p = net.route(vtx(rail), vtx(other + rail), /*salt=*/1024);
    for (const LinkId l : p) {
      const Link& link = net.link(l);
      if (net.vertex(link.dst).kind == VertexKind::kCore) {
        up_to_core.emplace_back(link.src, link.dst);
      }
    }
  }
  ASSERT_EQ(up_to_core.size(), 8u);
  std::sort(up_to_core.begin(), up_to_core.end());
  EXPECT_EQ(std::unique(up_to_core.begin(), up_to_core.end()), up_to_core.end());
  // The same salt still picks one path per NIC pair, and every path stays an equal-cost path.
  EXPECT_EQ(net.route(vtx(3), vtx(other + 3), 1024), net.route(vtx(3), vtx(other + 3), 1024));
  EXPECT_EQ(net.route(vtx(3), vtx(other + 3), 1024).size(), net.route(vtx(3), vtx(other + 3), 0).size());
}

struct TorusCase {
  std::string name;
  ClusterSpec spec;
};

std::vector<TorusCase> torus_cases() {
  ClusterSpec two = preset("tpu-v5p");
  two.slices = 2;
  two.nodes = 32;
  ClusterSpec three = two;
  three.slices = 3;
  three.nodes = 48;
  return {{"v5p 4x4x4", preset("tpu-v5p")},
          {"v5e 8x8 open", torus("tpu-v5e", {8, 8})},
          {"v5e 16x4", torus("tpu-v5e", {16, 4})},
          {"v4 4x4x8", torus("tpu-v4", {4, 4, 8})},
          {"v5p 2x2x1", torus("tpu-v5p", {2, 2, 1})},
          {"v5p 4x4x4 x2 slices", two},
          {"v5p 4x4x4 x3 slices", three}};
}

TEST(NetworkFabrics, TorusRoutesAreShortestAndEveryChipReachesEveryOther) {
  for (const TorusCase& c : torus_cases()) {
    SCOPED_TRACE(c.name);
    const Network net = Network::build(c.spec);
    const auto n = static_cast<int64_t>(net.num_devices());
    const int64_t per_slice = n / c.spec.slices;
    int64_t longest = 0;
    for (int64_t a = 0; a < n; ++a) {
      for (int64_t b = 0; b < n; ++b) {
        if (a == b) {
          continue;
        }
        const Path p = net.route(vtx(a), vtx(b));
        expect_walk(net, vtx(a), vtx(b), p, true);
        ASSERT_EQ(net.hops(dev(a), dev(b)), static_cast<int64_t>(p.size()));
        longest = std::max<int64_t>(longest, net.hops(dev(a), dev(b)));
        if (c.spec.slices > 1) {
          continue;  // search may shortcut through DCN inside a slice; routes never do
        }
        const std::vector<Path> found = net.search_paths(vtx(a), vtx(b));
        ASSERT_FALSE(found.empty());
        ASSERT_EQ(found.front().size(), p.size()) << a << " -> " << b;
        ASSERT_NE(std::find(found.begin(), found.end(), p), found.end());
      }
      if (a % per_slice == 0) {
        EXPECT_EQ(net.search_paths(vtx(a), vtx((a + per_slice) % n)).empty(), per_slice == n);
      }
    }
    EXPECT_EQ(net.summary().diameter_hops, longest);
  }
}

// The cut across `axis` at half its extent (chips with coordinate < e/2 on one side).
std::pair<std::vector<DeviceId>, std::vector<DeviceId>> axis_halves(const Network& net, size_t axis,
                                                                    int64_t e) {
  std::pair<std::vector<DeviceId>, std::vector<DeviceId>> out;
  for (int64_t d = 0; d < static_cast<int64_t>(net.num_devices()); ++d) {
    (net.torus_coords(dev(d))[axis] < e / 2 ? out.first : out.second).push_back(dev(d));
  }
  return out;
}

TEST(NetworkFabrics, TorusBisectionEqualsMaxFlowAcrossTheBestAxisCut) {
  for (const TorusCase& c : torus_cases()) {
    SCOPED_TRACE(c.name);
    const Network net = Network::build(c.spec);
    const NetworkSummary s = net.summary();
    if (c.spec.slices > 1) {
      const auto [first, second] = halves(net);  // whole slices (and half of one, if odd)
      EXPECT_DOUBLE_EQ(s.bisection_bandwidth.value(), net.cut_bandwidth(first, second).value())
          << s.bisection_formula;
      continue;
    }
    double best = std::numeric_limits<double>::infinity();
    for (size_t axis = 0; axis < c.spec.torus_shape.size(); ++axis) {
      const int64_t e = c.spec.torus_shape[axis];
      if (e >= 2) {
        const auto [first, second] = axis_halves(net, axis, e);
        best = std::min(best, net.cut_bandwidth(first, second).value());
      }
    }
    EXPECT_DOUBLE_EQ(s.bisection_bandwidth.value(), best) << s.bisection_formula;
  }
}

TEST(NetworkFabrics, TorusBisectionByHand) {
  const auto bisection = [](const ClusterSpec& spec) {
    return Network::build(spec).summary().bisection_bandwidth;
  };
  EXPECT_EQ(bisection(preset("tpu-v5p")), GBps(2 * 16 * 90));
  EXPECT_EQ(bisection(preset("tpu-v5e")), GBps(2 * 16 * 45));  // 16x16, both axes wrap
  EXPECT_EQ(bisection(torus("tpu-v5e", {8, 8})), GBps(8 * 45));
  // 16x4, only the 16-axis wraps: across it 2 x 4 rings (360 GB/s); across the open 4-axis
  // 16 x 1 (720 GB/s).
  EXPECT_EQ(bisection(torus("tpu-v5e", {16, 4})), GBps(2 * 4 * 45));
  // A v3 pod is 32x32 with both axes wrapping: 6.4 TB/s, the Google Cloud TPU v3 docs' bisection
  // bandwidth per pod. A 16-chip axis is a full pod edge on v5e but not on v3: no wraparound.
  EXPECT_EQ(bisection(preset("tpu-v3")), GBps(2 * 32 * 100));
  EXPECT_EQ(bisection(torus("tpu-v3", {16, 16})), GBps(16 * 100));
}

}  // namespace
}  // namespace meshsim::topology
