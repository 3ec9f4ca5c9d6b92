// The command line's communication flags (--backend, --algo, --proto, --nccl) as the step's
// options. Where each scenario and plan field's value came from, and the library's errors located
// there, are the scenario module's (meshsim/scenario/located.h).
#pragma once

#include <functional>
#include <string>

#include "cli11_fwd.h"

#include "meshsim/collectives/schedule.h"
#include "meshsim/scenario/comm_setup.h"
#include "meshsim/scenario/located.h"
#include "meshsim/scenario/scenario.h"

namespace meshsim::cli {

using scenario::flag_of;
using scenario::locate;
using scenario::located;
using scenario::origin_of;
using scenario::Scenario;

// --gpus N: the scenario's GPU cluster resized to N devices, whole nodes or part of one
// (scenario::Scenario::gpus: loading the cluster refuses a TPU slice or a count that is neither,
// on --gpus); InputError on --gpus with --nodes given too.
void resize_to_devices(Scenario& s, int64_t devices);

// A check for options that take a number above zero: "--gpus: expected a positive number, got 0"
// (CLI11's PositiveNumber says "Value 0 not in range 0.000000 to 1.797...e+308").
CLI::Validator positive_number();

// A yes/no flag bound to `value`: bare or `=true` sets it, `=false` clears it, and any other value
// is refused with exit 2 (CLI11's "Could not convert"), so that `--sp=false` is never a silent
// true. Every yes/no flag of meshsim is declared through it.
CLI::Option* add_bool_flag(CLI::App* app, const std::string& name, bool& value,
                           const std::string& help);

// The fat tree's knobs (scenario::FabricKnobs) as flags bound to `k` (--oversubscription, --tiers,
// --rail-optimized, --nics-per-device, --nic-bandwidth, --sharp); `on_set` runs for each.
void add_fabric_options(CLI::App* app, scenario::FabricKnobs& k,
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
scenario::CommOptions comm_options(const CommFlags& flags);

}  // namespace meshsim::cli
