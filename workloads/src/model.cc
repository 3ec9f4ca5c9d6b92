#include "meshsim/workloads/model.h"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <tuple>

#include "meshsim/sim/error.h"
#include "meshsim/sim/json_input.h"
#include "meshsim/workloads/accounting.h"
#include "model_loaders.h"

namespace meshsim::workloads {

namespace {

std::string preset_source(std::string_view stem) {
  return fmt::format("workloads/models/{}.json (preset)", stem);
}

// Reads a "name" field without the strict reader: only to index the presets.
std::string preset_name(std::string_view stem, std::string_view contents) {
  const nlohmann::json j = nlohmann::json::parse(contents);
  SIM_CHECK(j.contains("name") && j["name"].is_string(), "preset {} has no name", stem);
  return j["name"].get<std::string>();
}

bool looks_like_path(const std::string& s) {
  return s.find('/') != std::string::npos || s.ends_with(".json");
}

std::string file_stem(const std::string& path) {
  return std::filesystem::path(path).stem().string();
}

// 2^20 -> "2^20 (1,048,576)"
std::string power_of_two(int64_t v) {
  int bits = 0;
  while ((int64_t{1} << bits) < v) {
    ++bits;
  }
  std::string digits = std::to_string(v);
  for (int i = static_cast<int>(digits.size()) - 3; i > 0; i -= 3) {
    digits.insert(static_cast<size_t>(i), ",");
  }
  return (int64_t{1} << bits) == v ? fmt::format("2^{} ({})", bits, digits) : digits;
}

// Positive, and at most `max` (a size, width, rank or window; why: ModelLimits in model.h).
void positive(int64_t v, const std::string& source, const std::string& field,
              int64_t max = ModelLimits::kDff) {
  if (v <= 0) {
    throw InputError(source, field, fmt::format("expected a positive integer, got {}", v));
  }
  if (v > max) {
    throw InputError(source, field,
                     fmt::format("{} is above the limit of {}: far beyond any transformer "
                                 "trained, and past what meshsim's 64-bit accounting holds",
                                 v, power_of_two(max)));
  }
}

void validate_moe(const ModelConfig& m, const std::string& source, const ModelFieldNames& f) {
  const MoeConfig& e = *m.moe;
  positive(e.num_experts, source, f.num_experts, ModelLimits::kExperts);
  positive(e.experts_per_token, source, f.experts_per_token, ModelLimits::kExperts);
  positive(e.expert_d_ff, source, f.expert_d_ff);
  if (e.experts_per_token > e.num_experts) {
    throw InputError(source, f.experts_per_token,
                     fmt::format("top-k of {} exceeds the {} experts; expected 1 <= k <= "
                                 "num_experts",
                                 e.experts_per_token, e.num_experts));
  }
  if (e.num_shared_experts < 0 || e.num_shared_experts > ModelLimits::kExperts ||
      (e.num_shared_experts > 0 &&
       (e.shared_expert_d_ff <= 0 || e.shared_expert_d_ff > ModelLimits::kDff))) {
    throw InputError(source, f.shared_experts,
                     fmt::format("{} shared experts of width {}; expected a count in 0..{} "
                                 "and a positive width of at most {}",
                                 e.num_shared_experts, e.shared_expert_d_ff, ModelLimits::kExperts,
                                 ModelLimits::kDff));
  }
  const int64_t g = e.routing_groups;
  const int64_t per_token = e.routing_group_topk;
  if (g < 1 || g > e.num_experts || e.num_experts % g != 0 || per_token < 1 || per_token > g ||
      per_token * (e.num_experts / g) < e.experts_per_token) {
    throw InputError(source, f.routing_groups,
                     fmt::format("{} routing groups, {} per token: expected groups dividing the {} "
                                 "experts and 1 <= per token <= groups, with room for the top-{}",
                                 g, per_token, e.num_experts, e.experts_per_token));
  }
  if (e.first_dense_layers < 0 || e.first_dense_layers >= m.num_layers) {
    throw InputError(source, f.first_dense_layers,
                     fmt::format("{} dense layers first of {}; expected 0 <= k < num_layers",
                                 e.first_dense_layers, m.num_layers));
  }
}

void validate_attention(const ModelConfig& m, const std::string& source, const ModelFieldNames& f) {
  const bool deepseek =
      m.architecture == Architecture::kDeepseekV2 || m.architecture == Architecture::kDeepseekV3;
  if (m.mla.has_value() != deepseek) {
    throw InputError(source, deepseek ? f.mla : f.architecture,
                     deepseek ? "the DeepSeek family uses multi-head latent attention; expected "
                                "an mla section"
                              : fmt::format("multi-head latent attention is DeepSeek's; expected "
                                            "architecture deepseek_v2 or deepseek_v3, got {}",
                                            to_string(m.architecture)));
  }
  if (m.mla) {
    const MlaConfig& a = *m.mla;
    positive(a.kv_lora_rank, source, f.mla + "/kv_lora_rank");
    positive(a.qk_nope_head_dim, source, f.mla + "/qk_nope_head_dim");
    positive(a.qk_rope_head_dim, source, f.mla + "/qk_rope_head_dim");
    positive(a.v_head_dim, source, f.mla + "/v_head_dim");
    if (a.q_lora_rank < 0 || m.head_dim != a.qk_head_dim() || m.num_kv_heads != m.num_heads) {
      throw InputError(
          source, f.mla,
          fmt::format("q_lora_rank {} (expected >= 0, 0 for none), head_dim {} and "
                      "{} KV heads: MLA needs head_dim = qk_nope_head_dim + "
                      "qk_rope_head_dim = {} and one K/V head per query head ({})",
                      a.q_lora_rank, m.head_dim, m.num_kv_heads, a.qk_head_dim(), m.num_heads));
    }
  }
  if (m.sliding_window) {
    positive(m.sliding_window->size, source, f.sliding_window + "/size", ModelLimits::kPositions);
    if (m.sliding_window->pattern.empty()) {
      throw InputError(source, f.sliding_window + "/pattern",
                       "expected a non-empty list of booleans (true: the layer is windowed)");
    }
  }
  if (m.norms_per_layer != 1 && m.norms_per_layer != 2 && m.norms_per_layer != 4) {
    throw InputError(source, f.norms_per_layer,
                     fmt::format("expected 1 (one norm before parallel attention and MLP), 2 "
                                 "(pre-norm) or 4 (pre- and post-norm), got {}",
                                 m.norms_per_layer));
  }
  if (m.norms_per_layer == 1 && !m.parallel_blocks) {
    throw InputError(source, f.norms_per_layer,
                     "one norm per layer needs parallel attention and MLP blocks (Falcon-7B)");
  }
  if (m.parallel_blocks && (m.moe || m.norms_per_layer == 4)) {
    throw InputError(source, f.parallel_blocks,
                     "parallel attention and MLP blocks are modelled for dense pre-norm models "
                     "(GPT-NeoX, Falcon); expected no experts and 1 or 2 norms per layer");
  }
  if (m.mtp_layers < 0 || (m.mtp_layers > 0 && !m.moe) || m.mtp_layers > ModelLimits::kLayers) {
    throw InputError(
        source, f.mtp_layers,
        fmt::format("{} multi-token prediction layers; expected 0, or a positive depth of at "
                    "most {} in an MoE model (DeepSeek-V3)",
                    m.mtp_layers, ModelLimits::kLayers));
  }
}

}  // namespace

bool is_moe_family(Architecture a) {
  using A = Architecture;
  return a == A::kMixtral || a == A::kQwen2Moe || a == A::kQwen3Moe || a == A::kDeepseekV2 ||
         a == A::kDeepseekV3;
}

int64_t ModelConfig::attention_window(int64_t layer) const {
  if (!sliding_window) {
    return 0;
  }
  const std::vector<bool>& p = sliding_window->pattern;
  return p[static_cast<size_t>(layer) % p.size()] ? sliding_window->size : 0;
}

std::vector<std::string> model_preset_names() {
  std::vector<std::string> names;
  for (const auto& [stem, contents] : embedded_model_files()) {
    names.push_back(preset_name(stem, contents));
  }
  std::sort(names.begin(), names.end());
  return names;
}

ModelConfig parse_model(const nlohmann::json& value, const std::string& source) {
  JsonObject obj(value, source);
  const std::string default_name = file_stem(source);
  if (obj.has("model_type")) {
    return parse_hf_config(value, obj, default_name);
  }
  return parse_meshsim_model(obj, default_name);
}

ModelConfig load_model(const std::string& name_or_path) {
  for (const auto& [stem, contents] : embedded_model_files()) {
    if (preset_name(stem, contents) == name_or_path) {
      const nlohmann::json j = nlohmann::json::parse(contents);
      return parse_model(j, preset_source(stem));
    }
  }
  std::error_code ec;  // a name too long to be a path is not one: no exception
  if (!std::filesystem::exists(name_or_path, ec) && !looks_like_path(name_or_path)) {
    throw InputError(
        name_or_path, "",
        fmt::format("unknown model preset (expected one of: {}; or a path to a meshsim model JSON "
                    "or a Hugging Face config.json)",
                    fmt::join(model_preset_names(), ", ")));
  }
  const nlohmann::json j = load_json_file(name_or_path);
  return parse_model(j, name_or_path);
}

void derive_head_dim(ModelConfig& model, bool head_dim_given, const std::string& source,
                     const ModelFieldNames& fields) {
  if (head_dim_given) {
    return;
  }
  if (model.d_model % model.num_heads != 0) {
    throw InputError(source, fields.d_model,
                     fmt::format("{} is not divisible by the {} heads ({}); expected d_model = "
                                 "num_heads * head_dim, or give head_dim explicitly",
                                 model.d_model, model.num_heads, fields.num_heads));
  }
  model.head_dim = model.d_model / model.num_heads;
}

namespace {

// The counts the accounting derives per layer and per table, against their limits; the sizes are
// already within theirs, so none of these products can overflow.
void check_parameter_counts(const ModelConfig& m, const std::string& source,
                            const ModelFieldNames& f) {
  const ParameterCounts c = count_parameters(m);
  const int64_t layer = c.layer.total();
  if (layer > ModelLimits::kLayerParameters) {
    const bool mlp_heavy = c.layer.mlp + c.layer.experts() > c.layer.attention();
    throw InputError(
        source, mlp_heavy ? (m.moe ? f.num_experts : f.d_ff) : f.d_model,
        fmt::format("{} parameters per layer; expected at most {} (Llama 3 405B has 3.2 G)", layer,
                    power_of_two(ModelLimits::kLayerParameters)));
  }
  for (const auto& [count, field, what] :
       {std::tuple{c.token_embedding, f.vocab_size, "token embedding"},
        std::tuple{c.position_embedding, f.max_position_embeddings, "learned position table"}}) {
    if (count > ModelLimits::kTableParameters) {
      throw InputError(source, field,
                       fmt::format("a {} of {} parameters; expected at most {}", what, count,
                                   power_of_two(ModelLimits::kTableParameters)));
    }
  }
}

}  // namespace

void validate_model_fields(const ModelConfig& m, const std::string& source,
                           const ModelFieldNames& f) {
  positive(m.num_layers, source, f.num_layers, ModelLimits::kLayers);
  positive(m.d_model, source, f.d_model, ModelLimits::kDModel);
  positive(m.num_heads, source, f.num_heads, ModelLimits::kHeads);
  positive(m.num_kv_heads, source, f.num_kv_heads, ModelLimits::kHeads);
  positive(m.head_dim, source, f.head_dim, ModelLimits::kHeadDim);
  positive(m.d_ff, source, f.d_ff, ModelLimits::kDff);
  positive(m.vocab_size, source, f.vocab_size, ModelLimits::kVocab);
  positive(m.max_position_embeddings, source, f.max_position_embeddings, ModelLimits::kPositions);
  if (m.num_kv_heads > m.num_heads || m.num_heads % m.num_kv_heads != 0) {
    throw InputError(source, f.num_kv_heads,
                     fmt::format("{} key/value heads do not divide the {} query heads; expected "
                                 "a divisor of {} (grouped-query attention)",
                                 m.num_kv_heads, m.num_heads, f.num_heads.substr(1)));
  }
  const bool wants_moe = is_moe_family(m.architecture);
  if (wants_moe != m.is_moe()) {
    throw InputError(source, wants_moe ? f.num_experts : f.architecture,
                     wants_moe
                         ? fmt::format("architecture {} needs experts; expected a "
                                       "mixture-of-experts section",
                                       to_string(m.architecture))
                         : fmt::format("architecture {} is dense; expected no experts (use an "
                                       "MoE family such as mixtral, qwen2_moe or deepseek_v3)",
                                       to_string(m.architecture)));
  }
  if (m.moe) {
    validate_moe(m, source, f);
  }
  validate_attention(m, source, f);
  check_parameter_counts(m, source, f);
}

void validate_model(const ModelConfig& model, const std::string& source) {
  validate_model_fields(model, source, ModelFieldNames{});
}

namespace {

std::optional<bool> opt_bool(JsonObject& o, const std::string& key) {
  return opt(o, key, &JsonObject::boolean);
}

MoeConfig parse_moe(JsonObject& moe, int64_t d_ff) {
  MoeConfig e;
  e.num_experts = moe.positive_integer("num_experts");
  e.experts_per_token = moe.positive_integer("experts_per_token");
  e.expert_d_ff = opt(moe, "expert_d_ff", &JsonObject::positive_integer).value_or(d_ff);
  e.num_shared_experts =
      opt(moe, "num_shared_experts", &JsonObject::non_negative_integer).value_or(0);
  e.shared_expert_d_ff =
      opt(moe, "shared_expert_d_ff", &JsonObject::positive_integer).value_or(e.expert_d_ff);
  e.shared_expert_gate = opt_bool(moe, "shared_expert_gate").value_or(false);
  e.router_bias = opt_bool(moe, "router_bias").value_or(false);
  e.first_dense_layers =
      opt(moe, "first_dense_layers", &JsonObject::non_negative_integer).value_or(0);
  e.routing_groups = opt(moe, "routing_groups", &JsonObject::positive_integer).value_or(1);
  e.routing_group_topk =
      opt(moe, "routing_group_topk", &JsonObject::positive_integer).value_or(e.routing_groups);
  moe.finish();
  return e;
}

MlaConfig parse_mla(JsonObject& a) {
  MlaConfig mla;
  mla.q_lora_rank = a.non_negative_integer("q_lora_rank");
  mla.kv_lora_rank = a.positive_integer("kv_lora_rank");
  mla.qk_nope_head_dim = a.positive_integer("qk_nope_head_dim");
  mla.qk_rope_head_dim = a.positive_integer("qk_rope_head_dim");
  mla.v_head_dim = a.positive_integer("v_head_dim");
  a.finish();
  return mla;
}

SlidingWindow parse_window(JsonObject& w) {
  SlidingWindow out;
  out.size = w.positive_integer("size");
  const nlohmann::json& pattern = w.raw("pattern");
  if (!pattern.is_array() || pattern.empty()) {
    w.fail("pattern", "expected a non-empty array of booleans (true: the layer is windowed)");
  }
  for (const nlohmann::json& v : pattern) {
    if (!v.is_boolean()) {
      w.fail("pattern", fmt::format("expected booleans, got {}", describe_json(v)));
    }
    out.pattern.push_back(v.get<bool>());
  }
  w.finish();
  return out;
}

// The optional keys of the variants (model.h's schema comment).
void parse_variants(JsonObject& o, ModelConfig& m) {
  m.attention_out_bias = opt_bool(o, "attention_out_bias").value_or(m.attention_bias);
  m.qk_norm = opt_bool(o, "qk_norm").value_or(false);
  m.norms_per_layer = opt(o, "norms_per_layer", &JsonObject::positive_integer).value_or(2);
  m.parallel_blocks = opt_bool(o, "parallel_blocks").value_or(false);
  m.logit_softcapping = opt_bool(o, "logit_softcapping").value_or(false);
  m.mtp_layers = opt(o, "mtp_layers", &JsonObject::non_negative_integer).value_or(0);
  if (o.has("sliding_window")) {
    JsonObject w = o.object("sliding_window");
    m.sliding_window = parse_window(w);
  } else {
    o.ignore("sliding_window");
  }
  if (o.has("mla")) {
    JsonObject a = o.object("mla");
    m.mla = parse_mla(a);
  } else {
    o.ignore("mla");
  }
  if (o.has("moe")) {
    JsonObject moe = o.object("moe");
    m.moe = parse_moe(moe, m.d_ff);
  } else {
    o.ignore("moe");
  }
}

}  // namespace

ModelConfig parse_meshsim_model(JsonObject& o, const std::string& default_name) {
  ModelConfig m;
  m.name = opt(o, "name", &JsonObject::string).value_or(default_name);
  m.source = opt(o, "source", &JsonObject::string).value_or(o.source());
  m.architecture = o.choice<Architecture>("architecture");
  m.num_layers = o.positive_integer("num_layers");
  m.d_model = o.positive_integer("d_model");
  m.num_heads = o.positive_integer("num_heads");
  m.num_kv_heads = o.positive_integer("num_kv_heads");
  const auto head_dim = opt(o, "head_dim", &JsonObject::positive_integer);
  m.head_dim = head_dim.value_or(0);
  m.d_ff = o.positive_integer("d_ff");
  m.vocab_size = o.positive_integer("vocab_size");
  m.max_position_embeddings = o.positive_integer("max_position_embeddings");
  m.mlp = o.choice<MlpKind>("mlp");
  m.norm = o.choice<NormKind>("norm");
  m.positions = o.choice<PositionKind>("position_embedding");
  m.attention_bias = o.boolean("attention_bias");
  m.mlp_bias = o.boolean("mlp_bias");
  m.tied_embeddings = o.boolean("tied_embeddings");
  m.dropout = o.boolean("dropout");
  parse_variants(o, m);
  o.finish();
  const ModelFieldNames fields;
  derive_head_dim(m, head_dim.has_value(), o.source(), fields);
  validate_model_fields(m, o.source(), fields);
  return m;
}

}  // namespace meshsim::workloads
