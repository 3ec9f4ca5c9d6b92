// Private helpers shared by the collective planners (plan_*.cc) and algorithms.cc.
//
// Every planner is a pure function (STYLE A.4): (kind, bytes, group, network) -> Schedule, with no
// backend and no clock. A planner is only called for a group its algorithm applies to (checked by
// the `*_unsupported` functions, which return the reason it does not apply, or nullopt).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "meshsim/collectives/schedule.h"

namespace meshsim::collectives::detail {

using Group = std::span<const DeviceId>;
using Reason = std::optional<std::string>;

// ceil(n * num / den) bytes, exact in integers (the shard of a buffer a flow carries; rounding up
// keeps every flow of a non-empty buffer non-empty).
Bytes shard(Bytes n, int64_t num, int64_t den);

Flow device_flow(const topology::Network& net, DeviceId src, DeviceId dst, Bytes bytes);
Step make_step(std::vector<Flow> flows, int64_t repeat, std::string label,
               Duration overhead = Duration::zero());

// Path latency from `a` to `b` (route with salt 0); zero when a == b.
Duration latency_between(const topology::Network& net, topology::VertexId a, topology::VertexId b);
Duration device_latency(const topology::Network& net, DeviceId a, DeviceId b);

// Flows from each member of each ring to the member `offset` places on (offset -1: backwards),
// `bytes` each. Rings of one member contribute nothing.
void append_ring_flows(const topology::Network& net, std::span<const std::vector<DeviceId>> rings,
                       int64_t offset, Bytes bytes, std::vector<Flow>& out);

bool is_power_of_two(int64_t v);

// The group's members per scale-up domain (devices sharing an NVSwitch vertex, otherwise one
// host), each in group order; domains in order of first appearance.
std::vector<std::vector<DeviceId>> domains(Group group, const topology::Network& net);
// True when the group spans k >= 2 domains with the same m >= 2 members in each.
bool spans_even_domains(const std::vector<std::vector<DeviceId>>& doms);

// Per-algorithm applicability (nullopt: applies) and planners. Kinds an algorithm has no schedule
// for are rejected before these are called (supports_kind).
Reason ring_unsupported(CollectiveKind kind, Group group, const topology::Network& net);
Schedule plan_ring(CollectiveKind kind, Bytes bytes, Group group, const topology::Network& net);
Schedule plan_bidirectional_ring(CollectiveKind kind, Bytes bytes, Group group,
                                 const topology::Network& net);

Reason tree_unsupported(CollectiveKind kind, Group group, const topology::Network& net);
Schedule plan_double_binary_tree(CollectiveKind kind, Bytes bytes, Group group,
                                 const topology::Network& net);
Reason halving_doubling_unsupported(CollectiveKind kind, Group group, const topology::Network& net);
Schedule plan_halving_doubling(CollectiveKind kind, Bytes bytes, Group group,
                               const topology::Network& net);

Reason hierarchical_unsupported(CollectiveKind kind, Group group, const topology::Network& net);
Schedule plan_hierarchical(CollectiveKind kind, Bytes bytes, Group group,
                           const topology::Network& net);

Reason torus_unsupported(CollectiveKind kind, Group group, const topology::Network& net);
Schedule plan_torus_rings(CollectiveKind kind, Bytes bytes, Group group,
                          const topology::Network& net);

Reason nvls_unsupported(CollectiveKind kind, Group group, const topology::Network& net);
Schedule plan_nvls(CollectiveKind kind, Bytes bytes, Group group, const topology::Network& net);

}  // namespace meshsim::collectives::detail
