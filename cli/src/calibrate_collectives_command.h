// `meshsim calibrate-collectives LOG... [--cluster BASE] --out FRAGMENT.json`: fits a platform's
// collective figures (launch floor, Simple per-step overhead, LL128 fraction, achieved NVLink,
// NVLS and NIC fractions) to nccl-tests logs or published sweep tables, through the collective
// model the simulator uses (validation/collective_fit.h), prints the fit and its residual per
// size, and writes a cluster fragment that --cluster and scenario files accept (topology/
// cluster.h: a "base" and the figures written over it).
#pragma once

#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "cli11_fwd.h"

namespace meshsim::cli {

struct CalibrateCollectivesArgs {
  std::vector<std::string> logs;
  std::optional<std::string> cluster;  // the base: preset or file (default: from the devices)
  std::string out;
  std::optional<std::string> collective;
  std::optional<std::string> nccl;
  std::optional<std::string> algo;
  std::optional<std::string> proto;
  std::optional<int64_t> ranks;
  std::optional<int64_t> nodes;
  std::string min_size = "64KiB";
  std::optional<std::string> max_size;
  std::string columns = "both";
  std::optional<std::string> json_path;
};

CLI::App* add_calibrate_collectives_command(CLI::App& app, CalibrateCollectivesArgs& args);

// Returns the process exit code (0). Throws InputError on bad input.
int calibrate_collectives_command(const CalibrateCollectivesArgs& args, std::ostream& out);

}  // namespace meshsim::cli
