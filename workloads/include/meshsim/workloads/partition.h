// The plan, partitioned once per pipeline stage (docs/style.md A.5: derive each fact once). The
// memory closed forms (training_memory.h), the kernel lowering (src/layer_ops*.cc) and the stage
// builder (src/stage_*.cc) all read a stage's facts from its StagePartition; none derives them
// again.
//
// Layers: stage s holds plan.stage_layers[s] consecutive layers when the plan states an uneven
// split, else L / PP; with VPP > 1 chunk c of stage s is virtual stage v (interleaved:
// v = c * PP + s; zbv: s, then 2 PP - 1 - s; pipeline.h's virtual_stage) and holds layers
// [v * L/(PP*VPP), (v + 1) * L/(PP*VPP)), or with an uneven split plan.stage_layers[v] layers
// after those of the virtual stages before it.
//
// Parameters held by one rank of the stage before ZeRO sharding (Megatron-LM layout, Shoeybi et al.
// 2019, Narayanan et al. 2021): Q, K, V, gate/up and fc1 are column-parallel (weights and biases
// split over TP); the output projection, down and fc2 are row-parallel (weights split, biases
// replicated); norms, the router and the position table are replicated; the token embedding and
// the LM head are split over the vocabulary, ceil(V / TP) rows per rank (Megatron pads the
// vocabulary to a multiple of TP). Key/value heads split over TP when TP divides them, else each
// rank holds one (replicated). The stage of virtual stage 0 holds the embeddings; that of the last
// virtual stage (the last stage; zbv: stage 0 again) the final norm and the LM head (with tied
// embeddings: nothing more on a stage that also holds the embedding, whose head it is; a copy of
// the embedding on another last stage, as Megatron keeps). Experts split over EP (E / EP per
// rank) and over TP inside each expert.
//
// Activations per microbatch on one rank: the per-layer terms of training_memory.h
// (layer_activations) under the plan's recompute policy, and the terms outside the layers
// (outside_layer_activations) on the stages that hold the embedding and the head.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "meshsim/sim/units.h"
#include "meshsim/workloads/expert_load.h"
#include "meshsim/workloads/model.h"
#include "meshsim/workloads/parallel.h"

namespace meshsim::workloads {

// How a TP group splits one layer's widths (and the vocabulary).
struct ShardWidths {
  int64_t q_heads = 0;   // a / t
  int64_t kv_heads = 0;  // g / t, or 1 when t > g (replicated)
  int64_t d_ff = 0;      // f / t (the dense MLP)
  int64_t expert_d_ff = 0;  // f_e / t (one routed expert; 0 for dense models)
  int64_t shared_d_ff = 0;  // n_s * f_s / t (the shared experts as one MLP; 0 without)
  int64_t vocab = 0;     // ceil(V / t)
};

// Tokens a rank of the stage computes on per microbatch.
struct StageTokens {
  int64_t per_rank = 0;    // T = b * s / CP
  int64_t sequence = 0;    // T / TP with sequence parallelism, else T: norms, residuals
};

// [first, end): layers of one model chunk.
struct LayerRange {
  int64_t first = 0;
  int64_t end = 0;
  int64_t size() const { return end - first; }
};

// One layer's parameters on one rank of the stage, and, for an MoE layer, the tokens its
// experts receive (expert_load.h: drawn once per plan and layer).
struct LayerShare {
  int64_t layer = 0;   // global index
  int64_t dense = 0;   // non-expert parameters (attention, norms, dense MLP or router, shared)
  int64_t expert = 0;  // expert parameters (E / EP routed experts)
  std::optional<ExpertLoad> load;
  int64_t total() const { return dense + expert; }
};

struct StageParameters {
  std::vector<LayerShare> by_layer;  // the stage's layers, chunk by chunk
  int64_t embedding = 0;         // token and position tables (stage 0)
  int64_t head = 0;              // final norm and LM head or its tied copy (last stage)
  int64_t mtp = 0;               // multi-token prediction modules (last stage)
  int64_t layers = 0;            // layers on the stage (all chunks)
  // The MoE block of the MTP modules (last stage): the last layer's shape and expert load, which
  // the stage need not hold (a last virtual stage of only the head).
  std::optional<LayerShare> mtp_block;

