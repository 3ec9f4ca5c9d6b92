// Hugging Face config.json -> ModelConfig.
//
// Field names follow transformers' LlamaConfig, MixtralConfig and GPT2Config. Keys that do not
// change performance (rope_theta, rms_norm_eps, torch_dtype, ...) are ignored. Where a key is
// absent (or null), the value is the one transformers itself would use:
//   llama/mixtral: num_key_value_heads = num_attention_heads, head_dim = hidden_size / heads,
//                  tie_word_embeddings = false, attention_bias = mlp_bias = false,
//                  attention_dropout = 0
//   gpt2:          n_inner = 4 * n_embd, tie_word_embeddings = true,
//                  resid_pdrop = embd_pdrop = attn_pdrop = 0.1
// The sizes that define the model (hidden size, layers, heads, vocabulary, positions, experts)
// are required: a config.json without them is not one we can trust.
#include <fmt/format.h>

#include "meshsim/sim/checked.h"
#include "meshsim/sim/error.h"
#include "meshsim/sim/json_input.h"
#include "model_loaders.h"

namespace meshsim::workloads {

namespace {

bool present(JsonObject& o, const std::string& key) {
  if (!o.has(key)) {
    return false;
  }
  return !o.raw(key).is_null();
}

bool optional_bool(JsonObject& o, const std::string& key, bool fallback) {
  return present(o, key) ? o.boolean(key) : fallback;
}

double optional_number(JsonObject& o, const std::string& key, double fallback) {
  return present(o, key) ? o.number(key) : fallback;
}

std::string hf_name(JsonObject& o, const std::string& default_name) {
  if (present(o, "_name_or_path") && o.raw("_name_or_path").is_string()) {
    const std::string n = o.string("_name_or_path");
    if (!n.empty()) {
      return n;
    }
  }
  return default_name;
}

ModelFieldNames llama_fields() {
  ModelFieldNames f;
  f.num_layers = "/num_hidden_layers";
  f.d_model = "/hidden_size";
  f.num_heads = "/num_attention_heads";
  f.num_kv_heads = "/num_key_value_heads";
  f.head_dim = "/head_dim";
  f.d_ff = "/intermediate_size";
  f.vocab_size = "/vocab_size";
  f.max_position_embeddings = "/max_position_embeddings";
  f.num_experts = "/num_local_experts";
  f.experts_per_token = "/num_experts_per_tok";
  f.architecture = "/model_type";
  return f;
}

ModelFieldNames gpt2_fields() {
  ModelFieldNames f;
  f.num_layers = "/n_layer";
  f.d_model = "/n_embd";
  f.num_heads = "/n_head";
  f.num_kv_heads = "/n_head";
  f.head_dim = "/n_embd";
  f.d_ff = "/n_inner";
  f.vocab_size = "/vocab_size";
  f.max_position_embeddings = "/n_positions";
  f.architecture = "/model_type";
  return f;
}

ModelConfig parse_llama_family(JsonObject& o, bool mixtral) {
  ModelConfig m;
  m.architecture = mixtral ? Architecture::kMixtral : Architecture::kLlama;
  m.d_model = o.positive_integer("hidden_size");
  m.d_ff = o.positive_integer("intermediate_size");
  m.num_layers = o.positive_integer("num_hidden_layers");
  m.num_heads = o.positive_integer("num_attention_heads");
  m.num_kv_heads =
      present(o, "num_key_value_heads") ? o.positive_integer("num_key_value_heads") : m.num_heads;
  const bool head_dim_given = present(o, "head_dim");
  m.head_dim = head_dim_given ? o.positive_integer("head_dim") : 0;
  m.vocab_size = o.positive_integer("vocab_size");
  m.max_position_embeddings = o.positive_integer("max_position_embeddings");
  m.mlp = MlpKind::kGated;
  m.norm = NormKind::kRmsNorm;
  m.positions = PositionKind::kRope;
  m.tied_embeddings = optional_bool(o, "tie_word_embeddings", false);
  m.attention_bias = optional_bool(o, "attention_bias", false);
  m.mlp_bias = optional_bool(o, "mlp_bias", false);
  m.dropout = optional_number(o, "attention_dropout", 0.0) > 0.0;
  if (mixtral) {
    m.moe = MoeConfig{o.positive_integer("num_local_experts"),
                      o.positive_integer("num_experts_per_tok")};
  }
  const ModelFieldNames fields = llama_fields();
  derive_head_dim(m, head_dim_given, o.source(), fields);
  validate_model_fields(m, o.source(), fields);
  return m;
}

ModelConfig parse_gpt2(JsonObject& o) {
  ModelConfig m;
  m.architecture = Architecture::kGpt2;
  m.d_model = o.positive_integer("n_embd");
  m.num_layers = o.positive_integer("n_layer");
  m.num_heads = o.positive_integer("n_head");
  m.num_kv_heads = m.num_heads;
  // transformers' default; a d_model past its limit is refused by validation, not wrapped here.
  m.d_ff = present(o, "n_inner") ? o.positive_integer("n_inner")
                                 : try_mul(4, m.d_model).value_or(m.d_model);
  m.vocab_size = o.positive_integer("vocab_size");
  m.max_position_embeddings = o.positive_integer("n_positions");
  m.mlp = MlpKind::kGelu;
  m.norm = NormKind::kLayerNorm;
  m.positions = PositionKind::kLearned;
  m.attention_bias = true;
  m.mlp_bias = true;
  m.tied_embeddings = optional_bool(o, "tie_word_embeddings", true);
  m.dropout = optional_number(o, "resid_pdrop", 0.1) > 0.0 ||
              optional_number(o, "attn_pdrop", 0.1) > 0.0 ||
              optional_number(o, "embd_pdrop", 0.1) > 0.0;
  const ModelFieldNames fields = gpt2_fields();
  derive_head_dim(m, false, o.source(), fields);
  validate_model_fields(m, o.source(), fields);
  return m;
}

}  // namespace

ModelConfig parse_hf_config(JsonObject& o, const std::string& default_name) {
  o.allow_unknown();
  const std::string type = o.string("model_type");
  ModelConfig m;
  if (type == "llama" || type == "mixtral") {
    m = parse_llama_family(o, type == "mixtral");
  } else if (type == "gpt2") {
    m = parse_gpt2(o);
  } else {
    o.fail("model_type",
           fmt::format("unsupported Hugging Face model_type \"{}\" (expected one of: llama, "
                       "mixtral, gpt2)",
                       type));
  }
  m.name = hf_name(o, default_name);
  m.source = o.source();
  return m;
}

}  // namespace meshsim::workloads
