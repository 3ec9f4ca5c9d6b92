// Dispatch over the algorithms, concurrent groups, and the automatic choice.
//
// choose_and_time works like NCCL's tuner (src/graph/tuning.cc: every algorithm's estimated time
// for the size, the smallest wins), except that the estimate is the schedule itself timed on the
// backend, with every concurrent group's flows on the network at once, so contention between
// groups and the real topology decide, not per-algorithm bandwidth tables.
#include "meshsim/collectives/algorithms.h"

#include <fmt/format.h>

#include <array>
#include <set>

#include "meshsim/sim/error.h"
#include "planner_util.h"

namespace meshsim::collectives {
namespace {

using detail::Group;
using detail::Reason;

struct Entry {
  Algorithm algorithm;
  Reason (*unsupported)(CollectiveKind, Group, const topology::Network&);
  Schedule (*plan)(CollectiveKind, Bytes, Group, const topology::Network&);
};

// In enum order: the tie-break order of the automatic choice.
const std::array<Entry, 7>& entries() {
  static const std::array<Entry, 7> kEntries = {{
      {Algorithm::kRing, detail::ring_unsupported, detail::plan_ring},
      {Algorithm::kBidirectionalRing, detail::ring_unsupported, detail::plan_bidirectional_ring},
      {Algorithm::kDoubleBinaryTree, detail::tree_unsupported, detail::plan_double_binary_tree},
      {Algorithm::kHalvingDoubling, detail::halving_doubling_unsupported,
       detail::plan_halving_doubling},
      {Algorithm::kHierarchical, detail::hierarchical_unsupported, detail::plan_hierarchical},
      {Algorithm::kTorusRings, detail::torus_unsupported, detail::plan_torus_rings},
      {Algorithm::kNvls, detail::nvls_unsupported, detail::plan_nvls},
  }};
  return kEntries;
}

const Entry& entry(Algorithm a) {
  for (const auto& e : entries()) {
    if (e.algorithm == a) {
      return e;
    }
  }
  SIM_CHECK(false, "no planner for algorithm {}", to_string(a));
}

std::string kinds_of(Algorithm a) {
  std::string out;
  for (const auto k :
       {CollectiveKind::kAllReduce, CollectiveKind::kReduceScatter, CollectiveKind::kAllGather,
        CollectiveKind::kAllToAll, CollectiveKind::kBroadcast, CollectiveKind::kReduce}) {
    if (supports_kind(a, k)) {
      out += (out.empty() ? "" : ", ") + std::string(to_string(k));
    }
  }
  return out;
}

Reason why_not(Algorithm a, CollectiveKind kind, Group group, const topology::Network& net) {
  if (!supports_kind(a, kind)) {
    return fmt::format("has no {} schedule (it has {})", to_string(kind), kinds_of(a));
  }
  if (group.size() <= 1) {
    return std::nullopt;
  }
  return entry(a).unsupported(kind, group, net);
}

void check_distinct(Group group) {
  std::set<DeviceId> seen(group.begin(), group.end());
  SIM_CHECK(seen.size() == group.size(), "a group of {} ranks holds {} distinct devices",
            group.size(), seen.size());
}

bool same_shape(const Schedule& a, const Schedule& b) {
  if (a.steps.size() != b.steps.size()) {
    return false;
  }
  for (size_t i = 0; i < a.steps.size(); ++i) {
    if (a.steps[i].repeat != b.steps[i].repeat) {
      return false;
    }
  }
  return true;
}

// Step i of the result holds the flows of step i of every schedule; nullopt if shapes differ.
std::optional<Schedule> merge(std::vector<Schedule> schedules) {
  SIM_CHECK(!schedules.empty(), "merging no schedules");
  Schedule out = std::move(schedules.front());
  for (size_t g = 1; g < schedules.size(); ++g) {
    Schedule& s = schedules[g];
    if (!same_shape(out, s)) {
      return std::nullopt;
    }
    for (size_t i = 0; i < s.steps.size(); ++i) {
      Step& dst = out.steps[i];
      dst.flows.insert(dst.flows.end(), s.steps[i].flows.begin(), s.steps[i].flows.end());
      dst.overhead = std::max(dst.overhead, s.steps[i].overhead);
    }
  }
  return out;
}

// Every group's schedule, or nullopt if the algorithm does not apply to one of them.
std::optional<std::vector<Schedule>> plan_all(CollectiveKind kind, Bytes bytes,
                                              std::span<const std::vector<DeviceId>> groups,
                                              Algorithm a, const topology::Network& net) {
  std::vector<Schedule> out;
  for (const auto& g : groups) {
    if (why_not(a, kind, g, net)) {
      return std::nullopt;
    }
    check_distinct(g);
    out.push_back(entry(a).plan(kind, bytes, g, net));
  }
  return out;
}

}  // namespace

bool supports_kind(Algorithm a, CollectiveKind k) {
  const bool rs_ag_ar = k == CollectiveKind::kAllReduce || k == CollectiveKind::kReduceScatter ||
                        k == CollectiveKind::kAllGather;
  switch (a) {
    case Algorithm::kAuto:
    case Algorithm::kRing:
      return true;
    case Algorithm::kBidirectionalRing:
    case Algorithm::kHalvingDoubling:
    case Algorithm::kHierarchical:
    case Algorithm::kNvls:
      return rs_ag_ar;
    case Algorithm::kDoubleBinaryTree:
      return k == CollectiveKind::kAllReduce || k == CollectiveKind::kBroadcast ||
             k == CollectiveKind::kReduce;
    case Algorithm::kTorusRings:
      return rs_ag_ar || k == CollectiveKind::kAllToAll;
  }
  return false;
}

bool applicable(Algorithm algorithm, CollectiveKind kind, std::span<const DeviceId> group,
                const topology::Network& net) {
  if (algorithm == Algorithm::kAuto) {
    return true;
  }
  return !why_not(algorithm, kind, group, net);
}

Schedule plan_collective(CollectiveKind kind, Bytes bytes, std::span<const DeviceId> group,
                         Algorithm algorithm, const topology::Network& net) {
  SIM_CHECK(algorithm != Algorithm::kAuto, "plan_collective needs a concrete algorithm");
  SIM_CHECK(bytes.count() >= 0, "collective of {} bytes", bytes.count());
  if (const auto why = why_not(algorithm, kind, group, net)) {
    throw CommError(CommField::kAlgorithm,
                    fmt::format("algorithm {} does not apply to {} over {} ranks: it {}",
                                to_string(algorithm), to_string(kind), group.size(), *why));
  }
  check_distinct(group);
  return entry(algorithm).plan(kind, bytes, group, net);
}

Schedule plan_concurrent(CollectiveKind kind, Bytes bytes,
                         std::span<const std::vector<DeviceId>> groups, Algorithm algorithm,
                         const topology::Network& net) {
  SIM_CHECK(!groups.empty(), "concurrent collective over no groups");
  std::vector<Schedule> schedules;
  for (const auto& g : groups) {
    SIM_CHECK(g.size() == groups.front().size(),
              "concurrent groups must have the same size: {} and {}", groups.front().size(),
              g.size());
    schedules.push_back(plan_collective(kind, bytes, g, algorithm, net));
  }
  auto merged = merge(std::move(schedules));
  SIM_CHECK(merged.has_value(),
            "{} schedules of concurrent {} groups of {} ranks have different step structures",
            to_string(algorithm), groups.size(), groups.front().size());
  return std::move(*merged);
}

AlgorithmChoice choose_and_time(CollectiveKind kind, Bytes bytes,
                                std::span<const std::vector<DeviceId>> groups,
                                const topology::Network& net, NetworkBackend& backend) {
  if (groups.empty() || groups.front().size() <= 1 || bytes.count() == 0) {
    return {Algorithm::kRing, Duration::zero()};
  }
  std::optional<AlgorithmChoice> best;
  for (const auto& e : entries()) {
    auto schedules = plan_all(kind, bytes, groups, e.algorithm, net);
    if (!schedules) {
      continue;
    }
    auto merged = merge(std::move(*schedules));
    if (!merged) {
      continue;
    }
    const Duration t = schedule_time(*merged, backend);
    if (!best || t < best->time) {
      best = AlgorithmChoice{e.algorithm, t};
    }
  }
  SIM_CHECK(best.has_value(), "no algorithm applies to {} over {} groups", to_string(kind),
            groups.size());
  return *best;
}

Algorithm choose_algorithm(CollectiveKind kind, Bytes bytes,
                           std::span<const std::vector<DeviceId>> groups,
                           const topology::Network& net, NetworkBackend& backend) {
  return choose_and_time(kind, bytes, groups, net, backend).algorithm;
}

}  // namespace meshsim::collectives
