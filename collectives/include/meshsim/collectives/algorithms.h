// Collective algorithms: a collective over a group expands into a Schedule of flows.
//
// `group` lists the devices in rank order. Bytes follow nccl-tests' convention (see CollectiveWork
// in sim/program.h). Each algorithm, for p ranks and n bytes (B, alpha as in DESIGN.md):
//   ring                 all-reduce: p-1 reduce-scatter steps then p-1 all-gather steps, each rank
//                        sending n/p to its ring successor; RS/AG: p-1 steps; broadcast/reduce:
//                        pipelined chunks along the ring; all-to-all: p-1 pairwise steps (rank i
//                        sends its block for i+k to i+k at step k)
//   bidirectional ring   as ring, half the data each way round (both directions of every link)
//   double binary tree   two complementary binary trees, each carrying half the data (NCCL's tree:
//                        reduce up, broadcast down), pipelined; latency ~ log2 p
//   halving-doubling     recursive halving reduce-scatter then recursive doubling all-gather:
//                        log2 p steps each, partner at distance p/2, p/4, ... (p a power of two)
//   hierarchical         intra-node reduce-scatter, inter-node all-reduce per rail (rank with the
//                        same local index on every node, 1/k of the data), intra-node all-gather
//   torus rings          on a TPU torus: one ring per axis of the group's sub-grid, all axes at
//                        once, the data split across axes (the scaling book's multi-axis
//                        collectives): e.g. an all-gather over axes X, Y moves 1/2 of the data
//                        over each axis' rings concurrently
//   NVLS                 in-switch reduction: each GPU sends n to the NVSwitch, which reduces and
//                        multicasts n back (all-reduce); needs an NVSwitch with NVLS (Hopper+)
//                        (precisely, per GPU and direction n(p+1)/p for all-reduce: the
//                        multimem reduce-scatter reads all p slices of n/p through the switch
//                        and the multimem all-gather stores one; see plan_nvls.cc)
// Algorithms that do not apply to a group (NVLS off NVSwitch, torus rings off a torus or on a
// group that is not a sub-grid, halving-doubling on a non power of two) throw
// CommError(CommField::kAlgorithm).
#pragma once

#include <span>
#include <vector>

#include "meshsim/collectives/schedule.h"

namespace meshsim::collectives {

bool applicable(Algorithm algorithm, CollectiveKind kind, std::span<const DeviceId> group,
                const topology::Network& net);

// `algorithm` must not be kAuto.
Schedule plan_collective(CollectiveKind kind, Bytes bytes, std::span<const DeviceId> group,
                         Algorithm algorithm, const topology::Network& net);

// Several groups running the same collective at the same time (every TP group's all-reduce):
// their schedules merged step by step, so that their flows share links. The groups must have
// the same size; the algorithm is applied to each.
Schedule plan_concurrent(CollectiveKind kind, Bytes bytes,
                         std::span<const std::vector<DeviceId>> groups, Algorithm algorithm,
                         const topology::Network& net);

// The applicable algorithm with the smallest time on `backend`, the way NCCL's tuner picks
// (it estimates every algorithm's time and takes the fastest).
Algorithm choose_algorithm(CollectiveKind kind, Bytes bytes,
                           std::span<const std::vector<DeviceId>> groups,
                           const topology::Network& net, NetworkBackend& backend);

// The same choice with the winner's time (the merged schedule of all `groups` on `backend`).
// Candidates are tried in enum order (ring, bidirectional ring, double binary tree,
// halving-doubling, hierarchical, torus rings, NVLS); a later one wins only if strictly faster.
// An algorithm is a candidate when it applies to every group and their schedules have the same
// shape (so that they can run step by step together). Groups of one rank, or zero bytes: ring,
// zero time.
struct AlgorithmChoice {
  Algorithm algorithm = Algorithm::kRing;
  Duration time;
};
AlgorithmChoice choose_and_time(CollectiveKind kind, Bytes bytes,
                                std::span<const std::vector<DeviceId>> groups,
                                const topology::Network& net, NetworkBackend& backend);

// The collective kinds `algorithm` has a schedule for (regardless of the group).
bool supports_kind(Algorithm algorithm, CollectiveKind kind);

}  // namespace meshsim::collectives
