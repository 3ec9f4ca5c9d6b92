// Measured against simulated, for `meshsim validate` and `meshsim calibrate`.
//
// Measured (from a manifest and its imported trace):
//  * the step time is the manifest's median over the timed, unprofiled steps;
//  * per op class, the median over the trace's steps of the summed durations of that class's
//    ops; per GEMM shape, the median count and summed duration of the GEMMs with that shape;
//  * on host-op traces, each op is charged from the end of the previous op on its thread (the
//    framework's dispatch before it: Python, autograd, the dispatcher), which meshsim's per-kernel
//    launch overhead stands for; on device traces, kernel durations alone;
//  * on host-op traces those op times add up to the profiled step, which runs slower than the
//    unprofiled ones (the profiler's own cost, and on shared machines interference during the few
//    profiled steps: seen here, 0-33%); each profiled step's op and GEMM times are scaled to the
//    unprofiled median, so that the classes describe the composition of the step that was timed;
//  * profiler overhead: a profiler spends a roughly fixed time per recorded event, and on host
//    operators that time lands inside the ops (a top-level op holds every event nested in it). For
//    host-op traces, each op and GEMM loses `overhead x its recorded events`, with the overhead per
//    event the trainer measured (trace/profiler_overhead_per_event_s in the manifest; none is
//    removed without it: the rescaling below takes the profiled steps' extra time as a whole).
//    Device kernels (GPU traces) are not corrected.
// Simulated (from the plan's kernels on the profile's chip): the same sums, from the roofline
// model's kernel times; a single device runs its kernels one after another, so the step is their
// sum.
//
// Times are Durations (whole picoseconds): scaled and median times are rounded to the nearest
// picosecond, far below anything a trace resolves.
//
// GEMMs are grouped by op class and canonical shape: batch, reduction length k, and the two
// output dimensions sorted (C = AB and C^T = B^T A^T are the same GEMM), so that a measured
// aten::mm of [n, m] x [m, k] meets meshsim's weight-gradient GEMM [k, m] x [m, n].
#pragma once

#include <array>
#include <compare>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "meshsim/sim/program.h"
#include "meshsim/sim/units.h"
#include "meshsim/topology/chip.h"
#include "meshsim/traces/import.h"
#include "meshsim/validation/manifest.h"

namespace meshsim::validation {

using ClassTimes = std::array<Duration, kNumOpClasses>;  // indexed by OpClass

struct GemmKey {
  OpClass op_class = OpClass::kMatmul;
  int64_t batch = 1;
  int64_t k = 0;
  int64_t small = 0;  // the smaller output dimension
  int64_t large = 0;  // the larger one
  auto operator<=>(const GemmKey&) const = default;
  // "matmul 512x256 k=704" or "attention 32x 64x512 k=512".
  std::string label() const;
};
GemmKey gemm_key(OpClass op_class, const MatmulShape& shape);

struct GroupTimes {
  double count = 0;  // GEMMs per step (a median: may be a half)
  Duration time;     // their summed time per step
};
using GemmTimes = std::map<GemmKey, GroupTimes>;

struct Measured {
  size_t steps = 0;
  std::string op_source;       // "device" or "host"
  Duration step;               // the manifest's median unprofiled step
  Duration trace_step;         // median profiled step in the trace
  double events_per_step = 0;  // median profiler events per step (host)
  // Removed from host ops per recorded event (see above): the manifest's measurement; nullopt
  // when the manifest has none or the trace records device kernels.
  std::optional<Duration> overhead_per_event;
  double scale = 1;  // median factor the host-op times were scaled by (see above)
  ClassTimes by_class{};
  Duration unclassified;
  GemmTimes gemms;
  Duration op_time() const;  // the sum of by_class
};
Measured measure(const Manifest& m, const traces::MeasuredTrace& trace);

struct Simulated {
  ClassTimes by_class{};
  GemmTimes gemms;
  Duration step;  // the sum of the kernels' times
  size_t kernels = 0;
};
Simulated simulate_kernels(const std::vector<StepKernel>& kernels, const topology::Chip& chip);

// A GEMM group in both, for the table of per-op discrepancies.
struct GemmRow {
  GemmKey key;
  GroupTimes measured;
  GroupTimes simulated;
  Duration difference() const { return simulated.time - measured.time; }
};
// Every group on either side, the largest absolute differences first.
std::vector<GemmRow> gemm_rows(const GemmTimes& measured, const GemmTimes& simulated);

// simulated / measured - 1; nullopt when nothing was measured.
std::optional<double> relative_error(Duration measured, Duration simulated);

// A manifest's step, measured and simulated on `chip`.
struct Comparison {
  Measured measured;
  Simulated simulated;         // kernel by kernel
  Duration simulated_step;     // the step through the engine (the kernels' sum on one device)
  double step_time_error = 0;  // simulated_step / the manifest's median step - 1
};
Comparison compare(const Manifest& m, const topology::Chip& chip,
                   const traces::MeasuredTrace& trace);

}  // namespace meshsim::validation
