// Collective algorithms as schedules of flows on a network, and the backends that time them.
//
// A collective over a group (devices in rank order) expands, by algorithm, into a Schedule: a
// sequence of Steps. All flows of a step start together; the step ends when its last flow ends;
// the next step starts then. A step repeated k times (the p-1 identical steps of a ring) is one
// Step with repeat = k, so a 2048-rank ring costs one step evaluation, not 4094.
// A Flow moves bytes between two vertices of the network (device to device; or device to
// NVSwitch and back for in-switch reduction, NVLS), along routes chosen by the Network.
//
// Backends (STYLE A.5) time one step of flows on the network:
//  * AnalyticalBackend: rates by max-min fair sharing of every link among the flows that cross
//    it (progressive filling); each flow takes path latency + bytes / rate; the step takes the
//    longest flow. Deterministic, fast.
//  * SimGridBackend: the same flows through SimGrid's flow-level network model on the same
//    graph, with the same routes.
// Times of whole collectives are then: sum over steps of (step time + step overhead) * repeat.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "meshsim/sim/program.h"
#include "meshsim/sim/provenance.h"
#include "meshsim/sim/units.h"
#include "meshsim/topology/network.h"

namespace meshsim::collectives {

using meshsim::to_string;

enum class Algorithm : uint8_t {
  kAuto,
  kRing,
  kBidirectionalRing,
  kDoubleBinaryTree,
  kHalvingDoubling,
  kHierarchical,  // inside each node, then across nodes per rail, then inside again
  kTorusRings,    // per-axis rings, all axes at once (TPU)
  kNvls,          // in-switch reduction on NVSwitch (all-reduce, reduce-scatter, all-gather)
};
// Canonical names first, then the short forms parse_enum<Algorithm> also accepts.
constexpr auto enum_names(Algorithm) {
  return std::to_array<EnumName<Algorithm>>({{Algorithm::kAuto, "auto"},
                                             {Algorithm::kRing, "ring"},
                                             {Algorithm::kBidirectionalRing, "bidirectional-ring"},
                                             {Algorithm::kDoubleBinaryTree, "double-binary-tree"},
                                             {Algorithm::kHalvingDoubling, "halving-doubling"},
                                             {Algorithm::kHierarchical, "hierarchical"},
                                             {Algorithm::kTorusRings, "torus-rings"},
                                             {Algorithm::kNvls, "nvls"},
                                             {Algorithm::kBidirectionalRing, "bidir-ring"},
                                             {Algorithm::kDoubleBinaryTree, "tree"},
                                             {Algorithm::kDoubleBinaryTree, "dbt"},
                                             {Algorithm::kHalvingDoubling, "hd"},
                                             {Algorithm::kTorusRings, "torus"},
                                             {Algorithm::kNvls, "nvlink-sharp"}});
}

// The options of the collective model a user chooses. A CommError names one; the edge says where
// its value came from (sim/provenance.h).
enum class CommField : uint8_t { kAlgorithm };
constexpr auto enum_names(CommField) {
  return std::to_array<EnumName<CommField>>({{CommField::kAlgorithm, "algorithm"}});
}
using CommError = FieldError<CommField>;

struct Flow {
  topology::VertexId src;
  topology::VertexId dst;
  Bytes bytes;
};

struct Step {
  std::vector<Flow> flows;
  int64_t repeat = 1;
  Duration overhead;  // fixed per-step cost besides the flows (e.g. a reduction kernel)
  std::string label;  // e.g. "reduce-scatter ring step", for reports and traces
};

struct Schedule {
  Algorithm algorithm = Algorithm::kRing;
  std::vector<Step> steps;
};

class NetworkBackend {
 public:
  virtual ~NetworkBackend() = default;
  virtual std::string_view name() const = 0;
  // Time of each step, from the moment its flows start until the last one ends (excluding the
  // step's overhead and repeat). Backends may evaluate the steps in one batch.
  virtual std::vector<Duration> step_times(std::span<const Step> steps) = 0;
};

// sum over steps of (step_time + overhead) * repeat
Duration schedule_time(const Schedule& schedule, NetworkBackend& backend);

// The fraction of a link's line rate that collective traffic achieves, per link kind, and the
// further fraction that in-switch reduction (NVLS multimem traffic: flows to or from an NVSwitch
// vertex) achieves. A backend gives a link of bandwidth B the capacity B * link[kind]; a flow to
// or from an NVSwitch consumes 1 / in_switch of capacity per byte per second (it moves extra
// protocol traffic). Every factor is in (0, 1]; `ideal()` is all ones. Backends should apply the
// same factors so that they agree (see flow_weight / effective_bandwidth).
struct BandwidthEfficiency {
  std::array<double, topology::kNumLinkKinds> link{1.0, 1.0, 1.0, 1.0, 1.0};
  double in_switch = 1.0;

  static BandwidthEfficiency ideal() { return {}; }
  // Sourced defaults for the cluster's chip (see efficiency.cc): NVLink at NCCL's effective
  // per-link bandwidth (H100: 20.6 of 25 GB/s), NVLS at NCCL's nvlsEfficiency (Hopper 0.85);
  // other link kinds 1 (no sourced figure).
  static BandwidthEfficiency defaults_for(const topology::ClusterSpec& spec);
};

// The route of every flow of `step` (empty for a flow that stays on its vertex or carries no
// bytes), as every backend must route them so that they agree. Flows with several equal-cost
// paths take path number salt mod path_count (Network::route) with
//   salt = host index of the destination + k,
// k counting the earlier flows of the step with the same source and destination: destination-
// based D-mod-K routing (E. Zahavi et al., "D-Mod-K Routing Providing Non-Blocking Traffic for
// Shift Permutations on Real Life Fat Trees", 2010; the fat-tree routing of InfiniBand subnet
// managers): the spine follows the destination, so flows into one leaf from distinct hosts
// spread over the spines whatever order the planners list them in, and repeated flows of one pair
// (NCCL channels on separate queue pairs) take distinct paths. Deterministic.
std::vector<topology::Path> route_step(const topology::Network& net, const Step& step);

// Link capacity seen by collective traffic: bandwidth * efficiency.link[kind].
BytesPerSec effective_bandwidth(const topology::Link& link, const BandwidthEfficiency& efficiency);
// Capacity one byte/s of `flow` consumes on each link of its path: 1, or 1 / in_switch for flows
// to or from an NVSwitch vertex.
double flow_weight(const topology::Network& net, const Flow& flow,
                   const BandwidthEfficiency& efficiency);

}  // namespace meshsim::collectives
