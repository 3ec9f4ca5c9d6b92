// `meshsim kernel-model SHAPES.csv`: the GEMM cost model that costs every matmul of a simulation,
// evaluated on a table of shapes, so that tools (tools/fit_kernels.py) fit its constants against
// measurements through the model itself instead of a copy of it (topology/compute_model.h:
// gemm_tiling and RooflineComputeModel::kernel_time).
#pragma once

#include <optional>
#include <ostream>
#include <string>

#include "cli11_fwd.h"

namespace meshsim::cli {

struct KernelModelArgs {
  std::string shapes;  // CSV with a header: chip,dtype,m,n,k[,batch][,fast_accumulation]
  std::optional<std::string> hardware_catalogue;
  std::optional<double> k_half;  // overrides every chip's matmul_shape.k_half
  std::string out = "-";
};

CLI::App* add_kernel_model_command(CLI::App& app, KernelModelArgs& args);

// Writes one CSV row per shape; returns the exit code (0). Throws InputError on bad input.
int kernel_model_command(const KernelModelArgs& args, std::ostream& out);

}  // namespace meshsim::cli
