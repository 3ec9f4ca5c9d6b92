// Double binary tree and halving-doubling schedules.
//
// Double binary tree (NCCL's tree, Sanders et al. "Two-tree algorithms for full bandwidth
// broadcast, reduction and scan", 2009): tree A is the in-order binary tree on ranks 0..p-1 (rank
// r's parent clears r's lowest set bit b and sets bit 2b, or only clears b when that is out of
// range; odd ranks are leaves); tree B is A mirrored (r -> p-1-r) for even p or shifted by one
// rank for odd p, so that most interior ranks of one tree are leaves of the other. Each tree
// carries half of the buffer. All-reduce reduces up and broadcasts down both trees, pipelined in
// chunks: in the limit of many chunks every tree edge carries n/2 each way at once, so the
// schedule is one step of those concurrent flows (an interior rank of A that is a leaf of B sends
// 4 x n/2 = 2n, the same order as the ring's 2(p-1)/p n), plus a fixed overhead of 2h - 1 edge
// latencies (h: tree height) for the first chunk to go up and down. Broadcast / reduce: both
// trees rooted at rank 0 (tree B is entered through an extra edge 0 -> B's root), n/2 down (up)
// each, overhead h - 1 latencies.
//
// Halving-doubling (Thakur, Rabenseifner, Gropp 2005), p a power of two: the reduce-scatter is
// log2 p steps where rank i exchanges with i XOR d, d = p/2, p/4, ..., 1, sending n/2, n/4, ...,
// n/p; the all-gather mirrors it (d = 1, ..., p/2, sending n/p, ..., n/2). Per rank (p-1)/p n for
// each half, log2 p latencies each.
#include <fmt/format.h>

#include <algorithm>

#include "meshsim/sim/error.h"
#include "planner_util.h"

