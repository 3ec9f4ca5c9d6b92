// Calibration: fits a chip's efficiency parameters to measured runs.
//
// The model (topology/compute_model.h) gives each simulated kernel
//     t = max(F / (P * e_m * q * k / (k + k_half)), B / (BW * e_b)) + L + calls * c    (GEMMs)
//     t = max(F / P, B / (BW * e_b)) + L                                               (others)
// with q the tile/wave quantization and `calls` the library calls of the GEMM (both fixed by the
// profile's matmul_shape: tile, units, batched), BW the cache's or HBM's bandwidth, and e_b the
// memory efficiency of the kernel's op class. The fit chooses e_m (matmul), L (launch_overhead),
// when the base profile has a matmul_shape k_half and c (call_overhead), and e_b: first one for
// every class, then, from there, one per op class that the data has memory-bound time for
// (memory_by_class; the profile's "memory" becomes their time-weighted mean, for other classes).
// It minimizes over the manifests
//     loss = sum over manifests of [ 10 (T_step / M_step - 1)^2
//                                   + sum over op classes   w_c (T_c / M_c - 1)^2
//                                   + sum over GEMM shapes  w_g (T_g / M_g - 1)^2 ]
// where M are measured times (comparison.h: the unprofiled step; per class and per GEMM shape from
// the profiled steps, rescaled to the unprofiled one), T the simulated ones, and w the measured
// time's share of the manifest's measured op time, so that what takes time weighs most. Classes
// and shapes enter when both sides have time (communication never: single-device runs have none
// simulated). The step counts ten times: it is the figure users rely on, and the median of many
// unprofiled steps, while the per-op times come from a few profiled steps and from attributing
// ops to classes; with equal weight, the CPU fit traded up to 15% of step error for class
// composition the model cannot match (validation/README.md).
//
// Optimizer (src/calibrate_fit.h): NLopt's Subplex (LN_SBPLX), a bounded derivative-free local
// method, on the logarithms of the parameters (e_m, e_b <= 1), deterministic multi-start: polished
// from the best points of a 3^n grid of starts (the shared e_b), then over all parameters with
// per-class e_b from that point. Validation: every manifest is also predicted by a fit to the
// others (leave-one-out), so calibration cannot hide overfitting.
#pragma once

#include <array>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "meshsim/sim/program.h"
#include "meshsim/sim/units.h"
#include "meshsim/topology/chip.h"
#include "meshsim/traces/import.h"
#include "meshsim/validation/manifest.h"
#include "meshsim/validation/profile.h"
#include "meshsim/validation/trace_replay.h"

namespace meshsim::validation {

// One manifest's step-time errors (simulated / measured - 1, through the engine).
struct CalibratedCase {
  std::string case_name;
  std::string manifest_path;
  Duration measured_step;
  double step_time_error_before = 0;  // with the base profile's efficiency
  double step_time_error_after = 0;   // with the fitted one
  // With a fit to the other manifests (leave-one-out), and that fit; nullopt with one manifest.
  std::optional<double> step_time_error_held_out;
  std::optional<topology::Efficiency> held_out;
  // Per op class after the fit, for the classes that have time on both sides.
  std::array<std::optional<double>, kNumOpClasses> class_errors_after{};
};

struct Calibration {
  topology::Efficiency before;  // the base profile's
  topology::Efficiency after;   // fitted to every manifest
  // Whether k_half and the GEMM call overhead were fitted (the base profile has a matmul_shape).
  bool shape_fitted = false;
  double loss_before = 0;
  double loss_after = 0;
  std::vector<CalibratedCase> cases;             // in the order of the manifests
  std::optional<double> max_abs_held_out_error;  // nullopt with one manifest
};

// Imports every manifest's trace, fits, and predicts each manifest before, after and held out.
// Throws InputError on an unreadable trace.
// `trace_limits` bound the import of each manifest's trace (traces::ImportLimits).
Calibration calibrate(const Profile& base, const std::vector<Manifest>& manifests,
                      const traces::ImportLimits& trace_limits = {});

// The source of every fitted value in the written profile: `tool` (e.g. "meshsim calibrate
// (meshsim 0.1.0)"), the base profile, the manifests and the held-out errors.
std::string calibration_source(const Calibration& c, const Profile& base, std::string_view tool);

// Calibration from profiler traces of multi-GPU jobs (`meshsim calibrate TRACE...`): the same
// model, loss and optimizer as above, on the kernels the replay costs (trace_replay.h: GEMMs by
// shape, memory-bound kernels by their operators' bytes, device copies and sets), each step of
// each rank one case: its measured kernel times per class and per GEMM shape, and their sum as
// the "step" term (what the fit can change: the kernels' time, not the host's or the network's).
// Host copies (the host link's measured rates), collectives (the cluster's) and kernels kept as
// measured take no part.
//
// A parameter the traces pin down moves the loss: the fit's loss rises by more than 0.1% when the
// parameter is doubled, halved (durations also +-0.5 us) or set back to the base chip's value.
// The others go back to the base chip's values, and the report says so: a trace without GEMM
// shapes says nothing about e_m.
// Leave-one-out: with traces of several ranks, each rank's steps are replayed with a fit to the
// other ranks; with one rank of several steps, each step with a fit to the others.
struct TraceCase {
  const traces::RankTrace* trace = nullptr;
  const traces::RankStep* step = nullptr;
  int64_t rank = 0;  // global
};

// A communication model for one replay (collectives on the cluster the traces ran on).
using CommFactory = std::function<std::unique_ptr<CommModel>()>;

struct FittedParameter {
  std::string name;  // "matmul", "memory", "memory/norm", "launch_overhead", "k_half", ...
  double before = 0;  // efficiencies as fractions, durations in seconds
  double after = 0;
  bool pinned = false;
};

struct TraceCalibrationCase {
  int64_t rank = 0;
  int64_t step = 0;
  std::string held_out_with;  // "rank 3" or "step 12": the group left out of its held-out fit
  Duration measured;
  Duration fitted_kernels;  // measured time of the kernels the fit saw
  double error_before = 0;  // step time, simulated / measured - 1, through the replay
  double error_after = 0;
  std::optional<double> error_held_out;
};

struct TraceCalibration {
  topology::Efficiency before;
  topology::Efficiency after;
  bool shape_fitted = false;
  double loss_before = 0;
  double loss_after = 0;
  std::vector<FittedParameter> parameters;
  std::vector<TraceCalibrationCase> cases;
  std::string held_out_by;  // "rank", "step", or "" (one case: no leave-one-out)
  std::optional<double> max_abs_held_out_error;
  // Summed kernel time per class over the cases the fit saw, simulated / measured - 1.
  std::array<std::optional<double>, kNumOpClasses> class_errors_before{};
  std::array<std::optional<double>, kNumOpClasses> class_errors_after{};
  int64_t fitted_kernels = 0;
};

// Throws InputError when no case has a kernel to fit.
TraceCalibration calibrate_traces(const topology::Chip& base, const std::vector<TraceCase>& cases,
                                  int64_t world, const CommFactory& comm);

// The source of the values a trace calibration wrote (tool, base, traces, held-out errors).
std::string trace_calibration_source(const TraceCalibration& c, const std::string& base,
                                     const std::vector<std::string>& traces,
                                     std::string_view tool);

}  // namespace meshsim::validation
