// Chakra execution traces and a step: simulating an imported workload on a cluster, and writing a
// scenario's step (or an imported workload) as Chakra traces (traces/chakra.h has the format).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "meshsim/collectives/comm_model.h"
#include "meshsim/sim/breakdown.h"
#include "meshsim/sim/simulation.h"
#include "meshsim/scenario/comm_setup.h"
#include "meshsim/scenario/scenario.h"
#include "meshsim/scenario/step.h"
#include "meshsim/topology/cluster.h"
#include "meshsim/traces/chakra.h"

namespace meshsim::studies {

struct WorkloadReport {
  std::string source;
  std::string cluster_description;
  int64_t ranks = 0;
  Duration step_time;
  std::vector<RankBreakdown> breakdown;  // by rank
  uint64_t events = 0;
};

// Hooks around the engine (the cli's trace writer): before Simulation::run, and after it.
struct WorkloadHooks {
  std::function<void(Simulation&, collectives::NetworkCommModel&)> attach;
  std::function<void(SimTime end)> finish;
};

// Simulates every rank of `w` on `cluster`: rank r on device r (the cluster needs at least as
// many devices as the workload has ranks: InputError on the workload otherwise), compute ops
// costed by the cluster's chip (measured ones as measured), collectives and sends on its network
// with `options`. Programs whose ranks wait on each other forever (a collective some member
// never reaches, in the order its dependencies allow) are an InputError on the workload. The
// programs move into the engine (export first, if at all).
WorkloadReport simulate_workload(traces::ChakraWorkload w,
                                 const topology::ClusterSpec& cluster, const scenario::CommOptions& options,
                                 const WorkloadHooks& hooks = {});

// Writes `w` as Chakra traces to `dir`, each compute op with its time on `cluster`.
void export_workload(const traces::ChakraWorkload& w, const topology::ClusterSpec& cluster,
                     const std::string& dir);

// Writes the step of `s` (loaded as `l`) as Chakra traces to `dir`: every rank's program, as the
// full simulation runs it, each compute op with its time on the cluster.
void export_step(const scenario::Scenario& s, const scenario::LoadedScenario& l, const std::string& dir);

}  // namespace meshsim::studies
