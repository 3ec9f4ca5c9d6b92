// The simulated step and the measured one in one timeline (`meshsim validate --trace FILE`).
//
// Two processes in one trace (native Perfetto or Chrome JSON, traces/trace_writer.h), both
// starting at t = 0: "simulated" (meshsim's kernels of the step on the profile's chip, run through
// the engine) and "measured" (the trace's median step, as traces::to_timeline makes it: one slice
// per measured op, on a track per thread or stream of the trace). Slices carry their op class; the
// simulated ones also their FLOPs, bytes and GEMM shape. The scenario marker at t = 0 holds the
// metadata pairs (the caller's: case, manifest, profile, step times).
#pragma once

#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "meshsim/traces/import.h"
#include "meshsim/traces/trace_writer.h"
#include "meshsim/validation/manifest.h"
#include "meshsim/validation/profile.h"
#include "meshsim/validation/trace_replay.h"

namespace meshsim::validation {

// Writes the trace to `out` (opened in binary mode); the caller checks the stream.
void write_comparison_trace(std::ostream& out, traces::TraceFormat format, const Manifest& m,
                            const Profile& profile, const traces::MeasuredTrace& trace,
                            std::vector<std::pair<std::string, std::string>> metadata);

// Replayed steps of measured ranks (trace_replay.h), each rank twice: a process "simulated: rank
// N" and a process "measured: rank N", with the same ops (the replay's program) on the same tracks
// (one per CUDA stream of the trace, and the host), each step from t = 0. The programs are moved
// out of `replays`. The scenario marker holds `metadata`.
void write_replay_trace(std::ostream& out, traces::TraceFormat format,
                        std::vector<Replay>& replays,
                        std::vector<std::pair<std::string, std::string>> metadata);

}  // namespace meshsim::validation
