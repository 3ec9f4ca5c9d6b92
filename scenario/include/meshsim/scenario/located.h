// The edge's side of provenance for a scenario: the flag of each scenario and plan field, and the
// library's field errors about a scenario located where the value came from (a file and its JSON
// pointer, or a flag). The command line, the plan search and sweeps, and the published runs all
// locate a step's errors through these.
#pragma once

#include <string>

#include "meshsim/collectives/schedule.h"
#include "meshsim/sim/error.h"
#include "meshsim/scenario/scenario.h"
#include "meshsim/workloads/parallel.h"

namespace meshsim::scenario {

// The command-line flag of a plan field: "--tp", "--capacity-factor", "--no-overlap-p2p".
std::string flag_of(workloads::PlanField field);
// ... and of a scenario field: "--model", "--hardware-catalogue".
std::string flag_of(ScenarioField field);
// ... and of a fabric knob: "--oversubscription", "--rail-optimized".
std::string flag_of(topology::FabricField field);

// Where a field's value came from: its recorded origin when a user wrote it, else the flag that
// would set it.
Origin origin_of(const workloads::ParallelPlan& plan, workloads::PlanField field);
Origin origin_of(const Scenario& s, ScenarioField field);

// The InputError a library's PlanError (ScenarioError) is, located where the value came from:
// "scenario.json: /tp: ..." or "--tp: ...".
InputError locate(const workloads::ParallelPlan& plan, const workloads::PlanError& e);
InputError locate(const Scenario& s, const ScenarioError& e);
InputError locate(const Scenario& s, const topology::FabricError& e);
// A collective model's complaint about one of its options, at the flag that set it (--algo or
// --proto).
InputError locate(const collectives::CommError& e);

// Runs `f`, turning the library's field errors about `s` into located InputErrors, and a
// collective's CommError (an algorithm that does not apply) into an error on --algo.
template <typename F>
auto located(const Scenario& s, F&& f) -> decltype(f()) {
  try {
    return f();
  } catch (const workloads::PlanError& e) {
    throw locate(s.plan, e);
  } catch (const ScenarioError& e) {
    throw locate(s, e);
  } catch (const topology::FabricError& e) {
    throw locate(s, e);
  } catch (const collectives::CommError& e) {
    throw locate(e);
  }
}

}  // namespace meshsim::scenario
