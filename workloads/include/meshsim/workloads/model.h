// A transformer's architecture: the hyperparameters that decide parameter counts, FLOPs, memory
// and the shapes of every op meshsim plans. Nothing about hardware or parallelism lives here.
//
// One decoder-only block with the variants of the models trained today:
//   attention  multi-head (MHA, kv heads == heads), grouped-query (GQA), multi-query (MQA, one kv
//              head), or DeepSeek's multi-head latent attention (MLA: low-rank Q and KV
//              projections, a compressed KV cache); head_dim may differ from d_model / heads
//              (Gemma, Qwen3); optional QK norms (Qwen3, Gemma-3); a sliding window on all layers
//              (Mistral) or on a repeating local/global pattern (Gemma-2 1:1, Gemma-3 5:1);
//              biases on Q, K, V and, separately, on the output projection (Qwen2: QKV only)
//   MLP        gated (SwiGLU, GeGLU: three matrices) or plain (GeLU, squared ReLU: two)
//   block      sequential (x + attn, then + mlp) or parallel (GPT-NeoX, Falcon: attention and MLP
//              read the same input; one tensor-parallel reduction per layer); 1, 2 or 4 norms
//   MoE        top-k routed experts of their own width, shared experts (DeepSeek, Qwen-MoE), a
//              sigmoid gate on the shared expert (Qwen2-MoE), a router bias vector (DeepSeek-V3's
//              aux-loss-free e_score_correction_bias), the first k layers dense (DeepSeek)
//   MTP        DeepSeek-V3's multi-token prediction modules (one extra block and an extra LM head
//              pass per depth in training; their parameters are counted apart from the model's)
//
// Loading (`load_model`): a preset name (workloads/models/*.json, compiled into the library), a
// path to a meshsim model JSON (strict schema, every field below, unknown keys are errors), or a
// path to a Hugging Face config.json (recognised by its "model_type"; hf_config.cc lists the
// model_types and fields read; unknown model_types and fields that may change the cost are errors,
// fields that do not are named in `ignored_fields`). Every error is an InputError naming the file,
// the JSON pointer and what was expected.
//
// The meshsim schema (workloads/models/llama3-70b.json is an example):
//   name (optional, default: file stem), source (optional), architecture (the family, see
//   enum_names(Architecture)), num_layers, d_model, num_heads, num_kv_heads, head_dim (optional:
//   d_model / num_heads, which must then divide), d_ff (dense MLP width), vocab_size,
//   max_position_embeddings, mlp: swiglu|geglu|gelu|relu2, norm: rmsnorm|layernorm,
//   position_embedding: rope|learned|alibi, attention_bias (Q, K, V and output), mlp_bias,
//   tied_embeddings, dropout (booleans). Optional, with their defaults:
//   attention_out_bias (= attention_bias), qk_norm (false), norms_per_layer (2; 1 or 4),
//   parallel_blocks (false), logit_softcapping (false; recorded, no FLOPs: Gemma-2's tanh caps),
//   sliding_window: {size, pattern: [bool...]} (layer i is windowed iff pattern[i % len]),
//   mla: {q_lora_rank (0: no Q compression), kv_lora_rank, qk_nope_head_dim, qk_rope_head_dim,
//   v_head_dim}, mtp_layers (0),
//   moe: {num_experts, experts_per_token, expert_d_ff (= d_ff), num_shared_experts (0),
//   shared_expert_d_ff (each shared expert's width; = expert_d_ff), shared_expert_gate (false),
//   router_bias (false), first_dense_layers (0), routing_groups (1), routing_group_topk (1)}.
#pragma once

#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <vector>

#include "meshsim/sim/enum_names.h"

