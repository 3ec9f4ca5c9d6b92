// One communication (a collective, with the images that run beside it, or a send/recv) as the
// network sees it: a coupled transfer.
//
// Why coupled: NCCL pipelines a collective in chunks, so all of its links are busy at once and it
// progresses at one rate, set by its slowest link (a ring runs at its slowest hop) or by its
// protocol. A CommShape describes that:
//   * `latency`: the fixed part, paid before any byte moves (NCCL's latency terms for the chosen
//     algorithm and protocol, pipeline fill);
//   * `bytes` of progress (nccl-tests' size of the operation) made at a rate r that the network
//     grants; crossing link l costs `weight` bytes per byte of progress (the algorithm's traffic
//     pattern routed on the topology: 2(p-1)/p on every link of a ring all-reduce);
//   * r never exceeds `rate_cap` (the protocol and channel model: what NCCL's kernels can push);
//   * the whole lasts at least `floor` (the platform's launch and completion).
// Alone on the network, a shape takes
//   max(floor, latency + bytes / min(rate_cap, min over its links of capacity / weight)),
// which is isolated_time; shared, the network model re-shares every link among all shapes in
// flight (network_model.h). Weights are per byte of progress, so one shape may stand for several
// concurrent groups (a family of symmetric collectives) by summing their loads.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "meshsim/collectives/nccl.h"
#include "meshsim/collectives/schedule.h"
#include "meshsim/sim/units.h"
#include "meshsim/topology/network.h"

namespace meshsim::collectives {

struct LinkLoad {
  LinkId link;
  double weight = 0;  // bytes on `link` per byte of progress, > 0
  auto operator<=>(const LinkLoad&) const = default;
};

struct CommShape {
  Bytes bytes;
  Duration latency;
  Duration floor;
  std::optional<BytesPerSec> rate_cap;  // none: only the links limit it
  std::vector<LinkLoad> loads;          // sorted by link, each link once

  // What runs, for reports: the algorithm ("ring", "nvls", "torus-rings", "send-recv", ...),
  // NCCL's protocol where NCCL runs it, and the channels it uses.
  Algorithm algorithm = Algorithm::kRing;
  std::optional<NcclProtocol> protocol;
  int channels = 0;
};

// The capacity of every link of `net` (index LinkId::index()) as collective traffic sees it:
// bandwidth x the catalogue's efficiency for the link's kind (effective_bandwidth).
std::vector<double> link_capacities(const topology::Network& net,
                                    const BandwidthEfficiency& efficiency);

// The rate `shape` gets alone: min(rate_cap, min over loads of capacity / weight), bytes/s.
double isolated_rate(const CommShape& shape, const std::vector<double>& capacities);
// max(floor, latency + bytes / isolated_rate), with Bytes / BytesPerSec's rounding (ceil to ps).
Duration isolated_time(const CommShape& shape, const std::vector<double>& capacities);

// Sums the routed bytes of every flow of `schedule` (steps x repeats, flow weights applied) per
// link and divides by `progress`: the loads of a shape that makes `progress` bytes of progress.
std::vector<LinkLoad> schedule_loads(const topology::Network& net, const Schedule& schedule,
                                     const BandwidthEfficiency& efficiency, Bytes progress);
// The loads of several shapes run as one (families of groups): weights of a link added.
std::vector<LinkLoad> merge_loads(std::vector<LinkLoad> a, const std::vector<LinkLoad>& b);

// The latency of a schedule run step after step: per step, the longest path latency of its flows
// plus its overhead, times its repeats. What a torus collective pays besides bandwidth.
Duration schedule_latency(const topology::Network& net, const Schedule& schedule);

}  // namespace meshsim::collectives
