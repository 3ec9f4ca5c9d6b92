#include "meshsim/topology/compute_model.h"

#include "meshsim/sim/checked.h"
#include "meshsim/sim/error.h"

namespace meshsim::topology {
namespace {

// GEMMs (the planner gives them a MatmulShape: projections, attention's batched GEMMs, flash
// attention) run on the matrix units; everything else on the vector units.
bool on_matrix_units(const ComputeWork& w) { return w.shape.has_value(); }

// For a >= 0, b > 0, without forming a + b - 1 (which overflows near 2^63).
int64_t ceil_div(int64_t a, int64_t b) { return a / b + (a % b != 0 ? 1 : 0); }

}  // namespace

double wave_quantization(const MatmulShapeEfficiency& model, const MatmulShape& shape) {
  SIM_CHECK(shape.m > 0 && shape.n > 0 && shape.k > 0 && shape.batch > 0,
            "GEMM shape {}x{}x{} (batch {}) must be positive", shape.m, shape.k, shape.n,
            shape.batch);
  const int64_t tiles = checked_product(
      {shape.batch, ceil_div(shape.m, model.tile_m), ceil_div(shape.n, model.tile_n)},
      "output tiles of a GEMM");
  const int64_t waves = ceil_div(tiles, model.units);
  const double computed = static_cast<double>(waves) * static_cast<double>(model.units) *
                          static_cast<double>(model.tile_m) * static_cast<double>(model.tile_n);
  return static_cast<double>(shape.batch) * static_cast<double>(shape.m) *
         static_cast<double>(shape.n) / computed;
}

int64_t gemm_calls(const MatmulShapeEfficiency& model, const MatmulShape& shape) {
  return model.per_matrix_calls ? shape.batch : 1;
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

double RooflineComputeModel::flop_efficiency(const ComputeWork& work) const {
  if (!on_matrix_units(work)) {
    return 1.0;
  }
  double e = chip_.efficiency.matmul;
  if (const auto& m = chip_.efficiency.matmul_shape) {
    const auto k = static_cast<double>(work.shape->k);
    e *= wave_quantization(*m, *work.shape) * k / (k + m->k_half);
  }
  return e;
}

BytesPerSec RooflineComputeModel::memory_bandwidth(const ComputeWork& work) const {
  if (chip_.cache && work.bytes <= chip_.cache->capacity) {
    return chip_.cache->bandwidth;
  }
  return chip_.hbm_bandwidth;
}

KernelTime RooflineComputeModel::kernel_time(const ComputeWork& work) const {
  KernelTime t;
  t.flops_bound = work.flops / (flop_rate(work) * flop_efficiency(work));
  t.memory_bound =
      work.bytes / (memory_bandwidth(work) * chip_.efficiency.memory_for(work.op_class));
  t.overhead = chip_.efficiency.launch_overhead;
  if (const auto& m = chip_.efficiency.matmul_shape; m && on_matrix_units(work)) {
    t.overhead = t.overhead + m->call_overhead * gemm_calls(*m, *work.shape);
  }
  return t;
}

Duration RooflineComputeModel::compute_time(RankId /*rank*/, const ComputeWork& work) const {
  return kernel_time(work).total();
}

}  // namespace meshsim::topology
