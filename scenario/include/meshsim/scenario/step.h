// Simulating one training step of a scenario: the one code path behind `meshsim run`, the plan
// search and the sweeps.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "meshsim/sim/simulation.h"
#include "meshsim/scenario/comm_setup.h"
#include "meshsim/scenario/scenario.h"
#include "meshsim/scenario/step_report.h"
#include "meshsim/topology/cluster.h"
#include "meshsim/workloads/model.h"

namespace meshsim::scenario {

struct StepOptions {
  bool full_simulation = false;  // simulate every rank, not one per class
  // Simulate even when the closed-form model state exceeds the chip's memory (validation of runs
  // that were measured, so did fit); the report still says OOM.
  bool skip_memory_precheck = false;
  CommOptions comm;
};

// What a caller may add to a run (the cli's trace writer): which ranks must be simulated, and
// hooks before and after the engine runs.
class StepObserver {
 public:
  virtual ~StepObserver() = default;
  virtual bool needs_full_simulation() const = 0;
  virtual std::vector<int64_t> ranks_to_simulate() const = 0;
  // Before Simulation::run (subscribe to the engine's and the network model's signals).
  virtual void attach(Simulation& sim, CommSetup& comm, const StepReport& report) = 0;
  // After it; may fill the report's trace fields.
  virtual void finish(SimTime end, StepReport& report) = 0;
};

// The scenario's model and cluster, and its plan checked against both: the library's checks
// (PlanError), what its software stack runs (workloads::check_stack_runs: PlanError on the field
// the framework refuses; the custom stack runs anything valid), the degrees against the cluster's devices (PlanError on dp) and the precision
// against the chip's rates (PlanError on dtype). ScenarioError / InputError from the loaders.
struct LoadedScenario {
  topology::ClusterSpec cluster;
  workloads::ModelConfig model;
};
LoadedScenario load_and_check(const Scenario& s);
// The model and the cluster alone (the plan search checks each plan itself).
LoadedScenario load_inputs(const Scenario& s);
// The plan, bound to the cluster as it will run (bind_to_cluster), against an already loaded
// model and cluster (the checks of load_and_check).
void check_plan(const LoadedScenario& l, const workloads::ParallelPlan& p);
// Activation offloading's copies need the chip's host link rates; PlanError (offload_layers)
// otherwise.
void require_host_link(const topology::Chip& chip);

// "llama3-70b (70.55 B parameters, 80 layers)", "val-10m (10.1 M parameters, 8 layers)".
std::string describe_model(const workloads::ModelConfig& m);
// "TP 8 (SP) x CP 1 x PP 4 (interleaved, 5 virtual stages) x DP 64 (ZeRO-1); ..."
std::string describe_plan(const workloads::ParallelPlan& p);

// Loads everything, checks the plan, pre-checks memory, simulates, analyses. Throws PlanError,
// ScenarioError, InputError (loaders) and collectives::CommError (an algorithm that does not
// apply). A configuration that does not fit is returned with oom = true (and simulated = false
// when the closed-form model state already exceeds the chip's memory).
StepReport simulate_step(const Scenario& scenario, const StepOptions& options,
                         StepObserver* observer = nullptr);
// The same with the model and cluster already loaded (the plan search and sweeps load them once).
StepReport simulate_step(const Scenario& scenario, const LoadedScenario& loaded,
                         const StepOptions& options, StepObserver* observer = nullptr);

}  // namespace meshsim::scenario
