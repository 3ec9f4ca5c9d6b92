#include "meshsim/topology/compute_model.h"

#include <algorithm>
#include <cmath>

#include "meshsim/sim/checked.h"
#include "meshsim/sim/error.h"

namespace meshsim::topology {
namespace {

// Query rows of one attention CTA (FlashAttention-2/3 and cuDNN tile the queries by 128 at the
// head dimensions modelled).
constexpr int64_t kAttentionBlock = 128;

// GEMMs (the planner gives them a MatmulShape: projections, naive attention's batched GEMMs) and
// fused attention run on the matrix units; everything else on the vector units.
bool on_matrix_units(const ComputeWork& w) { return w.shape.has_value() || w.attention; }

// For a >= 0, b > 0, without forming a + b - 1 (which overflows near 2^63).
int64_t ceil_div(int64_t a, int64_t b) { return a / b + (a % b != 0 ? 1 : 0); }

// Tile and wave quantization of `tiles` output tiles of tile_m x tile_n, each run as `slices`
// slices of its reduction: the share of the units' work over whole waves that is real output.
double tile_quantization(int64_t tile_m, int64_t tile_n, int64_t units, const MatmulShape& s,
                         int64_t tiles, int64_t slices) {
  const int64_t waves =
      ceil_div(checked_product({tiles, slices}, "split-K tiles of a GEMM"), units);
  const double computed = static_cast<double>(waves) * static_cast<double>(units) *
                          static_cast<double>(tile_m) * static_cast<double>(tile_n);
  return static_cast<double>(s.batch) * static_cast<double>(s.m) * static_cast<double>(s.n) *
         static_cast<double>(slices) / computed;
}

}  // namespace

GemmTiling gemm_tiling(const MatmulShapeEfficiency& model, const MatmulShape& shape,
                       int64_t units) {
  SIM_CHECK(shape.m > 0 && shape.n > 0 && shape.k > 0 && shape.batch > 0,
            "GEMM shape {}x{}x{} (batch {}) must be positive", shape.m, shape.k, shape.n,
            shape.batch);
  SIM_CHECK(units > 0, "{} units", units);
  const auto k = static_cast<double>(shape.k);
  GemmTiling best;
  double best_rate = -1;
  // The library's choice: the tile, with its split of the reduction, that wastes least (ties to
  // the first tile).
  const auto consider = [&](int64_t tm, int64_t tn) {
    const int64_t tiles = checked_product(
        {shape.batch, ceil_div(shape.m, tm), ceil_div(shape.n, tn)}, "output tiles of a GEMM");
    // As many slices as fit in the one wave the tiles leave idle, each at least split_k_min
    // long: q grows with the slices as fast as k_s / (k_s + k_half) falls or faster, so the most
    // slices are the fastest (the reduction of the partial sums is not costed).
    int64_t slices = 1;
    if (model.split_k_min > 0 && tiles < units) {
      slices = std::max<int64_t>(1, std::min(units / tiles, shape.k / model.split_k_min));
    }
    const double q = tile_quantization(tm, tn, units, shape, tiles, slices);
    const double k_slice = k / static_cast<double>(slices);
    const double rate = q * k_slice / (k_slice + model.k_half);
    if (rate > best_rate) {
      best_rate = rate;
      best = GemmTiling{q, k_slice, slices, rate};
    }
  };
  consider(model.tile_m, model.tile_n);
  for (const auto& [tm, tn] : model.alternative_tiles) {
    consider(tm, tn);
  }
  return best;
}

GemmTiling gemm_tiling(const MatmulShapeEfficiency& model, const MatmulShape& shape) {
  return gemm_tiling(model, shape, model.units);
}

int64_t gemm_calls(const MatmulShapeEfficiency& model, const MatmulShape& shape) {
  return model.per_matrix_calls ? shape.batch : 1;
}

const AttentionEfficiency* attention_fit(const Efficiency& e, const AttentionShape& a) {
  const AttentionPass pass = a.backward ? AttentionPass::kBackward : AttentionPass::kForward;
  const AttentionEfficiency* best = nullptr;
  // Preference: the implementation's matmul stand-in; then the kernel's own pass over the
  // combined series, the same causal mask over the other, the nearest head dimension (log scale,
  // ties to the larger).
  const auto score = [&](const AttentionEfficiency& f) {
    const double dim =
        std::fabs(std::log2(static_cast<double>(f.head_dim) / static_cast<double>(a.head_dim)));
    return (f.pass == pass ? 0.0 : 100.0) + (f.causal == a.causal ? 0.0 : 1000.0) + dim -
           (f.head_dim > a.head_dim ? 1e-6 : 0.0);
  };
  for (const AttentionEfficiency& f : e.attention) {
    if (f.impl != a.impl) {
      continue;
    }
    if (f.as_matmul) {
      return &f;
    }
    if (f.pass != pass && f.pass != AttentionPass::kForwardBackward) {
      continue;
    }
    if (best == nullptr || score(f) < score(*best)) {
      best = &f;
    }
  }
  return best;
}

RooflineComputeModel::RooflineComputeModel(Chip chip) : chip_(std::move(chip)) {}

FlopsPerSec RooflineComputeModel::flop_rate(const ComputeWork& work) const {
  if (on_matrix_units(work)) {
    const auto peak = chip_.peak(work.dtype);
    SIM_CHECK(peak.has_value(), "{} has no {} matrix rate (the planner must check dtypes)",
              chip_.name, to_string(work.dtype));
    return *peak;
  }
  if (const auto fp32 = chip_.peak(Dtype::kFp32)) {
    return *fp32;
  }
  return *chip_.peak(Dtype::kBf16);
}

int64_t RooflineComputeModel::units_left(const ComputeContext& context) const {
  const auto& shape = chip_.efficiency.matmul_shape;
  if (!shape) {
    return 1;
  }
  const auto& comm = chip_.efficiency.comm_units;
  if (!comm || context.collectives_in_flight <= 0) {
    return shape->units;
  }
  const int64_t held = std::min(shape->units - 1, *comm * context.collectives_in_flight);
  return shape->units - held;
}

double RooflineComputeModel::gemm_efficiency(const ComputeWork& work, int64_t units) const {
  const Efficiency& e = chip_.efficiency;
  double eff = work.dtype == Dtype::kFp8 ? e.matmul_fp8_for(work.fast_accumulation) : e.matmul;
  if (const auto& m = e.matmul_shape) {
    const GemmTiling t = gemm_tiling(*m, *work.shape, units);
    eff *= t.rate * static_cast<double>(units) / static_cast<double>(m->units);
  }
  return eff;
}

double RooflineComputeModel::attention_efficiency(const AttentionEfficiency& fit,
                                                  const AttentionShape& a, int64_t units) const {
  const auto s = static_cast<double>(a.seq_kv);
  double eff = fit.e_inf * s / (s + fit.s_half);
  if (const auto& m = chip_.efficiency.matmul_shape) {
    const int64_t ctas = checked_product({a.batch_heads, ceil_div(a.seq_q, kAttentionBlock)},
                                         "attention CTAs of a kernel");
    const int64_t waves = ceil_div(ctas, units);
    eff *= static_cast<double>(ctas) / static_cast<double>(waves * m->units);
  }
  return eff;
}

const AttentionEfficiency* RooflineComputeModel::measured_attention(const ComputeWork& w) const {
  if (!w.attention) {
    return nullptr;
  }
  const AttentionEfficiency* fit = attention_fit(chip_.efficiency, *w.attention);
  return fit != nullptr && !fit->as_matmul ? fit : nullptr;
}

double RooflineComputeModel::flop_efficiency(const ComputeWork& work,
                                             const ComputeContext& context) const {
  const int64_t units = units_left(context);
  if (const AttentionEfficiency* fit = measured_attention(work)) {
    return attention_efficiency(*fit, *work.attention, units);
  }
  SIM_CHECK(!work.attention || chip_.efficiency.attention.empty() ||
                attention_fit(chip_.efficiency, *work.attention) != nullptr,
            "{} has no {} attention fit (the edge checks the implementation against the chip)",
            chip_.name, to_string(work.attention->impl));
  if (!work.shape) {
    return 1.0;
  }
  if (work.attention) {
    // An attention kernel without measurements (Pallas flash/splash on TPU v3, v6e): its FLOPs at
    // the GEMM model's efficiency for its P V product, which streams the keys through the matrix
    // units (reduction over the key length); Q K^T reduces over the head dimension only and is as
    // long.
    ComputeWork pv = work;
    const AttentionShape& a = *work.attention;
    pv.shape = MatmulShape{a.seq_q, a.seq_kv, a.head_dim, a.batch_heads};
    return gemm_efficiency(pv, units);
  }
  return gemm_efficiency(work, units);
}

BytesPerSec RooflineComputeModel::memory_bandwidth(const ComputeWork& work) const {
  if (chip_.cache && work.bytes <= chip_.cache->capacity) {
    return chip_.cache->bandwidth;
  }
  return chip_.hbm_bandwidth;
}

KernelTime RooflineComputeModel::kernel_time(const ComputeWork& work,
                                             const ComputeContext& context) const {
  KernelTime t;
  if (work.host != HostCopy::kNone) {  // a copy engine's transfer: the host link's measured rate
    SIM_CHECK(chip_.host_link.has_value(), "chip {} has no host_link rates", chip_.name);
    t.memory_bound = work.bytes / (work.host == HostCopy::kToHost ? chip_.host_link->to_host
                                                                   : chip_.host_link->to_device);
    t.overhead = chip_.efficiency.launch_overhead;
    return t;
  }
  t.flops_bound = work.flops / (flop_rate(work) * flop_efficiency(work, context));
  t.memory_bound =
      work.bytes / (memory_bandwidth(work) *
                    chip_.efficiency.memory_for(work.rate_class.value_or(work.op_class)));
  t.overhead = chip_.efficiency.launch_overhead;
  const bool gemm = work.shape.has_value() && measured_attention(work) == nullptr;
  if (const auto& m = chip_.efficiency.matmul_shape; m && gemm) {
    t.overhead = t.overhead + m->call_overhead * gemm_calls(*m, *work.shape);
  }
  return t;
}

Duration RooflineComputeModel::compute_time(RankId /*rank*/, const ComputeWork& work) const {
  return kernel_time(work).total();
}

Duration RooflineComputeModel::compute_time_in(RankId /*rank*/, const ComputeWork& work,
                                               const ComputeContext& context) const {
  return kernel_time(work, context).total();
}

}  // namespace meshsim::topology
