// `meshsim calibrate MANIFEST... --hardware-profile BASE --out PROFILE`: fits the profile's
// efficiencies to the measured runs (the library: validation/include/meshsim/validation/
// calibrate.h has the model, the loss and the optimizer), prints every manifest's step-time
// error before, after and held out, writes the fitted profile and, with --json, the report.
#pragma once

#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "meshsim/traces/import.h"

namespace meshsim::cli {

struct CalibrateArgs {
  std::vector<std::string> manifests;
  std::string out;
  std::string hardware_profile;
  std::optional<std::string> json_path;
  traces::ImportLimits trace_limits;  // --max-trace-size
};

// Returns the process exit code (0). Throws InputError on bad input.
int calibrate_command(const CalibrateArgs& args, std::ostream& out);

}  // namespace meshsim::cli
