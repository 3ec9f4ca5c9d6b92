// The fields of the parallel plan (parallel.h), and the typed error libraries throw about one.
#pragma once

#include <cstdint>

#include "meshsim/sim/enum_names.h"
#include "meshsim/sim/provenance.h"

namespace meshsim::workloads {

using meshsim::to_string;

// The fields of a ParallelPlan a user sets, named as the scenario file's keys. A library error
// about the plan is a PlanError on one of them; the edge says where the value came from
// (sim/provenance.h).
enum class PlanField : uint8_t {
  kDp,
  kZero,
  kTp,
  kSp,
  kCp,
  kPp,
  kVpp,
  kSchedule,
  kEp,
  kEtp,
  kMoeDispatcher,
  kCapacityFactor,
  kMoeLoadSkew,
  kMoeDropTokens,
  kMoeSeed,
  kFsdp,
  kRecomputeNumLayers,
  kRecomputeModules,
  kOffloadLayers,
  kMbs,
  kGbs,
  kSeq,
  kRecompute,
  kDtype,
  kAttention,
  kKernels,
  kOptimizerKernels,
  kStageLayers,
  kOverlapGradReduce,
  kOverlapParamGather,
  kOverlapP2p,
  kOverlapTp,
  kStack,
  kFp8Recipe,
  kCudaGraphs,
  kFp8ParamGather,
  kGradReduceFp32,
  kCrossEntropyFusion,
  kHostTimeScale,
};
constexpr auto enum_names(PlanField) {
  using F = PlanField;
  return std::to_array<EnumName<F>>({{F::kDp, "dp"},
                                     {F::kZero, "zero"},
                                     {F::kTp, "tp"},
                                     {F::kSp, "sp"},
                                     {F::kCp, "cp"},
                                     {F::kPp, "pp"},
                                     {F::kVpp, "vpp"},
                                     {F::kSchedule, "schedule"},
                                     {F::kEp, "ep"},
                                     {F::kEtp, "etp"},
                                     {F::kMoeDispatcher, "moe_dispatcher"},
                                     {F::kCapacityFactor, "capacity_factor"},
                                     {F::kMoeLoadSkew, "moe_load_skew"},
                                     {F::kMoeDropTokens, "moe_drop_tokens"},
                                     {F::kMoeSeed, "moe_seed"},
                                     {F::kFsdp, "fsdp"},
                                     {F::kRecomputeNumLayers, "recompute_num_layers"},
                                     {F::kRecomputeModules, "recompute_modules"},
                                     {F::kOffloadLayers, "offload_layers"},
                                     {F::kMbs, "mbs"},
                                     {F::kGbs, "gbs"},
                                     {F::kSeq, "seq"},
                                     {F::kRecompute, "recompute"},
                                     {F::kDtype, "dtype"},
                                     {F::kAttention, "attention"},
                                     {F::kKernels, "kernels"},
                                     {F::kOptimizerKernels, "optimizer_kernels"},
                                     {F::kStageLayers, "stage_layers"},
                                     {F::kOverlapGradReduce, "overlap_grad_reduce"},
                                     {F::kOverlapParamGather, "overlap_param_gather"},
                                     {F::kOverlapP2p, "overlap_p2p"},
                                     {F::kOverlapTp, "overlap_tp"},
                                     {F::kStack, "stack"},
                                     {F::kFp8Recipe, "fp8_recipe"},
                                     {F::kCudaGraphs, "cuda_graphs"},
                                     {F::kFp8ParamGather, "fp8_param_gather"},
                                     {F::kGradReduceFp32, "grad_reduce_fp32"},
                                     {F::kCrossEntropyFusion, "cross_entropy_fusion"},
                                     {F::kHostTimeScale, "host_time_scale"}});
}
using PlanError = FieldError<PlanField>;

}  // namespace meshsim::workloads
