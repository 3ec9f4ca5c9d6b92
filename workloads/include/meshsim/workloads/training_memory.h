// Training memory per rank as closed forms: model state (weights, gradients, optimizer states,
// sharded by TP, PP, EP and ZeRO) and activations saved for the backward pass. The simulator's
// peak comes from its memory ledger; these formulas are the reference it is checked against.
//
// Model state, per parameter held by the rank (ZeRO paper, Rajbhandari et al. 2020, Sec. 3 with
// K = 12; the scaling workbook's "16 bytes per parameter"):
//   weight     2 bytes  bf16 working copy                     sharded over DP at ZeRO-3
//   gradient   2 bytes  bf16 gradient                         sharded over DP at ZeRO-2 and 3
//   optimizer 12 bytes  fp32 master weight + Adam m + Adam v  sharded over DP at ZeRO-1, 2, 3
// (Megatron's default accumulates gradients in fp32 main_grad buffers: set gradient = 4.)
// Sharded amounts round up (ZeRO pads flat buffers to the DP degree).
//
// Parameters held by a rank (Megatron-LM layout, Shoeybi et al. 2019, Narayanan et al. 2021):
// Q, K, V, gate/up and fc1 are column-parallel (weights and biases split over TP); the output
// projection, down and fc2 are row-parallel (weights split, biases replicated); norms, the
// router and the position table are replicated; the token embedding and LM head are split over
// the vocabulary. Key/value heads split over TP when TP divides them, else each rank holds one
// (replicated). Stage 0 holds the embeddings, the last stage the final norm and the LM head
// (with tied embeddings and PP > 1, a copy of the embedding, as Megatron keeps). Stage i holds
// floor(L/PP) layers, plus one if i < L mod PP. Experts split over EP (E/EP per rank) and over
// TP inside each expert; EP is carved out of DP, so experts are ZeRO-sharded over DP/EP ranks.
//
// Activations per layer per microbatch (16-bit activations, e = 2 bytes per element; s sequence,
// b microbatch, h hidden, a query heads, g KV heads, d_h head dim, f = d_ff, t = TP). Each term
// is a tensor saved for backward (Korthikanti et al. 2022, "Reducing Activation Recomputation in
// Large Transformer Models", Sec. 4.1), generalised to GQA, SwiGLU and MoE:
//   replicated over TP, or divided by t with sequence parallelism:
//     norm_inputs       2 * e*s*b*h   inputs of the two pre-norms
//     norm_statistics   2 * s*b*4     LayerNorm mean+rstd (8 bytes/row) or RMSNorm rstd (4), fp32
//                                     (O(s*b); not in the paper, which neglects them)
//     qkv_input         e*s*b*h       normed input of the QKV projection (its weight gradient)
//     mlp_input         e*s*b*h       normed input of the MLP (or router and experts)
//     dropout_masks     2 * s*b*h     1-byte masks of the two residual dropouts (if dropout)
//   divided by t (heads and d_ff are split):
//     q, k, v           e*s*b*a*d_h, e*s*b*g*d_h, e*s*b*g*d_h (post-RoPE; RoPE saves nothing)
//     attention_output  e*s*b*a*d_h   softmax(QK^T)V: the output projection's input, also the
//                                     O that FlashAttention's backward needs (one tensor)
//     softmax_output    e*a*s^2*b     naive attention only: for the softmax and PV backward
//     attention_dropout (1+e)*a*s^2*b naive with dropout: the mask and the dropped probabilities
//     softmax_statistics 4*a*s*b      FlashAttention only: fp32 log-sum-exp per row and head
//     mlp_hidden        e*s*b*f       GeLU input; SwiGLU: 2*e*s*b*f (gate and up outputs, the
//                                     fused SwiGLU's saved input)
//     mlp_down_input    e*s*b*f       activation output, input of fc2 / down
//   MoE (replaces the dense MLP terms; balanced routing, no dropped tokens): router_logits
//     4*s*b*E (fp32, replicated unless SP); expert_inputs and expert_outputs k*e*s*b*h each (the
//     permuted copies for the experts' weight gradients and the combine's gradient w.r.t. the
//     routing weights; replicated unless SP); mlp_hidden and mlp_down_input times k.
// GPT (4h GeLU MLP, MHA, dropout), naive attention: 34*s*b*h + 5*a*s^2*b, the paper's formula;
// with TP: s*b*h*(10 + 24/t + 5*a*s/(h*t)); with TP and SP: s*b*h*(34/t + 5*a*s/(h*t)).
// Recompute: selective (the paper's) recomputes the attention core, dropping softmax_output and
// attention_dropout; full keeps only the layer input, e*s*b*h (divided by t with SP), and the
// backward then re-materialises one layer's activations at a time (`recompute_working_set`).
#pragma once

