// Exact accounting for a transformer: parameters, FLOPs per token, KV cache. Training memory per
// rank (model state and activations) is in training_memory.h, included here.
//
// Notation: L layers, h = d_model, a query heads, g key/value heads, d_h = head_dim,
// q = a*d_h (width of Q and of the attention output), kv = g*d_h, f = d_ff, V = vocab,
// P = max_position_embeddings, E experts, k = experts per token, s = sequence length.
//
// Parameters (all exact integers):
//   token embedding      V*h
//   position embedding   P*h for learned positions (GPT-2/3), 0 for RoPE
//   attention per layer  Q h*q, K h*kv, V h*kv, output q*h; with biases + q + 2kv + h
//   MLP per layer        gated (SwiGLU) 3*h*f, GeLU 2*h*f; with biases + 2f + h (gated) or
//                        + f + h (GeLU)
//   MoE per layer        router h*E (no bias, as Mixtral) + E experts, each an MLP as above
//   norms per layer      2 norms; RMSNorm h weights, LayerNorm 2h (weight and bias)
//   final norm           one norm
//   LM head              V*h, or 0 when tied to the token embedding
//   active per token     total - (E - k) experts per layer
// Checks: GPT-2 small 124,439,808; Llama-3-8B 8,030,261,248; Llama-3-70B 70,553,706,496;
// Mixtral-8x7B 46,702,792,704 total (12,879,925,248 active).
//
// FLOPs per token (a multiply-add is 2 FLOPs):
//   forward matmul     2 * (matmul weights a token passes through): Q, K, V, output, the MLP (or
//                      router + k experts), and the LM head (also when tied). The embedding
//                      lookup, position table, norms and biases are not matmuls.
//   forward attention  per layer 4*s*q for QK^T and PV if every query saw all s keys; causal
//                      masking halves it: 2*s*q (the FlashAttention / scaling-book convention;
//                      the exact causal count is 2*(s+1)*q, a 1/s difference).
//   training           3 x forward (backward = 2 x forward: gradients w.r.t. inputs and weights).
//   Model FLOPs only: activation recompute adds hardware FLOPs but not model FLOPs (MFU as
//   defined by Chowdhery et al. 2022, PaLM, appendix B).
//   Simplified conventions of the scaling workbook: 2N forward, 6N training per token, 6ND.
//
// KV cache: 2 (K and V) * L * g * d_h * s * batch * bytes_per_element.
#pragma once

#include <cstdint>

#include "meshsim/sim/units.h"
#include "meshsim/workloads/model.h"
#include "meshsim/workloads/training_memory.h"

namespace meshsim::workloads {

// One transformer block. All counts include biases where the model has them.
struct LayerParameters {
  int64_t q = 0;
  int64_t k = 0;
  int64_t v = 0;
  int64_t attention_out = 0;
  int64_t mlp = 0;     // dense MLP; 0 for MoE
  int64_t router = 0;  // 0 for dense
  int64_t expert = 0;  // one expert's MLP; 0 for dense
  int64_t num_experts = 0;
  int64_t experts_per_token = 0;
  int64_t norms = 0;  // the two pre-norms

  int64_t attention() const { return q + k + v + attention_out; }
  int64_t experts() const { return expert * num_experts; }
  int64_t total() const { return attention() + mlp + router + experts() + norms; }
  int64_t active() const { return attention() + mlp + router + expert * experts_per_token + norms; }
};

struct ParameterCounts {
  int64_t num_layers = 0;
  LayerParameters layer;  // each layer (all layers are identical)
  int64_t token_embedding = 0;
  int64_t position_embedding = 0;
  int64_t final_norm = 0;
  int64_t lm_head = 0;  // 0 when tied

  int64_t embeddings() const { return token_embedding + position_embedding; }
  int64_t attention() const { return num_layers * layer.attention(); }
  int64_t mlp() const { return num_layers * layer.mlp; }
  int64_t router() const { return num_layers * layer.router; }
  int64_t experts() const { return num_layers * layer.experts(); }
  int64_t norms() const { return num_layers * layer.norms + final_norm; }
  int64_t total() const { return embeddings() + num_layers * layer.total() + final_norm + lm_head; }
  int64_t active_per_token() const {
    return embeddings() + num_layers * layer.active() + final_norm + lm_head;
  }
};

ParameterCounts count_parameters(const ModelConfig& model);
int64_t total_parameters(const ModelConfig& model);
int64_t active_parameters_per_token(const ModelConfig& model);

// Parameters of one MLP of inner width `d_ff` (a dense MLP, or one expert, or a tensor-parallel
// shard of one when d_ff is the local width): matrices plus biases.
int64_t mlp_parameters(const ModelConfig& model, int64_t d_ff);
// Parameters of one norm: h (RMSNorm) or 2h (LayerNorm).
int64_t norm_parameters(const ModelConfig& model);

// Matmul weights a token passes through in the forward pass (see the file comment): the
// quantity forward matmul FLOPs are twice of.
int64_t matmul_weights_per_token(const ModelConfig& model);

enum class AttentionMask {
  kCausal,  // decoder training and prefill: half of the s x s scores are computed
  kFull,    // no masking (also the convention of Megatron's and PaLM's MFU formulas)
};

struct ForwardFlops {
  Flops matmul;     // 2 * matmul_weights_per_token
  Flops attention;  // QK^T and PV over all layers
  Flops total() const { return matmul + attention; }
};

// Per token of a sequence of `seq_len` tokens.
ForwardFlops forward_flops_per_token(const ModelConfig& model, int64_t seq_len,
                                     AttentionMask mask = AttentionMask::kCausal);
// 3 x forward_flops_per_token.
Flops training_flops_per_token(const ModelConfig& model, int64_t seq_len,
                               AttentionMask mask = AttentionMask::kCausal);

// The workbook's simplified conventions: 2N forward and 6N training FLOPs per token, 6ND for a
// run of D tokens (N = parameters, usually the active ones).
Flops forward_flops_per_token_2n(int64_t params);
Flops training_flops_per_token_6n(int64_t params);
Flops training_flops_6nd(int64_t params, int64_t tokens);

struct KvCacheShape {
  int64_t num_layers = 0;
  int64_t num_kv_heads = 0;
  int64_t head_dim = 0;
};

// 2 * layers * kv_heads * head_dim * seq_len * batch * bytes_per_element, exact.
Bytes kv_cache_bytes(const KvCacheShape& shape, int64_t seq_len, int64_t batch,
                     int64_t bytes_per_element);
Bytes kv_cache_bytes(const ModelConfig& model, int64_t seq_len, int64_t batch,
                     int64_t bytes_per_element);

}  // namespace meshsim::workloads
