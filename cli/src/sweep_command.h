// `meshsim sweep SPEC.json`: a sweep (studies/sweep.h) with CSV, JSON and the HTML report; split
// over processes when launched under mpirun (studies/distribute.h), rank 0 writing the outputs.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>

#include "cli11_fwd.h"

namespace meshsim::cli {

struct SweepArgs {
  std::string spec;
  std::string csv_path;
  std::string json_path;
  std::string html_path;
  std::string vega_dir = "/usr/share/javascript/vega";
  int64_t jobs = 0;
  bool no_mpi = false;
};

CLI::App* add_sweep_command(CLI::App& app, SweepArgs& a);
int sweep_command(const SweepArgs& a, std::ostream& out);

}  // namespace meshsim::cli
