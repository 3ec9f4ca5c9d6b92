// Conformance suite (docs/style.md D.14b): every algorithm x every collective kind x a few groups
// on GPU and TPU networks. Where the pattern fits the group: its flows carry bytes between the
// group's devices (or their NVSwitch or leaf); the ring family moves the bandwidth-optimal volumes
// of volume.h on one node; the planner's shape (forced algorithm) either runs it, with a positive,
// deterministic time that grows with the buffer, or refuses
// (CommError on the algorithm option: NCCL has no such algorithm on this system); shapes of one
// rank or no bytes cost nothing.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <set>

#include "collective_test_util.h"
#include "meshsim/collectives/volume.h"
#include "meshsim/sim/error.h"

namespace meshsim::collectives {
namespace {

using namespace testing;  // NOLINT

constexpr Algorithm kAlgorithms[] = {
    Algorithm::kRing,          Algorithm::kTree,          Algorithm::kNvls,
    Algorithm::kNvlsTree,      Algorithm::kCollNetDirect, Algorithm::kCollNetChain,
    Algorithm::kPat,           Algorithm::kTorusRings,    Algorithm::kHierarchical,
    Algorithm::kSendRecv};
constexpr CollectiveKind kKinds[] = {CollectiveKind::kAllReduce, CollectiveKind::kReduceScatter,
                                     CollectiveKind::kAllGather, CollectiveKind::kAllToAll,
                                     CollectiveKind::kBroadcast, CollectiveKind::kReduce};

struct Case {
  std::string name;
  topology::ClusterSpec spec;
  std::vector<std::vector<DeviceId>> groups;
};

std::vector<DeviceId> box(const topology::Network& net, int64_t ex, int64_t ey, int64_t ez) {
  std::vector<DeviceId> out;
  for (int64_t z = 0; z < ez; ++z) {
    for (int64_t y = 0; y < ey; ++y) {
      for (int64_t x = 0; x < ex; ++x) {
        out.push_back(net.device_at({x, y, z}));
      }
    }
  }
  return out;
}

std::vector<DeviceId> one_per_node(int64_t nodes) {
  std::vector<DeviceId> out;
  for (int64_t n = 0; n < nodes; ++n) {
    out.emplace_back(static_cast<uint32_t>(8 * n));
  }
  return out;
}

std::vector<Case> cases() {
  std::vector<Case> out;
  const std::vector<std::vector<DeviceId>> gpu_groups = {
      devices(0, 2), devices(0, 5), devices(0, 8), devices(4, 8), devices(0, 16),
      devices(0, 32), one_per_node(4)};
  out.push_back({"dgx-h100x4", dgx_h100(4), gpu_groups});
  topology::ClusterSpec sharp = dgx_h100(4);
  sharp.fat_tree->sharp = true;
  out.push_back({"dgx-h100x4-sharp", sharp, gpu_groups});
  const auto v5p = preset("tpu-v5p");
  const auto net = topology::Network::build(v5p);
  out.push_back({"tpu-v5p",
                 v5p,
                 {box(net, 4, 1, 1), box(net, 2, 1, 1), box(net, 4, 4, 1), box(net, 4, 4, 4),
                  box(net, 3, 2, 1)}});
  return out;
}

void check_flows(const Schedule& s, const std::vector<DeviceId>& group,
                 const topology::Network& net, const std::string& what) {
  std::set<topology::VertexId> allowed;
  for (const DeviceId d : group) {
    allowed.insert(net.device_vertex(d));
    if (const auto sw = net.nvswitch_of(d)) {
      allowed.insert(*sw);
    }
  }
  for (uint32_t v = 0; v < net.num_vertices(); ++v) {  // SHARP: the leaf switches
    if (net.vertex(topology::VertexId(v)).kind == topology::VertexKind::kLeaf) {
      allowed.insert(topology::VertexId(v));
    }
  }
  ASSERT_FALSE(s.steps.empty()) << what;
  for (const Step& step : s.steps) {
    EXPECT_GE(step.repeat, 1) << what;
    EXPECT_FALSE(step.flows.empty()) << what << ": step " << step.label;
    for (const Flow& f : step.flows) {
      EXPECT_GT(f.bytes.count(), 0) << what << ": step " << step.label;
      EXPECT_NE(f.src, f.dst) << what;
      EXPECT_TRUE(allowed.contains(f.src) && allowed.contains(f.dst))
          << what << ": flow " << net.vertex(f.src).name << " -> " << net.vertex(f.dst).name
          << " leaves the group";
    }
  }
}

// Inside one node, the ring and all-to-all move what volume.h says every rank must send.
void check_volumes(const Schedule& s, Algorithm a, CollectiveKind k, Bytes n,
                   const std::vector<DeviceId>& group, const topology::Network& net,
                   const std::string& what) {
  const auto p = static_cast<int64_t>(group.size());
  const bool one_node = net.nvswitch_of(group.front()) == net.nvswitch_of(group.back()) &&
                        net.nvswitch_of(group.front()).has_value();
  if (!one_node) {
    return;
  }
  std::optional<double> want;
  if (a == Algorithm::kRing && k == CollectiveKind::kAllReduce) {
    want = ring_allreduce_bytes_per_rank(n, p).as_double();
  } else if (a == Algorithm::kRing &&
             (k == CollectiveKind::kReduceScatter || k == CollectiveKind::kAllGather)) {
    want = reduce_scatter_bytes_per_rank(n, p).as_double();
  } else if (a == Algorithm::kSendRecv) {
    want = alltoall_bytes_per_rank(n, p).as_double();
  }
  if (!want) {
    return;
  }
  const auto sent = bytes_by_vertex(s, true);
  for (const DeviceId d : group) {
    EXPECT_LT(relative_error(static_cast<double>(sent.at(net.device_vertex(d))), *want), 1e-6)
        << what;
  }
}

TEST(Conformance, EveryAlgorithmKindAndGroup) {
  int planned = 0;
  int refused = 0;
  for (const Case& c : cases()) {
    const auto net = topology::Network::build(c.spec);
    for (const Algorithm a : kAlgorithms) {
      const CollectivePlanner planner(net, CollectiveOptions{a, std::nullopt, kDefaultNcclVersion});
      for (const CollectiveKind k : kKinds) {
        for (const auto& g : c.groups) {
          const std::string what = fmt::format("{} {} {} over {} ranks from {}", c.name,
                                               to_string(a), to_string(k), g.size(),
                                               g.front().value());
          if (supports_kind(a, k) && !pattern_unsupported(a, k, g, net)) {
            const Schedule s = plan_collective(k, MiB(8), g, a, net);
            check_flows(s, g, net, what);
            check_volumes(s, a, k, MiB(8), g, net, what);
          }
          Duration small;
          try {
            small = time_of(planner, k, MiB(1), g);
          } catch (const CommError& e) {
            EXPECT_EQ(e.field(), CommField::kAlgorithm) << what;
            ++refused;
            continue;
          }
          ++planned;
          const Duration big = time_of(planner, k, MiB(64), g);
          EXPECT_GT(small, Duration::zero()) << what;
          EXPECT_GT(big, small) << what;
          EXPECT_EQ(time_of(planner, k, MiB(64), g), big) << what << ": not deterministic";
        }
      }
    }
  }
  EXPECT_GT(planned, 100);
  EXPECT_GT(refused, 10);
}

TEST(Conformance, EmptyBufferAndSingleRankCostNothing) {
  const auto net = topology::Network::build(dgx_h100(1));
  const CollectivePlanner planner(net, {});
  for (const CollectiveKind k : kKinds) {
    EXPECT_EQ(time_of(planner, k, Bytes::zero(), devices(0, 8)), Duration::zero());
    EXPECT_EQ(time_of(planner, k, MiB(1), devices(3, 1)), Duration::zero());
  }
}

TEST(Conformance, NamesRoundTrip) {
  for (const Algorithm a : kAlgorithms) {
    EXPECT_EQ(parse_enum<Algorithm>(to_string(a)), a);
  }
  EXPECT_EQ(parse_enum<Algorithm>("auto"), Algorithm::kAuto);
  EXPECT_EQ(parse_enum<Algorithm>("nvlstree"), Algorithm::kNvlsTree);  // NCCL_ALGO's spelling
  EXPECT_FALSE(parse_enum<Algorithm>("halving-doubling"));  // not an algorithm NCCL has
  EXPECT_EQ(parse_enum<NcclProtocol>("LL128"), NcclProtocol::kLL128);
  for (const NcclAlgorithm n :
       {NcclAlgorithm::kTree, NcclAlgorithm::kRing, NcclAlgorithm::kNvls, NcclAlgorithm::kPat}) {
    EXPECT_EQ(nccl_algorithm(from_nccl(n)), n);
  }
}

TEST(Conformance, ImagesLoadTheLinksOfEveryGroup) {
  // A family of 8 TP groups (one per node) as one shape: the same algorithm, 8x the loads of one.
  const auto net = topology::Network::build(dgx_h100(8));
  const CollectivePlanner planner(net, {});
  std::vector<std::vector<DeviceId>> family;
  for (int64_t n = 0; n < 8; ++n) {
    family.push_back(devices(8 * n, 8));
  }
  const CommShape one = planner.collective(CollectiveKind::kAllReduce, MiB(64), {family.data(), 1});
  const CommShape all = planner.collective(CollectiveKind::kAllReduce, MiB(64), family);
  EXPECT_EQ(all.algorithm, one.algorithm);
  EXPECT_EQ(all.loads.size(), 8 * one.loads.size());
  EXPECT_EQ(planner.isolated_time(all), planner.isolated_time(one));  // disjoint NVLink domains
}

}  // namespace
}  // namespace meshsim::collectives
