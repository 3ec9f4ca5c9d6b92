// The edge's side of provenance: the flag of each scenario and plan field, and library errors
// located where the value came from (a file and its JSON pointer, or a flag).
#pragma once

#include <functional>
#include <string>

#include "cli11_fwd.h"

#include "meshsim/collectives/schedule.h"
#include "meshsim/sim/error.h"
#include "meshsim/studies/comm_setup.h"
#include "meshsim/studies/scenario.h"
#include "meshsim/workloads/parallel.h"

namespace meshsim::cli {

using studies::Scenario;

// The command-line flag of a plan field: "--tp", "--capacity-factor", "--no-overlap-p2p".
std::string flag_of(workloads::PlanField field);
// ... and of a scenario field: "--model", "--hardware-catalogue".
std::string flag_of(studies::ScenarioField field);
// ... and of a fabric knob: "--oversubscription", "--rail-optimized".
std::string flag_of(topology::FabricField field);

// Where a field's value came from: its recorded origin when a user wrote it, else the flag that
// would set it.
Origin origin_of(const workloads::ParallelPlan& plan, workloads::PlanField field);
Origin origin_of(const Scenario& s, studies::ScenarioField field);

// The InputError a library's PlanError (ScenarioError) is, located where the value came from:
// "scenario.json: /tp: ..." or "--tp: ...".
InputError locate(const workloads::ParallelPlan& plan, const workloads::PlanError& e);
InputError locate(const Scenario& s, const studies::ScenarioError& e);
InputError locate(const Scenario& s, const topology::FabricError& e);
// A collective model's complaint about one of its options, at the flag that set it (--algo or
// --proto).
InputError locate(const collectives::CommError& e);

// --gpus N: the scenario's GPU cluster resized to N devices in whole nodes (InputError on --gpus
// for a TPU slice, a count that is not whole nodes, or --nodes given too).
void resize_to_devices(Scenario& s, int64_t devices);

// A yes/no flag bound to `value`: bare or `=true` sets it, `=false` clears it, and any other value
// is refused with exit 2 (CLI11's "Could not convert"), so that `--sp=false` is never a silent
// true. Every yes/no flag of meshsim is declared through it.
CLI::Option* add_bool_flag(CLI::App* app, const std::string& name, bool& value,
                           const std::string& help);

// The fat tree's knobs (studies::FabricKnobs) as flags bound to `k` (--oversubscription, --tiers,
// --rail-optimized, --nics-per-device, --nic-bandwidth, --sharp); `on_set` runs for each.
void add_fabric_options(CLI::App* app, studies::FabricKnobs& k,
                        const std::function<void(CLI::Option*, topology::FabricField)>& on_set);

// The algorithm named by --algo; InputError("--algo") for an unknown name.
collectives::Algorithm parse_algo_flag(const std::string& name);
// The backend named by --backend; InputError("--backend") for an unknown name.
collectives::NetworkBackend parse_backend_flag(const std::string& name);

// The communication flags as written.
struct CommFlags {
  std::string backend = "analytical";  // analytical | simgrid
  std::string algorithm = "auto";
  std::string protocol = "auto";       // auto | ll | ll128 | simple
  std::string nccl = "2.30";           // the NCCL release whose tuner decides
};
// --backend, --algo, --proto and --nccl as the step's options; InputError naming the flag.
studies::CommOptions comm_options(const CommFlags& flags);

// Runs `f`, turning the library's field errors about `s` into located InputErrors, and a
// collective's CommError (an algorithm that does not apply) into an error on --algo.
template <typename F>
auto located(const Scenario& s, F&& f) -> decltype(f()) {
  try {
    return f();
  } catch (const workloads::PlanError& e) {
    throw locate(s.plan, e);
  } catch (const studies::ScenarioError& e) {
    throw locate(s, e);
  } catch (const topology::FabricError& e) {
    throw locate(s, e);
  } catch (const collectives::CommError& e) {
    throw locate(e);
  }
}

}  // namespace meshsim::cli
