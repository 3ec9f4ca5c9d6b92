// The compute cost of a kernel on a chip (docs/model.md, "Compute"), by kernel class:
//
//   time = max(FLOPs / (peak(dtype) * eff_flops), bytes / (bandwidth * eff_memory))
//          + launch + calls * call_overhead
//
// GEMMs (kernels with a MatmulShape: projections, naive attention's batched GEMMs) run on the
// matrix units at the peak of their dtype derated by the matmul efficiency
//
//   eff_flops = e_max(dtype) * q * k_s / (k_s + k_half),   k_s = k / slices
//   q = batch * m * n * slices / (waves * units * tile_m * tile_n),
//   waves = ceil(batch * ceil(m / tile_m) * ceil(n / tile_n) * slices / units)
//
// for the library's tile (the one that maximises eff_flops) and split of the reduction: slices is
// 1 unless the catalogue gives split_k_min and the output tiles leave units idle, when it is
// max(1, min(units / tiles, k / split_k_min)), the most that fit in one wave (cuBLAS's split-K
// and stream-K kernels run the slices of one output tile on several SMs and sum them: Osama et
// al., "Stream-K: Work-centric Parallel Decomposition for Dense Matrix Multiplication on the
// GPU", PPoPP 2023; the reduction's own small cost is not modelled)
//
// where e_max is the chip's matmul efficiency (matmul_fp8 for FP8 GEMMs where the catalogue has
// one, times matmul_fp8_fast_accum_speedup for those run with fast accumulation where it has
// that), q is tile and wave quantization (the share of the computed tiles that holds real output:
// NVIDIA, "Matrix Multiplication Background User's Guide", sections on tile and wave
// quantization; the library is taken to pick the tile, of those it has, that wastes least) and
// k / (k + k_half) the amortization of each tile's fixed prologue and epilogue over its reduction
// loop. GEMMs also pay a fixed cost per call (`calls` is 1, or `batch` where a batched GEMM is one
// library call per matrix, as PyTorch's CPU bmm is). Without a matmul_shape in the catalogue,
// q = 1, k_half = 0 and no call cost: one efficiency for every GEMM.
//
// Fused attention kernels (an AttentionShape) are a class of their own, costed from measurements
// of their implementation (FlashAttention-2/3, cuDNN; the catalogue's `attention` fits):
//
//   eff_flops = e_inf * s / (s + s_half) * q_a,   q_a = ctas / (ceil(ctas / units) * units),
//   ctas = batch_heads * ceil(seq_q / 128)
//
// with (e_inf, s_half) the fit of the kernel's implementation, pass (forward, backward, or the
// combined forward+backward series where only that was measured), causal mask and head dimension
// (the nearest measured one), s its key length, and q_a the wave quantization of its 128-query
// blocks over the SMs; the FLOPs are counted as the measurements count them (causal halved,
// backward 2.5 x forward), which is how workloads/ counts them. An implementation the catalogue
// marks `model: matmul` (no measurement: the Pallas kernels on TPU v3 and v6e) is costed at the
// GEMM model's efficiency for its P V product ([seq_q x seq_kv] x [seq_kv x head_dim],
// batch_heads times), the product that reduces over the keys.
//
// Interference: a GEMM or attention kernel that starts while its rank has n collectives in
// flight runs on units - n * comm_units SMs (NCCL's kernels hold one SM per channel): its waves
// are recounted on the SMs left and its rate scales with them. Memory-bound kernels are not
// slowed (their bandwidth saturates below the full SM count).
//
// Every other kernel runs on the vector units (the fp32 rate where the catalogue has one, else
// the bf16 rate), not derated: such kernels are memory bound on every chip modelled, so their
// time is the memory term. The memory term is bytes / (bandwidth * eff_memory), with the memory
// efficiency of the kernel's op class (efficiency/memory_by_class, else efficiency/memory) and
// where the bandwidth is the cache's when the chip has a cache and the kernel's bytes (read plus
// written) fit in it, and HBM's otherwise: a cache-aware roofline (Ilic, Pratas and Sousa,
// "Cache-aware Roofline model", IEEE CAL 2014), with the kernel's own traffic standing for its
// working set. The launch overhead is added to every kernel. All parameters come from the
// catalogue entry (each with its source): fitted to component measurements
// (validation/microbench/, tools/fit_kernels.py) or by `meshsim calibrate` to traces.
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

// How the library runs a GEMM of `shape` under `model` on `units` units (default: the model's):
// the tile that gives the best q * k_s / (k_s + k_half) above, with its split of the reduction;
// q is the tile and wave quantization over all slices, in (0, 1], and k_s = k / slices the
// reduction each slice runs. Without split-K, slices is 1 and k_s is k.
struct GemmTiling {
  double quantization = 1;
  double k_per_slice = 1;
  int64_t slices = 1;
  double rate = 1;  // quantization * k_per_slice / (k_per_slice + k_half): the shape's factor
};
GemmTiling gemm_tiling(const MatmulShapeEfficiency& model, const MatmulShape& shape);
GemmTiling gemm_tiling(const MatmulShapeEfficiency& model, const MatmulShape& shape, int64_t units);
// The library calls a GEMM of `shape` makes: its batch for per-matrix libraries, else 1.
int64_t gemm_calls(const MatmulShapeEfficiency& model, const MatmulShape& shape);
// The fit that costs an attention kernel: its implementation, pass (or the combined series),
// causal mask, and the nearest head dimension; nullptr when the catalogue has none for the
// implementation.
const AttentionEfficiency* attention_fit(const Efficiency& e, const AttentionShape& a);

class RooflineComputeModel : public ComputeCostModel {
 public:
  explicit RooflineComputeModel(Chip chip);

  Duration compute_time(RankId rank, const ComputeWork& work) const override;
  Duration compute_time_in(RankId rank, const ComputeWork& work,
                           const ComputeContext& context) const override;
  KernelTime kernel_time(const ComputeWork& work, const ComputeContext& context = {}) const;
  // The FLOP rate a kernel of this class and dtype gets, before efficiency.
  FlopsPerSec flop_rate(const ComputeWork& work) const;
  // eff_flops above: the GEMM or attention model's efficiency, 1 for other kernels.
  double flop_efficiency(const ComputeWork& work, const ComputeContext& context = {}) const;
  // The bandwidth the kernel's bytes stream at, before efficiency: cache or HBM.
  BytesPerSec memory_bandwidth(const ComputeWork& work) const;
  const Chip& chip() const { return chip_; }

 private:
  // SMs left to compute while `context`'s collectives hold theirs (the model's units without
  // interference or without a comm_units figure).
  int64_t units_left(const ComputeContext& context) const;
  // The measured fit that costs `w`, when it is a fused attention kernel the catalogue has
  // measurements of (nullptr: a GEMM or another kernel).
  const AttentionEfficiency* measured_attention(const ComputeWork& w) const;
  double gemm_efficiency(const ComputeWork& work, int64_t units) const;
  double attention_efficiency(const AttentionEfficiency& fit, const AttentionShape& a,
                              int64_t units) const;

  Chip chip_;
};

}  // namespace meshsim::topology
