// Traffic patterns of NCCL's tree, NVLS-tree, CollNet, PAT and all-to-all (the data movement of
// NCCL 2.30.7's kernels).
//
// The group spans k nodes (scale-up domains) with m ranks each (even_nodes_unsupported checks it);
// local rank j of a node is its j-th member in group order. NCCL runs one channel per NIC, and
// channel c of a node enters and leaves it through local rank c (its NIC, rail c), each channel
// carrying n/m of a buffer of n bytes. Flows are totals over the whole collective (the network
// model sums them into per-link loads; see schedule.h), so each pattern is one step.
//   tree (all-reduce)   per channel c: a chain through the node starting at local rank c (reduce
//                       towards c, broadcast back: n/m each way on every chain edge) and, between
//                       the nodes' local ranks c, two complementary binary trees (nccl's double
//                       binary tree), each carrying half: n/(2m) up and down every tree edge.
//                       One node: the chain alone.
//   NVLS-tree           NVLS inside each node (every GPU to and from the switch, n(m+1)/m each
//   (all-reduce)        way, plan_nvls.cc) and the double binary trees between the nodes' local
//                       ranks c over their NICs, n/(2m) each way per tree edge.
//   NVLS across nodes   NVLS inside each node, IB SHARP between the heads (as CollNet's).
//   CollNet (SHARP)     reduction in the network: every head (local rank c) sends its n/m to its
//                       leaf switch and gets the reduced n/m back. Inside the node: direct
//                       (every GPU to and from every head, n/m) or a chain (as the tree's).
//                       All-gather and reduce-scatter move n/m between each GPU and each head
//                       one way, and n/m between each head and the switch the other way.
//   PAT (AG/RS, one     Bruck's all-gather: at step s every rank sends the 2^s blocks of n/k it
//   rank per node)      holds (fewer at the last step) to the rank 2^s below it; each rank
//                       sends (k-1)/k n in all. Reduce-scatter runs the same steps in reverse.
//   all-to-all          every rank sends n/p to every other (NCCL's p2p engine: one send and
//                       receive per peer), across nodes through PXN (planner_util.h).
#include <fmt/format.h>

#include "meshsim/sim/error.h"
#include "planner_util.h"

