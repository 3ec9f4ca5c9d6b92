#include "meshsim/validation/published_flops.h"

namespace meshsim::validation {

Flops megatron2021_iteration_flops(int64_t batch, int64_t seq, int64_t layers, int64_t hidden,
                                   int64_t vocab) {
  const auto b = static_cast<double>(batch);
  const auto s = static_cast<double>(seq);
  const auto l = static_cast<double>(layers);
  const auto h = static_cast<double>(hidden);
  const auto v = static_cast<double>(vocab);
  return Flops::of(96.0 * b * s * l * h * h * (1.0 + s / (6.0 * h) + v / (16.0 * l * h)));
}

Flops megatron_deepspeed_iteration_flops(int64_t batch, int64_t seq, int64_t layers, int64_t hidden,
                                         int64_t vocab, bool glu, bool checkpointed) {
  const double factor = (glu ? 32.0 : 24.0) * (checkpointed ? 4.0 : 3.0) / 96.0;
  return megatron2021_iteration_flops(batch, seq, layers, hidden, vocab) * factor;
}

Flops maxtext2023_flops_per_device(int64_t parameters, int64_t per_device_batch, int64_t seq,
                                   int64_t heads, int64_t layers, int64_t head_dim) {
  const auto n = static_cast<double>(parameters);
  const auto b = static_cast<double>(per_device_batch);
  const auto len = static_cast<double>(seq);
  const double weights = 6.0 * n * len * b;
  const double noncausal_attention = 12.0 * static_cast<double>(heads) *
                                     static_cast<double>(layers) * static_cast<double>(head_dim) *
                                     len * len * b;
  return Flops::of(weights + noncausal_attention / 2.0);
}

int64_t maxtext2023_parameters(int64_t vocab, int64_t emb, int64_t heads, int64_t head_dim,
                               int64_t mlp, int64_t layers, int64_t mlp_activations) {
  const int64_t attention = 4 * emb * heads * head_dim;
  const int64_t mlp_weights = (mlp_activations + 1) * emb * mlp;
  return vocab * emb + layers * (emb + attention + mlp_weights) + emb;
}

Flops megatron_core08_iteration_flops(int64_t batch, int64_t seq, const MegatronCoreShape& m) {
  const auto d = [](int64_t v) { return static_cast<double>(v); };
  const double h = d(m.hidden);
  const double attention =
      (1.0 + d(m.query_groups) / d(m.heads) + d(seq) / h) * (d(m.kv_channels) * d(m.heads) / h);
  const double mlp = d(m.ffn) / h * d(m.experts_routed_to) * (m.gated ? 1.5 : 1.0);
  const double logit = d(m.vocab) / (2.0 * d(m.layers) * h);
  return Flops::of(12.0 * d(batch) * d(seq) * d(m.layers) * h * h * (attention + mlp + logit));
}

}  // namespace meshsim::validation
