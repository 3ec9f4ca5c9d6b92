// `meshsim validate --trace FILE`: the simulated step and the measured one in one timeline.
//
// Two processes in one file (FILE.pftrace: native Perfetto; FILE.json: Chrome JSON), both starting
// at t = 0: "simulated" (meshsim's kernels of the step on the profile's chip, run through the
// engine) and "measured" (the trace's median step, as traces::to_timeline makes it: one slice per
// measured op, on a track per thread or stream of the trace). Slices carry their op class; the
// simulated ones also their FLOPs, bytes and GEMM shape. The scenario marker at t = 0 holds the
// case, the manifest, the profile and the step times.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "manifest.h"
#include "meshsim/traces/import.h"

namespace meshsim::cli {

void write_comparison_trace(const std::string& path, const Manifest& m, const Profile& profile,
                            const traces::MeasuredTrace& trace,
                            std::vector<std::pair<std::string, std::string>> metadata);

}  // namespace meshsim::cli
