// What a stage runs outside its passes: the step's end kernels (shared by the stage builder and
// the public stage_extras of step.h).
#include <numeric>

#include "layer_ops.h"
#include "meshsim/workloads/step.h"

namespace meshsim::workloads {
namespace detail {

std::vector<KernelSpec> step_end_kernels(const LayerContext& c) {
  const ParallelPlan& p = c.plan;
  const StagePartition& part = c.stage;
  // The optimizer updates the rank's parameters, sharded over DP x CP with ZeRO; per tensor or
  // over all of them at once as the plan's optimizer kernels say.
  std::vector<int64_t> tensors = {part.params.total()};
  if (p.optimizer_kernels != OptimizerKernels::kFused) {
    tensors = parameter_tensors(c);
  }
  if (p.zero != ZeroStage::kNone) {
    for (int64_t& t : tensors) {
      t = (t + p.zero_shard_group() - 1) / p.zero_shard_group();
    }
  }
  const int64_t local_params = std::accumulate(tensors.begin(), tensors.end(), int64_t{0});
  // The weights FP8 GEMMs read: the stage's layers (their local experts too) and MTP modules.
  int64_t layer_weights = part.params.mtp;
  for (const LayerShare& l : part.params.by_layer) {
    layer_weights += l.total();
  }
  std::vector<KernelSpec> out = step_work(c, local_params, layer_weights);
  for (KernelSpec& k : optimizer_step(tensors, p.model_state(), p.optimizer_kernels)) {
    out.push_back(std::move(k));
  }
  return out;
}

}  // namespace detail

StageExtras stage_extras(const ModelConfig& model, const ParallelPlan& plan,
                         const StagePartition& stage) {
  const detail::LayerContext c{model, plan, stage};
  StageExtras out;
  for (const detail::KernelSpec& k : detail::step_end_kernels(c)) {
    out.step_end.push_back(k.work);
  }
  out.pipeline_message = detail::pipeline_message_bytes(c);
  return out;
}

}  // namespace meshsim::workloads
