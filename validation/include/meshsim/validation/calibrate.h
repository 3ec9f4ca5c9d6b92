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

}  // namespace meshsim::validation
