// The builder behind build_stage_program (see step.h and stage_program.h). Private.
//
// A stage program is built pass by pass in the stage's pipeline order. Three small pieces carry
// what one op needs from the ones before it, each with its rule written once:
//  * ComputeStream: what the next kernels on the compute stream wait for (blocking collectives,
//    received activations, gathered parameters; asynchronous collectives one kernel later), and
//    the last kernel, after which collectives and sends start.
//  * Scope: the labels and the name prefix of the ops being added, passed explicitly.
//  * GradientBuckets: gradients made final by the last backward, cut into reduction buckets.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "stage_program.h"

namespace meshsim::workloads::detail {

inline constexpr int kTpOverlapChunks = 4;  // GEMM/communication chunks when TP overlap is on

// Memory an op takes as it starts, or gives back as it ends.
inline MemoryEffect alloc(MemoryCategory c, Bytes b) { return {c, b, false}; }
inline MemoryEffect release(MemoryCategory c, Bytes b) { return {c, Bytes::zero() - b, true}; }

class ComputeStream {
 public:
  // The next kernel waits for `op`.
  void next_waits_for(OpId op) { next_.push_back(op); }
  // The kernel after the next waits for `op`, so that the next one overlaps it (Megatron's
  // asynchronous input-gradient reduction and input re-gather).
  void second_waits_for(OpId op) { second_.push_back(op); }
  // What a kernel being issued waits for; the kernel after it inherits what the second waits for.
  std::vector<OpId> take_waits() {
    std::vector<OpId> out = std::move(next_);
    next_ = std::move(second_);
    second_.clear();
    return out;
  }
  void issued(OpId kernel) { last_ = kernel; }
  // The last kernel issued: collectives and sends of its results start after it.
  std::optional<OpId> last() const { return last_; }

 private:
  std::vector<OpId> next_;
  std::vector<OpId> second_;
  std::optional<OpId> last_;
};

// Where the framework issues an op from, for the host's time per op (HostDispatch): the forward
// (and a recompute's re-run forward), the backward, or the step's own work (the optimizer).
enum class Phase : uint8_t { kForward, kBackward, kStep };

// Where ops are being added: their labels, the prefix of their names ("fwd.L12.", "bwd.L3.",
// "recompute.L3.", "wgrad.", or "" for the step's own ops) and the phase issuing them.
struct Scope {
  OpLabels labels;
  std::string prefix;
  Phase phase = Phase::kStep;

  Scope in_layer(int64_t layer, std::string layer_prefix) const {
    Scope s{labels, std::move(layer_prefix), phase};
    s.labels.layer = static_cast<int32_t>(layer);
    return s;
  }
  Scope unnamed() const { return Scope{labels, "", phase}; }  // bucket ops keep their labels
  // A recompute's re-run of the forward, issued from the backward like a forward.
  Scope recomputing(int64_t layer) const {
    Scope s = in_layer(layer, "recompute.L" + std::to_string(layer) + ".");
    s.phase = Phase::kForward;
    return s;
  }
};

// A bucket of final gradients: dense ones reduced over DP x CP, expert ones over expert DP.
struct GradientBucket {
  int index = 0;
  int64_t dense = 0;   // parameters
  int64_t expert = 0;  // parameters
};

// Megatron DDP's bucketing: gradients join the open bucket as they become final; the bucket is
// reduced once it holds `size` bytes of gradients, and at the end of the backward.
class GradientBuckets {
 public:
  GradientBuckets(Bytes size, int64_t bytes_per_gradient)
      : size_(size), bytes_per_gradient_(bytes_per_gradient) {}
  // Adds final gradients; returns the bucket when it is full.
  std::optional<GradientBucket> add(int64_t dense, int64_t expert) {
    open_.dense += dense;
    open_.expert += expert;
    if (Bytes::of((open_.dense + open_.expert) * bytes_per_gradient_) >= size_) {
      return close();
    }
    return std::nullopt;
  }
  // The open bucket, unless it is empty.
  std::optional<GradientBucket> close() {
    if (open_.dense + open_.expert == 0) {
      return std::nullopt;
    }
    GradientBucket full = open_;
    open_ = GradientBucket{full.index + 1, 0, 0};
    return full;
  }

 private:
  Bytes size_;
  int64_t bytes_per_gradient_;
  GradientBucket open_;
};

// grad_bucket_bytes (the stack's gradient bucket) is declared in parallel.h.

class StageBuilder {
 public:
  StageBuilder(const ModelConfig& m, const ParallelPlan& p, const StagePartition& part)
      : p_(p),
        part_(part),
        stage_(part.stage),
        ctx_{m, p, part},
        pipe_(p.pipeline()),
        buckets_(grad_bucket_bytes(p), p.model_state().gradient) {}

  Program build();

