// What the SimGrid backend hands to SimGrid: a batch of steps reduced to plain numbers.
//
// A plan is built in the calling process (pure, no SimGrid) and read by the forked child that
// runs SimGrid (simgrid_run.h). It holds only what SimGrid needs:
//  * links: the meshsim directed links that some flow of the batch crosses (and only those), each
//    with the capacity collective traffic sees (bandwidth x efficiency of its kind, schedule.h's
//    effective_bandwidth); SimGrid gets one link per entry.
//  * routes: every distinct path of the batch (a list of plan links) with its latency, the sum of
//    the meshsim link latencies. Two flows between the same pair of vertices that ECMP sends over
//    different paths get two routes; two flows on the same path share one.
//  * steps: per step, its flows as (route, bytes on the wire), sorted by route latency so that the
//    child can start them in order of their latency phase (see simgrid_run.h). Bytes on the wire
//    are the flow's bytes x flow_weight (1, or 1 / in_switch for NVLS traffic to or from an
//    NVSwitch, which moves that much extra protocol traffic).
// Routing, skipped flows and weights follow the analytical backend exactly, so that both backends
// time the same flows on the same paths with the same capacities:
//  * a flow whose source is its destination, or that carries no bytes, crosses nothing and takes
//    no time: it is left out;
//  * the ECMP salt of a flow is its index among the step's remaining flows that have more than
//    one equal-cost path (0 for single-path flows), as Network::route expects.
// Where the two differ is the sharing itself (SimGrid re-shares when a flow ends; see
// simgrid_run.h), and, between flows of different weights on one link, what is shared fairly:
// SimGrid shares wire bytes per second, the analytical backend payload bytes per second.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "meshsim/collectives/schedule.h"
#include "meshsim/topology/network.h"

namespace meshsim::collectives::detail {

struct SgLink {
  LinkId id;                 // the meshsim link
  double bandwidth_bps = 0;  // bytes per second, this direction, after efficiency
};

struct SgRoute {
  std::vector<uint32_t> links;  // indices into SgPlan::links, in path order
  double latency_s = 0;         // sum of the links' latencies, seconds
};

struct SgFlow {
  uint32_t route = 0;  // index into SgPlan::routes
  uint64_t bytes = 0;  // on the wire: payload x flow weight, rounded to the nearest byte
};

struct SgStep {
  std::vector<SgFlow> flows;  // sorted by route latency (ties: order in the Step)
};

struct SgPlan {
  std::vector<SgLink> links;
  std::vector<SgRoute> routes;
  std::vector<SgStep> steps;  // one per input step, same order

  size_t num_flows() const;
};

// Routes every flow of `steps` on `net` exactly as the analytical backend does (see above) and
// collects the links, routes and flows, with `efficiency` applied. Throws InternalError
// (SIM_CHECK) for a flow naming a vertex outside the network or carrying negative bytes.
// O(total flows x path length x log(routes)).
SgPlan make_plan(const topology::Network& net, const BandwidthEfficiency& efficiency,
                 std::span<const Step> steps);

}  // namespace meshsim::collectives::detail
