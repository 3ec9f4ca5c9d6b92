// Collective algorithms as traffic patterns on a network.
//
// A planner (docs/style.md A.4: a pure function, no clock) expands a collective over a group
// (devices in rank order) into a Schedule: a sequence of Steps, each a set of Flows that move bytes
// between two vertices of the network (device to device; device to NVSwitch and back for in-switch
// reduction), along routes the Network chooses. A step repeated k times (the p-1 identical steps
// of a ring) is one Step with repeat = k. The network model does not run the steps one by one:
// NCCL pipelines a collective so that all its links are busy at once, so a schedule is summed
// into per-link loads of one coupled transfer (comm_shape.h), and its step structure only gives
// the per-hop latency of the algorithms NCCL does not price itself (torus rings).
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "meshsim/collectives/nccl.h"
#include "meshsim/sim/program.h"
#include "meshsim/sim/provenance.h"
#include "meshsim/sim/units.h"
#include "meshsim/topology/network.h"

namespace meshsim::collectives {

using meshsim::to_string;

// The algorithms meshsim runs. On GPUs they are NCCL's (nccl.h; `kAuto` is NCCL's tuner's
// choice); on TPUs what XLA does on the torus. kSendRecv is the point-to-point engine that
// send/recv and all-to-all use (not an algorithm NCCL chooses).
enum class Algorithm : uint8_t {
  kAuto,
  kRing,
  kTree,           // NCCL's tree: a chain in each node, double binary trees across nodes
  kNvls,           // NVLink SHARP: in-switch reduction and multicast inside one NVLink domain
  kNvlsTree,       // NVLS inside each node, a tree across nodes (no IB SHARP)
  kCollNetDirect,  // IB SHARP: reduction in the switches, every GPU of a node to the NIC heads
  kCollNetChain,   // IB SHARP with a chain inside each node
  kPat,            // parallel aggregated trees (Bruck-like): AG/RS with one GPU per node
  kTorusRings,     // per-axis rings, all axes at once (TPU)
  kHierarchical,   // inside each scale-up domain, across domains per rail, inside again
  kSendRecv,       // NCCL's point-to-point engine
};
// Canonical names first, then the other spellings parse_enum<Algorithm> accepts (NCCL_ALGO's).
constexpr auto enum_names(Algorithm) {
  return std::to_array<EnumName<Algorithm>>({{Algorithm::kAuto, "auto"},
                                             {Algorithm::kRing, "ring"},
                                             {Algorithm::kTree, "tree"},
                                             {Algorithm::kNvls, "nvls"},
                                             {Algorithm::kNvlsTree, "nvls-tree"},
                                             {Algorithm::kCollNetDirect, "collnet-direct"},
                                             {Algorithm::kCollNetChain, "collnet-chain"},
                                             {Algorithm::kPat, "pat"},
                                             {Algorithm::kTorusRings, "torus-rings"},
                                             {Algorithm::kHierarchical, "hierarchical"},
                                             {Algorithm::kSendRecv, "send-recv"},
                                             {Algorithm::kNvlsTree, "nvlstree"},
                                             {Algorithm::kCollNetDirect, "collnet"},
                                             {Algorithm::kCollNetDirect, "collnetdirect"},
                                             {Algorithm::kCollNetChain, "collnetchain"},
                                             {Algorithm::kTorusRings, "torus"},
                                             {Algorithm::kNvls, "nvlink-sharp"}});
}

// NCCL's name for an algorithm, and back; nullopt where NCCL has no such algorithm.
std::optional<NcclAlgorithm> nccl_algorithm(Algorithm a);
Algorithm from_nccl(NcclAlgorithm a);

// The options of the collective model a user chooses. A CommError names one; the edge says where
// its value came from (sim/provenance.h).
enum class CommField : uint8_t { kAlgorithm, kProtocol };
constexpr auto enum_names(CommField) {
  return std::to_array<EnumName<CommField>>(
      {{CommField::kAlgorithm, "algorithm"}, {CommField::kProtocol, "protocol"}});
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

// The fraction of a link's line rate that collective traffic achieves, per link kind, and the
// further fraction that in-switch reduction (NVLS multimem traffic: flows to or from an NVSwitch
// vertex) achieves. A link of bandwidth B has capacity B * link[kind]; a flow to or from an
// NVSwitch consumes 1 / in_switch of capacity per byte (it moves extra protocol traffic). Every
// factor is in (0, 1]; `ideal()` is all ones.
struct BandwidthEfficiency {
  std::array<double, topology::kNumLinkKinds> link{1.0, 1.0, 1.0, 1.0, 1.0};
  double in_switch = 1.0;

  static BandwidthEfficiency ideal() { return {}; }
  // The chip's figures from the hardware catalogue (topology/chips.json, with their sources):
  // NVLink and NVLS efficiency on GPUs, the NIC's on every network link, ICI and DCN on TPUs;
  // PCIe 1.
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