 private:
  // Primitives: one op each, its dependencies from the compute stream. `add` charges the op's
  // host time by its phase (HostDispatch).
  OpId add(Op op, const std::vector<OpId>& deps, Phase phase);
  // ParallelPlan::cuda_graphs: the op's host time as a graph's member (stage_program.cc).
  void graph_launch(Op& op, Phase phase);
  OpId compute(const Scope& scope, const KernelSpec& k, std::vector<MemoryEffect> memory = {});
  // A collective after the last kernel; `blocking`: the next kernel waits for it.
  // `holds_sms` false: the transfer runs on the copy engines (CollectiveWork::holds_sms).
  OpId collective(const Scope& scope, const std::string& name, CommKind kind, CollectiveKind op,
                  Bytes bytes, bool blocking, std::optional<GroupSlot> slot = {},
                  std::vector<MemoryEffect> memory = {}, std::optional<Stream> stream = {},
                  bool holds_sms = true);
  OpId p2p(const Scope& scope, const std::string& name, bool send, PeerSlot peer, Tag tag,
           Bytes bytes, Stream stream);
  // Megatron-LM 2021's get_batch: the batch's sizes copied to the host, which waits for the
  // device (HostDispatch::sync_per_microbatch).
  void get_batch(const Scope& scope);
  // Activation offloading: layer `layer`'s saved activations copied to host memory (releasing
  // them when done) or back (allocating them as it starts), after the last kernel issued.
  OpId host_copy(const Scope& scope, int64_t layer, bool to_host);
  // A layer's items; `first_alloc` goes to its first kernel, `last_release` to its last.
  void emit(const Scope& scope, const std::vector<LayerItem>& items,
            std::optional<MemoryEffect> first_alloc, std::optional<MemoryEffect> last_release);
  void emit_comm(const Scope& scope, const CommSpec& c);
  void emit_tp_gemm(const Scope& scope, const TpOverlapGemm& g, std::vector<MemoryEffect> memory);
  void emit_ring(const Scope& scope, const RingSpec& r);

  // Passes.
  bool first_virtual(int64_t chunk) const { return virtual_stage(pipe_, stage_, chunk) == 0; }
  bool last_virtual(int64_t chunk) const {
    return virtual_stage(pipe_, stage_, chunk) == p_.pp * p_.vpp - 1;
  }
  // The peer slot and stream of a pass's pipeline message (a forward's activation or a
  // backward's gradient; `send` or receive), or nullopt when there is none: the ends of the
  // pipeline, and zbv's turn, where chunk 0 of rank p-1 feeds chunk 1 of the same rank.
  struct PipeChannel {
    PeerSlot peer;
    Stream stream;
  };
  std::optional<PipeChannel> pipe_channel(int32_t chunk, bool forward, bool send) const;
  Scope pass_scope(const PipelinePass& pass, std::string prefix) const;
  void forward(const PipelinePass& pass);
  void backward(const PipelinePass& pass, bool with_weights, bool last_for_chunk);
  void weights(const PipelinePass& pass, bool last_for_chunk);
  void grads_ready(const Scope& scope, int64_t dense_params, int64_t expert_params);
  // The end of a model chunk's last backward: its open bucket is reduced (Megatron-Core builds one
  // DDP, with its own buckets, per model chunk).
  void chunk_grads_done(const Scope& scope);
  void reduce(const Scope& scope, const GradientBucket& bucket);
  void gather_parameters_ahead();
  OpId zero3_gather(const Scope& scope, int64_t layer, bool blocking);
  void zero3_await(const Scope& scope, int64_t layer, std::optional<OpId>& prefetched);
  void gather_pipe_slices(const Scope& scope, const std::string& name, Bytes tensor);
  // Autograd's gradient accumulation (ParallelPlan::wgrad_accumulation_fused off).
  void accumulate_gradients(const Scope& scope, int64_t params);
  void replica_reduce(const Scope& scope, const std::string& name, int64_t params);
  // ZeRO's collectives run on the HSDP shard group, or on DP x CP without HSDP.
  std::optional<GroupSlot> shard_slot() const {
    return p_.fsdp > 0 ? std::optional(GroupSlot::kShard) : std::nullopt;
  }
  void finish(const Scope& last_pass);
  Bytes param_bytes(int64_t params) const { return Bytes::of(params * p_.state.weight); }
  // A layer's parameters as the ZeRO/FSDP gathers move them (ParallelPlan::layer_gather_bytes).
  Bytes layer_param_bytes(int64_t params) const {
    return Bytes::of(params * p_.layer_gather_bytes());
  }
  LayerContext layer_ctx(int64_t layer) const {
    return LayerContext{ctx_.model, ctx_.plan, ctx_.stage, layer};
  }
  Bytes grad_bytes(int64_t params) const { return Bytes::of(params * p_.model_state().gradient); }

  const ParallelPlan& p_;
  const StagePartition& part_;
  int64_t stage_;
  LayerContext ctx_;
  PipelineConfig pipe_;

  Program prog_;
  ComputeStream stream_;
  std::vector<OpId> dp_ops_;  // every data-parallel op: the optimizer waits for them
  GradientBuckets buckets_;
  std::vector<GradientBucket> deferred_buckets_;  // reduced after the backward (no overlap)
  std::map<int64_t, OpId> param_gathers_;  // ZeRO-1/2: layer -> the all-gather its forward awaits
  // The last pipeline send or receive added, if it synchronises the host (HostDispatch's
  // sync_after_p2p): a send or receive right after it joins its batch and takes the sync over.
  std::optional<OpId> synced_p2p_;
  // CUDA graphs: the per-layer graph the last op joined (layer, microbatch, phase), and whether
  // the whole-step graph has been launched.
  struct GraphKey {
    int32_t layer;
    int32_t microbatch;
    Phase phase;
    bool operator==(const GraphKey&) const = default;
  };
  std::optional<GraphKey> graph_;
  bool graph_open_ = false;
};

}  // namespace meshsim::workloads::detail