namespace meshsim::collectives::detail {
namespace {

// The group's members per node, in group order; nodes in order of appearance.
struct Nodes {
  std::vector<std::vector<DeviceId>> members;
  int64_t k = 0;
  int64_t m = 0;
};

Nodes nodes_of(Group group, const topology::Network& net) {
  Nodes n;
  n.members = domains(group, net);
  n.k = static_cast<int64_t>(n.members.size());
  n.m = static_cast<int64_t>(n.members.front().size());
  return n;
}

DeviceId local(const Nodes& n, int64_t node, int64_t j) {
  return n.members[static_cast<size_t>(node)][static_cast<size_t>(((j % n.m) + n.m) % n.m)];
}

// The chain of channel c inside every node: c, c+1, ..., c-1; `bytes` each way per edge.
void add_chains(const Nodes& n, int64_t c, Bytes bytes, const topology::Network& net,
                std::vector<Flow>& out) {
  for (int64_t node = 0; node < n.k; ++node) {
    for (int64_t j = 0; j + 1 < n.m; ++j) {
      const DeviceId a = local(n, node, c + j);
      const DeviceId b = local(n, node, c + j + 1);
      out.push_back(device_flow(net, b, a, bytes));
      out.push_back(device_flow(net, a, b, bytes));
    }
  }
}

// The double binary tree over the nodes' local ranks c; `bytes` each way per edge of each tree.
void add_trees(const Nodes& n, int64_t c, Bytes bytes, const topology::Network& net,
               std::vector<Flow>& out) {
  for (const bool second : {false, true}) {
    for (int64_t r = 0; r < n.k; ++r) {
      if (const auto up = tree_parent(n.k, r, second)) {
        const DeviceId a = local(n, r, c);
        const DeviceId b = local(n, *up, c);
        out.push_back(device_flow(net, a, b, bytes));
        out.push_back(device_flow(net, b, a, bytes));
      }
    }
  }
}

// Flows between `head` and the leaf switch above its NIC (the SHARP aggregation point), `up` and
// `down` bytes.
void add_sharp(const topology::Network& net, DeviceId head, Bytes up, Bytes down,
               std::vector<Flow>& out) {
  const topology::VertexId dev = net.device_vertex(head);
  auto next_of_kind = [&net](topology::VertexId v, topology::VertexKind kind) {
    for (const LinkId l : net.out_links(v)) {
      if (net.vertex(net.link(l).dst).kind == kind) {
        return std::optional<topology::VertexId>(net.link(l).dst);
      }
    }
    return std::optional<topology::VertexId>();
  };
  const auto nic = next_of_kind(dev, topology::VertexKind::kNic);
  const auto leaf = nic ? next_of_kind(*nic, topology::VertexKind::kLeaf) : std::nullopt;
  SIM_CHECK(leaf.has_value(), "no leaf switch above device {}", head.value());
  if (up.count() > 0) {
    out.push_back(Flow{dev, *leaf, up});
  }
  if (down.count() > 0) {
    out.push_back(Flow{*leaf, dev, down});
  }
}

Schedule one_step(Algorithm a, std::vector<Flow> flows, const std::string& label) {
  Schedule s;
  s.algorithm = a;
  s.steps.push_back(make_step(std::move(flows), 1, label));
  return s;
}

// The flows of an NVLS collective of `bytes` inside each node of `n`.
std::vector<Flow> nvls_inside_nodes(CollectiveKind kind, Bytes bytes, const Nodes& n,
                                    const topology::Network& net) {
  std::vector<Flow> flows;
  for (const auto& node : n.members) {
    const Schedule inside = plan_nvls(kind, bytes, node, net);
    for (const Step& st : inside.steps) {
      flows.insert(flows.end(), st.flows.begin(), st.flows.end());
    }
  }
  return flows;
}

}  // namespace

std::optional<int64_t> tree_parent(int64_t p, int64_t r, bool second) {
  auto first = [p](int64_t x) -> std::optional<int64_t> {
    if (x == 0) {
      return std::nullopt;
    }
    const int64_t bit = x & -x;
    const int64_t up = (x ^ bit) | (bit << 1);
    return up < p ? up : (x ^ bit);
  };
  if (!second) {
    return first(r);
  }
  if (p % 2 == 0) {
    const auto u = first(p - 1 - r);
    return u ? std::optional<int64_t>(p - 1 - *u) : std::nullopt;
  }
  const auto u = first((r - 1 + p) % p);
  return u ? std::optional<int64_t>((*u + 1) % p) : std::nullopt;
}

Reason even_nodes_unsupported(CollectiveKind, Group group, const topology::Network& net) {
  const auto doms = domains(group, net);
  for (const auto& d : doms) {
    if (d.size() != doms.front().size()) {
      return fmt::format("needs the same number of ranks on every node; the group has {} on one "
                         "and {} on another",
                         doms.front().size(), d.size());
    }
  }
  return std::nullopt;
}

Schedule plan_tree(CollectiveKind kind, Bytes bytes, Group group, const topology::Network& net) {
  SIM_CHECK(kind == CollectiveKind::kAllReduce, "NCCL's tree has no {} pattern", to_string(kind));
  const Nodes n = nodes_of(group, net);
  std::vector<Flow> flows;
  for (int64_t c = 0; c < n.m; ++c) {
    add_chains(n, c, shard(bytes, 1, n.m), net, flows);
    add_trees(n, c, shard(bytes, 1, 2 * n.m), net, flows);
  }
  return one_step(Algorithm::kTree, std::move(flows), "tree reduce + broadcast");
}

Schedule plan_nvls_tree(CollectiveKind kind, Bytes bytes, Group group,
                        const topology::Network& net) {
  SIM_CHECK(kind == CollectiveKind::kAllReduce, "NVLS-tree has no {} pattern", to_string(kind));
  const Nodes n = nodes_of(group, net);
  std::vector<Flow> flows = nvls_inside_nodes(kind, bytes, n, net);
  for (int64_t c = 0; c < n.m; ++c) {
    add_trees(n, c, shard(bytes, 1, 2 * n.m), net, flows);
  }
  return one_step(Algorithm::kNvlsTree, std::move(flows), "NVLS inside nodes, tree across");
}

Schedule plan_nvls_sharp(CollectiveKind kind, Bytes bytes, Group group,
                         const topology::Network& net) {
  const Nodes n = nodes_of(group, net);
  const Bytes slice = shard(bytes, 1, n.m);
  std::vector<Flow> flows = nvls_inside_nodes(kind, bytes, n, net);
  for (int64_t c = 0; c < n.m; ++c) {
    for (int64_t node = 0; node < n.k; ++node) {
      add_sharp(net, local(n, node, c), slice, slice, flows);
    }
  }
  return one_step(Algorithm::kNvls, std::move(flows), "NVLS inside nodes, IB SHARP across");
}

Schedule plan_collnet(CollectiveKind kind, Bytes bytes, Group group, const topology::Network& net,
                      bool chain) {
  const Nodes n = nodes_of(group, net);
  const Bytes slice = shard(bytes, 1, n.m);
  const bool reduce = kind != CollectiveKind::kAllGather;
  const bool gather = kind != CollectiveKind::kReduceScatter;
  std::vector<Flow> flows;
  for (int64_t c = 0; c < n.m; ++c) {
    if (chain) {
      add_chains(n, c, slice, net, flows);
    }
    for (int64_t node = 0; node < n.k; ++node) {
      const DeviceId head = local(n, node, c);
      for (int64_t j = 0; j < n.m && !chain; ++j) {
        const DeviceId other = local(n, node, j);
        if (other != head && reduce) {
          flows.push_back(device_flow(net, other, head, slice));
        }
        if (other != head && gather) {
          flows.push_back(device_flow(net, head, other, slice));
        }
      }
      add_sharp(net, head, reduce ? slice : Bytes::zero(), gather ? slice : Bytes::zero(), flows);
    }
  }
  return one_step(chain ? Algorithm::kCollNetChain : Algorithm::kCollNetDirect, std::move(flows),
                  "CollNet (SHARP) in-network reduction");
}

Schedule plan_pat(CollectiveKind kind, Bytes bytes, Group group, const topology::Network& net) {
  const auto k = static_cast<int64_t>(group.size());
  const bool gather = kind == CollectiveKind::kAllGather;
  SIM_CHECK(gather || kind == CollectiveKind::kReduceScatter, "PAT has no {} pattern",
            to_string(kind));
  Schedule s;
  s.algorithm = Algorithm::kPat;
  for (int64_t d = 1; d < k; d *= 2) {
    const int64_t blocks = std::min(d, k - d);
    std::vector<Flow> flows;
    for (int64_t i = 0; i < k; ++i) {
      const int64_t peer = ((gather ? i - d : i + d) % k + k) % k;
      flows.push_back(device_flow(net, group[static_cast<size_t>(i)],
                                  group[static_cast<size_t>(peer)], shard(bytes, blocks, k)));
    }
    s.steps.push_back(make_step(std::move(flows), 1, fmt::format("PAT step (distance {})", d)));
  }
  return s;
}

Schedule plan_send_recv_all_to_all(Bytes bytes, Group group, const topology::Network& net) {
  const auto p = static_cast<int64_t>(group.size());
  const Bytes block = shard(bytes, 1, p);
  std::vector<Flow> flows;
  for (const DeviceId a : group) {
    for (const DeviceId b : group) {
      if (a != b) {
        append_pxn_flows(net, a, b, block, group, flows);
      }
    }
  }
  return one_step(Algorithm::kSendRecv, std::move(flows), "all-to-all (send/recv to every peer)");
}

}  // namespace meshsim::collectives::detail
