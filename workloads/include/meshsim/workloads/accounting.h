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
//   attention per layer  Q h*q, K h*kv, V h*kv, output q*h; biases + q + 2kv (attention_bias)
//                        and + h (attention_out_bias); QK norms + 2*d_h
//   MLA per layer        (DeepSeek, r_q = q_lora_rank, r_kv = kv_lora_rank, d_r = rope dim)
//                        Q: h*r_q + r_q (norm) + r_q*a*(d_n + d_r), or h*a*(d_n + d_r) when
//                        r_q = 0; K: h*(r_kv + d_r) + r_kv (the compressed latent, its norm);
//                        V: r_kv*a*(d_n + d_v) (decompressing K_nope and V); output a*d_v*h
//   MLP per layer        gated (SwiGLU/GeGLU) 3*h*f, plain (GeLU, ReLU^2) 2*h*f; with biases
//                        + 2f + h (gated) or + f + h (plain)
//   MoE per layer        router h*E (+ E router bias, DeepSeek-V3) + E routed experts of width
//                        f_e + shared experts (n_s of width f_s, as one MLP of n_s*f_s) + the
//                        shared-expert gate h (Qwen2-MoE); the first k layers have a dense MLP
//   norms per layer      1, 2 or 4 norms; RMSNorm h weights, LayerNorm 2h (weight and bias)
//   final norm           one norm
//   LM head              V*h, or 0 when tied to the token embedding
//   active per token     total - (E - k) routed experts per MoE layer
//   MTP (not in total)   per depth: two norms and a 2h x h projection, one MoE block, a norm
// Checks: GPT-2 small 124,439,808; Llama-3-8B 8,030,261,248; Llama-3-70B 70,553,706,496;
// Mixtral-8x7B 46,702,792,704 total (12,879,925,248 active); DeepSeek-V3 671,026,419,200; the
// Hugging Face configs of tests/workloads/hf_configs/ against their published totals.
//
// FLOPs per token (a multiply-add is 2 FLOPs):
//   forward matmul     2 * (matmul weights a token passes through): Q, K, V, output (MLA: its
//                      down- and up-projections), the MLP (or router + k experts + shared
//                      experts), and the LM head (also when tied). The embedding lookup,
//                      position table, norms and biases are not matmuls.
//   forward attention  per layer 2*(q + v)*c per token, c the keys a query sees on average:
//                      s/2 under causal masking (the FlashAttention / scaling-book convention;
//                      the exact causal count is (s+1)/2, a 1/s difference), s unmasked; a
//                      window W < s: W - W^2/(2s) causal (the pairs i - W < j <= i), W unmasked.
//                      q = v = a*d_h for MHA/GQA/MQA (4*s*q/2 = 2*s*q causal); MLA scores over
//                      d_n + d_r and sums over d_v per head (the non-absorbed form that training
//                      runs).
//   MTP (training)     per depth: one more block (attention + MoE), the 2h x h projection and
//                      another LM head pass.
//   training           3 x forward (backward = 2 x forward: gradients w.r.t. inputs and weights).
//   Model FLOPs only: activation recompute adds hardware FLOPs but not model FLOPs (MFU as
//   defined by Chowdhery et al. 2022, PaLM, appendix B).
//   Simplified conventions of the scaling workbook: 2N forward, 6N training per token, 6ND.
//
// KV cache per layer and token: 2 (K and V) * g * d_h; MLA caches the normed latent and the
// shared RoPE key, r_kv + d_r (DeepSeek-V2 Sec. 2.1.2); a windowed layer holds at most W tokens.
#pragma once

#include <cstdint>

#include "meshsim/sim/units.h"
#include "meshsim/workloads/model.h"
#include "meshsim/workloads/training_memory.h"

namespace meshsim::workloads {

// One transformer block. All counts include biases where the model has them.
struct LayerParameters {
  int64_t q = 0;  // MLA: Q down-projection, its norm, Q up-projection
  int64_t k = 0;  // MLA: the KV down-projection (latent + RoPE key) and its norm
  int64_t v = 0;  // MLA: the KV up-projection (K_nope and V of every head)
  int64_t attention_out = 0;
  int64_t qk_norms = 0;        // Q and K norms over head_dim
  int64_t mlp = 0;             // dense MLP; 0 for MoE
  int64_t router = 0;          // router (+ its bias vector); 0 for dense
  int64_t expert = 0;          // one routed expert's MLP; 0 for dense
  int64_t shared_experts = 0;  // the shared experts and their gate; always active
  int64_t num_experts = 0;
  int64_t experts_per_token = 0;
  int64_t norms = 0;  // the block's norms

