#include "meshsim/workloads/accounting.h"

#include <algorithm>

#include "meshsim/sim/checked.h"
#include "meshsim/sim/error.h"

namespace meshsim::workloads {

namespace {
int64_t h_squared(const ModelConfig& m) { return m.d_model * m.d_model; }
}  // namespace

int64_t norm_parameters(const ModelConfig& model) {
  return model.norm == NormKind::kRmsNorm ? model.d_model : 2 * model.d_model;
}

int64_t mlp_parameters(const ModelConfig& model, int64_t d_ff) {
  const int64_t h = model.d_model;
  if (is_gated(model.mlp)) {
    // gate and up: h x f each (bias f each); down: f x h (bias h).
    return 3 * h * d_ff + (model.mlp_bias ? 2 * d_ff + h : 0);
  }
  // fc1: h x f (bias f); fc2: f x h (bias h).
  return 2 * h * d_ff + (model.mlp_bias ? d_ff + h : 0);
}

namespace {

int64_t mlp_matrices(const ModelConfig& model) { return is_gated(model.mlp) ? 3 : 2; }

void attention_parameters(const ModelConfig& m, LayerParameters& p) {
  const int64_t h = m.d_model;
  if (m.mla) {
    const MlaConfig& a = *m.mla;
    p.q = a.q_lora_rank == 0 ? h * m.q_dim()
                             : h * a.q_lora_rank + a.q_lora_rank + a.q_lora_rank * m.q_dim();
    p.k = h * (a.kv_lora_rank + a.qk_rope_head_dim) + a.kv_lora_rank;
    p.v = a.kv_lora_rank * m.num_heads * (a.qk_nope_head_dim + a.v_head_dim);
  } else {
    const int64_t bias = m.attention_bias ? 1 : 0;
    p.q = h * m.q_dim() + bias * m.q_dim();
    p.k = h * m.kv_dim() + bias * m.kv_dim();
    p.v = h * m.kv_dim() + bias * m.kv_dim();
  }
  p.attention_out = m.attention_out_dim() * h + (m.attention_out_bias ? h : 0);
  p.qk_norms = m.qk_norm ? 2 * m.head_dim : 0;
}

// Shared experts run as one MLP of their summed width (DeepSeek's DeepseekV3MLP of
// n_shared * moe_intermediate_size; Qwen2-MoE's single shared expert).
int64_t shared_expert_parameters(const ModelConfig& m) {
  const MoeConfig& e = *m.moe;
  if (e.num_shared_experts == 0) {
    return 0;
  }
  return mlp_parameters(m, e.num_shared_experts * e.shared_expert_d_ff) +
         (e.shared_expert_gate ? m.d_model : 0);
}

}  // namespace

LayerParameters layer_parameters(const ModelConfig& m, int64_t layer) {
  const int64_t h = m.d_model;
  LayerParameters p;
  attention_parameters(m, p);
  if (m.is_moe_layer(layer)) {
    p.router = h * m.moe->num_experts + (m.moe->router_bias ? m.moe->num_experts : 0);
    p.expert = mlp_parameters(m, m.moe->expert_d_ff);
    p.num_experts = m.moe->num_experts;
    p.experts_per_token = m.moe->experts_per_token;
    p.shared_experts = shared_expert_parameters(m);
  } else {
    p.mlp = mlp_parameters(m, m.d_ff);
  }
  p.norms = m.norms_per_layer * norm_parameters(m);
  return p;
}

ParameterCounts count_parameters(const ModelConfig& m) {
  ParameterCounts c;
  c.num_layers = m.num_layers;
  c.layer = layer_parameters(m, m.num_layers - 1);
  if (m.moe && m.moe->first_dense_layers > 0) {
    c.num_dense_layers = m.moe->first_dense_layers;
    c.dense_layer = layer_parameters(m, 0);
  }
  c.token_embedding = m.vocab_size * m.d_model;
  c.position_embedding =
      m.positions == PositionKind::kLearned ? m.max_position_embeddings * m.d_model : 0;
  c.final_norm = norm_parameters(m);
  c.lm_head = m.tied_embeddings ? 0 : m.vocab_size * m.d_model;
  // DeepSeek-V3's MTP module: enorm, hnorm, eh_proj (2h -> h), one MoE block, a final norm; it
  // shares the embedding and the LM head with the model.
  c.vision = m.vision_parameters;
  c.mtp = m.mtp_layers * (3 * norm_parameters(m) + 2 * h_squared(m) + c.layer.total());
  return c;
}

int64_t total_parameters(const ModelConfig& model) { return count_parameters(model).total(); }

int64_t active_parameters_per_token(const ModelConfig& model) {
  return count_parameters(model).active_per_token();
}

int64_t layer_matmul_weights_per_token(const ModelConfig& m, int64_t layer) {
  const int64_t h = m.d_model;
  int64_t attention = 0;
  if (m.mla) {
    const MlaConfig& a = *m.mla;
    const int64_t q =
        a.q_lora_rank == 0 ? h * m.q_dim() : h * a.q_lora_rank + a.q_lora_rank * m.q_dim();
    attention = q + h * (a.kv_lora_rank + a.qk_rope_head_dim) +
                a.kv_lora_rank * m.num_heads * (a.qk_nope_head_dim + a.v_head_dim);
  } else {
    attention = h * m.q_dim() + 2 * h * m.kv_dim();
  }
  attention += m.attention_out_dim() * h;
  if (!m.is_moe_layer(layer)) {
    return attention + mlp_matrices(m) * h * m.d_ff;
  }
  const MoeConfig& e = *m.moe;
  const int64_t shared = e.num_shared_experts * e.shared_expert_d_ff;
  return attention + h * e.num_experts + (e.shared_expert_gate ? h : 0) +
         mlp_matrices(m) * h * (e.experts_per_token * e.expert_d_ff + shared);
}

int64_t matmul_weights_per_token(const ModelConfig& m) {
  int64_t layers = 0;
  if (m.moe && m.moe->first_dense_layers > 0) {
    layers = m.moe->first_dense_layers * layer_matmul_weights_per_token(m, 0);
  }
  const int64_t main_layers = m.num_layers - (m.moe ? m.moe->first_dense_layers : 0);
  layers += main_layers * layer_matmul_weights_per_token(m, m.num_layers - 1);
  const int64_t lm_head = m.vocab_size * m.d_model;
  return layers + lm_head;
}

double mean_attended_keys(int64_t seq_len, int64_t window, AttentionMask mask) {
  SIM_CHECK(seq_len > 0 && window >= 0, "sequence length {}, window {}", seq_len, window);
  const auto s = static_cast<double>(seq_len);
  if (window == 0 || window >= seq_len) {
    return mask == AttentionMask::kCausal ? s / 2.0 : s;
  }
  const auto w = static_cast<double>(window);
  return mask == AttentionMask::kCausal ? w - w * w / (2.0 * s) : w;
}

Flops attention_flops_per_token(const ModelConfig& m, int64_t layer, int64_t seq_len,
                                AttentionMask mask) {
  // QK^T: 2*c*q per token (each of c keys, a dot product of d_h elements per head); PV: 2*c*v.
  const double width = static_cast<double>(m.q_dim() + m.attention_out_dim());
  return Flops::of(2.0 * width * mean_attended_keys(seq_len, m.attention_window(layer), mask));
}

ForwardFlops forward_flops_per_token(const ModelConfig& m, int64_t seq_len, AttentionMask mask) {
  SIM_CHECK(seq_len > 0, "sequence length {} is not positive", seq_len);
  ForwardFlops f;
  f.matmul = Flops::of(2.0 * static_cast<double>(matmul_weights_per_token(m)));
  double attention = 0.0;
  for (int64_t layer = 0; layer < m.num_layers; ++layer) {
    attention += attention_flops_per_token(m, layer, seq_len, mask).count();
  }
  f.attention = Flops::of(attention);
  if (m.mtp_layers > 0) {
    // Per depth: the block (its matmuls and attention), eh_proj and another LM head pass.
    const int64_t last = m.num_layers - 1;
    const int64_t weights =
        layer_matmul_weights_per_token(m, last) + 2 * h_squared(m) + m.vocab_size * m.d_model;
    const double per_depth = 2.0 * static_cast<double>(weights) +
                             attention_flops_per_token(m, last, seq_len, mask).count();
    f.mtp = Flops::of(per_depth * static_cast<double>(m.mtp_layers));
  }
  return f;
}

Flops training_flops_per_token(const ModelConfig& model, int64_t seq_len, AttentionMask mask) {
  return forward_flops_per_token(model, seq_len, mask).total() * 3.0;
}

Flops forward_flops_per_token_2n(int64_t params) {
  return Flops::of(2.0 * static_cast<double>(params));
}

Flops training_flops_per_token_6n(int64_t params) {
  return Flops::of(6.0 * static_cast<double>(params));
}

Flops training_flops_6nd(int64_t params, int64_t tokens) {
  return Flops::of(6.0 * static_cast<double>(params) * static_cast<double>(tokens));
}

Bytes kv_cache_bytes(const KvCacheShape& shape, int64_t seq_len, int64_t batch,
                     int64_t bytes_per_element) {
  SIM_CHECK(seq_len >= 0 && batch >= 0 && bytes_per_element > 0,
            "KV cache of seq {} batch {} at {} bytes per element", seq_len, batch,
            bytes_per_element);
  return Bytes::of(checked_product({2, shape.num_layers, shape.num_kv_heads, shape.head_dim,
                                    seq_len, batch, bytes_per_element},
                                   "KV cache bytes"));
}

int64_t kv_cache_elements_per_token(const ModelConfig& m, int64_t /*layer*/) {
  if (m.mla) {
    return m.mla->kv_lora_rank + m.mla->qk_rope_head_dim;
  }
  return 2 * m.kv_dim();
}

Bytes kv_cache_bytes(const ModelConfig& m, int64_t seq_len, int64_t batch,
                     int64_t bytes_per_element) {
  SIM_CHECK(seq_len >= 0 && batch >= 0 && bytes_per_element > 0,
            "KV cache of seq {} batch {} at {} bytes per element", seq_len, batch,
            bytes_per_element);
  int64_t elements = 0;
  for (int64_t layer = 0; layer < m.num_layers; ++layer) {
    const int64_t window = m.attention_window(layer);
    const int64_t tokens = window == 0 ? seq_len : std::min(seq_len, window);
    elements = checked_add(
        elements, checked_product({kv_cache_elements_per_token(m, layer), tokens}, "KV cache bytes"),
        "KV cache bytes");
  }
  return Bytes::of(checked_product({elements, batch, bytes_per_element}, "KV cache bytes"));
}

}  // namespace meshsim::workloads
