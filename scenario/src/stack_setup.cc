#include "meshsim/scenario/stack_setup.h"

#include <algorithm>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "meshsim/sim/error.h"
#include "meshsim/workloads/stack_profile.h"

namespace meshsim::scenario {

using workloads::PlanField;

std::optional<workloads::DeviceFamily> device_family(const topology::Chip& chip) {
  if (chip.kind == topology::ChipKind::kTpu) {
    return workloads::DeviceFamily::kTpu;
  }
  if (!chip.gpu || !chip.gpu->architecture) {
    return std::nullopt;
  }
  switch (*chip.gpu->architecture) {
    case topology::GpuArchitecture::kAmpere:
      return workloads::DeviceFamily::kAmpere;
    case topology::GpuArchitecture::kHopper:
      return workloads::DeviceFamily::kHopper;
    case topology::GpuArchitecture::kBlackwell:
      return workloads::DeviceFamily::kBlackwell;
  }
  return workloads::DeviceFamily::kHopper;
}

void apply_stack_for(workloads::ParallelPlan& plan, const topology::Chip& chip) {
  const std::optional<workloads::DeviceFamily> known = device_family(chip);
  if (!known) {
    if (plan.origins[PlanField::kStack].given()) {
      throw workloads::PlanError(
          PlanField::kStack,
          fmt::format("{} names no GPU architecture (/gpu/architecture: ampere, hopper or "
                      "blackwell), which a software stack picks its kernels by",
                      chip.name));
    }
    return;  // a device profile of its own: the plan's kernels as given, no stack
  }
  const workloads::DeviceFamily family = *known;
  if (!plan.origins[PlanField::kStack].given()) {
    plan.stack = workloads::default_stack(family);
  }
  workloads::StackOverrides given;
  given.kernels = plan.origins[PlanField::kKernels].given();
  given.optimizer_kernels = plan.origins[PlanField::kOptimizerKernels].given();
  given.attention = plan.origins[PlanField::kAttention].given();
  given.fp8_recipe = plan.origins[PlanField::kFp8Recipe].given();
  given.overlap_grad_reduce = plan.origins[PlanField::kOverlapGradReduce].given();
  given.overlap_param_gather = plan.origins[PlanField::kOverlapParamGather].given();
  given.grad_reduce_fp32 = plan.origins[PlanField::kGradReduceFp32].given();
  given.cross_entropy_fusion = plan.origins[PlanField::kCrossEntropyFusion].given();
  workloads::apply_stack(plan, workloads::stack_profile(plan.stack, family), given);
  const std::optional<AttentionImpl> impl = workloads::fused_attention(plan.attention);
  const std::vector<AttentionImpl> have = chip.attention_impls();
  if (impl && !have.empty() && std::find(have.begin(), have.end(), *impl) == have.end()) {
    std::vector<std::string_view> names;
    for (const AttentionImpl h : have) {
      names.push_back(to_string(h));
    }
    const PlanField field = given.attention ? PlanField::kAttention : PlanField::kStack;
    throw workloads::PlanError(
        field, fmt::format("{} has no measurements of {} attention (the catalogue has: {}); "
                           "choose one of those as the attention",
                           chip.description, to_string(*impl), fmt::join(names, ", ")));
  }
}

void bind_to_cluster(workloads::ParallelPlan& plan, const topology::ClusterSpec& cluster) {
  apply_stack_for(plan, cluster.chip);
  plan.node_ranks = cluster.scale_up_domain_size();
}

}  // namespace meshsim::scenario
