#include "meshsim/collectives/collective_planner.h"

#include <fmt/format.h>

#include "meshsim/collectives/algorithms.h"
#include "meshsim/sim/error.h"
#include "nccl_runtime.h"
#include "planner_util.h"

namespace meshsim::collectives {
namespace {

using Groups = std::span<const std::vector<DeviceId>>;

bool fits_all(Algorithm a, CollectiveKind kind, Groups groups, const topology::Network& net) {
  for (const auto& g : groups) {
    if (pattern_unsupported(a, kind, g, net)) {
      return false;
    }
  }
  return true;
}

[[noreturn]] void not_applicable(Algorithm a, CollectiveKind kind, size_t ranks,
                                 const std::string& why,
                                 CommField field = CommField::kAlgorithm) {
  throw CommError(field, fmt::format("algorithm {} does not apply to {} over {} ranks: it {}",
                                     to_string(a), to_string(kind), ranks, why));
}

// Why NCCL has no entry for a forced algorithm / protocol on this system, in words.
std::string why_no_entry(const NcclSystem& s, Algorithm a, std::optional<NcclProtocol> p) {
  const bool simple_only = a != Algorithm::kRing && a != Algorithm::kTree;
  if (p && *p != NcclProtocol::kSimple && simple_only) {
    return fmt::format("runs only with the simple protocol in NCCL, not {}", to_string(*p));
  }
  switch (a) {
    case Algorithm::kNvls:
      return s.has_nvls ? "needs IB SHARP (CollNet) across nodes, which this fabric lacks"
                        : "needs NVLink SHARP (an NVSwitch with multicast, Hopper or later)";
    case Algorithm::kNvlsTree:
      return s.has_nvls ? "runs across nodes only (inside one, NCCL has NVLS)"
                        : "needs NVLink SHARP (an NVSwitch with multicast, Hopper or later)";
    case Algorithm::kCollNetDirect:
    case Algorithm::kCollNetChain:
      return "needs IB SHARP in the fabric (\"sharp\": true in the cluster's scale_out)";
    case Algorithm::kPat:
      return "needs one rank per node (NCCL 2.23 or later)";
    default:
      return fmt::format("has no NCCL {} entry on this system", p ? to_string(*p) : "");
  }
}

}  // namespace

CollectivePlanner::CollectivePlanner(const topology::Network& net, CollectiveOptions options)
    : net_(net),
      options_(options),
      efficiency_(BandwidthEfficiency::defaults_for(net.spec())),
      capacities_(link_capacities(net, efficiency_)) {}

Duration CollectivePlanner::isolated_time(const CommShape& shape) const {
  return collectives::isolated_time(shape, capacities_);
}

std::vector<LinkLoad> CollectivePlanner::loads_of(CollectiveKind kind, Bytes bytes, Groups groups,
                                                  Algorithm a) const {
  Schedule all;
  for (const auto& g : groups) {
    Schedule s = plan_collective(kind, bytes, g, a, net_);
    for (Step& st : s.steps) {
      all.steps.push_back(std::move(st));
    }
  }
  return schedule_loads(net_, all, efficiency_, bytes);
}

CommShape CollectivePlanner::collective(CollectiveKind kind, Bytes bytes, Groups groups) const {
  SIM_CHECK(!groups.empty(), "a collective over no group");
  for (const auto& g : groups) {
    SIM_CHECK(g.size() == groups.front().size(), "images of a group of {} ranks hold {}",
              groups.front().size(), g.size());
  }
  if (groups.front().size() <= 1 || bytes.count() == 0) {
    CommShape empty;
    empty.algorithm = options_.algorithm == Algorithm::kAuto ? Algorithm::kRing
                                                              : options_.algorithm;
    return empty;
  }
  return net_.spec().chip.nvlink ? gpu_collective(kind, bytes, groups)
                                 : tpu_collective(kind, bytes, groups);
}

CommShape CollectivePlanner::gpu_collective(CollectiveKind kind, Bytes bytes,
                                            Groups groups) const {
  const auto& group = groups.front();
  const NcclSystem system = nccl_system(net_, group, options_.nccl_version);
  const topology::CollectivePlatform& platform = net_.spec().collectives;
  CommShape shape;
  shape.bytes = bytes;
  shape.floor = platform.launch_floor;
  const auto coll = nccl_collective(kind);
  if (!coll) {  // all-to-all: one send and one receive per peer
    shape.algorithm = Algorithm::kSendRecv;
    shape.loads = loads_of(kind, bytes, groups, Algorithm::kSendRecv);
    const auto p = static_cast<int64_t>(group.size());
    const auto p2p = detail::nccl_p2p(options_.nccl_version, system.nodes > 1, bytes / p);
    shape.latency = p2p.latency * ((p - 1 + 7) / 8);  // 8 p2p operations per work batch
    shape.protocol = p2p.ll ? NcclProtocol::kLL : NcclProtocol::kSimple;
    if (p2p.ll) {
      shape.rate_cap = BytesPerSec::of(0.5 * isolated_rate(shape, capacities_));
    }
    return shape;
  }
  NcclAllowed allowed;
  const Algorithm forced = options_.algorithm;
  // A forced algorithm without this collective is refused, as NCCL refuses an NCCL_ALGO that
  // leaves the function no algorithm ("no algorithm/protocol available for function %s ...
  // NCCL_ALGO was set to %s", ncclInvalidUsage: src/enqueue.cc topoGetAlgoInfo), rather than
  // replaced by another.
  if (forced != Algorithm::kAuto && !supports_kind(forced, kind)) {
    not_applicable(forced, kind, group.size(), *pattern_unsupported(forced, kind, {}, net_));
  }
  if (forced != Algorithm::kAuto) {
    const auto nccl = nccl_algorithm(forced);
    if (!nccl) {
      not_applicable(forced, kind, group.size(),
                     "is not an NCCL algorithm (GPUs run ring, tree, nvls, nvls-tree, "
                     "collnet-direct, collnet-chain, pat)");
    }
    allowed.algorithms = static_cast<uint8_t>(1u << static_cast<unsigned>(*nccl));
  }
  if (options_.protocol) {
    allowed.protocols = static_cast<uint8_t>(1u << static_cast<unsigned>(*options_.protocol));
  }
  const NcclTuner tuner(system);
  auto choice = tuner.choose(*coll, bytes, allowed);
  if (!choice) {
    // Nothing runs: the forced protocol when no algorithm was forced, else the algorithm (with or
    // without its protocol).
    not_applicable(forced == Algorithm::kAuto ? Algorithm::kRing : forced, kind, group.size(),
                   why_no_entry(system, forced, options_.protocol),
                   forced == Algorithm::kAuto ? CommField::kProtocol : CommField::kAlgorithm);
  }
  Algorithm a = from_nccl(choice->algorithm);
  if (!fits_all(a, kind, groups, net_)) {
    if (forced != Algorithm::kAuto) {
      not_applicable(a, kind, group.size(),
                     pattern_unsupported(a, kind, group, net_).value_or("does not fit an image"));
    }
    // A group NCCL's tuner accepts but whose pattern is not modelled (ranks spread unevenly over
    // nodes): NCCL's ring runs it.
    NcclAllowed ring = allowed;
    ring.algorithms = 1u << static_cast<unsigned>(NcclAlgorithm::kRing);
    choice = tuner.choose(*coll, bytes, ring);
    SIM_CHECK(choice.has_value(), "no ring for {} over {} ranks", to_string(kind), group.size());
    a = Algorithm::kRing;
  }
  const detail::RuntimeTiming timing = detail::nccl_runtime(tuner, *coll, *choice, bytes, platform);
  shape.latency = timing.latency;
  shape.rate_cap = timing.rate_cap;
  shape.channels = timing.channels;
  shape.algorithm = a;
  shape.protocol = choice->protocol;
  shape.loads = loads_of(kind, bytes, groups, a);
  return shape;
}

CommShape CollectivePlanner::tpu_collective(CollectiveKind kind, Bytes bytes,
                                            Groups groups) const {
  Algorithm a = options_.algorithm;
  if (a != Algorithm::kAuto && !supports_kind(a, kind)) {
    not_applicable(a, kind, groups.front().size(), *pattern_unsupported(a, kind, {}, net_));
  }
  if (a == Algorithm::kAuto) {
    for (const Algorithm c : {Algorithm::kTorusRings, Algorithm::kHierarchical, Algorithm::kRing,
                              Algorithm::kSendRecv}) {
      if (supports_kind(c, kind) && fits_all(c, kind, groups, net_)) {
        a = c;
        break;
      }
    }
  } else if (nccl_algorithm(a) && a != Algorithm::kRing) {
    not_applicable(a, kind, groups.front().size(),
                   "is NCCL's, for GPUs; on a TPU XLA runs torus-rings, hierarchical or ring");
  } else if (const auto why = pattern_unsupported(a, kind, groups.front(), net_)) {
    not_applicable(a, kind, groups.front().size(), *why);
  }
  CommShape shape;
  shape.bytes = bytes;
  shape.floor = net_.spec().collectives.launch_floor;
  shape.algorithm = a;
  shape.latency =
      schedule_latency(net_, plan_collective(kind, bytes, groups.front(), a, net_));
  shape.loads = loads_of(kind, bytes, groups, a);
  return shape;
}

CommShape CollectivePlanner::send_recv(std::span<const std::pair<DeviceId, DeviceId>> pairs,
                                       Bytes bytes) const {
  CommShape shape;
  shape.algorithm = Algorithm::kSendRecv;
  shape.bytes = bytes;
  if (pairs.empty() || bytes.count() == 0 || pairs.front().first == pairs.front().second) {
    shape.bytes = Bytes::zero();
    return shape;
  }
  Schedule s;
  s.algorithm = Algorithm::kSendRecv;
  std::vector<Flow> flows;
  for (const auto& [src, dst] : pairs) {
    flows.push_back(detail::device_flow(net_, src, dst, bytes));
  }
  s.steps.push_back(detail::make_step(std::move(flows), 1, "send/recv"));
  shape.loads = schedule_loads(net_, s, efficiency_, bytes);
  shape.floor = net_.spec().collectives.launch_floor;
  const auto [src, dst] = pairs.front();
  if (net_.spec().chip.nvlink) {
    const bool network = detail::domains(std::vector<DeviceId>{src, dst}, net_).size() > 1;
    const auto p2p = detail::nccl_p2p(options_.nccl_version, network, bytes);
    shape.latency = p2p.latency;
    shape.protocol = p2p.ll ? NcclProtocol::kLL : NcclProtocol::kSimple;
    if (p2p.ll) {
      shape.rate_cap = BytesPerSec::of(0.5 * isolated_rate(shape, capacities_));
    }
  } else {
    shape.latency = detail::device_latency(net_, src, dst);
  }
  return shape;
}

}  // namespace meshsim::collectives