  int64_t attention() const { return q + k + v + attention_out + qk_norms; }
  int64_t experts() const { return expert * num_experts; }
  int64_t total() const { return attention() + mlp + router + experts() + shared_experts + norms; }
  int64_t active() const {
    return attention() + mlp + router + expert * experts_per_token + shared_experts + norms;
  }
};

struct ParameterCounts {
  int64_t num_layers = 0;
  LayerParameters layer;         // each layer of the main kind (the MoE layers of an MoE model)
  int64_t num_dense_layers = 0;  // layers of an MoE model with a dense MLP (the first k)
  LayerParameters dense_layer;   // one of them (zeros when there are none)
  int64_t token_embedding = 0;
  int64_t position_embedding = 0;
  int64_t final_norm = 0;
  int64_t lm_head = 0;  // 0 when tied
  int64_t mtp = 0;      // multi-token prediction modules (not part of the model's total)
  int64_t vision = 0;   // a multimodal checkpoint's vision tower (not part of the total)

  int64_t main_layers() const { return num_layers - num_dense_layers; }
  int64_t embeddings() const { return token_embedding + position_embedding; }
  int64_t attention() const {
    return main_layers() * layer.attention() + num_dense_layers * dense_layer.attention();
  }
  int64_t mlp() const { return main_layers() * layer.mlp + num_dense_layers * dense_layer.mlp; }
  int64_t router() const { return main_layers() * layer.router; }
  int64_t experts() const { return main_layers() * layer.experts(); }
  int64_t shared_experts() const { return main_layers() * layer.shared_experts; }
  int64_t norms() const {
    return main_layers() * layer.norms + num_dense_layers * dense_layer.norms + final_norm;
  }
  int64_t layers_total() const {
    return main_layers() * layer.total() + num_dense_layers * dense_layer.total();
  }
  int64_t total() const { return embeddings() + layers_total() + final_norm + lm_head; }
  // What a multimodal checkpoint holds: the language model and the vision tower.
  int64_t with_vision() const { return total() + vision; }
  int64_t active_per_token() const {
    return embeddings() + main_layers() * layer.active() + num_dense_layers * dense_layer.active() +
           final_norm + lm_head;
  }
};

// The parameters of layer `layer` (0-based): a dense or an MoE block.
LayerParameters layer_parameters(const ModelConfig& model, int64_t layer);

ParameterCounts count_parameters(const ModelConfig& model);
int64_t total_parameters(const ModelConfig& model);
int64_t active_parameters_per_token(const ModelConfig& model);

// Parameters of one MLP of inner width `d_ff` (a dense MLP, or one expert, or a tensor-parallel
// shard of one when d_ff is the local width): matrices plus biases.
int64_t mlp_parameters(const ModelConfig& model, int64_t d_ff);
// Parameters of one norm: h (RMSNorm) or 2h (LayerNorm).
int64_t norm_parameters(const ModelConfig& model);

// Matmul weights a token passes through in the forward pass (see the file comment): the
// quantity forward matmul FLOPs are twice of (MTP modules excluded).
int64_t matmul_weights_per_token(const ModelConfig& model);
// The same for one layer: its attention projections and its MLP (router and k experts).
int64_t layer_matmul_weights_per_token(const ModelConfig& model, int64_t layer);

enum class AttentionMask {
  kCausal,  // decoder training and prefill: half of the s x s scores are computed
  kFull,    // no masking (also the convention of Megatron's and PaLM's MFU formulas)
};

struct ForwardFlops {
  Flops matmul;     // 2 * matmul_weights_per_token
  Flops attention;  // QK^T and PV over all layers
  Flops mtp;        // the multi-token prediction modules' matmuls and attention (training)
  Flops total() const { return matmul + attention + mtp; }
};

// Keys a query sees on average in a sequence of `seq_len` (see the file comment), for a layer
// with attention window `window` (0: none).
double mean_attended_keys(int64_t seq_len, int64_t window, AttentionMask mask);
// QK^T and PV FLOPs of one token in layer `layer`.
Flops attention_flops_per_token(const ModelConfig& model, int64_t layer, int64_t seq_len,
                                AttentionMask mask = AttentionMask::kCausal);

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
// Elements one token adds to layer `layer`'s cache: 2*g*d_h, or r_kv + d_r under MLA.
int64_t kv_cache_elements_per_token(const ModelConfig& model, int64_t layer);
// Sum over layers of elements_per_token * min(seq_len, window) * batch * bytes_per_element.
Bytes kv_cache_bytes(const ModelConfig& model, int64_t seq_len, int64_t batch,
                     int64_t bytes_per_element);

}  // namespace meshsim::workloads
