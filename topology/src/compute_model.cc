#include "meshsim/topology/compute_model.h"

#include "meshsim/sim/error.h"

namespace meshsim::topology {
namespace {

bool on_matrix_units(OpClass c) { return c == OpClass::kMatmul || c == OpClass::kAttention; }

}  // namespace

RooflineComputeModel::RooflineComputeModel(Chip chip) : chip_(std::move(chip)) {}

FlopsPerSec RooflineComputeModel::flop_rate(const ComputeWork& work) const {
  if (on_matrix_units(work.op_class)) {
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

KernelTime RooflineComputeModel::kernel_time(const ComputeWork& work) const {
  KernelTime t;
  const double flop_eff = on_matrix_units(work.op_class) ? chip_.efficiency.matmul : 1.0;
  t.flops_bound = work.flops / (flop_rate(work) * flop_eff);
  t.memory_bound = work.bytes / (chip_.hbm_bandwidth * chip_.efficiency.memory);
  t.overhead = chip_.efficiency.launch_overhead;
  return t;
}

Duration RooflineComputeModel::compute_time(RankId /*rank*/, const ComputeWork& work) const {
  return kernel_time(work).total();
}

}  // namespace meshsim::topology
