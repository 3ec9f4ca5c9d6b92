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
// GEMMs are grouped by op class and canonical shape: batch, reduction length k, and the two
// output dimensions sorted (C = AB and C^T = B^T A^T are the same GEMM), so that a measured
// aten::mm of [n, m] x [m, k] meets meshsim's weight-gradient GEMM [k, m] x [m, n].
#pragma once

#include <array>
#include <compare>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "manifest.h"
#include "meshsim/sim/program.h"
#include "meshsim/topology/chip.h"
#include "meshsim/traces/import.h"

namespace meshsim::cli {

using ClassTimes = std::array<double, kNumOpClasses>;  // seconds, indexed by OpClass

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
  double count = 0;   // GEMMs per step
  double time_s = 0;  // their summed time per step
};
using GemmTimes = std::map<GemmKey, GroupTimes>;

struct Measured {
  size_t steps = 0;
  std::string op_source;          // "device" or "host"
  double step_s = 0;              // the manifest's median unprofiled step
  double trace_step_s = 0;        // median profiled step in the trace
  double events_per_step = 0;     // median profiler events per step (host)
  double overhead_per_event_s = 0;  // removed from host ops (see above)
  bool overhead_measured = false;   // the manifest gives it (else none is removed)
  double scale = 1;                 // median factor the host-op times were scaled by (see above)
  ClassTimes by_class{};
  double unclassified_s = 0;
  GemmTimes gemms;
  double op_time_s() const;  // the sum of by_class
};
Measured measure(const Manifest& m, const traces::MeasuredTrace& trace);

struct Simulated {
  ClassTimes by_class{};
  GemmTimes gemms;
  double step_s = 0;  // the sum of the kernels' times
  size_t kernels = 0;
};
Simulated simulate_kernels(const std::vector<StepKernel>& kernels, const topology::Chip& chip);

// A GEMM group in both, for the table of per-op discrepancies.
struct GemmRow {
  GemmKey key;
  GroupTimes measured;
  GroupTimes simulated;
  double difference_s() const { return simulated.time_s - measured.time_s; }
};
// Every group on either side, the largest absolute differences first.
std::vector<GemmRow> gemm_rows(const GemmTimes& measured, const GemmTimes& simulated);

}  // namespace meshsim::cli
