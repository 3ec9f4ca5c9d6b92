// `meshsim run --workload DIR --cluster C`: simulate Chakra execution traces (one per rank) on a
// modelled cluster (studies/chakra_run.h); with --export-chakra DIR, write them back out.
#pragma once

#include <optional>
#include <ostream>
#include <string>

#include "collective_command.h"
#include "meshsim/scenario/comm_setup.h"
#include "trace_limits.h"

namespace meshsim::cli {

struct WorkloadArgs {
  std::string path;
  ClusterArgs cluster;
  scenario::CommOptions comm;
  std::optional<std::string> json_path;
  std::optional<std::string> trace_path;
  std::optional<std::string> trace_ranks;
  TraceLimit trace_limit;  // --trace-limit
  std::optional<std::string> export_dir;
};

// Returns the process exit code (0). Throws InputError on bad input.
int workload_command(const WorkloadArgs& args, std::ostream& out);

}  // namespace meshsim::cli
