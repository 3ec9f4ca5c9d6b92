// `meshsim run`: simulate one training step of a scenario and report it.
#pragma once

#include <memory>
#include <optional>
#include <ostream>
#include <string>

#include "budget.h"
#include "meshsim/scenario/step.h"
#include "report.h"
#include "scenario_flags.h"
#include "trace_limits.h"

namespace meshsim::cli {

using scenario::StepReport;

struct RunOutputs {
  std::optional<std::string> json_path;
  std::optional<std::string> trace_path;   // .pftrace (native Perfetto) or .json (Chrome JSON)
  std::optional<std::string> trace_ranks;  // --trace-ranks
  TraceLimit trace_limit;                  // --trace-limit (no flag: validate-published --run)
  scenario::StepOptions step;              // --full-simulation, --backend, --algo
  BudgetArgs budget;                       // --tokens, --days, --price-table, ...
  std::optional<std::string> export_chakra;  // --export-chakra DIR
};

// The trace writer the outputs ask for, as the step's observer (null without --trace): its
// --trace and --trace-ranks errors are raised here, before any simulation.
std::unique_ptr<scenario::StepObserver> trace_observer(const RunOutputs& outputs,
                                                       const Scenario& s,
                                                       const topology::ClusterSpec& cluster);

// scenario::load_and_check, its errors located where the scenario's values came from
// (meshsim/scenario/located.h).
scenario::LoadedScenario load_located(const Scenario& scenario);
// scenario::simulate_step with the trace the outputs ask for, errors located as above.
StepReport simulate_step(const Scenario& scenario, const scenario::LoadedScenario& loaded,
                         const RunOutputs& outputs);

// simulate_step + summary on `out` + --json. Returns the process exit code: 0, or 3 for OOM.
int run_command(const Scenario& scenario, const RunOutputs& outputs, std::ostream& out);

}  // namespace meshsim::cli
