// The command line's communication flags (--backend, --algo, --proto, --nccl) as the step's
// options. Where each scenario and plan field's value came from, and the library's errors located
// there, are the scenario module's (meshsim/scenario/located.h).
#pragma once

#include <string>

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
