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
// The parameters a rank holds, and its layers, are its stage's partition (partition.h): the layers
// the stage's program runs, also for an uneven stage_layers split. Dense state is ZeRO-sharded over
// the DP x CP ranks that reduce it; experts (EP is carved out of DP) over DP x CP / EP ranks.
//
// Activations per layer per microbatch (16-bit activations, e = 2 bytes per element; s sequence
// (of a context-parallel rank: s / CP), b microbatch, h hidden, a query heads, g KV heads, d_h head dim, f = d_ff, t = TP). Each term
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
//     routing weights; replicated unless SP); mlp_hidden and mlp_down_input times k, at the
//     expert width, plus once at the shared experts' width. The first dense layers of an MoE
//     model have the dense terms.
//   Variants: norm_inputs and norm_statistics count the block's norms (1, 2 or 4); MLA saves its
//     latents (e*s*b*(r_q + r_kv + d_r), replicated: the up-projections' inputs) and K, V and the
//     output at their own head dims.
// GPT (4h GeLU MLP, MHA, dropout), naive attention: 34*s*b*h + 5*a*s^2*b, the paper's formula;
// with TP: s*b*h*(10 + 24/t + 5*a*s/(h*t)); with TP and SP: s*b*h*(34/t + 5*a*s/(h*t)).
// Recompute: selective (the paper's) recomputes the attention core, dropping softmax_output and
// attention_dropout; full keeps only the layer input, e*s*b*h (divided by t with SP), and the
// backward then re-materialises one layer's activations at a time (`recompute_working_set`);
// full with recompute_num_layers N: the first N layers of each chunk as full, the others none;
// dots (JAX checkpoint_dots, MaxText "minimal"): drops norm_inputs, qkv_input, mlp_input and
// mlp_down_input (outputs of norms and of the activation function, recomputed) and keeps the
// layer input and the two projection outputs, 3*e*s*b*h (divided by t with SP).
// FP8 through Transformer Engine (the stack's fp8_saves_quantized_inputs): qkv_input, mlp_input
// and mlp_down_input are saved as FP8 casts, 1 byte per element; the output projection's FP8 cast
// of the attention output is saved beside its 16-bit copy (1 more byte per element).
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "meshsim/sim/units.h"
#include "meshsim/workloads/model.h"
#include "meshsim/workloads/parallel.h"
#include "meshsim/workloads/partition.h"

namespace meshsim::workloads {

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
  Bytes latents;  // MLA
  // The layer input (full recompute); with the attention output projection's result (dots,
  // qkv_out_proj).
  Bytes checkpoint;

  Bytes total() const;
};

// Under the plan's TP, SP, CP, microbatch, sequence, attention kernel and activation width, and
// the recompute policy `recompute` (default: the plan's). Throws PlanError when the plan cannot
// split the model (validate_sharding).
// Without `layer`: a layer of the model's main kind (its last layer: an MoE layer in an MoE
// model).
LayerActivations layer_activations(const ModelConfig& model, const ParallelPlan& plan);
LayerActivations layer_activations(const ModelConfig& model, const ParallelPlan& plan,
                                   Recompute recompute);
LayerActivations layer_activations(const ModelConfig& model, const ParallelPlan& plan,
                                   Recompute recompute, int64_t layer);

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
// On a stage that holds the embedding (`first`) and/or the head (`last`).
OutsideLayerActivations outside_layer_activations(const ModelConfig& model, const ParallelPlan& plan,
                                                  bool first, bool last);


struct TrainingMemory {
  Bytes weights;
  Bytes gradients;
  Bytes optimizer_states;
  // in_flight * (layers * layer_activations + outside_layer_activations), plus, with full
  // recompute, one layer's un-recomputed activations (the backward's working set); offloaded
  // layers count as two of them (one being copied out, one back) instead of one per layer.
  Bytes activations;
  Bytes model_state() const { return weights + gradients + optimizer_states; }
  Bytes total() const { return model_state() + activations; }
};

// One rank of `stage` holding the activations of `in_flight` microbatches (>= 1) at its peak.
TrainingMemory training_memory(const StagePartition& stage, const ParallelPlan& plan,
                               int64_t in_flight);
// The same for stage `stage` of a plan that splits the model (validate_split, PlanError
// otherwise); in flight by default as 1F1B holds them, PP - stage (GPipe holds all of the step's
// microbatches).
TrainingMemory training_memory(const ModelConfig& model, const ParallelPlan& plan,
                               int64_t stage = 0, std::optional<int64_t> in_flight = {});

// A lower bound on each stage's simulated peak memory per rank (one entry per stage of `parts`,
// the plan's partition_stages): its model state plus the activations its schedule must hold at
// once (max_in_flight_per_stage chunks) of its least-saving layer per chunk layer; offloaded
// layers, whose activations leave the device, are not counted. Never above the engine's peak.
std::vector<Bytes> least_peak_memory(const ParallelPlan& plan,
                                     const std::vector<StagePartition>& parts);

}  // namespace meshsim::workloads
