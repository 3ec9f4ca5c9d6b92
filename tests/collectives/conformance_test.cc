// Conformance suite (STYLE D.14b): every algorithm x every collective kind it applies to x a few
// groups on GPU and TPU networks. For each schedule: flows are non-empty and join group members
// (or their NVSwitch); the bytes match the algorithm's traffic model (the bandwidth-optimal
// volumes of volume.h for the ring family); times are positive, deterministic and grow with the
// buffer; concurrent groups merge step by step; algorithms that do not apply say so with an
// CommError on the algorithm option.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <set>

#include "collective_test_util.h"
#include "meshsim/collectives/volume.h"
#include "meshsim/sim/error.h"

namespace meshsim::collectives {
namespace {

using namespace testing;  // NOLINT

constexpr Algorithm kAlgorithms[] = {Algorithm::kRing,
                                     Algorithm::kBidirectionalRing,
                                     Algorithm::kDoubleBinaryTree,
                                     Algorithm::kHalvingDoubling,
                                     Algorithm::kHierarchical,
                                     Algorithm::kTorusRings,
                                     Algorithm::kNvls};
constexpr CollectiveKind kKinds[] = {CollectiveKind::kAllReduce, CollectiveKind::kReduceScatter,
                                     CollectiveKind::kAllGather, CollectiveKind::kAllToAll,
                                     CollectiveKind::kBroadcast, CollectiveKind::kReduce};

struct Case {
  std::string name;
  topology::ClusterSpec spec;
  std::vector<std::vector<DeviceId>> groups;
};

// A TPU sub-grid: the devices at coords with x < ex, y < ey, z < ez.
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

std::vector<Case> cases() {
  std::vector<Case> out;
  out.push_back({"dgx-h100x4",
                 dgx_h100(4),
                 {devices(0, 2), devices(0, 5), devices(0, 8), devices(4, 8), devices(0, 16),
                  devices(0, 32)}});
  const auto v5p = preset("tpu-v5p");
  const auto net = topology::Network::build(v5p);
  out.push_back({"tpu-v5p",
                 v5p,
                 {box(net, 4, 1, 1), box(net, 2, 1, 1), box(net, 4, 4, 1), box(net, 4, 4, 4),
                  box(net, 3, 2, 1)}});
  return out;
}

// What each member must send over the whole schedule, for the algorithms whose volume is fixed
// per rank; nullopt where it varies by rank (trees, chains).
std::optional<double> sent_per_rank(Algorithm a, CollectiveKind k, Bytes n, int64_t p) {
  if (a == Algorithm::kNvls || a == Algorithm::kDoubleBinaryTree) {
    return std::nullopt;
  }
  switch (k) {
    case CollectiveKind::kAllReduce:
      return ring_allreduce_bytes_per_rank(n, p).as_double();
    case CollectiveKind::kReduceScatter:
    case CollectiveKind::kAllGather:
      return reduce_scatter_bytes_per_rank(n, p).as_double();
    case CollectiveKind::kAllToAll:
      return a == Algorithm::kRing
                 ? std::optional<double>(alltoall_bytes_per_rank(n, p).as_double())
                 : std::nullopt;
    default:
      return std::nullopt;
  }
}

void check_flows(const Schedule& s, const std::vector<DeviceId>& group,
                 const topology::Network& net, const std::string& what) {
  std::set<topology::VertexId> members;
  for (const DeviceId d : group) {
    members.insert(net.device_vertex(d));
    if (const auto sw = net.nvswitch_of(d); sw && s.algorithm == Algorithm::kNvls) {
      members.insert(*sw);
    }
  }
  ASSERT_FALSE(s.steps.empty()) << what;
  for (const Step& step : s.steps) {
    EXPECT_GE(step.repeat, 1) << what;
    EXPECT_GE(step.overhead, Duration::zero()) << what;
    EXPECT_FALSE(step.flows.empty()) << what << ": step " << step.label;
    for (const Flow& f : step.flows) {
      EXPECT_GT(f.bytes.count(), 0) << what << ": step " << step.label;
      EXPECT_NE(f.src, f.dst) << what;
      EXPECT_TRUE(members.contains(f.src) && members.contains(f.dst))
          << what << ": flow " << f.src.value() << " -> " << f.dst.value() << " leaves the group";
    }
  }
}

void check_volumes(const Schedule& s, Algorithm a, CollectiveKind k, Bytes n,
                   const std::vector<DeviceId>& group, const topology::Network& net,
                   const std::string& what) {
  const auto p = static_cast<int64_t>(group.size());
  const auto sent = bytes_by_vertex(s, true);
  const auto received = bytes_by_vertex(s, false);
  if (const auto want = sent_per_rank(a, k, n, p)) {
    for (const DeviceId d : group) {
      const auto v = net.device_vertex(d);
      EXPECT_LT(relative_error(static_cast<double>(sent.at(v)), *want), 1e-6) << what;
      EXPECT_EQ(sent.at(v), received.at(v)) << what << ": device " << d.value();
    }
  }
  const double nd = n.as_double();
  const double pd = static_cast<double>(p);
  if (a == Algorithm::kDoubleBinaryTree && k == CollectiveKind::kAllReduce) {
    // Every edge of both trees carries n/2 up and n/2 down: 2 trees x (p-1) edges x n.
    EXPECT_EQ(total_bytes(s), 2 * (p - 1) * n.count()) << what;
  }
  if (k == CollectiveKind::kBroadcast) {  // every rank but the root receives the buffer once
    for (size_t i = 1; i < group.size(); ++i) {
      EXPECT_EQ(received.at(net.device_vertex(group[i])), n.count()) << what;
    }
  }
  if (k == CollectiveKind::kReduce) {  // every rank but the root sends the buffer once
    for (size_t i = 1; i < group.size(); ++i) {
      EXPECT_EQ(sent.at(net.device_vertex(group[i])), n.count()) << what;
    }
  }
  if (a == Algorithm::kNvls) {
    const double up = k == CollectiveKind::kAllReduce   ? nd * (pd + 1) / pd
                      : k == CollectiveKind::kAllGather ? nd / pd
                                                        : nd;
    for (const DeviceId d : group) {
      EXPECT_LT(relative_error(static_cast<double>(sent.at(net.device_vertex(d))), up), 1e-6)
          << what;
    }
  }
}

void check_times(CollectiveKind k, Algorithm a, const std::vector<DeviceId>& group,
                 const topology::Network& net, const std::string& what) {
  AnalyticalBackend backend(net);
  const Duration small = time_of(plan_collective(k, MiB(1), group, a, net), backend);
  const Duration large = time_of(plan_collective(k, MiB(64), group, a, net), backend);
  EXPECT_GT(small, Duration::zero()) << what;
  EXPECT_GT(large, small) << what;
  EXPECT_EQ(time_of(plan_collective(k, MiB(64), group, a, net), backend), large) << what;
}

TEST(Conformance, EveryAlgorithmKindAndGroup) {
  const Bytes n = MiB(96);  // divisible by every group size's shards below
  int checked = 0;
  for (const Case& c : cases()) {
    const auto net = topology::Network::build(c.spec);
    for (const auto& group : c.groups) {
      for (const Algorithm a : kAlgorithms) {
        for (const CollectiveKind k : kKinds) {
          const std::string what = fmt::format("{} {} {} over {} ranks", c.name, to_string(a),
                                               to_string(k), group.size());
          if (!applicable(a, k, group, net)) {
            try {
              plan_collective(k, n, group, a, net);
              ADD_FAILURE() << what << ": not applicable, yet planned";
            } catch (const CommError& e) {
              EXPECT_EQ(e.field(), CommField::kAlgorithm) << what;
              EXPECT_FALSE(e.message().empty()) << what;
            }
            continue;
          }
          SCOPED_TRACE(what);
          const Schedule s = plan_collective(k, n, group, a, net);
          EXPECT_EQ(s.algorithm, a);
          check_flows(s, group, net, what);
          check_volumes(s, a, k, n, group, net, what);
          check_times(k, a, group, net, what);
          ++checked;
        }
      }
    }
  }
  EXPECT_GT(checked, 100);
}

TEST(Conformance, ApplicabilityMatchesTheHeader) {
  const auto net = topology::Network::build(dgx_h100(4));
  const auto node = devices(0, 8);
  const auto odd = devices(0, 6);
  const auto two_nodes = devices(0, 16);
  using K = CollectiveKind;
  EXPECT_TRUE(applicable(Algorithm::kNvls, K::kAllReduce, node, net));
  EXPECT_FALSE(applicable(Algorithm::kNvls, K::kBroadcast, node, net));
  EXPECT_FALSE(applicable(Algorithm::kNvls, K::kAllReduce, two_nodes, net));
  EXPECT_TRUE(applicable(Algorithm::kHalvingDoubling, K::kAllGather, node, net));
  EXPECT_FALSE(applicable(Algorithm::kHalvingDoubling, K::kAllGather, odd, net));
  EXPECT_FALSE(applicable(Algorithm::kHierarchical, K::kAllReduce, node, net));
  EXPECT_TRUE(applicable(Algorithm::kHierarchical, K::kAllReduce, two_nodes, net));
  EXPECT_FALSE(applicable(Algorithm::kTorusRings, K::kAllReduce, node, net));
  const auto a100 = topology::Network::build(preset("dgx-a100"));
  EXPECT_FALSE(applicable(Algorithm::kNvls, K::kAllReduce, devices(0, 8), a100));
  try {
    plan_collective(K::kAllReduce, MiB(1), two_nodes, Algorithm::kNvls, net);
    FAIL() << "NVLS across nodes planned";
  } catch (const CommError& e) {
    EXPECT_EQ(e.field(), CommField::kAlgorithm);
    EXPECT_NE(e.message().find("nvls"), std::string::npos) << e.message();
    EXPECT_NE(e.message().find("NVSwitch domain"), std::string::npos) << e.message();
  }
}

TEST(Conformance, ConcurrentGroupsMergeStepByStep) {
  const auto net = topology::Network::build(dgx_h100(2));
  const std::vector<std::vector<DeviceId>> groups = {devices(0, 4), devices(4, 4), devices(8, 4)};
  for (const Algorithm a : {Algorithm::kRing, Algorithm::kHalvingDoubling, Algorithm::kNvls,
                            Algorithm::kDoubleBinaryTree}) {
    const Schedule merged = plan_concurrent(CollectiveKind::kAllReduce, MiB(8), groups, a, net);
    const Schedule one = plan_collective(CollectiveKind::kAllReduce, MiB(8), groups[0], a, net);
    ASSERT_EQ(merged.steps.size(), one.steps.size()) << to_string(a);
    for (size_t i = 0; i < one.steps.size(); ++i) {
      EXPECT_EQ(merged.steps[i].flows.size(), 3 * one.steps[i].flows.size()) << to_string(a);
      EXPECT_EQ(merged.steps[i].repeat, one.steps[i].repeat) << to_string(a);
    }
  }
  // Groups whose hierarchical schedules differ (2 nodes x 4 ranks vs 4 nodes x 2) cannot run
  // step by step together.
  const auto big = topology::Network::build(dgx_h100(4));
  std::vector<DeviceId> two_by_four = devices(0, 4);
  for (const DeviceId d : devices(8, 4)) {
    two_by_four.push_back(d);
  }
  std::vector<DeviceId> four_by_two;
  for (uint32_t node = 0; node < 4; ++node) {
    four_by_two.push_back(DeviceId(node * 8 + 6));
    four_by_two.push_back(DeviceId(node * 8 + 7));
  }
  const std::vector<std::vector<DeviceId>> uneven = {two_by_four, four_by_two};
  EXPECT_THROW(
      plan_concurrent(CollectiveKind::kAllReduce, MiB(8), uneven, Algorithm::kHierarchical, big),
      InternalError);
}

TEST(Conformance, EmptyBufferAndSingleRankCostNothing) {
  const auto net = topology::Network::build(dgx_h100(1));
  AnalyticalBackend backend(net);
  for (const Algorithm a : kAlgorithms) {
    for (const CollectiveKind k : kKinds) {
      if (!supports_kind(a, k)) {
        continue;
      }
      EXPECT_EQ(time_of(plan_collective(k, MiB(1), devices(3, 1), a, net), backend),
                Duration::zero())
          << to_string(a);
      if (applicable(a, k, devices(0, 8), net)) {
        EXPECT_EQ(time_of(plan_collective(k, Bytes::zero(), devices(0, 8), a, net), backend),
                  Duration::zero())
            << to_string(a);
      }
    }
  }
}

TEST(Conformance, NamesRoundTrip) {
  for (const Algorithm a : kAlgorithms) {
    EXPECT_EQ(parse_enum<Algorithm>(to_string(a)), a);
  }
  EXPECT_EQ(parse_enum<Algorithm>("auto"), Algorithm::kAuto);
  EXPECT_EQ(parse_enum<Algorithm>("tree"), Algorithm::kDoubleBinaryTree);
  EXPECT_FALSE(parse_enum<Algorithm>("rings").has_value());
}

}  // namespace
}  // namespace meshsim::collectives
