// The Hugging Face families: which keys change the cost and the defaults transformers uses when
// a key is absent or null (configuration_<model_type>.py; the notes of issue 13, fields.md).
//   llama     head_dim d/h, num_key_value_heads = heads, attention_bias (Q, K, V and O) false,
//             mlp_bias false, tie false
//   mistral   llama + sliding_window on every layer (absent: 4096, the class default; null: none)
//   mixtral   llama + num_local_experts, num_experts_per_tok (experts of intermediate_size),
//             sliding_window (default none)
//   qwen2     Q, K, V biases always, none on O; a window only with use_sliding_window, then on
//             layers >= max_window_layers
//   qwen2_moe qwen2 + num_experts, num_experts_per_tok, moe_intermediate_size, one shared expert
//             of shared_expert_intermediate_size with its sigmoid gate
//   qwen3(_moe) llama attention + QK norms, head_dim (default 128); MoE without shared experts
//   phi3      llama (fused qkv_proj and gate_up_proj hold the same weights), sliding_window
//             (default none) on every layer, dropouts resid/embd/attention
//   gemma     GeGLU, head_dim 256, tie true; gemma2: + 4 norms, sliding_window 4096 on even
//             layers, soft-capping; gemma3_text: + QK norms, sliding_window_pattern 6 (layer i
//             global iff (i+1) % 6 == 0) or layer_types, Gemma3TextConfig's defaults for what the
//             multimodal text_config leaves out (vocab 262208, 8 heads, 4 KV heads, head_dim 256,
//             131072 positions)
//   nemotron  squared-ReLU MLP (up, down), LayerNorm with bias, tie false
//   gpt_neox  LayerNorm, GeLU MLP with biases, attention_bias true, use_parallel_residual true
//             (two norms either way), tie false
//   falcon    multi_query true (one KV head) unless new_decoder_architecture (num_kv_heads),
//             parallel_attn true, norms: num_ln_in_parallel_attn (2) on the new architecture,
//             else 1 parallel / 2 sequential; bias false, ffn_hidden_size 4d, tie true,
//             2048 positions
//   gpt2      n_inner 4d, tie true, dropouts 0.1, learned positions
//   deepseek  MLA (q_lora_rank null: no Q compression), n_routed_experts, n_shared_experts of
//             moe_intermediate_size, first_k_dense_replace, moe_layer_freq 1, topk_method
//             noaux_tc (a router bias vector), num_nextn_predict_layers (MTP)
#include <fmt/format.h>

#include <limits>

#include "hf_reader.h"
#include "meshsim/sim/checked.h"
#include "model_loaders.h"

