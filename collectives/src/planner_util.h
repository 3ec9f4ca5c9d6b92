// Private helpers shared by the collective planners (plan_*.cc) and algorithms.cc.
//
// Every planner is a pure function (docs/style.md A.4): (kind, bytes, group, network) -> Schedule,
// with no backend and no clock. A planner is only called for a group its algorithm applies to
// (checked by the `*_unsupported` functions, which return the reason it does not apply, or
// nullopt).
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
// `bytes` each, across nodes through PXN (append_pxn_flows). Rings of one member contribute
// nothing.
void append_ring_flows(const topology::Network& net, std::span<const std::vector<DeviceId>> rings,
                       int64_t offset, Bytes bytes, std::vector<Flow>& out);

bool is_power_of_two(int64_t v);

// The group's members per scale-up domain (devices sharing an NVSwitch vertex, otherwise one
// host), each in group order; domains in order of first appearance.
std::vector<std::vector<DeviceId>> domains(Group group, const topology::Network& net);
// True when the group spans k >= 2 domains with the same m >= 2 members in each.
bool spans_even_domains(const std::vector<std::vector<DeviceId>>& doms);

// Flows carrying `bytes` from `src` to `dst` the way NCCL routes point-to-point traffic between
// nodes with PXN (src/transport/net.cc, on by default since NCCL 2.12): over NVLink to the GPU of
// the source's node that sits on the destination's rail, then through that GPU's NIC, so that
// traffic never crosses rails in the fabric. The proxy must be one of `members` (a rank of the
// same communicator: NCCL's proxy runs in the rank that owns that GPU). One flow where src and
// dst share a scale-up domain, where there is no such proxy or it is src itself, or off fat
// trees.
void append_pxn_flows(const topology::Network& net, DeviceId src, DeviceId dst, Bytes bytes,
                      std::span<const DeviceId> members, std::vector<Flow>& out);

// Parent of rank r in the in-order binary tree on p ranks (rank r's parent clears r's lowest set
// bit b and sets bit 2b, or only clears b when that is out of range); nullopt for the root 0. The
// second tree of a double binary tree (Sanders et al. 2009) mirrors it (r -> p-1-r) for even p and
// shifts it by one for odd p.
std::optional<int64_t> tree_parent(int64_t p, int64_t r, bool second);

// Per-algorithm applicability (nullopt: applies) and planners. Kinds an algorithm has no pattern
// for are rejected before these are called (supports_kind). GPU algorithms apply where NCCL's
// tuner has them (collective_planner.cc); the planners here only check the shape of the group.
// plan_collective (algorithms.cc) calls the planners only with two or more ranks and some bytes;
// a smaller collective is an empty schedule, planned there once for every algorithm. plan_nvls
// alone also takes one rank or no bytes (an empty schedule): plan_nccl.cc plans each node's part
// of a collective with it.
Reason ring_unsupported(CollectiveKind kind, Group group, const topology::Network& net);
Schedule plan_ring(CollectiveKind kind, Bytes bytes, Group group, const topology::Network& net);

Reason hierarchical_unsupported(CollectiveKind kind, Group group, const topology::Network& net);
Schedule plan_hierarchical(CollectiveKind kind, Bytes bytes, Group group,
                           const topology::Network& net);

Reason torus_unsupported(CollectiveKind kind, Group group, const topology::Network& net);
Schedule plan_torus_rings(CollectiveKind kind, Bytes bytes, Group group,
                          const topology::Network& net);

Reason nvls_unsupported(CollectiveKind kind, Group group, const topology::Network& net);
Schedule plan_nvls(CollectiveKind kind, Bytes bytes, Group group, const topology::Network& net);

// NCCL's other algorithms (plan_nccl.cc).
Reason even_nodes_unsupported(CollectiveKind kind, Group group, const topology::Network& net);
Schedule plan_tree(CollectiveKind kind, Bytes bytes, Group group, const topology::Network& net);
Schedule plan_nvls_tree(CollectiveKind kind, Bytes bytes, Group group,
                        const topology::Network& net);
Schedule plan_nvls_sharp(CollectiveKind kind, Bytes bytes, Group group,
                         const topology::Network& net);
Schedule plan_collnet(CollectiveKind kind, Bytes bytes, Group group, const topology::Network& net,
                      bool chain);
Schedule plan_pat(CollectiveKind kind, Bytes bytes, Group group, const topology::Network& net);
Schedule plan_send_recv_all_to_all(Bytes bytes, Group group, const topology::Network& net);

}  // namespace meshsim::collectives::detail
