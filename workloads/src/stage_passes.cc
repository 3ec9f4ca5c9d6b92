// The passes of a stage program: forward, backward (whole, or input-gradient only for zero-bubble
// schedules), weight gradients, gradient buckets, ZeRO gathers and the optimizer.
#include <fmt/format.h>

#include <numeric>

#include "meshsim/sim/error.h"
#include "meshsim/workloads/training_memory.h"
#include "stage_builder.h"

namespace meshsim::workloads::detail {

namespace {
MemoryEffect alloc(MemoryCategory c, Bytes b) { return {c, b, false}; }
MemoryEffect release(MemoryCategory c, Bytes b) { return {c, Bytes::zero() - b, true}; }

std::vector<LayerItem> without_wgrad(std::vector<LayerItem> items) {
  std::erase_if(items, [](const LayerItem& i) { return is_wgrad(i); });
  return items;
}

std::vector<LayerItem> only_wgrad(std::vector<LayerItem> items) {
  std::erase_if(items, [](const LayerItem& i) { return !is_wgrad(i); });
  return items;
}
}  // namespace

OpId StageBuilder::zero3_gather(int64_t layer, bool blocking) {
  const Bytes full = param_bytes(part_.params.per_layer());
  return collective(fmt::format("L{}.fsdp_allgather", layer), CommKind::kData,
                    CollectiveKind::kAllGather, full, {}, blocking, std::nullopt,
                    {alloc(MemoryCategory::kCommBuffers, full)});
}

void StageBuilder::forward(const PipelinePass& pass) {
  const int64_t chunk = pass.chunk;
  labels_ = OpLabels{std::nullopt, pass.microbatch, static_cast<int32_t>(stage_), std::nullopt};
  prefix_ = "fwd.";
  const Bytes msg = pipeline_message_bytes(ctx_);
  if (first_virtual(chunk)) {
    emit(embedding_forward(ctx_), alloc(MemoryCategory::kActivations, part_.activations.embedding), {});
  } else {
    waits_.push_back(p2p(fmt::format("c{}.recv_activation", chunk), false,
                         PeerSlot::kPipelinePrevious, Tag::kActivation, msg,
                         Stream::kPipeReceiveActivation));
  }
  const auto [first, end] = part_.chunks[static_cast<size_t>(chunk)];
  const bool zero3 = p_.zero == ZeroStage::kParameters;
  const Bytes saved = part_.activations.saved_per_layer;
  std::optional<OpId> prefetched;
  for (int64_t layer = first; layer < end; ++layer) {
    labels_.layer = static_cast<int32_t>(layer);
    prefix_ = fmt::format("fwd.L{}.", layer);
    std::optional<MemoryEffect> drop;
    if (zero3) {
      waits_.push_back(prefetched ? *prefetched : zero3_gather(layer, true));
      prefetched.reset();
      if (layer + 1 < end) {
        prefetched = zero3_gather(layer + 1, !p_.overlap.param_gather);
      }
      drop = release(MemoryCategory::kCommBuffers, param_bytes(part_.params.per_layer()));
    } else if (auto it = param_gather_.find(layer);
               it != param_gather_.end() && !gathered_once_[layer]) {
      waits_.push_back(it->second);
      gathered_once_[layer] = true;
    }
    emit(layer_forward(ctx_), alloc(MemoryCategory::kActivations, saved), drop);
  }
  labels_.layer.reset();
  prefix_ = "fwd.";
  if (last_virtual(chunk)) {
    emit(head_forward(ctx_), alloc(MemoryCategory::kActivations, part_.activations.head), {});
  } else {
    const OpId send = p2p(fmt::format("c{}.send_activation", chunk), true, PeerSlot::kPipelineNext,
                          Tag::kActivation, msg, Stream::kPipeSendActivation);
    if (!p_.overlap.pipeline_p2p) {
      waits_.push_back(send);
    }
  }
}

void StageBuilder::backward(const PipelinePass& pass, bool with_weights, bool last_for_chunk) {
  const int64_t chunk = pass.chunk;
  labels_ = OpLabels{std::nullopt, pass.microbatch, static_cast<int32_t>(stage_), std::nullopt};
  prefix_ = "bwd.";
  const Bytes msg = pipeline_message_bytes(ctx_);
  if (last_virtual(chunk)) {
    emit(head_backward(ctx_), {},
         with_weights ? std::optional(release(MemoryCategory::kActivations, part_.activations.head))
                      : std::nullopt);
    if (with_weights && last_for_chunk) {
      grads_ready(part_.params.head, 0);
    }
  } else {
    waits_.push_back(p2p(fmt::format("c{}.recv_gradient", chunk), false, PeerSlot::kPipelineNext,
                         Tag::kGradient, msg, Stream::kPipeReceiveGradient));
  }
  const auto [first, end] = part_.chunks[static_cast<size_t>(chunk)];
  const bool zero3 = p_.zero == ZeroStage::kParameters;
  const bool full_recompute = p_.recompute == Recompute::kFull;
  const Bytes saved = part_.activations.saved_per_layer;
  const Bytes materialised = part_.activations.materialised_per_layer;
  for (int64_t layer = end - 1; layer >= first; --layer) {
    labels_.layer = static_cast<int32_t>(layer);
    if (zero3) {
      prefix_ = fmt::format("bwd.L{}.", layer);
      waits_.push_back(zero3_gather(layer, true));
    }
    if (full_recompute) {
      prefix_ = fmt::format("recompute.L{}.", layer);
      emit(layer_forward(ctx_), alloc(MemoryCategory::kActivations, materialised), {});
    }
    prefix_ = fmt::format("bwd.L{}.", layer);
    std::vector<MemoryEffect> drops;
    Bytes freed = Bytes::zero();
    if (with_weights) {
      freed = saved + (full_recompute ? materialised : Bytes::zero());
    } else if (full_recompute) {
      freed = materialised;  // the re-materialised layer; the checkpoint waits for W
    }
    std::optional<MemoryEffect> last_release;
    if (freed > Bytes::zero()) {
      last_release = release(MemoryCategory::kActivations, freed);
    }
    auto items = layer_backward(ctx_);
    emit(with_weights ? std::move(items) : without_wgrad(std::move(items)), {}, last_release);
    if (zero3) {
      // The gathered layer is dropped after its backward; its gradients are reduce-scattered
      // after every microbatch (FSDP without no_sync).
      collective(fmt::format("L{}.fsdp_reducescatter", layer), CommKind::kData,
                 CollectiveKind::kReduceScatter, grad_bytes(part_.params.per_layer()), {}, false,
                 std::nullopt, {release(MemoryCategory::kCommBuffers, param_bytes(part_.params.per_layer()))});
    } else if (with_weights && last_for_chunk) {
      grads_ready(part_.params.dense_per_layer, part_.params.expert_per_layer);
    }
  }
  labels_.layer.reset();
  prefix_ = "bwd.";
  if (first_virtual(chunk)) {
    emit(embedding_backward(ctx_), {},
         with_weights ? std::optional(release(MemoryCategory::kActivations, part_.activations.embedding))
                      : std::nullopt);
    if (with_weights && last_for_chunk) {
      grads_ready(part_.params.embedding, 0);
    }
  } else {
    const OpId send = p2p(fmt::format("c{}.send_gradient", chunk), true, PeerSlot::kPipelinePrevious,
                          Tag::kGradient, msg, Stream::kPipeSendGradient);
    if (!p_.overlap.pipeline_p2p) {
      waits_.push_back(send);
    }
  }
}

void StageBuilder::weights(const PipelinePass& pass, bool last_for_chunk) {
  const int64_t chunk = pass.chunk;
  labels_ = OpLabels{std::nullopt, pass.microbatch, static_cast<int32_t>(stage_), std::nullopt};
  const auto [first, end] = part_.chunks[static_cast<size_t>(chunk)];
  if (last_virtual(chunk)) {
    prefix_ = "wgrad.";
    emit(only_wgrad(head_backward(ctx_)), {},
         release(MemoryCategory::kActivations, part_.activations.head));
    if (last_for_chunk) {
      grads_ready(part_.params.head, 0);
    }
  }
  for (int64_t layer = end - 1; layer >= first; --layer) {
    labels_.layer = static_cast<int32_t>(layer);
    prefix_ = fmt::format("wgrad.L{}.", layer);
    // The last weight gradient of the pass also releases the embedding's activations (its
    // scatter-add ran with the input gradients).
    Bytes freed = part_.activations.materialised_per_layer;
    if (layer == first && first_virtual(chunk)) {
      freed += part_.activations.embedding;
    }
    emit(only_wgrad(layer_backward(ctx_)), {}, release(MemoryCategory::kActivations, freed));
    if (last_for_chunk) {
      grads_ready(part_.params.dense_per_layer, part_.params.expert_per_layer);
    }
  }
  labels_.layer.reset();
  if (first_virtual(chunk) && last_for_chunk) {
    grads_ready(part_.params.embedding, 0);
  }
}

// Gradients of `dense` (and `expert`) parameters are final: add them to the open bucket, and
// reduce the bucket once it is full.
void StageBuilder::grads_ready(int64_t dense, int64_t expert) {
  bucket_params_ += dense;
  bucket_expert_params_ += expert;
  if (grad_bytes(bucket_params_ + bucket_expert_params_) >= p_.grad_bucket) {
    flush_bucket();
  }
}

void StageBuilder::flush_bucket() {
  const int64_t dense = bucket_params_;
  const int64_t expert = bucket_expert_params_;
  bucket_params_ = 0;
  bucket_expert_params_ = 0;
  if (dense + expert == 0) {
    return;
  }
  if (!p_.overlap.grad_reduce) {
    deferred_buckets_.emplace_back(dense, expert);
    return;
  }
  const CollectiveKind op =
      p_.zero == ZeroStage::kNone ? CollectiveKind::kAllReduce : CollectiveKind::kReduceScatter;
  const std::string saved_prefix = prefix_;
  prefix_ = "";
  const int bucket = bucket_index_++;
  if (dense > 0 && p_.dense_grad_group() > 1) {
    dp_ops_.push_back(collective(fmt::format("grad_bucket{}.{}", bucket, to_string(op)),
                                 CommKind::kData, op, grad_bytes(dense), {}, false));
  }
  if (expert > 0 && p_.expert_grad_group() > 1) {
    dp_ops_.push_back(collective(fmt::format("grad_bucket{}.expert_{}", bucket, to_string(op)),
                                 CommKind::kData, op, grad_bytes(expert), {}, false,
                                 GroupSlot::kExpertData));
  }
  prefix_ = saved_prefix;
}

// ZeRO-1/2: the updated parameters are all-gathered bucket by bucket ahead of the forward
// passes that need them (Megatron's overlapped parameter gather, which in steady state runs
// during the forward of the step).
void StageBuilder::gather_parameters_ahead() {
  if (p_.zero == ZeroStage::kNone || p_.zero == ZeroStage::kParameters || p_.dense_grad_group() == 1) {
    return;
  }
  int64_t pending = 0;
  std::vector<int64_t> layers;
  auto flush = [&] {
    if (pending == 0) {
      return;
    }
    const OpId ag = collective(fmt::format("param_gather{}", param_gather_.size()), CommKind::kData,
                               CollectiveKind::kAllGather, param_bytes(pending), {}, false);
    dp_ops_.push_back(ag);
    for (const int64_t l : layers) {
      param_gather_[l] = ag;
    }
    if (!p_.overlap.param_gather) {
      waits_.push_back(ag);
    }
    pending = 0;
    layers.clear();
  };
  pending += part_.params.embedding;
  for (int64_t chunk = 0; chunk < p_.vpp; ++chunk) {
    const auto [first, end] = part_.chunks[static_cast<size_t>(chunk)];
    for (int64_t layer = first; layer < end; ++layer) {
      pending += part_.params.per_layer();
      layers.push_back(layer);
      if (param_bytes(pending) >= p_.grad_bucket) {
        flush();
      }
    }
  }
  pending += part_.params.head;
  flush();
}

void StageBuilder::finish() {
  flush_bucket();
  const CollectiveKind op =
      p_.zero == ZeroStage::kNone ? CollectiveKind::kAllReduce : CollectiveKind::kReduceScatter;
  prefix_ = "";
  labels_ = OpLabels{std::nullopt, std::nullopt, static_cast<int32_t>(stage_), std::nullopt};
  for (size_t i = 0; i < deferred_buckets_.size(); ++i) {
    const auto [dense, expert] = deferred_buckets_[i];
    if (dense > 0 && p_.dense_grad_group() > 1) {
      dp_ops_.push_back(collective(fmt::format("grad_bucket{}.{}", i, to_string(op)),
                                   CommKind::kData, op, grad_bytes(dense), {}, false));
    }
    if (expert > 0 && p_.expert_grad_group() > 1) {
      dp_ops_.push_back(collective(fmt::format("grad_bucket{}.expert_{}", i, to_string(op)),
                                   CommKind::kData, op, grad_bytes(expert), {}, false,
                                   GroupSlot::kExpertData));
    }
  }
  waits_.insert(waits_.end(), dp_ops_.begin(), dp_ops_.end());
  // The optimizer updates the rank's parameters, sharded over DP x CP with ZeRO; per tensor or
  // over all of them at once as the plan's optimizer kernels say.
  std::vector<int64_t> tensors = {part_.params.total()};
  if (p_.optimizer_kernels != OptimizerKernels::kFused) {
    tensors = parameter_tensors(ctx_);
  }
  if (p_.zero != ZeroStage::kNone) {
    for (int64_t& t : tensors) {
      t = (t + p_.dense_grad_group() - 1) / p_.dense_grad_group();
    }
  }
  for (const KernelSpec& k : optimizer_step(tensors, p_.state, p_.optimizer_kernels)) {
    compute(k);
  }
}

Program StageBuilder::build() {
  // The model state of the layers the stage runs (and its embedding or head), as the closed form
  // counts it.
  const TrainingMemory state = training_memory(part_, p_, 1);
  prog_.set_initial_memory(MemoryCategory::kWeights, state.weights);
  prog_.set_initial_memory(MemoryCategory::kGradients, state.gradients);
  prog_.set_initial_memory(MemoryCategory::kOptimizerState, state.optimizer_states);
  gather_parameters_ahead();
  const std::vector<PipelinePass> order = pipeline_order(pipe_, stage_);
  // The last pass that produces each chunk's weight gradients: its gradients are final.
  std::map<int32_t, size_t> last_grad_pass;
  for (size_t i = 0; i < order.size(); ++i) {
    if (order[i].kind == PassKind::kBackward || order[i].kind == PassKind::kBackwardWeight) {
      last_grad_pass[order[i].chunk] = i;
    }
  }
  for (size_t i = 0; i < order.size(); ++i) {
    const PipelinePass& pass = order[i];
    const bool last = last_grad_pass[pass.chunk] == i;
    switch (pass.kind) {
      case PassKind::kForward:
        forward(pass);
        break;
      case PassKind::kBackward:
        backward(pass, true, last);
        break;
      case PassKind::kBackwardInput:
        backward(pass, false, false);
        break;
      case PassKind::kBackwardWeight:
        weights(pass, last);
        break;
    }
  }
  finish();
  return std::move(prog_);
}

Program build_stage_program(const ModelConfig& model, const ParallelPlan& plan,
                            const StagePartition& stage) {
  return StageBuilder(model, plan, stage).build();
}

}  // namespace meshsim::workloads::detail