namespace meshsim::workloads {

using meshsim::to_string;

// The family a model belongs to (its Hugging Face model_type). It decides which variants the
// schema may combine: MoE families need a moe section, dense ones must not have one, and only
// the DeepSeek family has MLA.
enum class Architecture {
  kLlama,
  kMixtral,
  kGpt2,
  kMistral,
  kQwen2,
  kQwen2Moe,
  kQwen3,
  kQwen3Moe,
  kGemma,
  kGemma2,
  kGemma3,
  kPhi3,
  kGptNeox,
  kFalcon,
  kNemotron,
  kDeepseekV2,
  kDeepseekV3,
};
// kGated: SwiGLU / GeGLU, three d x d_ff matrices (gate, up, down). kGelu / kRelu2: two (fc1,
// fc2); kRelu2 is Nemotron's squared ReLU.
enum class MlpKind { kGated, kGelu, kGeglu, kRelu2 };
// kRmsNorm: one weight vector of d. kLayerNorm: weight and bias, 2d.
enum class NormKind { kRmsNorm, kLayerNorm };
// kRope: rotary, no parameters. kLearned: a max_position_embeddings x d_model table (GPT-2/3).
// kAlibi: linear biases added to the attention scores inside the attention kernel (Press et al.
// 2022; MPT), no parameters and no kernel of its own.
enum class PositionKind { kRope, kLearned, kAlibi };
constexpr auto enum_names(Architecture) {
  using A = Architecture;
  return std::to_array<EnumName<A>>({{A::kLlama, "llama"},
                                     {A::kMixtral, "mixtral"},
                                     {A::kGpt2, "gpt2"},
                                     {A::kMistral, "mistral"},
                                     {A::kQwen2, "qwen2"},
                                     {A::kQwen2Moe, "qwen2_moe"},
                                     {A::kQwen3, "qwen3"},
                                     {A::kQwen3Moe, "qwen3_moe"},
                                     {A::kGemma, "gemma"},
                                     {A::kGemma2, "gemma2"},
                                     {A::kGemma3, "gemma3"},
                                     {A::kPhi3, "phi3"},
                                     {A::kGptNeox, "gpt_neox"},
                                     {A::kFalcon, "falcon"},
                                     {A::kNemotron, "nemotron"},
                                     {A::kDeepseekV2, "deepseek_v2"},
                                     {A::kDeepseekV3, "deepseek_v3"}});
}
constexpr auto enum_names(MlpKind) {
  return std::to_array<EnumName<MlpKind>>({{MlpKind::kGated, "swiglu"},
                                           {MlpKind::kGelu, "gelu"},
                                           {MlpKind::kGeglu, "geglu"},
                                           {MlpKind::kRelu2, "relu2"}});
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

// Three matrices (gate, up, down) or two (up, down).
constexpr bool is_gated(MlpKind k) { return k == MlpKind::kGated || k == MlpKind::kGeglu; }
// Architectures whose MLPs are routed experts.
bool is_moe_family(Architecture a);

struct MoeConfig {
  int64_t num_experts = 0;          // routed experts per MoE layer (HF num_local_experts)
  int64_t experts_per_token = 0;    // top-k (HF num_experts_per_tok); 1 <= k <= num_experts
  int64_t expert_d_ff = 0;          // one routed expert's inner width (HF moe_intermediate_size)
  int64_t num_shared_experts = 0;   // experts every token passes through (DeepSeek, Qwen-MoE)
  int64_t shared_expert_d_ff = 0;   // one shared expert's inner width
  bool shared_expert_gate = false;  // Qwen2-MoE: sigmoid(Linear(d, 1)) scales the shared expert
  bool router_bias = false;         // DeepSeek-V3 noaux_tc: an E-vector added to the scores
  int64_t first_dense_layers = 0;   // layers [0, k) have a dense MLP of width d_ff
  // Group-limited routing (DeepSeek-V2 group_limited_greedy, V3 noaux_tc; HF n_group and
  // topk_group; Megatron-Core moe_router_num_groups, moe_router_group_topk): the experts fall in
  // `routing_groups` equal groups and a token's top-k lie in `routing_group_topk` of them. With
  // groups placed on nodes (DeepSeek-V3: 8 groups, 4 per token, "each token will be sent to at most
  // 4 nodes", Liu et al. 2024, Sec. 2.1.2) it bounds the nodes a token's copies cross to.
  int64_t routing_groups = 1;
  int64_t routing_group_topk = 1;
};

// Multi-head latent attention (DeepSeek-V2, Liu et al. 2024, Sec. 2.1): Q through a rank
// q_lora_rank bottleneck (or directly when 0), K and V decompressed from a shared latent of
// kv_lora_rank plus one RoPE key of qk_rope_head_dim shared by all heads. Heads score over
// qk_nope_head_dim + qk_rope_head_dim and output v_head_dim.
struct MlaConfig {
  int64_t q_lora_rank = 0;
  int64_t kv_lora_rank = 0;
  int64_t qk_nope_head_dim = 0;
  int64_t qk_rope_head_dim = 0;
  int64_t v_head_dim = 0;
  int64_t qk_head_dim() const { return qk_nope_head_dim + qk_rope_head_dim; }
};

// Layer i attends to at most `size` previous tokens iff pattern[i % pattern.size()].
struct SlidingWindow {
  int64_t size = 0;
  std::vector<bool> pattern;
};

struct ModelConfig {
  std::string name;
  std::string source;  // where the hyperparameters come from (paper, HF config URL, file path)
  Architecture architecture = Architecture::kLlama;
  int64_t num_layers = 0;
  int64_t d_model = 0;       // hidden size h
  int64_t num_heads = 0;     // query heads a
  int64_t num_kv_heads = 0;  // key/value heads (GQA); == num_heads for MHA; MLA: == num_heads
  int64_t head_dim = 0;      // usually d_model / num_heads, but may differ when given explicitly;
                             // MLA: the Q/K head dim, qk_nope_head_dim + qk_rope_head_dim
  int64_t d_ff = 0;          // dense MLP inner size (Mixtral: also the experts')
  int64_t vocab_size = 0;
  int64_t max_position_embeddings = 0;
  MlpKind mlp = MlpKind::kGated;
  NormKind norm = NormKind::kRmsNorm;
  PositionKind positions = PositionKind::kRope;
  bool attention_bias = false;      // biases on Q, K and V
  bool attention_out_bias = false;  // bias on the output projection
  bool mlp_bias = false;            // biases on every MLP matrix
  bool tied_embeddings = false;     // LM head shares the token embedding matrix
  bool dropout = false;             // attention-probability and residual dropout in training
  bool qk_norm = false;             // RMSNorm over head_dim on Q and K (Qwen3, Gemma-3)
  int64_t norms_per_layer = 2;      // 1 (Falcon-7B parallel), 2 (pre-norm), 4 (Gemma-2/3 sandwich)
  bool parallel_blocks = false;     // attention and MLP in parallel from one input
  bool logit_softcapping = false;   // tanh caps on attention scores / logits (Gemma-2)
  int64_t mtp_layers = 0;           // multi-token prediction depth (DeepSeek-V3: 1)
  std::optional<SlidingWindow> sliding_window;
  std::optional<MlaConfig> mla;
  std::optional<MoeConfig> moe;  // absent: dense MLP
  // Parameters of a multimodal checkpoint outside the language model (Gemma 3's SigLIP vision
  // tower and projector): in its published total, not simulated (text-only training).
  int64_t vision_parameters = 0;
  // Fields of an imported config that do not change the cost, named so that nothing is dropped
  // silently (JSON pointers, sorted, with the reason where it is not obvious). Empty for
  // meshsim's own schema.
  std::vector<std::string> ignored_fields;

  // Widths (all heads) of Q, of K, of V and of the attention output. MLA: K is per head too
  // (num_kv_heads == num_heads), and V and the output have v_head_dim per head.
  int64_t q_dim() const { return num_heads * head_dim; }
  int64_t kv_dim() const { return num_kv_heads * head_dim; }
  int64_t v_dim() const { return mla ? num_heads * mla->v_head_dim : kv_dim(); }
  int64_t attention_out_dim() const { return mla ? num_heads * mla->v_head_dim : q_dim(); }
  bool is_moe() const { return moe.has_value(); }
  // Layer i (0-based) routes to experts: an MoE model past its first dense layers.
  bool is_moe_layer(int64_t layer) const { return moe && layer >= moe->first_dense_layers; }
  int64_t num_moe_layers() const { return moe ? num_layers - moe->first_dense_layers : 0; }
  // Keys layer i attends to at most: its window, or 0 (the whole causal prefix).
  int64_t attention_window(int64_t layer) const;
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
// divisible by num_kv_heads; top-k <= experts; MoE iff the family is an MoE family; MLA only in
// DeepSeek.
void validate_model(const ModelConfig& model, const std::string& source);

}  // namespace meshsim::workloads
