// `meshsim validate MANIFEST`: simulate the step a validation manifest measured and compare, and
// print the comparison (the library: validation/include/meshsim/validation/manifest.h documents
// the manifest and the single-device run, profile.h the hardware profile, comparison.h how
// measured and simulated times are made comparable).
//
// Reported: the measured step time (median of the unprofiled timed steps) against the simulated
// one, step_time_error = simulated / measured - 1; per op class, measured and simulated time and
// their relative error; the measured time outside any op (the framework's own work between ops);
// the per-op discrepancies, GEMM shape by GEMM shape (count and time per step on each side), the
// largest first; the profiler overhead removed and how it was obtained. With --trace, both steps
// in one Perfetto or Chrome JSON timeline (comparison_trace.h).
#pragma once

#include <optional>
#include <ostream>
#include <string>

#include "meshsim/traces/import.h"

namespace meshsim::cli {

struct ValidateArgs {
  std::string manifest;
  std::string hardware_profile;
  std::optional<std::string> json_path;
  std::optional<double> max_step_error;  // exit 4 when |step_time_error| exceeds it
  std::optional<std::string> trace_path;  // the simulated and measured steps side by side
  traces::ImportLimits trace_limits;      // --max-trace-size
};

inline constexpr int kExitThresholdExceeded = 4;

// Returns the process exit code: 0, or kExitThresholdExceeded. Throws InputError on bad input.
int validate_command(const ValidateArgs& args, std::ostream& out);

}  // namespace meshsim::cli
