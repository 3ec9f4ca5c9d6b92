// Hierarchical schedules: inside each scale-up domain, then across domains per rail, then inside
// again (NCCL's intra-node / inter-node split; the scaling book's "hierarchical all-reduce").
//
// Domains: devices sharing an NVSwitch vertex (a DGX node, a whole NVL72 domain), otherwise
// devices of one host. The group must span k >= 2 domains with the same number m >= 2 of its
// ranks in each. Local rank j of a domain is its j-th member in group order; rail j is local
// rank j of every domain, domains in order of first appearance. For a buffer of n bytes:
//   all-reduce      intra-domain ring reduce-scatter, m-1 steps of n/m per flow (every domain at
//                   once); per rail a ring all-reduce of the n/m shard across the k domains:
//                   2 x (k-1) steps of n/(mk); intra-domain ring all-gather, m-1 steps of n/m.
//                   Per rank: 2(m-1)/m n inside, 2(k-1)/k n/m across domains.
//   reduce-scatter  intra-domain reduce-scatter, then per rail reduce-scatter across domains
//                   ((k-1) steps of n/(mk)): the scale-up fabric takes the (m-1)/m n part.
//   all-gather      the reverse: per rail across domains first, then inside domains.
#include <fmt/format.h>

#include "meshsim/sim/error.h"
#include "planner_util.h"

namespace meshsim::collectives::detail {
namespace {

std::vector<std::vector<DeviceId>> rails(const std::vector<std::vector<DeviceId>>& doms) {
  std::vector<std::vector<DeviceId>> out(doms.front().size());
  for (const auto& dom : doms) {
    for (size_t j = 0; j < dom.size(); ++j) {
      out[j].push_back(dom[j]);
    }
  }
  return out;
}

void add_rings(Schedule& s, const topology::Network& net,
               const std::vector<std::vector<DeviceId>>& rings, Bytes block, int64_t repeat,
               std::string label) {
  std::vector<Flow> flows;
  append_ring_flows(net, rings, 1, block, flows);
  s.steps.push_back(make_step(std::move(flows), repeat, std::move(label)));
}

}  // namespace

Reason hierarchical_unsupported(CollectiveKind, Group group, const topology::Network& net) {
  const auto doms = domains(group, net);
  if (doms.size() < 2) {
    return std::string(
        "needs a group that spans several nodes (scale-up domains); this one is "
        "inside one");
  }
  for (const auto& dom : doms) {
    if (dom.size() != doms.front().size()) {
      return fmt::format(
          "needs the same number of ranks on every node; the group has {} on one "
          "and {} on another",
          doms.front().size(), dom.size());
    }
  }
  if (doms.front().size() < 2) {
    return std::string("needs at least two ranks per node (with one it is the plain ring)");
  }
  return std::nullopt;
}

Schedule plan_hierarchical(CollectiveKind kind, Bytes bytes, Group group,
                           const topology::Network& net) {
  Schedule s;
  s.algorithm = Algorithm::kHierarchical;
  const auto doms = domains(group, net);
  const auto m = static_cast<int64_t>(doms.front().size());
  const auto k = static_cast<int64_t>(doms.size());
  const auto rail_rings = rails(doms);
  const Bytes intra_block = shard(bytes, 1, m);
  const Bytes inter_block = shard(bytes, 1, m * k);
  switch (kind) {
    case CollectiveKind::kAllReduce:
      add_rings(s, net, doms, intra_block, m - 1, "intra-node ring reduce-scatter step");
      add_rings(s, net, rail_rings, inter_block, k - 1, "inter-node rail ring reduce-scatter step");
      add_rings(s, net, rail_rings, inter_block, k - 1, "inter-node rail ring all-gather step");
      add_rings(s, net, doms, intra_block, m - 1, "intra-node ring all-gather step");
      break;
    case CollectiveKind::kReduceScatter:
      add_rings(s, net, doms, intra_block, m - 1, "intra-node ring reduce-scatter step");
      add_rings(s, net, rail_rings, inter_block, k - 1, "inter-node rail ring reduce-scatter step");
      break;
    case CollectiveKind::kAllGather:
      add_rings(s, net, rail_rings, inter_block, k - 1, "inter-node rail ring all-gather step");
      add_rings(s, net, doms, intra_block, m - 1, "intra-node ring all-gather step");
      break;
    default:
      SIM_CHECK(false, "hierarchical has no {} schedule", to_string(kind));
  }
  return s;
}

}  // namespace meshsim::collectives::detail
