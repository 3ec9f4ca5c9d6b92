// The compute cost of a kernel on a chip (DESIGN.md, "Compute"):
//
//   time = max(FLOPs / (peak(dtype) * eff_flops), bytes / (HBM bandwidth * eff_memory))
//          + launch + calls * call_overhead
//
// GEMMs (kernels with a MatmulShape: projections, attention's batched GEMMs, flash attention) run
// on the matrix units at the peak of their dtype derated by the matmul efficiency
//
//   eff_flops = matmul * q * k / (k + k_half)
//   q = batch * m * n / (waves * units * tile_m * tile_n),
//   waves = ceil(batch * ceil(m / tile_m) * ceil(n / tile_n) / units)
//
// where q is tile and wave quantization (the share of the computed tiles that holds real output:
// NVIDIA, "Matrix Multiplication Background User's Guide", sections on tile and wave
// quantization) and k / (k + k_half) the amortization of each tile's fixed prologue and epilogue
// over its reduction loop. GEMMs also pay a fixed cost per call (`calls` is 1, or `batch` where a
// batched GEMM is one library call per matrix, as PyTorch's CPU bmm is). Without a matmul_shape
// in the catalogue, q = 1, k_half = 0 and no call cost: one efficiency for every GEMM.
// Every other kernel runs on the vector units (the fp32 rate where the catalogue has one, else
// the bf16 rate), not derated: such kernels are memory bound on every chip modelled, so their time
// is the memory term. The memory term is bytes / (bandwidth * eff_memory), with the memory
// efficiency of the kernel's op class (efficiency/memory_by_class, else efficiency/memory) and
// where the bandwidth is
// the cache's when the chip has a cache and the kernel's bytes (read plus written) fit in it, and
// HBM's otherwise: a cache-aware roofline (Ilic, Pratas and Sousa, "Cache-aware Roofline model",
// IEEE CAL 2014), with the kernel's own traffic standing for its working set. The launch overhead is added to
// every kernel. All parameters come from the catalogue entry (each with its source) and are what
// calibration fits.
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

// q above: tile and wave quantization of a GEMM of `shape` under `model`, in (0, 1].
double wave_quantization(const MatmulShapeEfficiency& model, const MatmulShape& shape);
// The library calls a GEMM of `shape` makes: its batch for per-matrix libraries, else 1.
int64_t gemm_calls(const MatmulShapeEfficiency& model, const MatmulShape& shape);

class RooflineComputeModel : public ComputeCostModel {
 public:
  explicit RooflineComputeModel(Chip chip);

  Duration compute_time(RankId rank, const ComputeWork& work) const override;
  KernelTime kernel_time(const ComputeWork& work) const;
  // The FLOP rate a kernel of this class and dtype gets, before efficiency.
  FlopsPerSec flop_rate(const ComputeWork& work) const;
  // eff_flops above: the chip's matmul efficiency times the shape factor (GEMMs), 1 otherwise.
  double flop_efficiency(const ComputeWork& work) const;
  // The bandwidth the kernel's bytes stream at, before efficiency: cache or HBM.
  BytesPerSec memory_bandwidth(const ComputeWork& work) const;
  const Chip& chip() const { return chip_; }

 private:
  Chip chip_;
};

}  // namespace meshsim::topology
