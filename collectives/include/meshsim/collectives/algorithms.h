// The traffic pattern of each algorithm: a collective over a group expands into a Schedule of
// flows (schedule.h), which the network model sums into one coupled transfer (comm_shape.h).
//
// `group` lists the devices in rank order. Bytes follow nccl-tests' convention (see CollectiveWork
// in sim/program.h). For p ranks, n bytes, k nodes (scale-up domains) of m ranks:
//   ring            all-reduce: every rank sends 2(p-1)/p n to its ring successor (reduce-scatter
//                   then all-gather); RS/AG (p-1)/p n; broadcast/reduce: a pipelined chain
//                   carrying n on every hop. Across nodes, m rings (one per NIC), rail-aligned
//                   through PXN (plan_ring.cc).
//   tree            NCCL's all-reduce tree: a chain in each node, double binary trees across
//                   nodes per NIC (plan_nccl.cc).
//   nvls            NVLink SHARP in one NVLink domain: each GPU moves n(p+1)/p each way to the
//                   switch for all-reduce (plan_nvls.cc); across nodes it needs IB SHARP.
//   nvls-tree       NVLS in each node, trees across nodes (plan_nccl.cc).
//   collnet-direct, IB SHARP: reduction in the leaf switches, heads per NIC (plan_nccl.cc).
//   collnet-chain
//   pat             Bruck's all-gather / reduce-scatter with one rank per node (plan_nccl.cc).
//   torus-rings     on a TPU torus: one ring per axis of the group's sub-grid, all axes at once,
//                   the data split across axes (plan_torus.cc).
//   hierarchical    inside each scale-up domain, across domains per rail, inside again
//                   (plan_hierarchical.cc): what XLA does across TPU slices over DCN.
//   send-recv       all-to-all as one send and receive per peer (NCCL's p2p engine).
// Which algorithm NCCL would run, and whether a GPU algorithm exists on a system, is NCCL's
// tuner's answer (nccl.h, collective_planner.h); the checks here are the group's shape only.
#pragma once

#include <optional>
#include <span>
#include <string>

#include "meshsim/collectives/schedule.h"

namespace meshsim::collectives {

// The collective kinds `algorithm` has a pattern for (regardless of the group).
bool supports_kind(Algorithm algorithm, CollectiveKind kind);

// Why `algorithm`'s pattern does not fit `group` for `kind` ("has no broadcast pattern", "needs
// an ICI torus", ...), or nullopt when it does. `algorithm` must not be kAuto.
std::optional<std::string> pattern_unsupported(Algorithm algorithm, CollectiveKind kind,
                                               std::span<const DeviceId> group,
                                               const topology::Network& net);

// The pattern of `algorithm` (not kAuto) over `group`; SIM_CHECKs that it fits
// (pattern_unsupported) and that the group's devices are distinct.
Schedule plan_collective(CollectiveKind kind, Bytes bytes, std::span<const DeviceId> group,
                         Algorithm algorithm, const topology::Network& net);

}  // namespace meshsim::collectives
