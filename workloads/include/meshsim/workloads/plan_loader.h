// Hands a step plan to the engine: its programs, its groups (simulated members and the global
// ranks the cost model is asked about) and each simulated rank's bindings. The one bridge from
// workloads/ to sim/, for every caller that runs a plan (cli/, validation/).
#pragma once

#include "meshsim/sim/simulation.h"
#include "meshsim/workloads/step.h"

namespace meshsim::workloads {

// Moves the plan's programs into `sim`.
void load_plan(Simulation& sim, StepPlan& plan);

}  // namespace meshsim::workloads
