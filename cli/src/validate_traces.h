// `meshsim validate TRACE...`: per-rank PyTorch profiler traces of a multi-GPU job (files, or
// directories of them) replayed through meshsim (validation/trace_replay.h) and compared, rank by
// rank: step time, where the time went (compute, communication, exposed communication, overlap,
// idle, pipeline bubble, host-launch gaps), time per op class, how much of the measured time
// meshsim modelled and why the rest kept its measured time, the host's launch costs, and the
// largest per-kernel discrepancies. With --trace, each rank's median step simulated and measured
// side by side; with --json, everything per step.
#pragma once

#include <optional>
#include <ostream>
#include <string>

#include "trace_inputs.h"

namespace meshsim::cli {

struct ValidateTracesArgs {
  TraceInputArgs inputs;
  std::optional<std::string> json_path;
  std::optional<std::string> trace_path;
  std::optional<double> max_step_error;  // exit 4 when a rank's |step-time error| exceeds it
};

// Returns 0, or 4 (kExitThresholdExceeded) past --max-step-error. Throws InputError on bad input.
int validate_traces_command(const ValidateTracesArgs& args, std::ostream& out);

}  // namespace meshsim::cli
