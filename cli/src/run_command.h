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

// "llama3-70b (70.55 B parameters, 80 layers)", "val-10m (10.1 M parameters, 8 layers)".
std::string describe_model(const workloads::ModelConfig& m);

// Loads everything, checks the plan against the model and the cluster, pre-checks memory,
// simulates, analyses. Throws InputError on bad input, a library's PlanError located where the
// plan field came from (scenario.h) and a collective CommError at --algo. A configuration that
// does not fit is returned with oom = true (and simulated = false when the closed-form estimate
// already exceeds the chip's memory).
StepReport simulate_step(const Scenario& scenario, const RunOutputs& outputs);

// simulate_step + summary on `out` + --json. Returns the process exit code: 0, or 3 for OOM.
int run_command(const Scenario& scenario, const RunOutputs& outputs, std::ostream& out);

}  // namespace meshsim::cli