namespace meshsim::workloads::detail {
namespace {

using A = Architecture;

ModelFieldNames hf_fields(const JsonObject& o) {
  const std::string p = o.pointer();
  ModelFieldNames f;
  f.num_layers = p + "/num_hidden_layers";
  f.d_model = p + "/hidden_size";
  f.num_heads = p + "/num_attention_heads";
  f.num_kv_heads = p + "/num_key_value_heads";
  f.head_dim = p + "/head_dim";
  f.d_ff = p + "/intermediate_size";
  f.vocab_size = p + "/vocab_size";
  f.max_position_embeddings = p + "/max_position_embeddings";
  f.num_experts = p + "/num_experts";
  f.experts_per_token = p + "/num_experts_per_tok";
  f.architecture = p + "/model_type";
  f.expert_d_ff = p + "/moe_intermediate_size";
  f.shared_experts = p + "/n_shared_experts";
  f.first_dense_layers = p + "/first_k_dense_replace";
  f.mla = p + "/kv_lora_rank";
  f.sliding_window = p + "/sliding_window";
  f.norms_per_layer = p + "/num_ln_in_parallel_attn";
  f.parallel_blocks = p + "/parallel_attn";
  f.mtp_layers = p + "/num_nextn_predict_layers";
  return f;
}

void finish_model(HfReader& r, ModelConfig& m, bool head_dim_given, ModelFieldNames f) {
  derive_head_dim(m, head_dim_given, r.obj().source(), f);
  validate_model_fields(m, r.obj().source(), f);
}

bool any_dropout(HfReader& r, std::initializer_list<const char*> keys, double fallback) {
  bool on = false;
  for (const char* k : keys) {
    on = r.number_or(k, fallback) > 0.0 || on;
  }
  return on;
}

// The attention and sizes every llama-like family shares.
void read_core(HfReader& r, ModelConfig& m) {
  m.d_model = r.positive("hidden_size");
  m.d_ff = r.positive("intermediate_size");
  m.num_layers = r.positive("num_hidden_layers");
  m.num_heads = r.positive("num_attention_heads");
  m.num_kv_heads = r.positive_or("num_key_value_heads", m.num_heads);
  m.vocab_size = r.positive("vocab_size");
  m.max_position_embeddings = r.positive("max_position_embeddings");
}

SlidingWindow every_layer(int64_t size) { return SlidingWindow{size, {true}}; }

// Qwen2/Qwen3: windows only with use_sliding_window, on layers >= max_window_layers.
void qwen_window(HfReader& r, ModelConfig& m) {
  const bool use = r.boolean_or("use_sliding_window", false);
  const int64_t size = r.non_negative_or("sliding_window", 0);
  const int64_t from = r.non_negative_or("max_window_layers", m.num_layers);
  if (!use || size == 0 || from >= m.num_layers) {
    return;
  }
  SlidingWindow w{size, {}};
  for (int64_t i = 0; i < m.num_layers; ++i) {
    w.pattern.push_back(i >= from);
  }
  m.sliding_window = w;
}

// Qwen-MoE: every layer sparse (decoder_sparse_step 1, no mlp_only_layers), the only layout
// the schema expresses besides dense first layers.
void qwen_moe(HfReader& r, ModelConfig& m, bool shared) {
  MoeConfig e;
  e.num_experts = r.positive("num_experts");
  e.experts_per_token = r.positive("num_experts_per_tok");
  e.expert_d_ff = r.positive("moe_intermediate_size");
  if (r.positive_or("decoder_sparse_step", 1) != 1) {
    r.fail("decoder_sparse_step", "MoE on every n-th layer only is not modelled; expected 1");
  }
  if (r.present("mlp_only_layers") && !r.obj().raw("mlp_only_layers").empty()) {
    r.fail("mlp_only_layers", "dense layers among MoE layers are not modelled; expected []");
  }
  if (shared) {
    e.shared_expert_d_ff = r.non_negative_or("shared_expert_intermediate_size", 0);
    e.num_shared_experts = e.shared_expert_d_ff > 0 ? 1 : 0;
    e.shared_expert_gate = e.num_shared_experts > 0;
  }
  m.moe = e;
}

}  // namespace

ModelConfig parse_hf_llama_like(HfReader& r, Architecture family) {
  ModelConfig m;
  m.architecture = family;
  read_core(r, m);
  const bool qwen3 = family == A::kQwen3 || family == A::kQwen3Moe;
  const bool qwen2 = family == A::kQwen2 || family == A::kQwen2Moe;
  const bool head_dim_given = r.present("head_dim") || qwen3;
  m.head_dim = r.positive_or("head_dim", qwen3 ? 128 : 0);
  m.tied_embeddings = r.boolean_or("tie_word_embeddings", false);
  m.attention_bias = qwen2 || r.boolean_or("attention_bias", false);
  m.attention_out_bias = !qwen2 && m.attention_bias;
  m.mlp_bias = r.boolean_or("mlp_bias", false);
  m.qk_norm = qwen3;
  m.dropout = any_dropout(r, {"attention_dropout"}, 0.0);
  if (family == A::kPhi3) {
    m.dropout = any_dropout(r, {"attention_dropout", "resid_pdrop", "embd_pdrop"}, 0.0);
  }
  if (qwen2 || qwen3) {
    qwen_window(r, m);
  } else if (family == A::kMistral) {
    // MistralConfig: absent -> 4096 (the class default), null -> full attention.
    const bool given = r.obj().has("sliding_window");
    if (!given || r.present("sliding_window")) {
      m.sliding_window = every_layer(r.positive_or("sliding_window", 4096));
    }
  } else if (family == A::kMixtral || family == A::kPhi3) {
    if (r.present("sliding_window")) {
      m.sliding_window = every_layer(r.positive("sliding_window"));
    }
  }
  if (family == A::kMixtral) {
    const int64_t experts = r.positive("num_local_experts");
    m.moe = MoeConfig{experts, r.positive("num_experts_per_tok"), m.d_ff, 0, 0, false, false, 0};
  } else if (family == A::kQwen2Moe || family == A::kQwen3Moe) {
    qwen_moe(r, m, family == A::kQwen2Moe);
  }
  ModelFieldNames f = hf_fields(r.obj());
  if (family == A::kMixtral) {
    f.num_experts = r.obj().pointer() + "/num_local_experts";
  }
  finish_model(r, m, head_dim_given, f);
  return m;
}

ModelConfig parse_hf_gemma(HfReader& r, Architecture family) {
  const bool v3 = family == A::kGemma3;
  ModelConfig m;
  m.architecture = family;
  // Gemma3TextConfig fills what the multimodal text_config leaves out; gemma and gemma2 need the
  // sizes.
  m.d_model = v3 ? r.positive_or("hidden_size", 2304) : r.positive("hidden_size");
  m.d_ff = v3 ? r.positive_or("intermediate_size", 9216) : r.positive("intermediate_size");
  m.num_layers = v3 ? r.positive_or("num_hidden_layers", 26) : r.positive("num_hidden_layers");
  m.num_heads = v3 ? r.positive_or("num_attention_heads", 8) : r.positive("num_attention_heads");
  m.num_kv_heads = r.positive_or("num_key_value_heads", v3 ? 4 : m.num_heads);
  m.head_dim = r.positive_or("head_dim", 256);
  m.vocab_size = v3 ? r.positive_or("vocab_size", 262208) : r.positive("vocab_size");
  m.max_position_embeddings =
      v3 ? r.positive_or("max_position_embeddings", 131072) : r.positive("max_position_embeddings");
  m.mlp = MlpKind::kGeglu;
  m.tied_embeddings = r.boolean_or("tie_word_embeddings", true);
  m.attention_bias = m.attention_out_bias = r.boolean_or("attention_bias", false);
  m.dropout = any_dropout(r, {"attention_dropout"}, 0.0);
  if (family != A::kGemma) {
    m.norms_per_layer = 4;
    const bool softcap = r.present("attn_logit_softcapping");
    m.logit_softcapping = r.present("final_logit_softcapping") || softcap;
    r.read("sliding_window_size");  // Gemma-2's duplicate of sliding_window
    const int64_t window = r.positive_or("sliding_window", 4096);
    SlidingWindow w{window, {true, false}};  // Gemma-2: even layers local
    if (v3) {
      m.qk_norm = true;
      const int64_t period = r.positive_or("sliding_window_pattern", 6);
      if (period > ModelLimits::kLayers) {  // one flag per layer of the period is built below
        r.fail("sliding_window_pattern",
               fmt::format("a period of {} layers; expected at most {} (meshsim's layer limit)",
                           period, ModelLimits::kLayers));
      }
      w.pattern.assign(static_cast<size_t>(period), true);
      w.pattern.back() = false;  // layer i global iff (i + 1) % period == 0
    }
    if (r.present("layer_types")) {
      w.pattern.clear();
      for (const auto& t : r.obj().raw("layer_types")) {
        w.pattern.push_back(t == "sliding_attention");
      }
    }
    m.sliding_window = w;
  }
  finish_model(r, m, true, hf_fields(r.obj()));
  return m;
}

ModelConfig parse_hf_nemotron(HfReader& r) {
  ModelConfig m;
  m.architecture = A::kNemotron;
  read_core(r, m);
  const bool head_dim_given = r.present("head_dim");
  m.head_dim = r.positive_or("head_dim", 0);
  m.mlp = MlpKind::kRelu2;
  m.norm = NormKind::kLayerNorm;  // LayerNorm1P: weight and bias
  m.tied_embeddings = r.boolean_or("tie_word_embeddings", false);
  m.attention_bias = m.attention_out_bias = r.boolean_or("attention_bias", false);
  m.mlp_bias = r.boolean_or("mlp_bias", false);
  m.dropout = any_dropout(r, {"attention_dropout", "hidden_dropout"}, 0.0);
  finish_model(r, m, head_dim_given, hf_fields(r.obj()));
  return m;
}

ModelConfig parse_hf_gpt_neox(HfReader& r) {
  ModelConfig m;
  m.architecture = A::kGptNeox;
  read_core(r, m);
  m.mlp = MlpKind::kGelu;
  m.norm = NormKind::kLayerNorm;
  m.mlp_bias = true;
  m.attention_bias = m.attention_out_bias = r.boolean_or("attention_bias", true);
  m.parallel_blocks = r.boolean_or("use_parallel_residual", true);
  m.tied_embeddings = r.boolean_or("tie_word_embeddings", false);
  m.dropout = any_dropout(r,
                          {"attention_dropout", "hidden_dropout", "attention_probs_dropout_prob",
                           "hidden_dropout_prob"},
                          0.0);
  finish_model(r, m, false, hf_fields(r.obj()));
  return m;
}

// The conventional 4 x d_model MLP width a config leaves unstated, saturating rather than
// wrapping (validate_model then refuses the width, naming the config's own field).
int64_t four_times(int64_t d_model) {
  return try_mul(4, d_model).value_or(std::numeric_limits<int64_t>::max());
}

ModelConfig parse_hf_falcon(HfReader& r) {
  ModelConfig m;
  m.architecture = A::kFalcon;
  const auto need = [&](const std::vector<std::string>& keys) {
    if (const std::optional<int64_t> v = r.positive_any(keys)) {
      return *v;
    }
    r.fail(keys.front(), "expected a positive integer (the field is required)");
  };
  m.d_model = need({"hidden_size", "n_embed"});
  m.num_layers = need({"num_hidden_layers", "n_layer"});
  m.num_heads = need({"num_attention_heads", "n_head"});
  m.vocab_size = r.positive("vocab_size");
  m.max_position_embeddings = r.positive_or("max_position_embeddings", 2048);
  const bool new_arch = r.boolean_or("new_decoder_architecture", false);
  const bool multi_query = r.boolean_or("multi_query", true);
  const std::optional<int64_t> kv = r.positive_any({"num_kv_heads", "n_head_kv"});
  m.num_kv_heads = new_arch ? kv.value_or(m.num_heads) : (multi_query ? 1 : m.num_heads);
  const bool parallel = r.boolean_or("parallel_attn", true);
  m.parallel_blocks = new_arch || parallel;
  m.norms_per_layer = new_arch ? r.positive_or("num_ln_in_parallel_attn", 2) : (parallel ? 1 : 2);
  m.d_ff = r.positive_or("ffn_hidden_size", four_times(m.d_model));
  m.mlp = MlpKind::kGelu;
  m.norm = NormKind::kLayerNorm;
  m.attention_bias = m.attention_out_bias = m.mlp_bias = r.boolean_or("bias", false);
  m.tied_embeddings = r.boolean_or("tie_word_embeddings", true);
  m.dropout = any_dropout(r, {"attention_dropout", "hidden_dropout"}, 0.0);
  if (r.boolean_or("alibi", false)) {
    r.fail("alibi", "ALiBi position biases are not modelled; expected false (rotary)");
  }
  ModelFieldNames f = hf_fields(r.obj());
  f.num_kv_heads = r.obj().pointer() + (new_arch ? "/num_kv_heads" : "/multi_query");
  finish_model(r, m, false, f);
  return m;
}

ModelConfig parse_hf_gpt2(HfReader& r) {
  ModelConfig m;
  m.architecture = A::kGpt2;
  m.d_model = r.positive("n_embd");
  m.num_layers = r.positive("n_layer");
  m.num_heads = r.positive("n_head");
  m.num_kv_heads = m.num_heads;
  m.d_ff = r.positive_or("n_inner", four_times(m.d_model));
  m.vocab_size = r.positive("vocab_size");
  m.max_position_embeddings = r.positive("n_positions");
  m.mlp = MlpKind::kGelu;
  m.norm = NormKind::kLayerNorm;
  m.positions = PositionKind::kLearned;
  m.attention_bias = m.attention_out_bias = m.mlp_bias = true;
  m.tied_embeddings = r.boolean_or("tie_word_embeddings", true);
  m.dropout = any_dropout(r, {"resid_pdrop", "attn_pdrop", "embd_pdrop"}, 0.1);
  if (r.boolean_or("add_cross_attention", false)) {
    r.fail("add_cross_attention",
           "encoder-decoder cross attention is not modelled; expected "
           "false");
  }
  const std::string p = r.obj().pointer();
  ModelFieldNames f;
  f.num_layers = p + "/n_layer";
  f.d_model = p + "/n_embd";
  f.num_heads = f.num_kv_heads = p + "/n_head";
  f.head_dim = f.d_model;
  f.d_ff = p + "/n_inner";
  f.vocab_size = p + "/vocab_size";
  f.max_position_embeddings = p + "/n_positions";
  f.architecture = p + "/model_type";
  finish_model(r, m, false, f);
  return m;
}

ModelConfig parse_hf_deepseek(HfReader& r, Architecture family) {
  ModelConfig m;
  m.architecture = family;
  read_core(r, m);
  MlaConfig a;
  a.q_lora_rank = r.non_negative_or("q_lora_rank", 0);
  a.kv_lora_rank = r.positive("kv_lora_rank");
  a.qk_nope_head_dim = r.positive("qk_nope_head_dim");
  a.qk_rope_head_dim = r.positive("qk_rope_head_dim");
  a.v_head_dim = r.positive("v_head_dim");
  m.mla = a;
  m.head_dim = a.qk_head_dim();
  m.num_kv_heads = m.num_heads;  // num_key_value_heads has no meaning under MLA
  m.attention_bias = m.attention_out_bias = r.boolean_or("attention_bias", false);
  m.tied_embeddings = r.boolean_or("tie_word_embeddings", false);
  m.dropout = any_dropout(r, {"attention_dropout"}, 0.0);
  MoeConfig e;
  e.num_experts = r.positive("n_routed_experts");
  e.experts_per_token = r.positive("num_experts_per_tok");
  e.expert_d_ff = r.positive("moe_intermediate_size");
  e.num_shared_experts = r.non_negative_or("n_shared_experts", 0);
  e.shared_expert_d_ff = e.expert_d_ff;
  e.first_dense_layers = r.non_negative_or("first_k_dense_replace", 0);
  if (r.positive_or("moe_layer_freq", 1) != 1) {
    r.fail("moe_layer_freq", "MoE on every n-th layer only is not modelled; expected 1");
  }
  r.read("topk_method");
  const bool noaux = r.obj().has("topk_method") && r.obj().raw("topk_method") == "noaux_tc";
  e.router_bias = noaux || (family == A::kDeepseekV3 && !r.obj().has("topk_method"));
  // Group-limited routing: V2's group_limited_greedy and V3's noaux_tc (its default) pick the
  // top-k inside the topk_group best of n_group groups (modeling_deepseek.py MoEGate); greedy
  // (V2-Lite) ignores the groups.
  const bool grouped = noaux || (family == A::kDeepseekV3 && !r.obj().has("topk_method")) ||
                       (r.obj().has("topk_method") &&
                        r.obj().raw("topk_method") == "group_limited_greedy");
  const int64_t groups = r.positive_or("n_group", 1);
  const int64_t group_topk = r.positive_or("topk_group", groups);
  if (grouped) {
    e.routing_groups = groups;
    e.routing_group_topk = group_topk;
  }
  m.moe = e;
  m.mtp_layers = r.non_negative_or("num_nextn_predict_layers", 0);
  ModelFieldNames f = hf_fields(r.obj());
  f.num_experts = r.obj().pointer() + "/n_routed_experts";
  f.routing_groups = r.obj().pointer() + "/n_group";
  finish_model(r, m, true, f);
  return m;
}

std::vector<std::string> hf_family_ignored(Architecture family) {
  switch (family) {
    case A::kDeepseekV2:
    case A::kDeepseekV3:
      return {"num_key_value_heads: MLA has one latent K/V per token",
              "ep_size: an inference hint of the remote code; EP is the plan's"};
    case A::kGpt2:
      return {"n_ctx",
              "summary_activation",
              "summary_first_dropout",
              "summary_proj_to_labels",
              "summary_type",
              "summary_use_proj",
              "scale_attn_by_inverse_layer_idx",
              "reorder_and_upcast_attn",
              "scale_attn_weights"};
    case A::kGemma3:
      return {"boi_token_index", "eoi_token_index", "image_token_index",
              "mm_tokens_per_image: image tokens are not simulated (text-only training)"};
    case A::kQwen2:
      return {"use_mrope"};
    case A::kFalcon:
      return {"apply_residual_connection_post_layernorm"};
    default:
      return {};
  }
}

}  // namespace meshsim::workloads::detail
