// `meshsim run`: simulate one training step of a scenario and report it.
#pragma once

#include <optional>
#include <ostream>
#include <string>

#include "comm_setup.h"
#include "report.h"
#include "meshsim/workloads/parallel.h"
#include "scenario.h"

namespace meshsim::cli {

struct RunOutputs {
  std::optional<std::string> json_path;
  std::optional<std::string> trace_path;   // .pftrace (native Perfetto) or .json (Chrome JSON)
  std::optional<std::string> trace_ranks;  // --trace-ranks
  bool full_simulation = false;           // simulate every rank, not one per class
  CommOptions comm;
};

// Loads everything, checks the plan against the cluster, pre-checks memory, simulates, analyses.
// Throws InputError on bad input. A configuration that does not fit is returned with oom = true
// (and simulated = false when the closed-form estimate already exceeds the chip's memory).
// "llama3-70b (70.55 B parameters, 80 layers)", "val-10m (10.1 M parameters, 8 layers)".
std::string describe_model(const workloads::ModelConfig& m);

// The parallel plan a scenario describes (degrees, schedule, precision, kernels, overlap); checked
// against the model and cluster later, by the planner.
workloads::ParallelPlan to_plan(const Scenario& s);

StepReport simulate_step(const Scenario& scenario, const RunOutputs& outputs);

// simulate_step + summary on `out` + --json. Returns the process exit code: 0, or 3 for OOM.
int run_command(const Scenario& scenario, const RunOutputs& outputs, std::ostream& out);

}  // namespace meshsim::cli
