// `meshsim calibrate`: fits a chip's efficiency parameters to measured runs.
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
// Optimizer: deterministic multi-start Nelder-Mead on the logarithms of the parameters
// (e_m, e_b <= 1), from the best points of a 3^n grid of starts (the shared e_b), then
// Nelder-Mead over all parameters with per-class e_b from that point. Validation: every manifest is
// also predicted by a fit to the others (leave-one-out), so calibration cannot hide overfitting.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "comparison.h"
#include "manifest.h"

namespace meshsim::cli {

struct Params {
  double matmul = 1;    // e_m
  double memory = 1;    // e_b, for classes without their own
  double launch_s = 0;  // L
  double k_half = 0;
  double call_s = 0;    // c
  // e_b of one op class (memory_by_class); 0: the class uses `memory`.
  std::array<double, kNumOpClasses> class_memory{};
  double memory_for(size_t op_class) const {
    return class_memory[op_class] > 0 ? class_memory[op_class] : memory;
  }
};
// The parameters a profile's chip holds.
Params params_of(const topology::Chip& chip);
// `chip` with `p` as its efficiency (its matmul_shape's tile, units and batched kept): predict()
// must give what the roofline model gives for it (a test holds them together).
topology::Chip with_params(topology::Chip chip, const Params& p);

// One manifest, ready for fitting: its kernels reduced to parameter-free terms (identical kernels
// merged, with a count) and its measured times.
struct FitCase {
  double measured_step_s = 0;
  ClassTimes measured{};
  double measured_ops_s = 0;            // the sum of `measured`
  std::vector<GemmKey> groups;          // GEMM shapes with time on both sides
  std::vector<double> group_measured;   // their measured time per step
  struct Kernel {
    uint8_t op_class = 0;
    int32_t group = -1;     // index into `groups`, or -1
    bool matrix = false;    // a GEMM: its FLOP term is derated by e_m and the shape factor
    double count = 1;       // identical kernels merged
    double flops_s = 0;     // F / P
    double memory_s = 0;    // B / BW
    double quantization = 1;
    double k = 1;
    double calls = 0;       // GEMM library calls (0 for other kernels)
  };
  std::vector<Kernel> kernels;
};
FitCase make_fit_case(const std::vector<StepKernel>& kernels, const topology::Chip& chip,
                      const Measured& measured);

struct Prediction {
  double step_s = 0;
  ClassTimes by_class{};
  std::vector<double> groups;
};
Prediction predict(const FitCase& c, const Params& p);
inline constexpr double kStepWeight = 10;
double fit_loss(const std::vector<const FitCase*>& cases, const Params& p);
// Fits from `start`; with `shape` false, k_half and call_s stay as in `start`; with `by_class`,
// per-class memory efficiencies are fitted too (for the classes with memory-bound simulated
// kernels and measured time).
Params fit(const std::vector<const FitCase*>& cases, const Params& start, bool shape,
           bool by_class = true);

struct CalibrateArgs {
  std::vector<std::string> manifests;
  std::string out;
  std::string hardware_profile;
  std::optional<std::string> json_path;
};
int calibrate_command(const CalibrateArgs& args, std::ostream& out);

}  // namespace meshsim::cli
