// Hugging Face config.json -> ModelConfig: the dispatch on model_type, the key bookkeeping and
// the keys that cannot change the cost. The families' parsers are in hf_families.cc.
//
// model_types read: llama, mistral, mixtral, qwen2, qwen2_moe, qwen3, qwen3_moe, gemma, gemma2,
// gemma3_text, gemma3 (the text model of the multimodal config; its SigLIP vision tower is
// counted, not simulated), phi3, nemotron, gpt_neox, falcon (also the legacy RefinedWeb and
// RefinedWebModel), gpt2, deepseek_v2, deepseek_v3. Anything else is an error listing them.
//
// Every key of the object is one of: read by the family's parser (the cost-changing keys; a
// value the model cannot express, such as Qwen-MoE's decoder_sparse_step != 1, is an error),
// named below as ignored (reported in ModelConfig::ignored_fields, with the reason where it is
// not obvious), or unknown: an error, since meshsim cannot tell whether it changes the cost.
#include <fmt/format.h>

#include <algorithm>

#include "hf_reader.h"
#include "meshsim/sim/checked.h"
#include "meshsim/sim/error.h"
#include "model_loaders.h"

namespace meshsim::workloads {
namespace detail {
namespace {

// Keys that change neither FLOPs, memory nor communication (the notes of issue 13 and each
// family's configuration_<type>.py): bookkeeping, token ids, numerics constants, RoPE variants
// (elementwise), losses and routing scalars (elementwise), the checkpoint's storage.
const std::vector<std::string>& common_ignored() {
  static const std::vector<std::string> keys = {
      "architectures",
      "auto_map",
      "_name_or_path",
      "model_type",
      "transformers_version",
      "torch_dtype",
      "dtype",
      "use_cache",
      "bos_token_id",
      "eos_token_id",
      "pad_token_id",
      "unk_token_id",
      "initializer_range",
      "rms_norm_eps",
      "layer_norm_eps",
      "layer_norm_epsilon",
      "norm_eps",
      "rope_theta",
      "rope_scaling",
      "rope_parameters",
      "rope_local_base_freq",
      "rotary_emb_base",
      "original_max_position_embeddings",
      "rotary_pct: partial RoPE is elementwise",
      "partial_rotary_factor: partial RoPE is "
      "elementwise",
      "hidden_act",
      "hidden_activation",
      "activation_function",
      "query_pre_attn_scalar",
      "cache_implementation",
      "pretraining_tp: splits matmuls for numerics only",
      "tokenizer_class",
      "task_specific_params",
      "output_router_logits",
      "router_aux_loss_coef",
      "router_jitter_noise",
      "aux_loss_alpha",
      "seq_aux",
      "routed_scaling_factor",
      "scoring_func",
      "norm_topk_prob",
      "classifier_dropout",
      "tie_encoder_decoder",
      "quantization_config: checkpoint storage; the training precision is the plan's dtype",
      "return_dict",
      "output_hidden_states",
      "output_attentions",
      "is_decoder"};
  return keys;
}

std::string key_of(const std::string& entry) { return entry.substr(0, entry.find(':')); }

bool listed(const std::vector<std::string>& list, const std::string& key, std::string& entry) {
  for (const std::string& e : list) {
    if (key_of(e) == key) {
      entry = e;
      return true;
    }
  }
  return false;
}

std::string hf_name(JsonObject& o, const std::string& default_name) {
  if (o.has("_name_or_path") && o.raw("_name_or_path").is_string()) {
    const std::string n = o.string("_name_or_path");
    if (!n.empty()) {
      return n;
    }
  }
  return default_name;
}

struct Family {
  const char* model_type;
  Architecture architecture;
};

// The model_types read and the family each becomes.
constexpr std::array<Family, 19> kFamilies = {{{"llama", Architecture::kLlama},
                                               {"mistral", Architecture::kMistral},
                                               {"mixtral", Architecture::kMixtral},
                                               {"qwen2", Architecture::kQwen2},
                                               {"qwen2_moe", Architecture::kQwen2Moe},
                                               {"qwen3", Architecture::kQwen3},
                                               {"qwen3_moe", Architecture::kQwen3Moe},
                                               {"phi3", Architecture::kPhi3},
                                               {"gemma", Architecture::kGemma},
                                               {"gemma2", Architecture::kGemma2},
                                               {"gemma3_text", Architecture::kGemma3},
                                               {"gemma3", Architecture::kGemma3},
                                               {"nemotron", Architecture::kNemotron},
                                               {"gpt_neox", Architecture::kGptNeox},
                                               {"falcon", Architecture::kFalcon},
                                               {"RefinedWeb", Architecture::kFalcon},
                                               {"RefinedWebModel", Architecture::kFalcon},
                                               {"gpt2", Architecture::kGpt2},
                                               {"deepseek_v2", Architecture::kDeepseekV2}}};

std::optional<Architecture> family_of(const std::string& type) {
  if (type == "deepseek_v3") {
    return Architecture::kDeepseekV3;
  }
  for (const Family& f : kFamilies) {
    if (type == f.model_type) {
      return f.architecture;
    }
  }
  return std::nullopt;
}

std::string supported_types() {
  std::string out;
  for (const Family& f : kFamilies) {
    out += std::string(out.empty() ? "" : ", ") + f.model_type;
  }
  return out + ", deepseek_v3";
}

ModelConfig parse_family(HfReader& r, Architecture a) {
  using A = Architecture;
  switch (a) {
    case A::kGemma:
    case A::kGemma2:
    case A::kGemma3:
      return parse_hf_gemma(r, a);
    case A::kNemotron:
      return parse_hf_nemotron(r);
    case A::kGptNeox:
      return parse_hf_gpt_neox(r);
    case A::kFalcon:
      return parse_hf_falcon(r);
    case A::kGpt2:
      return parse_hf_gpt2(r);
    case A::kDeepseekV2:
    case A::kDeepseekV3:
      return parse_hf_deepseek(r, a);
    default:
      return parse_hf_llama_like(r, a);
  }
}

// Gemma 3's SigLIP vision tower without its head (vision_use_head false) and the multimodal
// projector (mm_soft_emb_norm d_v, mm_input_projection d_v x d): patch Conv2d 3*p^2*d_v + d_v,
// position table (image/p)^2 * d_v, per layer q, k, v, o with biases, fc1 and fc2 with biases,
// two LayerNorms, and the post LayerNorm (transformers' modeling_siglip.py, modeling_gemma3.py).
int64_t gemma3_vision_parameters(HfReader& r, int64_t text_hidden) {
  JsonObject v = r.obj().object("vision_config");
  HfReader vr(r.value().at("vision_config"), v);
  const int64_t d = vr.positive("hidden_size");
  const int64_t f = vr.positive("intermediate_size");
  const int64_t layers = vr.positive("num_hidden_layers");
  const int64_t patch = vr.positive("patch_size");
  const int64_t image = vr.positive("image_size");
  const int64_t channels = vr.positive_or("num_channels", 3);
  if (vr.boolean_or("vision_use_head", false)) {
    vr.fail("vision_use_head", "Gemma 3 uses the vision tower without its head; expected false");
  }
  vr.read("num_attention_heads");  // heads split d_v; no parameters of their own
  std::vector<std::string> ignored;
  vr.finish("gemma3 vision_config",
            {"model_type", "layer_norm_eps", "hidden_act", "attention_dropout", "torch_dtype"},
            ignored);
  const int64_t per_layer = 4 * (d * d + d) + (d * f + f) + (f * d + d) + 2 * 2 * d;
  const int64_t tower = channels * patch * patch * d + d + (image / patch) * (image / patch) * d +
                        layers * per_layer + 2 * d;
  return tower + d + d * text_hidden;
}

ModelConfig parse_gemma3_multimodal(HfReader& r, std::vector<std::string>& ignored) {
  JsonObject t = r.obj().object("text_config");
  HfReader tr(r.value().at("text_config"), t);
  ModelConfig m = parse_hf_gemma(tr, Architecture::kGemma3);
  tr.finish("gemma3 text_config", hf_family_ignored(Architecture::kGemma3), ignored);
  m.vision_parameters = gemma3_vision_parameters(r, m.d_model);
  return m;
}

}  // namespace

bool HfReader::present(const std::string& key) {
  read(key);
  return obj_.has(key) && !obj_.raw(key).is_null();
}

int64_t HfReader::positive(const std::string& key) {
  read(key);
  return obj_.positive_integer(key);
}

int64_t HfReader::positive_or(const std::string& key, int64_t fallback) {
  return present(key) ? obj_.positive_integer(key) : fallback;
}

int64_t HfReader::non_negative_or(const std::string& key, int64_t fallback) {
  return present(key) ? obj_.non_negative_integer(key) : fallback;
}

bool HfReader::boolean_or(const std::string& key, bool fallback) {
  return present(key) ? obj_.boolean(key) : fallback;
}

double HfReader::number_or(const std::string& key, double fallback) {
  return present(key) ? obj_.number(key) : fallback;
}

std::optional<int64_t> HfReader::positive_any(const std::vector<std::string>& keys) {
  for (const std::string& k : keys) {
    if (present(k)) {
      return obj_.positive_integer(k);
    }
  }
  return std::nullopt;
}

void HfReader::finish(const std::string& family, const std::vector<std::string>& family_ignored,
                      std::vector<std::string>& ignored) const {
  for (const auto& [key, v] : value_.items()) {
    if (read_.contains(key)) {
      continue;
    }
    std::string entry;
    if (listed(common_ignored(), key, entry) || listed(family_ignored, key, entry)) {
      const size_t colon = entry.find(':');
      ignored.push_back(obj_.pointer_of(key) +
                        (colon == std::string::npos ? "" : " (" + entry.substr(colon + 2) + ")"));
      continue;
    }
    obj_.fail(key, fmt::format("unknown field for model_type {}: meshsim cannot tell whether it "
                               "changes the cost (remove it, or describe the model in meshsim's "
                               "own schema)",
                               family));
  }
}

}  // namespace detail

ModelConfig parse_hf_config(const nlohmann::json& value, JsonObject& o,
                            const std::string& default_name) {
  o.allow_unknown();
  detail::HfReader r(value, o);
  r.read("model_type");
  const std::string type = o.string("model_type");
  const std::optional<Architecture> family = detail::family_of(type);
  if (!family) {
    o.fail("model_type", fmt::format("unsupported Hugging Face model_type \"{}\" (expected one "
                                     "of: {})",
                                     type, detail::supported_types()));
  }
  std::vector<std::string> ignored;
  ModelConfig m;
  if (type == "gemma3") {
    r.read("text_config");
    r.read("vision_config");
    m = detail::parse_gemma3_multimodal(r, ignored);
  } else {
    m = detail::parse_family(r, *family);
  }
  r.finish(type, detail::hf_family_ignored(*family), ignored);
  std::sort(ignored.begin(), ignored.end());
  m.ignored_fields = std::move(ignored);
  m.name = detail::hf_name(o, default_name);
  m.source = o.source();
  return m;
}

}  // namespace meshsim::workloads
