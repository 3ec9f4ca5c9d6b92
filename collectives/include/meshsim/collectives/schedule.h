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

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "meshsim/sim/program.h"
#include "meshsim/sim/units.h"
#include "meshsim/topology/network.h"

namespace meshsim::collectives {

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
std::string_view to_string(Algorithm a);
std::optional<Algorithm> parse_algorithm(std::string_view s);

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

}  // namespace meshsim::collectives
