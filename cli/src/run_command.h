// `meshsim run`: simulate one training step of a scenario and report it.
#pragma once

#include <optional>
#include <ostream>
#include <string>

#include "meshsim/scenario/step.h"
#include "budget.h"
#include "report.h"
#include "scenario_flags.h"

namespace meshsim::cli {

using scenario::StepReport;

struct RunOutputs {
  std::optional<std::string> json_path;
  std::optional<std::string> trace_path;   // .pftrace (native Perfetto) or .json (Chrome JSON)
  std::optional<std::string> trace_ranks;  // --trace-ranks
  scenario::StepOptions step;               // --full-simulation, --backend, --algo
  BudgetArgs budget;                       // --tokens, --days, --price-table, ...
};

// scenario::simulate_step with the trace the outputs ask for; the library's errors located where
// the scenario's values came from (scenario_flags.h).
StepReport simulate_step(const Scenario& scenario, const RunOutputs& outputs);
// The same for a scenario whose model and cluster are already built and checked (a published run
// as validate-published maps it).
StepReport simulate_loaded(const Scenario& scenario, const scenario::LoadedScenario& loaded,
                           const RunOutputs& outputs);

// simulate_step + summary on `out` + --json. Returns the process exit code: 0, or 3 for OOM.
int run_command(const Scenario& scenario, const RunOutputs& outputs, std::ostream& out);

}  // namespace meshsim::cli