namespace meshsim::collectives::detail {
namespace {

// Parent of rank r in the in-order binary tree on p ranks; nullopt for the root (rank 0).
std::optional<int64_t> btree_parent(int64_t p, int64_t r) {
  if (r == 0) {
    return std::nullopt;
  }
  const int64_t bit = r & -r;
  const int64_t up = (r ^ bit) | (bit << 1);
  return up < p ? up : (r ^ bit);
}

struct Tree {
  int64_t root = 0;
  std::vector<std::optional<int64_t>> parent;  // by rank
  int64_t height = 0;
};

Tree make_tree(int64_t p, bool second) {
  Tree t;
  t.parent.resize(static_cast<size_t>(p));
  for (int64_t r = 0; r < p; ++r) {
    std::optional<int64_t> up;
    if (!second) {
      up = btree_parent(p, r);
    } else if (p % 2 == 0) {  // mirror
      const auto u = btree_parent(p, p - 1 - r);
      up = u ? std::optional<int64_t>(p - 1 - *u) : std::nullopt;
    } else {  // shift by one
      const auto u = btree_parent(p, (r - 1 + p) % p);
      up = u ? std::optional<int64_t>((*u + 1) % p) : std::nullopt;
    }
    t.parent[static_cast<size_t>(r)] = up;
    if (!up) {
      t.root = r;
    }
  }
  for (int64_t r = 0; r < p; ++r) {
    int64_t depth = 0;
    for (auto u = t.parent[static_cast<size_t>(r)]; u; u = t.parent[static_cast<size_t>(*u)]) {
      ++depth;
      SIM_CHECK(depth <= p, "binary tree over {} ranks has a cycle at rank {}", p, r);
    }
    t.height = std::max(t.height, depth);
  }
  return t;
}

struct TreeFlows {
  std::vector<Flow> flows;
  Duration max_latency = Duration::zero();
  void add(const topology::Network& net, DeviceId a, DeviceId b, Bytes bytes) {
    flows.push_back(device_flow(net, a, b, bytes));
    max_latency = std::max(max_latency, device_latency(net, a, b));
  }
};

Schedule tree_all_reduce(Bytes bytes, Group group, const topology::Network& net) {
  const auto p = static_cast<int64_t>(group.size());
  const Bytes half = shard(bytes, 1, 2);
  TreeFlows tf;
  int64_t height = 0;
  for (const bool second : {false, true}) {
    const Tree t = make_tree(p, second);
    height = std::max(height, t.height);
    for (int64_t r = 0; r < p; ++r) {
      if (const auto u = t.parent[static_cast<size_t>(r)]) {
        tf.add(net, group[static_cast<size_t>(r)], group[static_cast<size_t>(*u)], half);
        tf.add(net, group[static_cast<size_t>(*u)], group[static_cast<size_t>(r)], half);
      }
    }
  }
  Schedule s;
  s.algorithm = Algorithm::kDoubleBinaryTree;
  s.steps.push_back(make_step(std::move(tf.flows), 1, "double binary tree reduce + broadcast",
                              tf.max_latency * (2 * height - 1)));
  return s;
}

// Both trees rooted at rank 0; `up` reverses every edge (reduce).
Schedule tree_rooted(Bytes bytes, Group group, const topology::Network& net, bool up) {
  const auto p = static_cast<int64_t>(group.size());
  const Bytes half = shard(bytes, 1, 2);
  TreeFlows tf;
  auto edge = [&](int64_t from, int64_t to) {
    const DeviceId a = group[static_cast<size_t>(from)];
    const DeviceId b = group[static_cast<size_t>(to)];
    up ? tf.add(net, b, a, half) : tf.add(net, a, b, half);
  };
  const Tree a = make_tree(p, false);
  const Tree b = make_tree(p, true);
  for (int64_t r = 1; r < p; ++r) {
    edge(*a.parent[static_cast<size_t>(r)], r);
    if (const auto u = b.parent[static_cast<size_t>(r)]) {
      edge(*u, r);
    }
  }
  edge(0, b.root);  // b.root != 0 for p >= 2
  Schedule s;
  s.algorithm = Algorithm::kDoubleBinaryTree;
  const int64_t height = std::max(a.height, b.height + 1);
  s.steps.push_back(make_step(std::move(tf.flows), 1,
                              up ? "double binary tree reduce" : "double binary tree broadcast",
                              tf.max_latency * (height - 1)));
  return s;
}

void add_exchange(Schedule& s, const topology::Network& net, Group group, int64_t distance,
                  Bytes bytes, const char* phase) {
  std::vector<Flow> flows;
  for (size_t i = 0; i < group.size(); ++i) {
    const size_t j = i ^ static_cast<size_t>(distance);
    flows.push_back(device_flow(net, group[i], group[j], bytes));
  }
  s.steps.push_back(make_step(std::move(flows), 1,
                              fmt::format("halving-doubling {} (distance {})", phase, distance)));
}

}  // namespace

Reason tree_unsupported(CollectiveKind, Group, const topology::Network&) { return std::nullopt; }

Schedule plan_double_binary_tree(CollectiveKind kind, Bytes bytes, Group group,
                                 const topology::Network& net) {
  if (group.size() < 2 || bytes.count() == 0) {
    Schedule s;
    s.algorithm = Algorithm::kDoubleBinaryTree;
    return s;
  }
  switch (kind) {
    case CollectiveKind::kAllReduce:
      return tree_all_reduce(bytes, group, net);
    case CollectiveKind::kBroadcast:
      return tree_rooted(bytes, group, net, false);
    case CollectiveKind::kReduce:
      return tree_rooted(bytes, group, net, true);
    default:
      SIM_CHECK(false, "double binary tree has no {} schedule", to_string(kind));
  }
}

Reason halving_doubling_unsupported(CollectiveKind, Group group, const topology::Network&) {
  if (!is_power_of_two(static_cast<int64_t>(group.size()))) {
    return fmt::format("needs a power-of-two number of ranks, the group has {}", group.size());
  }
  return std::nullopt;
}

Schedule plan_halving_doubling(CollectiveKind kind, Bytes bytes, Group group,
                               const topology::Network& net) {
  Schedule s;
  s.algorithm = Algorithm::kHalvingDoubling;
  const auto p = static_cast<int64_t>(group.size());
  if (p < 2 || bytes.count() == 0) {
    return s;
  }
  SIM_CHECK(is_power_of_two(p), "halving-doubling over {} ranks", p);
  const bool rs = kind == CollectiveKind::kAllReduce || kind == CollectiveKind::kReduceScatter;
  const bool ag = kind == CollectiveKind::kAllReduce || kind == CollectiveKind::kAllGather;
  SIM_CHECK(rs || ag, "halving-doubling has no {} schedule", to_string(kind));
  if (rs) {
    for (int64_t d = p / 2, part = 2; d >= 1; d /= 2, part *= 2) {
      add_exchange(s, net, group, d, shard(bytes, 1, part), "reduce-scatter");
    }
  }
  if (ag) {
    for (int64_t d = 1, part = p; d < p; d *= 2, part /= 2) {
      add_exchange(s, net, group, d, shard(bytes, 1, part), "all-gather");
    }
  }
  return s;
}

}  // namespace meshsim::collectives::detail