#include <cstdint>
#include <optional>

#include "meshsim/sim/units.h"
#include "meshsim/workloads/model.h"

namespace meshsim::workloads {

enum class AttentionKernel { kFlash, kNaive };
constexpr auto enum_names(AttentionKernel) {
  return std::to_array<EnumName<AttentionKernel>>(
      {{AttentionKernel::kFlash, "flash"}, {AttentionKernel::kNaive, "naive"}});
}
enum class Recompute { kNone, kSelective, kFull };
constexpr auto enum_names(Recompute) {
  return std::to_array<EnumName<Recompute>>(
      {{Recompute::kNone, "none"}, {Recompute::kSelective, "selective"}, {Recompute::kFull, "full"}});
}
enum class ZeroStage { kNone = 0, kOptimizerStates = 1, kGradients = 2, kParameters = 3 };

struct ParallelLayout {
  int64_t tensor_parallel = 1;
  bool sequence_parallel = false;
  int64_t pipeline_parallel = 1;
  int64_t pipeline_stage = 0;  // 0-based: the stage whose rank is described
  int64_t data_parallel = 1;
  int64_t expert_parallel = 1;  // divides data_parallel and num_experts
  ZeroStage zero = ZeroStage::kNone;
};

struct ActivationOptions {
  int64_t seq_len = 0;      // s
  int64_t micro_batch = 1;  // b
  AttentionKernel attention = AttentionKernel::kFlash;
  Recompute recompute = Recompute::kNone;
  int64_t bytes_per_element = 2;  // e
};

// One layer, one microbatch, one rank (see the file comment for each term).
struct LayerActivations {
  Bytes norm_inputs;
  Bytes norm_statistics;
  Bytes qkv_input;
  Bytes mlp_input;
  Bytes dropout_masks;
  Bytes q;
  Bytes k;
  Bytes v;
  Bytes attention_output;
  Bytes softmax_output;
  Bytes attention_dropout;
  Bytes softmax_statistics;
  Bytes mlp_hidden;
  Bytes mlp_down_input;
  Bytes router_logits;
  Bytes expert_inputs;
  Bytes expert_outputs;
  Bytes checkpoint;  // full recompute: the layer input

  Bytes total() const;
};

// Throws InfeasibleError when the layout cannot split the model (TP not dividing the query heads
// or d_ff, SP with s not divisible by t).
LayerActivations layer_activations(const ModelConfig& model, const ActivationOptions& options,
                                   const ParallelLayout& layout = {});

// Activations outside the layers, per microbatch (Korthikanti Sec. 4.3): stage 0 keeps the
// embedding dropout mask s*b*h (if dropout); the last stage keeps the final norm's input and the
// LM head's input (e*s*b*h each) and the fp32 softmax of the vocabulary-parallel cross entropy,
// 4*s*b*V/t. The first two are divided by t with SP.
struct OutsideLayerActivations {
  Bytes embedding_dropout_mask;
  Bytes final_norm_input;
  Bytes lm_head_input;
  Bytes logits;
  Bytes total() const;
};
OutsideLayerActivations outside_layer_activations(const ModelConfig& model,
                                                  const ActivationOptions& options,
                                                  const ParallelLayout& layout = {});

struct ModelStateBytes {
  int64_t weight = 2;
  int64_t gradient = 2;
  int64_t optimizer = 12;
};

// Parameters the rank holds before ZeRO sharding; experts kept apart because they shard over
// DP/EP rather than DP.
struct RankParameters {
  int64_t dense = 0;
  int64_t expert = 0;
  int64_t layers = 0;  // layers on the rank's stage
  int64_t total() const { return dense + expert; }
};
RankParameters parameters_per_rank(const ModelConfig& model, const ParallelLayout& layout);

struct TrainingMemoryOptions {
  ParallelLayout layout;
  ActivationOptions activations;
  ModelStateBytes state;
  // Microbatches whose activations a stage holds at its peak. Default: 1F1B, PP - stage (stage 0
  // holds PP). GPipe holds all of the step's microbatches.
  std::optional<int64_t> in_flight_microbatches;
};

struct TrainingMemory {
  Bytes weights;
  Bytes gradients;
  Bytes optimizer_states;
  // in_flight * (layers * layer_activations + outside_layer_activations), plus, with full
  // recompute, one layer's un-recomputed activations (the backward's working set).
  Bytes activations;
  Bytes model_state() const { return weights + gradients + optimizer_states; }
  Bytes total() const { return model_state() + activations; }
};

TrainingMemory training_memory_per_rank(const ModelConfig& model,
                                        const TrainingMemoryOptions& options);

}  // namespace meshsim::workloads
