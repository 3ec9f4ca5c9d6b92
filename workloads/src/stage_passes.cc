// The passes of a stage program: forward, backward (whole, or input-gradient only for zero-bubble
// schedules), weight gradients, gradient buckets, ZeRO gathers and the optimizer.
#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <numeric>

#include "meshsim/sim/error.h"
#include "meshsim/workloads/training_memory.h"
#include "layer_items.h"
#include "stage_builder.h"

namespace meshsim::workloads::detail {

namespace {

bool weight_gradient(const LayerItem& item) {
  const auto* k = std::get_if<KernelSpec>(&item);
  return k != nullptr && k->role == KernelRole::kWeightGradient;
}

// A zero-bubble B pass: the backward without its weight-gradient kernels.
std::vector<LayerItem> without_weight_gradients(std::vector<LayerItem> items) {
  std::erase_if(items, weight_gradient);
  return items;
}

// A fully recomputed layer's forward under ParallelPlan::recompute_skips_unread_outputs: without
// the kernels and collectives whose outputs no backward op reads. Those are the dense MLP's down
// projection (its TP reduction with it) and the residual sum that ends the layer; in a parallel
// block, the attention's output projection and the block's one TP reduction too. A MoE layer, or
// a layer whose post-MLP norm reads the down projection's output, re-runs whole.
std::vector<LayerItem> without_unread_outputs(std::vector<LayerItem> items,
                                              const ModelConfig& model, int64_t layer) {
  if (model.is_moe_layer(layer) || model.norms_per_layer == 4) {
    return items;
  }
  const std::string down = is_gated(model.mlp) ? "mlp_down" : "fc2";
  const auto unread = [&](const LayerItem& item) {
    if (const auto* t = std::get_if<TpOverlapGemm>(&item)) {
      return t->gemm.name == down;
    }
    if (const auto* k = std::get_if<KernelSpec>(&item)) {
      return k->name == down || k->name == "residual_mlp" ||
             (model.parallel_blocks && (k->name == "attn_out" || k->name == "residual"));
    }
    if (const auto* c = std::get_if<CommSpec>(&item)) {
      return model.parallel_blocks && c->name.starts_with("layer.tp_");
    }
    return false;
  };
  std::erase_if(items, unread);
  return items;
}

// A zero-bubble W pass: only the weight-gradient kernels.
std::vector<LayerItem> only_weight_gradients(std::vector<LayerItem> items) {
  std::erase_if(items, [](const LayerItem& i) { return !weight_gradient(i); });
  return items;
}

// Transformer Engine's offload window (cpu_offload.py, AsyncDoubleBufferGroupOffloadHandler): n
// of a chunk's `layers` offloaded, spread over the chunk's forward. The copy of layer k starts
// once the compute stream has passed layer k and the previous copy's window (layer 0's right after
// it), and the compute stream waits for it at the end of layer sync(k) = (k + 1) * (layers / n)
// - 1. In the backward, layer k's reload starts as layer sync(k)'s backward begins and layer k's
// backward waits for it. Layers counted from the chunk's first.
struct OffloadWindow {
  int64_t n = 0;
  int64_t per = 1;
  OffloadWindow(int64_t offloaded, int64_t layers)
      : n(offloaded), per(offloaded > 0 ? layers / offloaded : 1) {}
  int64_t sync(int64_t k) const { return (k + 1) * per - 1; }
  int64_t issue(int64_t k) const { return k == 0 ? 0 : std::max(k, sync(k - 1)); }
};

}  // namespace

std::optional<StageBuilder::PipeChannel> StageBuilder::pipe_channel(int32_t chunk, bool forward,
                                                                    bool send) const {
  const std::optional<PipelinePeer> peer = forward != send
                                                ? forward_source(pipe_, stage_, chunk)
                                                : forward_destination(pipe_, stage_, chunk);
  if (!peer || peer->stage == stage_) {
    return std::nullopt;
  }
  // Along the forward flow (a forward's send, a backward's receive) the peer is the next rank,
  // except on the V's return leg, which flows to the previous one.
  const bool returning = pipe_.schedule == PipelineSchedule::kZeroBubbleV && chunk == 1;
  const bool downstream = forward == send;
  const PeerSlot slot =
      downstream != returning ? PeerSlot::kPipelineNext : PeerSlot::kPipelinePrevious;
  if (forward) {
    return PipeChannel{slot, send ? (returning ? Stream::kPipeSendActivationReturn
                                               : Stream::kPipeSendActivation)
                                  : (returning ? Stream::kPipeReceiveActivationReturn
                                               : Stream::kPipeReceiveActivation)};
  }
  return PipeChannel{slot, send ? (returning ? Stream::kPipeSendGradientReturn
                                             : Stream::kPipeSendGradient)
                                : (returning ? Stream::kPipeReceiveGradientReturn
                                             : Stream::kPipeReceiveGradient)};
}

Scope StageBuilder::pass_scope(const PipelinePass& pass, std::string prefix) const {
  return Scope{OpLabels{std::nullopt, pass.microbatch, static_cast<int32_t>(stage_), std::nullopt},
               std::move(prefix),
               pass.kind == PassKind::kForward ? Phase::kForward : Phase::kBackward};
}

// ZeRO-3: the layer's parameters, gathered into a transient buffer on the gather stream.
OpId StageBuilder::zero3_gather(const Scope& scope, int64_t layer, bool blocking) {
  const Bytes full = layer_param_bytes(part_.params.of(layer).total());
  return collective(scope, fmt::format("L{}.fsdp_allgather", layer), CommKind::kData,
                    CollectiveKind::kAllGather, full, blocking, shard_slot(),
                    {alloc(MemoryCategory::kCommBuffers, full)}, Stream::kDataGather);
}

// ZeRO-3: the layer's parameters before its pass: the gather prefetched for it, or one issued now
// (blocking) when none was; the prefetch is used up either way.
void StageBuilder::zero3_await(const Scope& scope, int64_t layer, std::optional<OpId>& prefetched) {
  if (prefetched) {
    stream_.next_waits_for(*prefetched);
  } else {
    zero3_gather(scope, layer, true);
  }
  prefetched.reset();
}

// A received pipeline tensor, in slices: the TP group all-gathers them before the next kernel
// (Megatron-LM's mpu.gather_split_1d_tensor), blocking; a TP-group collective, counted as TP.
void StageBuilder::gather_pipe_slices(const Scope& scope, const std::string& name, Bytes tensor) {
  if (p_.scatters_pipeline_tensors()) {
    collective(scope, name + ".tp_gather", CommKind::kTensor, CollectiveKind::kAllGather, tensor,
               true);
  }
}

// The weight gradients of `params` parameters added to those of the microbatches before
// (ParallelPlan::wgrad_accumulation_fused off): autograd's in-place add, reading both, writing one.
void StageBuilder::accumulate_gradients(const Scope& scope, int64_t params) {
  const int64_t bytes = 3 * grad_bytes(params).count();
  compute(scope, {"grad_accumulate", memory_bound(OpClass::kElementwise, 1.0, params, bytes)});
}

// HSDP: the sharded gradients of `params` all-reduced across the replicas of the shard group.
void StageBuilder::replica_reduce(const Scope& scope, const std::string& name, int64_t params) {
  if (p_.zero_replicas() == 1) {
    return;
  }
  const int64_t shard = (params + p_.zero_shard_group() - 1) / p_.zero_shard_group();
  dp_ops_.push_back(collective(scope, name + ".hsdp_allreduce", CommKind::kData,
                               CollectiveKind::kAllReduce, grad_bytes(shard), false,
                               GroupSlot::kReplica));
}

void StageBuilder::forward(const PipelinePass& pass) {
  const int64_t chunk = pass.chunk;
  const Scope scope = pass_scope(pass, "fwd.");
  const Bytes msg = pipeline_message_bytes(ctx_);
  if (first_virtual(chunk)) {
    emit(scope, embedding_forward(ctx_),
         alloc(MemoryCategory::kActivations, part_.activations.embedding), {});
  } else if (const auto from = pipe_channel(pass.chunk, true, false)) {
    stream_.next_waits_for(p2p(scope, fmt::format("c{}.recv_activation", chunk), false, from->peer,
                               Tag::kActivation, p_.pipeline_wire_bytes(msg), from->stream));
    gather_pipe_slices(scope, fmt::format("c{}.recv_activation", chunk), msg);
  }
  // Under the interleaved schedule the receives are posted where their chunk needs them, not in
  // Megatron's batches with the sends (schedules.py), so a host wait between a blocking send and
  // its peer's receive could deadlock where the real code cannot; there the sync is left out, as
  // the pipeline's own syncs are (StageBuilder::p2p).
  const BatchSync loads = p_.host.sync_per_microbatch;
  if ((loads == BatchSync::kEveryStage ||
       (loads == BatchSync::kFirstAndLastStages && (part_.first || part_.last))) &&
      p_.vpp == 1) {
    get_batch(scope);
  }
  const auto [first, end] = part_.chunks[static_cast<size_t>(chunk)];
  const bool zero3 = p_.zero == ZeroStage::kParameters;
  std::optional<OpId> prefetched;  // ZeRO-3: the next layer's gather, issued one layer ahead
  const OffloadWindow window(p_.offload_layers, end - first);
  std::vector<OpId> offloads;  // by offloaded layer, counted from the chunk's first
  for (int64_t layer = first; layer < end; ++layer) {
    const Scope in_layer = scope.in_layer(layer, fmt::format("fwd.L{}.", layer));
    std::optional<MemoryEffect> drop;
    if (zero3) {
      zero3_await(in_layer, layer, prefetched);
      if (layer + 1 < end) {
        prefetched = zero3_gather(in_layer, layer + 1, !p_.overlap.param_gather);
      }
      drop = release(MemoryCategory::kCommBuffers,
                     layer_param_bytes(part_.params.of(layer).total()));
    } else if (const auto it = param_gathers_.find(layer); it != param_gathers_.end()) {
      stream_.next_waits_for(it->second);  // the step's first forward of the layer only
      param_gathers_.erase(it);
    }
    emit(in_layer, layer_forward(layer_ctx(layer)),
         alloc(MemoryCategory::kActivations, part_.activations.of(layer).saved), drop);
    for (int64_t k = 0; k < window.n; ++k) {
      if (window.issue(k) == layer - first) {
        offloads.push_back(
            host_copy(scope.in_layer(first + k, fmt::format("fwd.L{}.", first + k)), first + k,
                      true));
      }
      if (window.sync(k) == layer - first) {
        stream_.next_waits_for(offloads[static_cast<size_t>(k)]);
      }
    }
  }
  if (last_virtual(chunk)) {
    emit(scope, head_forward(ctx_), alloc(MemoryCategory::kActivations, part_.activations.head),
         {});
  } else if (const auto to = pipe_channel(pass.chunk, true, true)) {
    const OpId send = p2p(scope, fmt::format("c{}.send_activation", chunk), true, to->peer,
                          Tag::kActivation, p_.pipeline_wire_bytes(msg), to->stream);
    if (!p_.overlap.pipeline_p2p) {
      stream_.next_waits_for(send);
    }
  }
}

// The backward of one chunk: whole (`with_weights`), or zero-bubble's B (input gradients only).
void StageBuilder::backward(const PipelinePass& pass, bool with_weights, bool last_for_chunk) {
  const int64_t chunk = pass.chunk;
  const Scope scope = pass_scope(pass, "bwd.");
  const Bytes msg = pipeline_message_bytes(ctx_);
  const bool reduce_grads = with_weights && last_for_chunk;
  if (last_virtual(chunk)) {
    std::vector<LayerItem> head = head_backward(ctx_);
    if (!with_weights) {
      head = without_weight_gradients(std::move(head));
    }
    emit(scope, head, {},
         with_weights ? std::optional(release(MemoryCategory::kActivations, part_.activations.head))
                      : std::nullopt);
    if (reduce_grads) {
      grads_ready(scope, part_.params.head, 0);
    }
  } else if (const auto from = pipe_channel(pass.chunk, false, false)) {
    stream_.next_waits_for(p2p(scope, fmt::format("c{}.recv_gradient", chunk), false, from->peer,
                               Tag::kGradient, p_.pipeline_wire_bytes(msg), from->stream));
    gather_pipe_slices(scope, fmt::format("c{}.recv_gradient", chunk), msg);
  }
  const auto [first, end] = part_.chunks[static_cast<size_t>(chunk)];
  const bool zero3 = p_.zero == ZeroStage::kParameters;
  // ZeRO-3: the next (lower) layer's gather is issued on the gather stream as this layer's
  // backward starts (BackwardPrefetch::kPre: FSDP's BACKWARD_PRE, DeepSpeed's prefetch), so that
  // it runs beside this layer's compute, or after it (kPost); either way not behind its
  // reduce-scatter. The first gather of the chunk blocks.
  const bool prefetch_pre = p_.backward_prefetch == BackwardPrefetch::kPre;
  std::optional<OpId> prefetched;
  const OffloadWindow window(p_.offload_layers, end - first);
  std::vector<std::optional<OpId>> reloads(static_cast<size_t>(window.n));  // by offloaded layer
  for (int64_t layer = end - 1; layer >= first; --layer) {
    const Bytes saved = part_.activations.of(layer).saved;
    const Bytes materialised = part_.activations.of(layer).materialised;
    const bool full_recompute = part_.activations.of(layer).full_recompute;
    const Scope in_layer = scope.in_layer(layer, fmt::format("bwd.L{}.", layer));
    for (int64_t k = 0; k < window.n; ++k) {
      if (window.sync(k) == layer - first) {
        reloads[static_cast<size_t>(k)] = host_copy(
            scope.in_layer(first + k, fmt::format("bwd.L{}.", first + k)), first + k, false);
      }
    }
    if (layer - first < window.n) {
      stream_.next_waits_for(*reloads[static_cast<size_t>(layer - first)]);
    }
    if (zero3) {
      zero3_await(in_layer, layer, prefetched);
      if (layer > first && prefetch_pre) {
        prefetched = zero3_gather(in_layer, layer - 1, !p_.overlap.param_gather);
      }
    }
    if (full_recompute) {
      std::vector<LayerItem> rerun = layer_forward(layer_ctx(layer));
      if (p_.recompute_skips_unread_outputs) {
        rerun = without_unread_outputs(std::move(rerun), ctx_.model, layer);
      }
      emit(scope.recomputing(layer), rerun, alloc(MemoryCategory::kActivations, materialised), {});
      if (zero3 && p_.zero3_regather_for_recompute) {
        // Released after the recomputed forward, the layer is gathered again for its backward
        // (in the same buffer: no memory effect).
        collective(in_layer, fmt::format("L{}.fsdp_allgather_again", layer), CommKind::kData,
                   CollectiveKind::kAllGather, layer_param_bytes(part_.params.of(layer).total()),
                   true,
                   shard_slot(), {}, Stream::kDataGather);
      }
    }
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
    if (jax_policy(p_.recompute)) {
      emit(scope.recomputing(layer),
           recompute_jax_policy(layer_ctx(layer)), {}, {});
    } else if (p_.recompute == Recompute::kSelective && p_.selective_by_op) {
      emit(scope.recomputing(layer), recompute_torchtitan_ops(layer_ctx(layer)), {}, {});
    } else if (p_.recompute == Recompute::kSelective) {
      emit(scope.recomputing(layer), recompute_selected_modules(layer_ctx(layer)), {}, {});
    }
    std::vector<LayerItem> items = layer_backward(layer_ctx(layer));
    if (!with_weights) {
      items = without_weight_gradients(std::move(items));
    }
    emit(in_layer, items, {}, last_release);
    if (with_weights && !p_.wgrad_accumulation_fused && !zero3 && pass.microbatch > 0) {
      accumulate_gradients(in_layer, part_.params.of(layer).total());
    }
    if (zero3 && layer > first && !prefetch_pre) {
      prefetched = zero3_gather(in_layer, layer - 1, !p_.overlap.param_gather);
    }
    if (zero3) {
      // The gathered layer is dropped after its backward; its gradients are reduce-scattered
      // after every microbatch (FSDP without no_sync).
      const int64_t params = part_.params.of(layer).total();
      collective(in_layer, fmt::format("L{}.fsdp_reducescatter", layer), CommKind::kData,
                 CollectiveKind::kReduceScatter, grad_bytes(params), false, shard_slot(),
                 {release(MemoryCategory::kCommBuffers, layer_param_bytes(params))});
      replica_reduce(in_layer, fmt::format("L{}", layer), params);
    } else if (reduce_grads) {
      grads_ready(in_layer, part_.params.of(layer).dense, part_.params.of(layer).expert);
    }
  }
  if (first_virtual(chunk)) {
    emit(scope, embedding_backward(ctx_), {},
         with_weights
             ? std::optional(release(MemoryCategory::kActivations, part_.activations.embedding))
             : std::nullopt);
    if (reduce_grads) {
      grads_ready(scope, part_.params.embedding, 0);
    }
  }
  if (reduce_grads) {
    chunk_grads_done(scope);
  }
  if (first_virtual(chunk)) {
    return;
  }
  if (const auto to = pipe_channel(pass.chunk, false, true)) {
    const OpId send = p2p(scope, fmt::format("c{}.send_gradient", chunk), true, to->peer,
                          Tag::kGradient, p_.pipeline_wire_bytes(msg), to->stream);
    if (!p_.overlap.pipeline_p2p) {
      stream_.next_waits_for(send);
    }
  }
}

// Zero-bubble's W: the weight gradients of one chunk, deferred from its B.
void StageBuilder::weights(const PipelinePass& pass, bool last_for_chunk) {
  const int64_t chunk = pass.chunk;
  const Scope scope = pass_scope(pass, "wgrad.");
  const auto [first, end] = part_.chunks[static_cast<size_t>(chunk)];
  if (last_virtual(chunk)) {
    emit(scope, only_weight_gradients(head_backward(ctx_)), {},
         release(MemoryCategory::kActivations, part_.activations.head));
    if (last_for_chunk) {
      grads_ready(scope, part_.params.head, 0);
    }
  }
  for (int64_t layer = end - 1; layer >= first; --layer) {
    const Scope in_layer = scope.in_layer(layer, fmt::format("wgrad.L{}.", layer));
    // The last weight gradient of the pass also releases the embedding's activations (its
    // scatter-add ran with the input gradients).
    Bytes freed = part_.activations.of(layer).materialised;
    if (layer == first && first_virtual(chunk)) {
      freed += part_.activations.embedding;
    }
    emit(in_layer, only_weight_gradients(layer_backward(layer_ctx(layer))), {},
         release(MemoryCategory::kActivations, freed));
    if (last_for_chunk) {
      grads_ready(in_layer, part_.params.of(layer).dense, part_.params.of(layer).expert);
    }
  }
  if (first_virtual(chunk) && last_for_chunk) {
    grads_ready(scope, part_.params.embedding, 0);
  }
  if (last_for_chunk) {
    chunk_grads_done(scope);
  }
}

// Gradients of `dense` (and `expert`) parameters are final: they join the open bucket, which is
// reduced once full (or after the backward, without overlap).
void StageBuilder::grads_ready(const Scope& scope, int64_t dense, int64_t expert) {
  if (const std::optional<GradientBucket> full = buckets_.add(dense, expert)) {
    if (p_.overlap.grad_reduce) {
      reduce(scope.unnamed(), *full);
    } else {
      deferred_buckets_.push_back(*full);
    }
  }
}

void StageBuilder::chunk_grads_done(const Scope& scope) {
  if (p_.vpp == 1 || p_.zero == ZeroStage::kParameters) {
    return;  // one chunk: its last bucket closes with the step (finish)
  }
  if (const std::optional<GradientBucket> last = buckets_.close()) {
    if (p_.overlap.grad_reduce) {
      reduce(scope.unnamed(), *last);
    } else {
      deferred_buckets_.push_back(*last);
    }
  }
}

// The reduction of one bucket: all-reduce, or reduce-scatter with ZeRO (ZeRO-1 all-reduces where
// the optimizer updates its shard of whole gradients, ParallelPlan::optimizer_all_reduces_grads);
// dense gradients over DP x CP, expert gradients over the expert-data-parallel group.
void StageBuilder::reduce(const Scope& scope, const GradientBucket& bucket) {
  const bool whole = p_.zero == ZeroStage::kNone ||
                     (p_.zero == ZeroStage::kOptimizerStates && p_.optimizer_all_reduces_grads);
  const CollectiveKind op = whole ? CollectiveKind::kAllReduce : CollectiveKind::kReduceScatter;
  if (bucket.dense > 0 && p_.dense_grad_group() > 1) {
    dp_ops_.push_back(
        collective(scope, fmt::format("grad_bucket{}.{}", bucket.index, to_string(op)),
                   CommKind::kData, op, grad_bytes(bucket.dense), false, shard_slot()));
    replica_reduce(scope, fmt::format("grad_bucket{}", bucket.index), bucket.dense);
  }
  if (bucket.expert > 0 && p_.expert_grad_group() > 1) {
    dp_ops_.push_back(
        collective(scope, fmt::format("grad_bucket{}.expert_{}", bucket.index, to_string(op)),
                   CommKind::kData, op, grad_bytes(bucket.expert), false, GroupSlot::kExpertData));
  }
}

// ZeRO-1/2: the updated parameters are all-gathered bucket by bucket ahead of the forward
// passes that need them (Megatron's overlapped parameter gather, which in steady state runs
// during the forward of the step).
void StageBuilder::gather_parameters_ahead() {
  if (p_.zero == ZeroStage::kNone || p_.zero == ZeroStage::kParameters ||
      p_.dense_grad_group() == 1) {
    return;
  }
  int64_t pending = 0;          // parameters: the gradient buckets' (Megatron's buckets are shared)
  Bytes moved = Bytes::zero();  // what the gather moves (layers in FP8 with fp8_param_gather)
  std::vector<int64_t> layers;
  auto gather = [&] {
    if (pending == 0) {
      return;
    }
    const OpId ag = collective(Scope{}, fmt::format("param_gather{}", param_gathers_.size()),
                               CommKind::kData, CollectiveKind::kAllGather, moved,
                               !p_.overlap.param_gather, shard_slot());
    dp_ops_.push_back(ag);
    for (const int64_t l : layers) {
      param_gathers_[l] = ag;
    }
    pending = 0;
    moved = Bytes::zero();
    layers.clear();
  };
  pending += part_.params.embedding;
  moved += param_bytes(part_.params.embedding);
  for (const LayerRange& chunk : part_.chunks) {
    for (int64_t layer = chunk.first; layer < chunk.end; ++layer) {
      pending += part_.params.of(layer).total();
      moved += layer_param_bytes(part_.params.of(layer).total());
      layers.push_back(layer);
      if (grad_bytes(pending) >= grad_bucket_bytes(p_)) {
        gather();
      }
    }
  }
  pending += part_.params.head;
  moved += param_bytes(part_.params.head);
  gather();
}

// The last gradients, then the optimizer step once every data-parallel op is done. `last_pass`:
// the scope of the step's last pass, whose labels the last overlapped bucket carries.
void StageBuilder::finish(const Scope& last_pass) {
  const Scope step{OpLabels{std::nullopt, std::nullopt, static_cast<int32_t>(stage_), std::nullopt},
                   ""};
  if (const std::optional<GradientBucket> last = buckets_.close()) {
    if (p_.overlap.grad_reduce) {
      reduce(last_pass.unnamed(), *last);
    } else {
      deferred_buckets_.push_back(*last);
    }
  }
  for (const GradientBucket& bucket : deferred_buckets_) {
    reduce(step, bucket);
  }
  for (const OpId op : dp_ops_) {
    stream_.next_waits_for(op);
  }
  for (const KernelSpec& k : step_end_kernels(ctx_)) {
    compute(step, k);
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
    // The passes emit about as many ops each: once a forward and a backward are built, a program
    // bound to pass the limit by a quarter more is refused now, not after gigabytes of ops.
    if (i >= 2 && prog_.size() * order.size() > (kMaxOps + kMaxOps / 4) * i) {
      throw LimitError(
          fmt::format("a program of about {} ops ({} passes of about {} ops): more "
                      "than the {} (2^24) meshsim simulates in a minute",
                      prog_.size() * order.size() / i, order.size(), prog_.size() / i, kMaxOps));
    }
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
  finish(order.empty() ? Scope{} : pass_scope(order.back(), ""));
  return std::move(prog_);
}

Program build_stage_program(const ModelConfig& model, const ParallelPlan& plan,
                            const StagePartition& stage) {
  return StageBuilder(model, plan, stage).build();
}

}  // namespace meshsim::workloads::detail

namespace meshsim::workloads {

Bytes grad_bucket_bytes(const ParallelPlan& p) {
  if (p.grad_bucket) {
    return *p.grad_bucket;
  }
  if (p.stack == Stack::kMegatron) {
    if (!p.overlap.grad_reduce) {
      // "Set bucket_size to infinity if overlap_grad_reduce is False" (the same file).
      return Bytes::of(std::numeric_limits<int64_t>::max());
    }
    const int64_t params = std::max<int64_t>(40'000'000, 1'000'000 * p.dense_grad_group());
    return Bytes::of(params * p.model_state().gradient);
  }
  if (p.stack == Stack::kMegatronDeepSpeed2022) {
    // DeepSpeed's reductions after the backward: buffered_allreduce_fallback's
    // elements_per_buffer, MEMORY_OPT_ALLREDUCE_SIZE = 500,000,000 (deepspeed/runtime/engine.py
    // @ v0.6.5), the same count as ZeRO's default reduce_bucket_size.
    return Bytes::of(int64_t{500'000'000} * p.model_state().gradient);
  }
  if (p.stack == Stack::kMegatron2021 || p.stack == Stack::kMegatron2022 ||
      p.stack == Stack::kMegatron2023) {
    if (!p.overlap.grad_reduce) {
      // The local DDP's allreduce_gradients: one all-reduce of every gradient of a dtype, the
      // contiguous buffer or the grads flattened together (megatron/model/distributed.py @
      // de7dc40f); the distributed optimizer reduce-scatters its buffer whole (@ b90fb2685f).
      return Bytes::of(std::numeric_limits<int64_t>::max());
    }
    // --DDP-impl torch: PyTorch's DistributedDataParallel, bucket_cap_mb=25
    // (torch/nn/parallel/distributed.py).
    return MiB(25);
  }
  // 40M bf16 gradients, the rule's floor: what meshsim has used for every other stack.
  return MB(80);
}

}  // namespace meshsim::workloads
