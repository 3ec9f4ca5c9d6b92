// A transformer's architecture: the hyperparameters that decide parameter counts, FLOPs, memory
// and the shapes of every op meshsim plans. Nothing about hardware or parallelism lives here.
//
// Three families are modelled exactly:
//   llama    pre-norm decoder, RMSNorm, RoPE (no position table), gated SwiGLU MLP, GQA
//   mixtral  llama with the MLP replaced by a top-k routed mixture of SwiGLU experts
//   gpt2     pre-norm decoder, LayerNorm, learned absolute positions, GeLU MLP, biases (also GPT-3,
//            whose dense layers have the same parameters; its banded sparse attention does not
//            change the count)
//
// Loading (`load_model`): a preset name (workloads/models/*.json, compiled into the library), a
// path to a meshsim model JSON (strict schema, every field below, unknown keys are errors), or a
// path to a Hugging Face config.json (recognised by its "model_type"; unknown keys are ignored).
// Every error is an InputError naming the file, the JSON pointer and what was expected.
//
// The meshsim schema (workloads/models/llama3-70b.json is an example):
//   name (optional, default: file stem), source (optional), architecture: llama|mixtral|gpt2,
//   num_layers, d_model, num_heads, num_kv_heads, head_dim (optional: d_model / num_heads, which
//   must then divide), d_ff, vocab_size, max_position_embeddings, mlp: swiglu|gelu,
//   norm: rmsnorm|layernorm, position_embedding: rope|learned|alibi, attention_bias, mlp_bias,
//   tied_embeddings, dropout (booleans), moe: {num_experts, experts_per_token} (mixtral only).
#pragma once

#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <vector>

#include "meshsim/sim/enum_names.h"

namespace meshsim::workloads {

using meshsim::to_string;

enum class Architecture { kLlama, kMixtral, kGpt2 };
// kGated: SwiGLU, three d x d_ff matrices (gate, up, down). kGelu: two (fc1, fc2).
enum class MlpKind { kGated, kGelu };
// kRmsNorm: one weight vector of d. kLayerNorm: weight and bias, 2d.
enum class NormKind { kRmsNorm, kLayerNorm };
// kRope: rotary, no parameters. kLearned: a max_position_embeddings x d_model table (GPT-2/3).
// kAlibi: linear biases added to the attention scores inside the attention kernel (Press et al.
// 2022; MPT), no parameters and no kernel of its own.
enum class PositionKind { kRope, kLearned, kAlibi };
constexpr auto enum_names(Architecture) {
  return std::to_array<EnumName<Architecture>>(
      {{Architecture::kLlama, "llama"}, {Architecture::kMixtral, "mixtral"}, {Architecture::kGpt2, "gpt2"}});
}
constexpr auto enum_names(MlpKind) {
  return std::to_array<EnumName<MlpKind>>({{MlpKind::kGated, "swiglu"}, {MlpKind::kGelu, "gelu"}});
}
constexpr auto enum_names(NormKind) {
  return std::to_array<EnumName<NormKind>>(
      {{NormKind::kRmsNorm, "rmsnorm"}, {NormKind::kLayerNorm, "layernorm"}});
}
constexpr auto enum_names(PositionKind) {
  return std::to_array<EnumName<PositionKind>>(
      {{PositionKind::kRope, "rope"},
       {PositionKind::kLearned, "learned"},
       {PositionKind::kAlibi, "alibi"}});
}

struct MoeConfig {
  int64_t num_experts = 0;        // experts per MoE layer (HF num_local_experts)
  int64_t experts_per_token = 0;  // top-k (HF num_experts_per_tok); 1 <= k <= num_experts
};

struct ModelConfig {
  std::string name;
  std::string source;  // where the hyperparameters come from (paper, HF config URL, file path)
  Architecture architecture = Architecture::kLlama;
  int64_t num_layers = 0;
  int64_t d_model = 0;       // hidden size h
  int64_t num_heads = 0;     // query heads a
  int64_t num_kv_heads = 0;  // key/value heads (GQA); == num_heads for multi-head attention
  int64_t head_dim = 0;      // usually d_model / num_heads, but may differ when given explicitly
  int64_t d_ff = 0;          // MLP inner size (per expert for MoE)
  int64_t vocab_size = 0;
  int64_t max_position_embeddings = 0;
  MlpKind mlp = MlpKind::kGated;
  NormKind norm = NormKind::kRmsNorm;
  PositionKind positions = PositionKind::kRope;
  bool attention_bias = false;   // biases on Q, K, V and the output projection
  bool mlp_bias = false;         // biases on every MLP matrix
  bool tied_embeddings = false;  // LM head shares the token embedding matrix
  bool dropout = false;          // attention-probability and residual dropout used in training
  std::optional<MoeConfig> moe;  // absent: dense MLP

  int64_t q_dim() const { return num_heads * head_dim; }      // width of Q and attention output
  int64_t kv_dim() const { return num_kv_heads * head_dim; }  // width of K and of V
  bool is_moe() const { return moe.has_value(); }
};

// Names of the built-in presets, sorted: gpt2-small, gpt3-175b, llama3-405b, llama3-70b,
// llama3-8b, llama3.2-1b, mixtral-8x7b.
std::vector<std::string> model_preset_names();

// A preset, a meshsim model JSON path or a Hugging Face config.json path (see the file comment).
// An argument that is neither a preset nor an existing file is an InputError that lists the
// presets.
ModelConfig load_model(const std::string& name_or_path);

// Parses an already-read JSON value; `source` names it in errors. A value with "model_type" is
// read as a Hugging Face config, anything else as the meshsim schema.
ModelConfig parse_model(const nlohmann::json& value, const std::string& source);

// Upper bounds on a model's sizes, which every loader checks (validate_model). Each is far above
// any transformer trained (the largest figure of today's models in brackets), and together they
// keep every count the accounting derives (parameters, FLOPs, bytes of weights, gradients and
// optimizer state) inside 64 bits.
struct ModelLimits {
  static constexpr int64_t kLayers = 4096;                  // (Llama 3 405B: 126)
  static constexpr int64_t kDModel = int64_t{1} << 20;      // (PaLM 540B: 18,432)
  static constexpr int64_t kDff = int64_t{1} << 22;         // (PaLM 540B: 73,728)
  static constexpr int64_t kHeads = int64_t{1} << 16;       // query heads (PaLM 540B: 48)
  static constexpr int64_t kHeadDim = int64_t{1} << 16;     // (Gemma 2: 256)
  static constexpr int64_t kVocab = int64_t{1} << 24;       // (Gemma: 256,000)
  static constexpr int64_t kPositions = int64_t{1} << 30;   // (Llama 4 Scout: 10 M tokens)
  static constexpr int64_t kExperts = int64_t{1} << 16;     // (DeepSeek-V3: 256)
  static constexpr int64_t kLayerParameters = int64_t{1} << 40;  // per layer (405B: 3.2 G)
  static constexpr int64_t kTableParameters = int64_t{1} << 40;  // an embedding or position table
};

// Checks the invariants every loader guarantees (throws InputError against `source`, pointing at
// the offending field of the meshsim schema): positive sizes within ModelLimits; num_heads
// divisible by num_kv_heads; top-k <= experts; MoE iff architecture is mixtral.
void validate_model(const ModelConfig& model, const std::string& source);

}  // namespace meshsim::workloads
