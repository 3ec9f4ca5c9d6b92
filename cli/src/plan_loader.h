// Hands a step plan to the engine: its programs, its groups (simulated members and the global
// ranks the cost model is asked about) and each simulated rank's bindings. The composition
// root's one bridge from workloads/ to sim/.
#pragma once

#include "meshsim/sim/simulation.h"
#include "meshsim/workloads/step.h"

namespace meshsim::cli {

// Moves the plan's programs into `sim`.
void load_plan(Simulation& sim, workloads::StepPlan& plan);

}  // namespace meshsim::cli
