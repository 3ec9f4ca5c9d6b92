// The numeric core of calibration (calibrate.h has the model, the loss and the optimizer): each
// manifest reduced to parameter-free terms, the fast prediction from them, the loss and the fit.
// Inside the fit, times are doubles in seconds (the optimizer's currency); what crosses into the
// rest of the library is typed (Measured, StepKernel, topology::Efficiency).
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "meshsim/sim/program.h"
#include "meshsim/topology/chip.h"
#include "meshsim/validation/comparison.h"
#include "meshsim/validation/manifest.h"

namespace meshsim::validation {

// One manifest, ready for fitting: its kernels reduced to parameter-free terms (identical kernels
// merged, with a count) and its measured times.
struct FitCase {
  double measured_step_s = 0;
  std::array<double, kNumOpClasses> measured{};  // seconds per op class
  double measured_ops_s = 0;                     // the sum of `measured`
  std::vector<GemmKey> groups;                   // GEMM shapes with time on both sides
  std::vector<double> group_measured;            // their measured seconds per step
  struct Kernel {
    uint8_t op_class = 0;  // the class its time is measured and reported under
    // The class whose memory efficiency it runs at (ComputeWork::rate_class).
    uint8_t rate_class = 0;
    int32_t group = -1;   // index into `groups`, or -1
    bool matrix = false;  // a GEMM: its FLOP term is derated by e_m and the shape factor
    double count = 1;     // identical kernels merged
    double flops_s = 0;   // F / P
    double memory_s = 0;  // B / BW
    double quantization = 1;
    double k = 1;
    double calls = 0;  // GEMM library calls (0 for other kernels)
  };
  std::vector<Kernel> kernels;
};
FitCase make_fit_case(const std::vector<StepKernel>& kernels, const topology::Chip& chip,
                      const Measured& measured);

// The roofline model's times of a FitCase's kernels at efficiency `e` (seconds).
struct Prediction {
  double step_s = 0;
  std::array<double, kNumOpClasses> by_class{};
  std::vector<double> groups;
};
Prediction predict(const FitCase& c, const topology::Efficiency& e);

inline constexpr double kStepWeight = 10;
double fit_loss(const std::vector<const FitCase*>& cases, const topology::Efficiency& e);

// Fits from `start`; k_half and the call overhead only where `start` has a matmul_shape (its tile,
// units and batching are kept); with `by_class`, per-class memory efficiencies too (for the
// classes with memory-bound simulated kernels and measured time).
topology::Efficiency fit(const std::vector<const FitCase*>& cases,
                         const topology::Efficiency& start, bool by_class = true);

}  // namespace meshsim::validation
