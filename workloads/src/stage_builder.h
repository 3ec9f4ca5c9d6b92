// The builder behind build_stage_program (see step.h and stage_program.h). Private.
#pragma once

#include <map>
#include <optional>
#include <vector>

#include "stage_program.h"

namespace meshsim::workloads::detail {

inline bool is_wgrad(const LayerItem& item) {
  const auto* k = std::get_if<KernelSpec>(&item);
  return k != nullptr && k->name.ends_with(".wgrad");
}

inline constexpr int kTpOverlapChunks = 4;  // GEMM/communication chunks when TP overlap is on

class StageBuilder {
 public:
  StageBuilder(const ModelConfig& m, const ParallelPlan& p, const StagePartition& part)
      : m_(m), p_(p), part_(part), stage_(part.stage), ctx_{m, p, part}, pipe_(p.pipeline()) {}

  Program build();

 private:
  // Primitives.
  OpId add(Op op, const std::vector<OpId>& deps);
  OpId compute(const KernelSpec& k, std::vector<MemoryEffect> memory = {});
  OpId collective(const std::string& name, CommKind kind, CollectiveKind op, Bytes bytes,
                  std::vector<OpId> deps, bool blocking, std::optional<GroupSlot> slot = {},
                  std::vector<MemoryEffect> memory = {});
  OpId p2p(const std::string& name, bool send, PeerSlot peer, Tag tag, Bytes bytes, Stream stream);
  void emit(std::vector<LayerItem> items, std::optional<MemoryEffect> first_alloc,
            std::optional<MemoryEffect> last_release);
  void emit_split(const KernelSpec& gemm, const CommSpec& comm, bool comm_first);
  void emit_ring(const RingSpec& r);

  // Passes.
  bool first_virtual(int64_t chunk) const { return chunk * p_.pp + stage_ == 0; }
  bool last_virtual(int64_t chunk) const { return chunk * p_.pp + stage_ == p_.pp * p_.vpp - 1; }
  void forward(const PipelinePass& pass);
  void backward(const PipelinePass& pass, bool with_weights, bool last_for_chunk);
  void weights(const PipelinePass& pass, bool last_for_chunk);
  void grads_ready(int64_t dense_params, int64_t expert_params);
  void flush_bucket();
  void gather_parameters_ahead();
  OpId zero3_gather(int64_t layer, bool blocking);
  void finish();
  Bytes param_bytes(int64_t params) const { return Bytes::of(params * p_.state.weight); }
  Bytes grad_bytes(int64_t params) const { return Bytes::of(params * p_.state.gradient); }

  const ModelConfig& m_;
  const ParallelPlan& p_;
  const StagePartition& part_;
  int64_t stage_;
  LayerContext ctx_;
  PipelineConfig pipe_;

  Program prog_;
  std::vector<OpId> waits_;  // ops the next compute op must wait for
  std::vector<OpId> after_next_;  // async collectives: the compute op after the next waits
  std::optional<OpId> last_compute_;
  OpLabels labels_;
  std::string prefix_;  // prepended to op names: "fwd.L12.", "bwd.L3.", "recompute.L3."
  std::vector<OpId> dp_ops_;          // every data-parallel op (the optimizer waits for them)
  int64_t bucket_params_ = 0;
  int64_t bucket_expert_params_ = 0;
  int bucket_index_ = 0;
  std::map<int64_t, OpId> param_gather_;  // ZeRO-1/2: layer -> the all-gather of its bucket
  std::map<int64_t, bool> gathered_once_;
  std::vector<std::pair<int64_t, int64_t>> deferred_buckets_;  // (dense, expert) params
};

}  // namespace meshsim::workloads::detail
