// Dispatch from an algorithm to its pattern planner (algorithms.h).
#include "meshsim/collectives/algorithms.h"

#include <fmt/format.h>

#include <set>

#include "meshsim/sim/error.h"
#include "planner_util.h"

namespace meshsim::collectives {
namespace {

using detail::Group;
using detail::Reason;
using K = CollectiveKind;

bool rs_ag_ar(K k) { return k == K::kAllReduce || k == K::kReduceScatter || k == K::kAllGather; }

std::string kinds_of(Algorithm a) {
  std::string out;
  for (const auto k : {K::kAllReduce, K::kReduceScatter, K::kAllGather, K::kAllToAll,
                       K::kBroadcast, K::kReduce}) {
    if (supports_kind(a, k)) {
      out += (out.empty() ? "" : ", ") + std::string(to_string(k));
    }
  }
  return out;
}

Reason gpu_nodes(const topology::Network& net) {
  if (!net.spec().chip.nvlink) {
    return std::string("is NCCL's, for GPUs; this cluster has no NVLink");
  }
  return std::nullopt;
}

Reason one_rank_per_node(Group group, const topology::Network& net) {
  if (detail::domains(group, net).size() != group.size()) {
    return std::string("needs one rank per node (NCCL runs PAT only then)");
  }
  return std::nullopt;
}

Reason several_nodes(Group group, const topology::Network& net) {
  if (detail::domains(group, net).size() < 2) {
    return std::string("runs across nodes; this group is inside one");
  }
  return detail::even_nodes_unsupported(K::kAllReduce, group, net);
}

Reason check(Algorithm a, K kind, Group group, const topology::Network& net) {
  switch (a) {
    case Algorithm::kRing:
      return detail::ring_unsupported(kind, group, net);
    case Algorithm::kNvls:
      if (auto why = gpu_nodes(net); why) {
        return why;
      }
      if (net.spec().fat_tree && net.spec().fat_tree->sharp &&
          detail::domains(group, net).size() > 1) {
        return detail::even_nodes_unsupported(kind, group, net);  // NVLS + IB SHARP
      }
      return detail::nvls_unsupported(kind, group, net);
    case Algorithm::kTree:
    case Algorithm::kCollNetDirect:
    case Algorithm::kCollNetChain:
      if (auto why = gpu_nodes(net); why) {
        return why;
      }
      return detail::even_nodes_unsupported(kind, group, net);
    case Algorithm::kNvlsTree:
      if (auto why = gpu_nodes(net); why) {
        return why;
      }
      return several_nodes(group, net);
    case Algorithm::kPat:
      if (auto why = gpu_nodes(net); why) {
        return why;
      }
      return one_rank_per_node(group, net);
    case Algorithm::kTorusRings:
      return detail::torus_unsupported(kind, group, net);
    case Algorithm::kHierarchical:
      return detail::hierarchical_unsupported(kind, group, net);
    case Algorithm::kSendRecv:
    case Algorithm::kAuto:
      return std::nullopt;
  }
  return std::nullopt;
}

}  // namespace

bool supports_kind(Algorithm a, CollectiveKind k) {
  switch (a) {
    case Algorithm::kAuto:
      return true;
    case Algorithm::kRing:
      return k != K::kAllToAll;
    case Algorithm::kTree:
    case Algorithm::kNvlsTree:
    case Algorithm::kCollNetChain:
      return k == K::kAllReduce;
    case Algorithm::kNvls:
    case Algorithm::kCollNetDirect:
    case Algorithm::kHierarchical:
      return rs_ag_ar(k);
    case Algorithm::kPat:
      return k == K::kAllGather || k == K::kReduceScatter;
    case Algorithm::kTorusRings:
      return rs_ag_ar(k) || k == K::kAllToAll;
    case Algorithm::kSendRecv:
      return k == K::kAllToAll;
  }
  return false;
}

std::optional<std::string> pattern_unsupported(Algorithm a, CollectiveKind kind,
                                               std::span<const DeviceId> group,
                                               const topology::Network& net) {
  SIM_CHECK(a != Algorithm::kAuto, "pattern_unsupported needs a concrete algorithm");
  if (!supports_kind(a, kind)) {
    return fmt::format("has no {} pattern (it has {})", to_string(kind), kinds_of(a));
  }
  if (group.size() <= 1) {
    return std::nullopt;
  }
  return check(a, kind, group, net);
}

Schedule plan_collective(CollectiveKind kind, Bytes bytes, std::span<const DeviceId> group,
                         Algorithm a, const topology::Network& net) {
  SIM_CHECK(bytes.count() >= 0, "collective of {} bytes", bytes.count());
  const auto why = pattern_unsupported(a, kind, group, net);
  SIM_CHECK(!why, "algorithm {} on {} over {} ranks: it {}", to_string(a), to_string(kind),
            group.size(), why.value_or(""));
  const std::set<DeviceId> distinct(group.begin(), group.end());
  SIM_CHECK(distinct.size() == group.size(), "a group of {} ranks holds {} distinct devices",
            group.size(), distinct.size());
  if (group.size() < 2 || bytes.count() == 0) {
    Schedule empty;
    empty.algorithm = a;
    return empty;
  }
  switch (a) {
    case Algorithm::kRing:
      return detail::plan_ring(kind, bytes, group, net);
    case Algorithm::kTree:
      return detail::plan_tree(kind, bytes, group, net);
    case Algorithm::kNvls:
      if (detail::domains(group, net).size() > 1) {
        return detail::plan_nvls_sharp(kind, bytes, group, net);
      }
      return detail::plan_nvls(kind, bytes, group, net);
    case Algorithm::kNvlsTree:
      return detail::plan_nvls_tree(kind, bytes, group, net);
    case Algorithm::kCollNetDirect:
      return detail::plan_collnet(kind, bytes, group, net, false);
    case Algorithm::kCollNetChain:
      return detail::plan_collnet(kind, bytes, group, net, true);
    case Algorithm::kPat:
      return detail::plan_pat(kind, bytes, group, net);
    case Algorithm::kTorusRings:
      return detail::plan_torus_rings(kind, bytes, group, net);
    case Algorithm::kHierarchical:
      return detail::plan_hierarchical(kind, bytes, group, net);
    case Algorithm::kSendRecv:
      return detail::plan_send_recv_all_to_all(bytes, group, net);
    case Algorithm::kAuto:
      break;
  }
  SIM_CHECK(false, "no pattern for algorithm {}", to_string(a));
}

}  // namespace meshsim::collectives
