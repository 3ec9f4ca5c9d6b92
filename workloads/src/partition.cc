// The per-stage partition of a plan; what each fact means is in partition.h.
#include "meshsim/workloads/partition.h"

#include <algorithm>
#include <numeric>

#include "meshsim/sim/error.h"
#include "meshsim/workloads/accounting.h"
#include "meshsim/workloads/training_memory.h"

namespace meshsim::workloads {
namespace {

std::vector<LayerRange> chunks_of(const ModelConfig& m, const ParallelPlan& p, int64_t stage) {
  if (p.vpp == 1) {
    const std::vector<int64_t> split =
        p.stage_layers.empty()
            ? std::vector<int64_t>(static_cast<size_t>(p.pp), m.num_layers / p.pp)
            : p.stage_layers;
    const auto here = static_cast<size_t>(stage);
    const int64_t first = std::accumulate(split.begin(), split.begin() + stage, int64_t{0});
    return {LayerRange{first, first + split[here]}};
  }
  const int64_t per = m.num_layers / (p.pp * p.vpp);
  std::vector<LayerRange> out;
  for (int64_t chunk = 0; chunk < p.vpp; ++chunk) {
    const int64_t v = virtual_stage(p.pipeline(), stage, chunk);
    if (p.stage_layers.empty()) {
      out.push_back(LayerRange{v * per, (v + 1) * per});
      continue;
    }
    // Uneven: stage_layers per virtual stage, in virtual-stage order.
    const auto at = p.stage_layers.begin() + v;
    const int64_t first = std::accumulate(p.stage_layers.begin(), at, int64_t{0});
    out.push_back(LayerRange{first, first + *at});
  }
  return out;
}

// One layer's attention parameters on one TP rank: column-parallel weights and biases split,
// row-parallel biases and norms replicated. MLA (Megatron-Core MLASelfAttention): the down-
// projections and their norms are replicated ("duplicated"), the up-projections column-parallel
// by heads.
int64_t attention_params(const ModelConfig& m, const ShardWidths& w) {
  const int64_t h = m.d_model;
  const int64_t q = w.q_heads * m.head_dim;
  const int64_t out = (m.attention_out_bias ? h : 0) + (m.qk_norm ? 2 * m.head_dim : 0);
  if (m.mla) {
    const MlaConfig& a = *m.mla;
    const int64_t q_path =
        a.q_lora_rank == 0 ? h * q : h * a.q_lora_rank + a.q_lora_rank + a.q_lora_rank * q;
    return q_path + h * (a.kv_lora_rank + a.qk_rope_head_dim) + a.kv_lora_rank +
           a.kv_lora_rank * w.q_heads * (a.qk_nope_head_dim + a.v_head_dim) +
           w.q_heads * a.v_head_dim * h + out;
  }
  const int64_t kv = w.kv_heads * m.head_dim;
  const int64_t bias = m.attention_bias ? 1 : 0;
  return h * q + 2 * h * kv + q * h + bias * (q + 2 * kv) + out;
}

// One layer's non-expert parameters on one TP rank: attention, norms and the dense MLP, or the
// router (replicated) and the shared experts (split like a dense MLP; their gate replicated).
// mlp_parameters(m, f/t) counts the row-parallel output bias (h) once per rank: it is
// replicated, so that is right for every TP degree.
int64_t dense_layer_params(const ModelConfig& m, const ShardWidths& w, int64_t layer) {
  const int64_t h = m.d_model;
  int64_t p = attention_params(m, w) + m.norms_per_layer * norm_parameters(m);
  if (m.is_moe_layer(layer)) {
    const MoeConfig& e = *m.moe;
    p += h * e.num_experts + (e.router_bias ? e.num_experts : 0);
    if (w.shared_d_ff > 0) {
      p += mlp_parameters(m, w.shared_d_ff) + (e.shared_expert_gate ? h : 0);
    }
  } else {
    p += mlp_parameters(m, w.d_ff);
  }
  return p;
}

int64_t expert_layer_params(const ModelConfig& m, const ParallelPlan& p, const ShardWidths& w,
                            int64_t layer) {
  return m.is_moe_layer(layer) ? (m.moe->num_experts / p.ep) * mlp_parameters(m, w.expert_d_ff) : 0;
}

StageParameters parameters_of(const ModelConfig& m, const ParallelPlan& p,
                              const StagePartition& s) {
  StageParameters out;
  for (const LayerRange& c : s.chunks) {
    out.layers += c.size();
    for (int64_t layer = c.first; layer < c.end; ++layer) {
      out.by_layer.push_back(LayerShare{
          layer, dense_layer_params(m, s.widths, layer), expert_layer_params(m, p, s.widths, layer),
          m.is_moe_layer(layer) ? std::optional(expert_load(m, p, layer)) : std::nullopt});
    }
  }
  const int64_t vocab_table = s.widths.vocab * m.d_model;
  if (s.first) {
    out.embedding = vocab_table;
    out.embedding +=
        m.positions == PositionKind::kLearned ? m.max_position_embeddings * m.d_model : 0;
  }
  if (s.last) {
    out.head = norm_parameters(m);
    // Untied: the LM head. Tied across stages: Megatron's copy of the embedding. Tied on one
    // stage: the embedding is the head.
    if (!m.tied_embeddings || !s.first) {
      out.head += vocab_table;
    }
    // MTP modules sit after the last layer (DeepSeek-V3; Megatron-Core places them on the last
    // stage): enorm, hnorm, eh_proj (column-parallel), a final norm and one MoE block.
    if (m.mtp_layers > 0) {
      const int64_t last = m.num_layers - 1;
      out.mtp_block = LayerShare{
          last, dense_layer_params(m, s.widths, last), expert_layer_params(m, p, s.widths, last),
          m.is_moe_layer(last) ? std::optional(expert_load(m, p, last)) : std::nullopt};
      out.mtp = m.mtp_layers * (3 * norm_parameters(m) + 2 * m.d_model * m.d_model / p.tp +
                                out.mtp_block->total());
    }
  }
  return out;
}

StageActivations activations_of(const ModelConfig& m, const ParallelPlan& p,
                                const StagePartition& s) {
  StageActivations out;
  const Recompute materialised = p.recompute == Recompute::kFull ? Recompute::kNone : p.recompute;
  for (const LayerRange& c : s.chunks) {
    for (int64_t layer = c.first; layer < c.end; ++layer) {
      // Megatron's block method: full recompute for the first N layers of the chunk only.
      const bool full = p.recompute == Recompute::kFull &&
                        (p.recompute_num_layers == 0 || layer - c.first < p.recompute_num_layers);
      const Recompute policy =
          full || p.recompute != Recompute::kFull ? p.recompute : Recompute::kNone;
      out.by_layer.push_back(LayerSaved{layer, layer_activations(m, p, policy, layer).total(),
                                        layer_activations(m, p, materialised, layer).total(),
                                        full, layer - c.first < p.offload_layers});
    }
  }
  const OutsideLayerActivations outside = outside_layer_activations(m, p, s.first, s.last);
  out.embedding = outside.embedding_dropout_mask;
  out.head = outside.final_norm_input + outside.lm_head_input + outside.logits;
  return out;
}

StagePartition make_partition(const ModelConfig& m, const ParallelPlan& p, int64_t stage) {
  SIM_CHECK(stage >= 0 && stage < p.pp, "pipeline stage {} outside 0..{}", stage, p.pp - 1);
  StagePartition s;
  s.stage = stage;
  // The stages holding the first and the last virtual stage (zbv: both on stage 0).
  s.first = virtual_stage_home(p.pipeline(), 0).stage == stage;
  s.last = virtual_stage_home(p.pipeline(), p.pp * p.vpp - 1).stage == stage;
  s.chunks = chunks_of(m, p, stage);
  s.widths = shard_widths(m, p);
  s.tokens = stage_tokens(p);
  s.params = parameters_of(m, p, s);
  s.activations = activations_of(m, p, s);
  if (m.moe && p.ep > 1 && p.moe_dispatcher == MoeDispatcher::kFlex) {
    s.flex = flex_route(m, p);
  }
  return s;
}

}  // namespace

const LayerShare& StageParameters::of(int64_t layer) const {
  for (const LayerShare& l : by_layer) {
    if (l.layer == layer) {
      return l;
    }
  }
  if (mtp_block && mtp_block->layer == layer) {
    return *mtp_block;
  }
  SIM_CHECK(false, "layer {} is not on the stage", layer);
  return by_layer.front();
}

int64_t StageParameters::dense() const {
  int64_t sum = embedding + head + mtp;
  for (const LayerShare& l : by_layer) {
    sum += l.dense;
  }
  return sum;
}

int64_t StageParameters::expert() const {
  int64_t sum = 0;
  for (const LayerShare& l : by_layer) {
    sum += l.expert;
  }
  return sum;
}

const LayerSaved& StageActivations::of(int64_t layer) const {
  for (const LayerSaved& l : by_layer) {
    if (l.layer == layer) {
      return l;
    }
  }
  SIM_CHECK(false, "layer {} is not on the stage", layer);
  return by_layer.front();
}

Bytes StageActivations::saved_layers() const {
  Bytes sum = Bytes::zero();
  for (const LayerSaved& l : by_layer) {
    sum += l.saved;
  }
  return sum;
}

Bytes StageActivations::offloaded_layers() const {
  Bytes sum = Bytes::zero();
  for (const LayerSaved& l : by_layer) {
    sum += l.offloaded ? l.saved : Bytes::zero();
  }
  return sum;
}

Bytes StageActivations::max_offloaded() const {
  Bytes most = Bytes::zero();
  for (const LayerSaved& l : by_layer) {
    most = l.offloaded ? std::max(most, l.saved) : most;
  }
  return most;
}

Bytes StageActivations::max_materialised() const {
  Bytes most = Bytes::zero();
  for (const LayerSaved& l : by_layer) {
    if (l.full_recompute) {
      most = std::max(most, l.materialised);
    }
  }
  return most;
}

ShardWidths shard_widths(const ModelConfig& m, const ParallelPlan& p) {
  validate_sharding(m, p);
  const int64_t t = p.tp;
  ShardWidths w;
  w.q_heads = m.num_heads / t;
  w.kv_heads = m.num_kv_heads % t == 0 ? m.num_kv_heads / t : 1;
  w.d_ff = m.d_ff / t;
  if (m.moe) {
    w.expert_d_ff = m.moe->expert_d_ff / p.expert_tp();
    w.shared_d_ff = m.moe->num_shared_experts * m.moe->shared_expert_d_ff / t;
  }
  w.vocab = (m.vocab_size + t - 1) / t;
  return w;
}

StageTokens stage_tokens(const ParallelPlan& p) {
  StageTokens t;
  t.per_rank = p.mbs * p.seq / p.cp;
  t.sequence = p.sp ? t.per_rank / p.tp : t.per_rank;
  return t;
}

StagePartition partition_stage(const ModelConfig& model, const ParallelPlan& plan, int64_t stage) {
  validate_split(model, plan);
  return make_partition(model, plan, stage);
}

std::vector<StagePartition> partition_stages(const ModelConfig& model, const ParallelPlan& plan) {
  validate_split(model, plan);
  std::vector<StagePartition> out;
  for (int64_t stage = 0; stage < plan.pp; ++stage) {
    out.push_back(make_partition(model, plan, stage));
  }
  return out;
}

std::vector<int64_t> deepspeed_type_partition(int64_t layers, int64_t stages, int64_t leading,
                                              int64_t trailing) {
  if (layers < 1 || stages < 1 || leading < 0 || trailing < 0) {
    throw InternalError("deepspeed_type_partition: layers and stages >= 1, the others >= 0");
  }
  const int64_t n = leading + layers + trailing;
  // Inclusive prefix weights: how many transformer layers specs 0..i hold.
  const auto weight_through = [&](int64_t i) {
    return static_cast<double>(std::clamp<int64_t>(i + 1 - leading, 0, layers));
  };
  const auto layers_in = [&](int64_t from, int64_t to) {  // specs [from, to)
    return static_cast<int64_t>(weight_through(to - 1) - weight_through(from - 1));
  };
  std::vector<int64_t> bounds(static_cast<size_t>(stages + 1), n);
  bounds[0] = 0;
  if (n <= stages) {
    for (int64_t s = 0; s <= stages; ++s) {
      bounds[static_cast<size_t>(s)] = std::min(s, n);
    }
  } else {
    const double total = weight_through(n - 1);
    const int64_t window = n / stages;
    // Whether parts no heavier than `most` hold every spec, the bounds it found in `bounds`.
    const auto fits = [&](double most) {
      std::fill(bounds.begin() + 1, bounds.end(), n);
      double target = most;
      int64_t step = window;
      for (int64_t s = 1; s < stages; ++s) {
        while (step < n && weight_through(step) < target) {
          step += window;
        }
        int64_t end = step - window;  // the first spec in the window whose prefix reaches target
        while (end < std::min(step, n) && weight_through(end) < target) {
          ++end;
        }
        bounds[static_cast<size_t>(s)] = end;
        if (end == n) {
          // DeepSpeed measures the last part from the previous bound's own prefix.
          return total - weight_through(bounds[static_cast<size_t>(s - 1)]) < most;
        }
        // (At end 0 DeepSpeed's weights[end - 1] reads its last prefix, the total.)
        target = (end == 0 ? total : weight_through(end - 1)) + most;
      }
      return target >= total;
    };
    constexpr double kEps = 1e-3;  // partition_balanced's eps
    double low = total / static_cast<double>(stages);
    double high = total;
    while (high > low + kEps) {
      const double mid = low + (high - low) / 2;
      if (fits(mid)) {
        high = mid;
      } else {
        low = mid + kEps;
      }
    }
    if (!fits(high)) {
      throw InternalError("deepspeed_type_partition: the searched bound does not fit");
    }
  }
  std::vector<int64_t> out;
  out.reserve(static_cast<size_t>(stages));
  for (int64_t s = 0; s < stages; ++s) {
    out.push_back(layers_in(bounds[static_cast<size_t>(s)], bounds[static_cast<size_t>(s + 1)]));
  }
  return out;
}

}  // namespace meshsim::workloads
