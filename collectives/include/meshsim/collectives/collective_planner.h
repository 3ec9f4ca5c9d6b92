// From a collective over a group (and its images) to the coupled transfer the network runs
// (comm_shape.h): which algorithm, its traffic pattern routed on the topology, its latency, rate
// cap and floor.
//
// On GPUs, what NCCL does: NCCL's topology search and tuner (nccl.h) choose the algorithm and
// protocol (`--algo auto`), or take a forced one where it exists (NCCL_ALGO, NCCL_PROTO); the
// run-time model (src/nccl_runtime.h) gives the latency and the rate cap; the platform's launch
// floor is the floor. All-to-all runs on NCCL's send/recv engine. On TPUs, what XLA does: rings
// along every axis of the group's sub-grid of the torus, all at once (a group inside one slice),
// or the hierarchical scheme across slices (reduce-scatter inside, all-reduce over DCN, gather
// inside), else a plain ring; latency is the per-hop latency of the schedule's steps, and only
// the links limit the rate.
// A forced algorithm that has no pattern for a collective kind at all (NVLS for a broadcast)
// leaves that kind to the automatic choice, as NCCL_ALGO only affects the operations that have
// it; one that has a pattern but does not exist for the group (NVLS across nodes without SHARP,
// PAT with eight ranks per node) throws CommError(CommField::kAlgorithm) (kProtocol for a forced
// protocol that nothing runs with). Errors name the option, never a flag.
// Pure (docs/style.md A.4): no clock, no state besides the network's link capacities.
#pragma once

#include <optional>
#include <span>
#include <utility>
#include <vector>

#include "meshsim/collectives/comm_shape.h"
#include "meshsim/collectives/nccl.h"

namespace meshsim::collectives {

struct CollectiveOptions {
  Algorithm algorithm = Algorithm::kAuto;
  std::optional<NcclProtocol> protocol;
  NcclVersion nccl_version = kDefaultNcclVersion;
};

class CollectivePlanner {
 public:
  explicit CollectivePlanner(const topology::Network& net, CollectiveOptions options = {});

  // `groups`: a group (devices in rank order) and the images that run the same collective beside
  // it (same size); the first one decides the algorithm, all of them load the links. A group of
  // one rank, or zero bytes, gives an empty shape (no time).
  CommShape collective(CollectiveKind kind, Bytes bytes,
                       std::span<const std::vector<DeviceId>> groups) const;
  // A send of `bytes` from each pair's first device to its second (a send/recv and its images).
  CommShape send_recv(std::span<const std::pair<DeviceId, DeviceId>> pairs, Bytes bytes) const;

  const topology::Network& network() const { return net_; }
  const CollectiveOptions& options() const { return options_; }
  const BandwidthEfficiency& efficiency() const { return efficiency_; }
  const std::vector<double>& capacities() const { return capacities_; }
  // The shape's time alone on the network (comm_shape.h's isolated_time).
  Duration isolated_time(const CommShape& shape) const;

 private:
  const topology::Network& net_;
  CollectiveOptions options_;
  BandwidthEfficiency efficiency_;
  std::vector<double> capacities_;

  CommShape gpu_collective(CollectiveKind kind, Bytes bytes,
                           std::span<const std::vector<DeviceId>> groups) const;
  CommShape tpu_collective(CollectiveKind kind, Bytes bytes,
                           std::span<const std::vector<DeviceId>> groups) const;
  std::vector<LinkLoad> loads_of(CollectiveKind kind, Bytes bytes,
                                 std::span<const std::vector<DeviceId>> groups, Algorithm a) const;
};

}  // namespace meshsim::collectives
