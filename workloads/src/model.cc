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

}  // namespace

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
    return parse_hf_config(obj, default_name);
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
  // Positive, and at most `max` (why: ModelLimits in model.h).
  const auto size = [&](int64_t v, const std::string& field, int64_t max) {
    if (v <= 0) {
      throw InputError(source, field, fmt::format("expected a positive integer, got {}", v));
    }
    if (v > max) {
      throw InputError(source, field,
                       fmt::format("{} is above the limit of {}: far beyond any transformer "
                                   "trained, and past what meshsim's 64-bit accounting holds",
                                   v, power_of_two(max)));
    }
  };
  size(m.num_layers, f.num_layers, ModelLimits::kLayers);
  size(m.d_model, f.d_model, ModelLimits::kDModel);
  size(m.num_heads, f.num_heads, ModelLimits::kHeads);
  size(m.num_kv_heads, f.num_kv_heads, ModelLimits::kHeads);
  size(m.head_dim, f.head_dim, ModelLimits::kHeadDim);
  size(m.d_ff, f.d_ff, ModelLimits::kDff);
  size(m.vocab_size, f.vocab_size, ModelLimits::kVocab);
  size(m.max_position_embeddings, f.max_position_embeddings, ModelLimits::kPositions);
  if (m.num_kv_heads > m.num_heads || m.num_heads % m.num_kv_heads != 0) {
    throw InputError(source, f.num_kv_heads,
                     fmt::format("{} key/value heads do not divide the {} query heads; expected "
                                 "a divisor of {} (grouped-query attention)",
                                 m.num_kv_heads, m.num_heads, f.num_heads.substr(1)));
  }
  const bool wants_moe = m.architecture == Architecture::kMixtral;
  if (wants_moe != m.is_moe()) {
    throw InputError(source, wants_moe ? f.num_experts : f.architecture,
                     wants_moe
                         ? "architecture mixtral needs experts; expected a mixture-of-experts "
                           "section"
                         : fmt::format("architecture {} is dense; expected no experts (use "
                                       "architecture mixtral for a mixture of experts)",
                                       to_string(m.architecture)));
  }
  if (m.moe) {
    size(m.moe->num_experts, f.num_experts, ModelLimits::kExperts);
    size(m.moe->experts_per_token, f.experts_per_token, ModelLimits::kExperts);
    if (m.moe->experts_per_token > m.moe->num_experts) {
      throw InputError(source, f.experts_per_token,
                       fmt::format("top-k of {} exceeds the {} experts; expected 1 <= k <= "
                                   "num_experts",
                                   m.moe->experts_per_token, m.moe->num_experts));
    }
  }
  check_parameter_counts(m, source, f);
}

void validate_model(const ModelConfig& model, const std::string& source) {
  validate_model_fields(model, source, ModelFieldNames{});
}

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
  if (o.has("moe")) {
    JsonObject moe = o.object("moe");
    m.moe =
        MoeConfig{moe.positive_integer("num_experts"), moe.positive_integer("experts_per_token")};
    moe.finish();
  } else {
    o.ignore("moe");
  }
  o.finish();
  const ModelFieldNames fields;
  derive_head_dim(m, head_dim.has_value(), o.source(), fields);
  validate_model_fields(m, o.source(), fields);
  return m;
}

}  // namespace meshsim::workloads
