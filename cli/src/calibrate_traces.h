// `meshsim calibrate TRACE... --out PROFILE`: fits the chip's kernel efficiencies and launch
// overhead to the kernels of per-rank PyTorch profiler traces (validation/calibrate.h,
// calibrate_traces), reports which parameters the traces pin down (the others keep their
// catalogue values), every step's step-time error before, after and held out (leave one rank out,
// or one step with a single rank), the error per op class, and the host's measured dispatch costs
// per rank; writes the fitted one-chip profile, which `meshsim run --hardware-catalogue PROFILE`
// and `meshsim validate --hardware-profile PROFILE` take.
#pragma once

#include <optional>
#include <ostream>
#include <string>

#include "trace_inputs.h"

namespace meshsim::cli {

struct CalibrateTracesArgs {
  TraceInputArgs inputs;
  std::string out;
  std::optional<std::string> json_path;
};

// Returns 0. Throws InputError on bad input.
int calibrate_traces_command(const CalibrateTracesArgs& args, std::ostream& out);

}  // namespace meshsim::cli
