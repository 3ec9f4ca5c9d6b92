// Runs a plan (simgrid_plan.h) through SimGrid in the current process.
//
// SimGrid keeps its engine in a process-wide singleton that cannot be rebuilt once a platform is
// sealed and run, so this may be called AT MOST ONCE per process, and only in a process that has
// never initialised SimGrid: the backend calls it in a forked child (simgrid_fork.h) that exits
// right after (so the engine is left for the process's end to reclaim, not torn down). Never call
// it in the meshsim process itself.
//
// Model: SimGrid's CM02 flow-level network model, configured so that bandwidth is shared by plain
// max-min fairness:
//  * CM02 rather than the default LV08: LV08 multiplies latencies by 13.01 and bandwidths by 0.97
//    and weights sharing with a "weight-S" term (TCP slow-start corrections calibrated for WAN
//    TCP); CM02 has latency factor 1, bandwidth factor 1 and weight-S 0. We also set those three
//    explicitly.
//  * network/TCP-gamma:0 removes the TCP window cap (rate <= gamma / (2 x latency)).
//  * network/crosstraffic:0 removes the 5% of each flow charged to the reverse path (ACKs).
//  * CM02 still weights each flow's share by 1 / (the latency of its route) (Casanova-Marchal's
//    RTT-unfairness of TCP): a flow with twice the latency gets half the share of a link. That is
//    not the max-min of meshsim's contract, so the SimGrid links carry bandwidth only (latency 0,
//    which gives every flow the same weight), and each flow's latency phase is played by the
//    driver: a flow with path latency L is started L after its step starts. This is exactly
//    SimGrid's own semantics of latency (a flow consumes no bandwidth during its latency, then
//    shares bandwidth until its last byte), minus the weighting. An uncontended flow therefore
//    takes latency + bytes / bandwidth of its slowest link.
//  * surf/precision:1e-12 (SimGrid's default is 1e-9 s): events closer than this are merged; we
//    keep picosecond resolution like meshsim's Duration.
// Platform: one star zone; one SimGrid link (SHARED) per plan link; one host per route, whose
// "up" route is the route's links, and one sink host with an empty "down" route, so a comm from a
// route's host to the sink crosses exactly that route (ECMP siblings between the same pair of
// vertices are separate hosts and so separate routes). One actor on the sink runs the steps one
// after another: each step's flows start together (after their latency), the actor waits for all
// of them, and the step's time is SimGrid's clock at the last completion minus the step's start.
#pragma once

#include <vector>

#include "simgrid_plan.h"

namespace meshsim::collectives::detail {

// Seconds per step of `plan`, in step order. Throws std::exception on a SimGrid error (SimGrid may
// also abort the process on an internal assertion).
std::vector<double> run_plan_in_simgrid(const SgPlan& plan);

}  // namespace meshsim::collectives::detail
