#include "meshsim/workloads/accounting.h"

#include "meshsim/sim/checked.h"
#include "meshsim/sim/error.h"

namespace meshsim::workloads {

int64_t norm_parameters(const ModelConfig& model) {
  return model.norm == NormKind::kRmsNorm ? model.d_model : 2 * model.d_model;
}

int64_t mlp_parameters(const ModelConfig& model, int64_t d_ff) {
  const int64_t h = model.d_model;
  if (model.mlp == MlpKind::kGated) {
    // gate and up: h x f each (bias f each); down: f x h (bias h).
    return 3 * h * d_ff + (model.mlp_bias ? 2 * d_ff + h : 0);
  }
  // fc1: h x f (bias f); fc2: f x h (bias h).
  return 2 * h * d_ff + (model.mlp_bias ? d_ff + h : 0);
}

namespace {

int64_t mlp_matrices(const ModelConfig& model) { return model.mlp == MlpKind::kGated ? 3 : 2; }

LayerParameters layer_parameters(const ModelConfig& m) {
  const int64_t h = m.d_model;
  const int64_t bias = m.attention_bias ? 1 : 0;
  LayerParameters p;
  p.q = h * m.q_dim() + bias * m.q_dim();
  p.k = h * m.kv_dim() + bias * m.kv_dim();
  p.v = h * m.kv_dim() + bias * m.kv_dim();
  p.attention_out = m.q_dim() * h + bias * h;
  if (m.moe) {
    p.router = h * m.moe->num_experts;
    p.expert = mlp_parameters(m, m.d_ff);
    p.num_experts = m.moe->num_experts;
    p.experts_per_token = m.moe->experts_per_token;
  } else {
    p.mlp = mlp_parameters(m, m.d_ff);
  }
  p.norms = 2 * norm_parameters(m);
  return p;
}

}  // namespace

ParameterCounts count_parameters(const ModelConfig& m) {
  ParameterCounts c;
  c.num_layers = m.num_layers;
  c.layer = layer_parameters(m);
  c.token_embedding = m.vocab_size * m.d_model;
  c.position_embedding =
      m.positions == PositionKind::kLearned ? m.max_position_embeddings * m.d_model : 0;
  c.final_norm = norm_parameters(m);
  c.lm_head = m.tied_embeddings ? 0 : m.vocab_size * m.d_model;
  return c;
}

int64_t total_parameters(const ModelConfig& model) { return count_parameters(model).total(); }

int64_t active_parameters_per_token(const ModelConfig& model) {
  return count_parameters(model).active_per_token();
}

int64_t matmul_weights_per_token(const ModelConfig& m) {
  const int64_t h = m.d_model;
  const int64_t attention = h * m.q_dim() + 2 * h * m.kv_dim() + m.q_dim() * h;
  const int64_t mlp_one = mlp_matrices(m) * h * m.d_ff;
  const int64_t mlp = m.moe ? h * m.moe->num_experts + m.moe->experts_per_token * mlp_one : mlp_one;
  const int64_t lm_head = m.vocab_size * h;
  return m.num_layers * (attention + mlp) + lm_head;
}

ForwardFlops forward_flops_per_token(const ModelConfig& m, int64_t seq_len, AttentionMask mask) {
  SIM_CHECK(seq_len > 0, "sequence length {} is not positive", seq_len);
  ForwardFlops f;
  f.matmul = Flops::of(2.0 * static_cast<double>(matmul_weights_per_token(m)));
  // QK^T: 2*s*q per token (each of s keys, a dot product of q/a elements per head over a heads);
  // PV: the same again. Causal masking computes half of the score matrix.
  const double unmasked = 4.0 * static_cast<double>(seq_len) * static_cast<double>(m.q_dim());
  const double per_layer = mask == AttentionMask::kCausal ? unmasked / 2.0 : unmasked;
  f.attention = Flops::of(per_layer * static_cast<double>(m.num_layers));
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

Bytes kv_cache_bytes(const ModelConfig& model, int64_t seq_len, int64_t batch,
                     int64_t bytes_per_element) {
  return kv_cache_bytes(KvCacheShape{model.num_layers, model.num_kv_heads, model.head_dim}, seq_len,
                        batch, bytes_per_element);
}

}  // namespace meshsim::workloads
