// `meshsim validate MANIFEST`: simulate the step a validation manifest measured and compare,
// step time and time per op class (calibrate.h documents the manifest, the hardware profile and
// the single-device cluster the step runs on).
//
// Reported: the measured step time (the manifest's median_step_time_s, and the median step
// duration in its trace), the simulated step time, step_time_error = simulated / measured - 1;
// per op class, the measured time (median over the trace's steps of the summed op durations of
// that class) next to the simulated time (rank 0's summed kernel time of that class) and their
// relative error; the measured time no classification rule matched; and the measured ops that
// take the most time, each with its class and that class's simulated total (measured ops are not
// matched one to one to simulated kernels: host-operator traces nest and fuse differently).
#pragma once

#include <optional>
#include <ostream>
#include <string>

namespace meshsim::cli {

struct ValidateArgs {
  std::string manifest;
  std::string hardware_profile;
  std::optional<std::string> json_path;
};

// Returns the process exit code (0). Throws InputError on bad input.
int validate_command(const ValidateArgs& args, std::ostream& out);

}  // namespace meshsim::cli