  // Layer `layer` of the stage, or the MTP modules' block of the last layer's shape
  // (InternalError if the stage holds neither).
  const LayerShare& of(int64_t layer) const;
  int64_t dense() const;  // all non-expert parameters of the stage, embedding, head and MTP too
  int64_t expert() const;
  int64_t total() const { return dense() + expert(); }
};

// What one layer of the stage keeps for its backward, per microbatch on one rank.
struct LayerSaved {
  int64_t layer = 0;
  // Kept from its forward to its backward under the plan's recompute policy (full recompute:
  // only its input).
  Bytes saved;
  // Materialised by its forward for its backward (the plan's policy; none under full recompute,
  // whose backward re-materialises it one layer at a time).
  Bytes materialised;
  bool full_recompute = false;  // the layer's backward re-runs its forward first
  bool offloaded = false;       // `saved` waits in host memory between forward and backward
};

struct StageActivations {
  std::vector<LayerSaved> by_layer;  // the stage's layers, chunk by chunk
  const LayerSaved& of(int64_t layer) const;
  Bytes saved_layers() const;           // sum over the stage's layers
  Bytes max_materialised() const;  // the largest working set of a fully recomputed layer
  Bytes offloaded_layers() const;  // sum of `saved` over the offloaded layers
  Bytes max_offloaded() const;     // the largest `saved` of an offloaded layer
  Bytes embedding;  // saved outside the layers on the stage holding the embedding
  Bytes head;       // final norm input, LM head input and logits on the last stage
  Bytes outside() const { return embedding + head; }
};

// The flex dispatcher's route (parallel.h MoeDispatcher::kFlex): the EP group's ranks per node
// and its nodes, and the nodes one token's copies reach: the routing groups' bound, or uniform
// routing's expectation when that is fewer.
struct FlexRoute {
  int64_t per_node = 1;
  int64_t nodes = 1;
  double node_copies = 1.0;
};
// Of a plan that passed validate_split with an MoE model, EP > 1 and the flex dispatcher.
FlexRoute flex_route(const ModelConfig& model, const ParallelPlan& plan);

struct StagePartition {
  int64_t stage = 0;
  bool first = false;  // holds the embedding
  bool last = false;   // holds the final norm, the LM head and the loss
  std::vector<LayerRange> chunks;  // one per model chunk on the stage (VPP entries)
  ShardWidths widths;
  StageTokens tokens;
  StageParameters params;
  StageActivations activations;
  std::optional<FlexRoute> flex;  // MoE under the flex dispatcher with EP > 1
};

// The transformer layers per stage of DeepSpeed's PipelineModule with partition_method
// "type:transformer", Megatron-DeepSpeed's default (megatron/model/gpt_model.py @ 0f23a729), for
// `layers` transformer layers between `leading` and `trailing` other layer specs (GPTModelPipe: 3
// before, the input cast, the embedding and a transpose; 4 after in 16-bit training, the
// transpose back, the final LayerNorm, the tied head and the output cast). The layer specs weigh
// 1 each for a transformer layer, 0 otherwise, and deepspeed/runtime/utils.py's partition_balanced
// (@ v0.6.5; unchanged from 65c2f974d, 2020-09, until 2bdf061f4, 2023-12) binary-searches the
// smallest heaviest-stage weight for which its greedy probe, stepping through the specs in
// windows of len / stages, fits every spec. Not always the most even split: 70 layers over 12
// stages are eleven of 6 and one of 4. stages >= 1, layers >= 1, leading and trailing >= 0.
std::vector<int64_t> deepspeed_type_partition(int64_t layers, int64_t stages, int64_t leading,
                                              int64_t trailing);

// Every stage of a plan. Checks that the plan splits the model (validate_split: PlanError).
std::vector<StagePartition> partition_stages(const ModelConfig& model, const ParallelPlan& plan);
// One stage (0 <= stage < pp, else InternalError). Checks the split.
StagePartition partition_stage(const ModelConfig& model, const ParallelPlan& plan, int64_t stage);

// The widths of a TP split and the tokens of a rank, without a full plan check (the sharding checks
// of validate_plan only: TP against heads and d_ff, SP and CP against the sequence).
ShardWidths shard_widths(const ModelConfig& model, const ParallelPlan& plan);
StageTokens stage_tokens(const ParallelPlan& plan);  // of a plan that passed validate_sharding

}  // namespace meshsim::workloads
