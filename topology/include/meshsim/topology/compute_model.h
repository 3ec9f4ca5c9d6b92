// The compute cost of a kernel on a chip (DESIGN.md, "Compute"):
//
//   time = max(FLOPs / (peak(dtype) * eff_flops), bytes / (HBM bandwidth * eff_memory)) + launch
//
// Matmul and attention kernels run on the matrix units at the peak of their dtype derated by the
// chip's matmul efficiency. Every other kernel runs on the vector units (the fp32 rate where the
// catalogue has one, else the bf16 rate), not derated: such kernels are memory bound on every chip
// modelled, so their time is the HBM term. The HBM term uses the chip's memory efficiency. The
// launch overhead is added to every kernel. All parameters come from the catalogue entry (each
// with its source) and are what calibration fits.
#pragma once

#include "meshsim/sim/cost_model.h"
#include "meshsim/topology/chip.h"

namespace meshsim::topology {

struct KernelTime {
  Duration flops_bound;
  Duration memory_bound;
  Duration overhead;
  Duration total() const {
    return (flops_bound > memory_bound ? flops_bound : memory_bound) + overhead;
  }
};

class RooflineComputeModel : public ComputeCostModel {
 public:
  explicit RooflineComputeModel(Chip chip);

  Duration compute_time(RankId rank, const ComputeWork& work) const override;
  KernelTime kernel_time(const ComputeWork& work) const;
  // The FLOP rate a kernel of this class and dtype gets, before efficiency.
  FlopsPerSec flop_rate(const ComputeWork& work) const;
  const Chip& chip() const { return chip_; }

 private:
  Chip chip_;
};

}  // namespace meshsim::topology
