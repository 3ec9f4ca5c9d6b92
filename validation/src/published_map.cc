// A published run as a meshsim scenario: the model, the hardware, the plan (published_plan.cc)
// and the measured step. Every default applied is a documented framework default and is listed
// in the scenario's assumptions; a value that depends on a choice the source does not state makes
// the run NotExpressible, with the reason.
#include <fmt/format.h>

#include <map>
#include <regex>

#include "meshsim/sim/error.h"
#include "meshsim/sim/unit_parse.h"
#include "meshsim/validation/published.h"
#include "meshsim/validation/published_flops.h"
#include "published_internal.h"

namespace meshsim::validation {
namespace detail {

int64_t stated(const std::optional<int64_t>& v, const char* what) {
  if (!v) {
    throw Unmappable(fmt::format("{} is not stated", what));
  }
  return *v;
}

bool contains(const std::string& text, const char* word) {
  return text.find(word) != std::string::npos;
}

}  // namespace detail

namespace {

using detail::contains;
using detail::stated;
using detail::Unmappable;
using workloads::Architecture;
using workloads::MlpKind;
using workloads::ModelConfig;
using workloads::NormKind;
using workloads::PositionKind;

// The model family a record describes, from its name, architecture notes and framework.
enum class Family {
  kGpt,
  kLlama,
  kMpt,
  kNemotron,
  kMaxTextSynthetic,
  kDeepSeekV3,
  kMixtral,
  kQwen3Moe
};

Family family_of(const PublishedRun& r) {
  const std::string& name = r.model.name;
  const std::string& notes = r.model.arch_notes;
  if (contains(name, "DeepSeek-V3") && contains(notes, "MLA")) {
    return Family::kDeepSeekV3;
  }
  // Mixtral and Qwen3's two MoE models route every layer's MLP to routed experts alone (no
  // shared expert, no dense layer): the record's experts, top-k and widths are the whole MoE.
  // Qwen3-Next and Qwen3.5 (linear-attention layers, a shared expert) are other shapes.
  static const std::regex mixtral(R"(mixtral)", std::regex::icase);
  static const std::regex qwen3_moe(R"(qwen3[-_ ]?(30b[-_ ]?a3b|235b[-_ ]?a22b))",
                                    std::regex::icase);
  if (r.model.moe && !contains(notes, "MLA") && std::regex_search(name, mixtral)) {
    return Family::kMixtral;
  }
  if (r.model.moe && !contains(notes, "MLA") && std::regex_search(name, qwen3_moe)) {
    return Family::kQwen3Moe;
  }
  if (r.model.moe || contains(notes, "MLA") || contains(notes, "experts")) {
    throw Unmappable("a mixture of experts or MLA other than DeepSeek-V3's, Mixtral's or "
                     "Qwen3's: its shape (shared experts, dense layers, latent ranks) is not in "
                     "the record");
  }
  if (contains(name, "MPT")) {
    return Family::kMpt;
  }
  if (contains(name, "MaxText")) {
    return Family::kMaxTextSynthetic;
  }
  if (contains(name, "Nemotron")) {
    return Family::kNemotron;
  }
  if (contains(name, "Llama") || contains(name, "LLAMA") || contains(notes, "SwiGLU")) {
    return Family::kLlama;
  }
  if (contains(name, "GPT")) {
    return Family::kGpt;
  }
  throw Unmappable(fmt::format("model family of \"{}\" not recognised", name));
}

// GPT-3 in NeMo 24.0x, whose performance tables came from NeMo-Framework-Launcher's training
// configs: a framework-wide default rather than a ScriptFact (published_plan.cc), which holds one
// run's setting read from the script beside its table. Where a table is silent, every
// launcher_scripts/conf/training/gpt3/{126m,5b,20b,40b,175b}.yaml at tag 24.07 sets tokenizer
// library megatron, type GPT2BPETokenizer (GPT-2's 50257 BPE tokens) with
// make_vocab_size_divisible_by 128, which Megatron multiplies by the tensor-parallel degree
// (_vocab_size_with_padding), and hidden_dropout and attention_dropout 0.1.
constexpr const char* kLauncherGpt3 =
    "NeMo-Framework-Launcher's gpt3 training configs (launcher_scripts/conf/training/gpt3/*.yaml "
    "@ 24.07)";

bool nemo_launcher_gpt3(const PublishedRun& r, Family family) {
  static const std::regex gpt3(R"(^GPT-?3)");
  return family == Family::kGpt && contains(r.framework, "NeMo 24.0") &&
         std::regex_search(r.model.name, gpt3);
}

// The vocabulary as stated, else the launcher's padded GPT-2 BPE for NeMo 24.0x GPT-3.
int64_t vocab_of(const PublishedRun& r, Family family, std::vector<std::string>& assumptions) {
  if (r.model.vocab || !nemo_launcher_gpt3(r, family)) {
    return stated(r.model.vocab, "the vocabulary size");
  }
  constexpr int64_t kGpt2BpeTokens = 50257;
  const int64_t tp = r.parallelism.tp.value_or(1);
  workloads::check_plan_size(workloads::PlanField::kTp, tp);  // 128 x tp stays in 64 bits
  const int64_t multiple = 128 * tp;
  const int64_t vocab = (kGpt2BpeTokens + multiple - 1) / multiple * multiple;
  assumptions.push_back(fmt::format("vocabulary {}: not in the table, but {} use the "
                                    "GPT2BPETokenizer (50257 tokens) padded to a multiple of "
                                    "128 x TP",
                                    vocab, kLauncherGpt3));
  return vocab;
}

// The common shape; the family sets the rest.
ModelConfig base_model(const PublishedRun& r, Family family,
                       std::vector<std::string>& assumptions) {
  ModelConfig m;
  m.name = r.id;
  m.source = r.citation;
  m.num_layers = stated(r.model.layers, "the number of layers");
  m.d_model = stated(r.model.hidden, "the hidden size");
  m.num_heads = stated(r.model.heads, "the number of attention heads");
  if (m.num_heads < 1) {  // head_dim below divides by it
    throw Unmappable(fmt::format("the number of attention heads is {}", m.num_heads));
  }
  m.vocab_size = vocab_of(r, family, assumptions);
  const int64_t seq = stated(r.model.seq_len, "the sequence length");
  m.max_position_embeddings = seq;
  m.head_dim = m.d_model / m.num_heads;
  return m;
}

// DeepSeek-V3 (Liu et al. 2024): the record states the layers, widths, heads, vocabulary and the
// routed experts; the rest is deepseek-ai/DeepSeek-V3's config.json (huggingface.co, as
// tests/workloads/hf_configs/DeepSeek-V3.json): MLA with q_lora_rank 1536, kv_lora_rank 512,
// qk_nope_head_dim 128, qk_rope_head_dim 64, v_head_dim 128; one shared expert of the routed
// experts' width; the first 3 layers dense (first_k_dense_replace); the noaux_tc router's bias;
// untied embeddings; one MTP module (num_nextn_predict_layers, which Megatron-Bridge's recipe
// sets as mtp_num_layers = 1: recipes/deepseek/deepseek_v3.py).
void deepseek_v3(const PublishedRun& r, ModelConfig& m, std::vector<std::string>& assumptions) {
  m.architecture = Architecture::kDeepseekV3;
  m.d_ff = stated(r.model.ffn, "the dense layers' MLP size");
  workloads::MlaConfig a;
  a.q_lora_rank = 1536;
  a.kv_lora_rank = 512;
  a.qk_nope_head_dim = 128;
  a.qk_rope_head_dim = 64;
  a.v_head_dim = 128;
  m.mla = a;
  m.head_dim = a.qk_head_dim();
  m.num_kv_heads = m.num_heads;
  m.tied_embeddings = false;
  workloads::MoeConfig e;
  e.num_experts = stated(r.model.experts, "the routed experts");
  e.experts_per_token = stated(r.model.top_k, "the experts per token");
  e.expert_d_ff = stated(r.model.expert_ffn, "the experts' width");
  e.num_shared_experts = 1;
  e.shared_expert_d_ff = e.expert_d_ff;
  e.first_dense_layers = 3;
  e.router_bias = true;
  e.routing_groups = 8;      // n_group; Megatron-Bridge's provider: moe_router_num_groups 8
  e.routing_group_topk = 4;  // topk_group; moe_router_group_topk 4
  m.moe = e;
  m.mtp_layers = 1;
  assumptions.push_back(
      "DeepSeek-V3's MLA ranks, 1 shared expert, 3 dense first layers, 1 MTP module and "
      "group-limited routing (8 groups, 4 per token) from deepseek-ai/DeepSeek-V3 config.json "
      "(the record states the rest)");
}

// The routed experts as the record states them, on every layer.
workloads::MoeConfig routed_experts(const PublishedRun& r) {
  workloads::MoeConfig e;
  e.num_experts = stated(r.model.experts, "the routed experts");
  e.experts_per_token = stated(r.model.top_k, "the experts per token");
  e.expert_d_ff = stated(r.model.expert_ffn, "the experts' width");
  return e;
}

// Mixtral (Jiang et al. 2024; mistralai/Mixtral-8x7B-v0.1 and -8x22B-v0.1 config.json, as
// workloads/models/mixtral-8x7b.json): Mistral's decoder (RMSNorm, RoPE, GQA, SwiGLU, untied
// embeddings, full attention: sliding_window null) with every MLP replaced by the routed experts.
void mixtral(const PublishedRun& r, ModelConfig& m, std::vector<std::string>& assumptions) {
  m.architecture = Architecture::kMixtral;
  m.moe = routed_experts(r);
  m.d_ff = r.model.ffn.value_or(m.moe->expert_d_ff);
  m.num_kv_heads = stated(r.model.kv_heads, "the number of KV heads");
  assumptions.push_back("Mixtral: every layer's MLP is the routed experts (no shared expert, no "
                        "dense layer), untied embeddings, full attention (Mixtral config.json)");
}

// Qwen3's MoE models (Qwen/Qwen3-30B-A3B and -235B-A22B config.json, as
// tests/workloads/hf_configs/Qwen3-30B-A3B.json): head_dim 128 whatever the hidden size, RMSNorm
// on the queries and keys, untied embeddings, no sliding window, MoE on every layer
// (decoder_sparse_step 1, mlp_only_layers []) without a shared expert.
void qwen3_moe(const PublishedRun& r, ModelConfig& m, std::vector<std::string>& assumptions) {
  m.architecture = Architecture::kQwen3Moe;
  m.moe = routed_experts(r);
  m.d_ff = r.model.ffn.value_or(m.moe->expert_d_ff);
  m.num_kv_heads = stated(r.model.kv_heads, "the number of KV heads");
  m.head_dim = 128;
  m.qk_norm = true;
  assumptions.push_back("Qwen3 MoE: head_dim 128, QK norm, MoE on every layer without a shared "
                        "expert, untied embeddings (Qwen3 MoE config.json)");
}

// The KV heads of a Llama record: as stated, else those of Meta's config.json for the model the
// name gives (num_key_value_heads of meta-llama/Llama-2-{7b,13b,70b}-hf and of every Llama 3,
// 3.1, 3.2 and 3.3 model on huggingface.co): Llama 2 7B and 13B are multi-head, Llama 2 70B and
// all of Llama 3 group the queries over 8 KV heads. Another Llama's attention is not guessed.
int64_t llama_kv_heads(const PublishedRun& r, int64_t query_heads,
                       std::vector<std::string>& assumptions) {
  if (r.model.kv_heads) {
    return *r.model.kv_heads;
  }
  static const std::regex llama2_mha(R"(llama[-_ ]?2[-_ ]+(7|13)b)", std::regex::icase);
  static const std::regex gqa8(R"(llama[-_ ]?(2[-_ ]+70b|3(\.\d+)?([^.\d]|$)))",
                               std::regex::icase);
  const std::string& name = r.model.name;
  if (std::regex_search(name, llama2_mha)) {
    assumptions.push_back("kv heads = query heads (Llama 2 7B and 13B config.json: multi-head)");
    return query_heads;
  }
  if (std::regex_search(name, gqa8)) {
    assumptions.push_back("kv heads = 8 (num_key_value_heads of Meta's Llama 2 70B and Llama 3 "
                          "config.json)");
    return 8;
  }
  throw Unmappable(fmt::format(
      "the number of KV heads is not stated, and \"{}\" is not a Llama whose config.json gives "
      "them",
      name));
}

ModelConfig model_of(const PublishedRun& r, std::vector<std::string>& assumptions) {
  const Family family = family_of(r);
  ModelConfig m = base_model(r, family, assumptions);
  const auto ffn_or = [&](int64_t framework_default, const char* source) {
    if (r.model.ffn) {
      return *r.model.ffn;
    }
    assumptions.push_back(fmt::format("ffn = {} ({})", framework_default, source));
    return framework_default;
  };
  const auto kv_or_mha = [&](const char* source) {
    if (r.model.kv_heads) {
      return *r.model.kv_heads;
    }
    assumptions.push_back(fmt::format("kv heads = query heads ({})", source));
    return m.num_heads;
  };
  switch (family) {
    case Family::kGpt:
    case Family::kMpt: {
      // GPT-2/3 as Megatron and NeMo build it: LayerNorm, learned positions, GeLU MLP of 4h,
      // biases, the LM head tied to the embedding (Megatron's default
      // share_embeddings_and_output_weights). llm-foundry's MPT as its benchmark yamls build it
      // is the same (scripts/train/yamls/pretrain/mpt-*.yaml at v0.3.0 and 5e85bd62d set no alibi
      // and no no_bias; MPTConfig's defaults then: learned_pos_emb True, a table of max_seq_len
      // rows; no_bias False; alibi False; the LM head tied to wte). The tables' NumParams bear it
      // out (MPT-7b at 32k: 6,784,688,128 = the layers with biases, the tied embedding and a
      // 32768 x 4096 position table).
      const bool mpt = family == Family::kMpt;
      m.architecture = Architecture::kGpt2;
      m.mlp = MlpKind::kGelu;
      m.norm = NormKind::kLayerNorm;
      m.positions = PositionKind::kLearned;
      m.attention_bias = m.mlp_bias = true;
      m.tied_embeddings = true;
      m.d_ff = ffn_or(4 * m.d_model, mpt ? "MPT expansion_ratio 4"
                                         : "Megatron's default ffn_hidden_size = 4 h");
      m.num_kv_heads = kv_or_mha(mpt ? "MPT's multi-head attention"
                                     : "multi-head attention, Megatron's default");
      if (nemo_launcher_gpt3(r, family)) {
        m.dropout = true;
        assumptions.push_back(fmt::format(
            "attention and hidden dropout 0.1: {}; the masks of the residual dropouts are "
            "costed, the dropout inside the fused attention kernel is not (no measurement of it)",
            kLauncherGpt3));
      }
      break;
    }
    case Family::kLlama:
      m.d_ff = stated(r.model.ffn, "the MLP size");
      m.num_kv_heads = llama_kv_heads(r, m.num_heads, assumptions);
      break;
    case Family::kNemotron:
      // Nemotron-4 (NeMo Nemotron4Config): LayerNorm (layernorm1p), RoPE on half the head
      // dimension, a non-gated squared-ReLU MLP. Its activation moves the bytes of GeLU's
      // kernel: meshsim costs it as the non-gated MLP's activation.
      m.mlp = MlpKind::kGelu;
      m.norm = NormKind::kLayerNorm;
      m.d_ff = stated(r.model.ffn, "the MLP size");
      m.num_kv_heads = stated(r.model.kv_heads, "the number of KV heads");
      assumptions.push_back(
          "Nemotron's squared-ReLU MLP costed as the non-gated MLP (the same GEMMs; the "
          "activation's element-wise kernel moves the same bytes)");
      break;
    case Family::kDeepSeekV3:
      deepseek_v3(r, m, assumptions);
      break;
    case Family::kMixtral:
      mixtral(r, m, assumptions);
      break;
    case Family::kQwen3Moe:
      qwen3_moe(r, m, assumptions);
      break;
    case Family::kMaxTextSynthetic:
      // MaxText's default decoder at 76bd53b0f (base.yml): head_dim 256 whatever d_model, one
      // ReLU input matrix (non-gated), RMSNorm, RoPE, logits through the embedding.
      m.head_dim = 256;
      m.mlp = MlpKind::kGelu;
      m.tied_embeddings = true;
      m.d_ff = stated(r.model.ffn, "the MLP size");
      m.num_kv_heads = kv_or_mha("MaxText's multi-head attention");
      // MaxText/layers/models.py DecoderLayer @ 76bd53b0f: attention and MLP both read one
      // RMSNorm's output and their sum joins the layer input in one residual add, i.e. a
      // parallel block. With TP, meshsim gathers the normed input once for both branches and
      // reduces their summed partial outputs once; XLA's partitioner reduce-scatters each
      // branch (each output is constrained embed-sharded) and can hide the first behind the
      // other branch's GEMMs, which leaves the same one reduction on the critical path.
      m.parallel_blocks = true;
      m.norms_per_layer = 1;
      assumptions.push_back(
          "MaxText's parallel block (models.py DecoderLayer @ 76bd53b0f: attention and MLP on "
          "one RMSNorm's output, one residual add): with TP, one gather of the normed input and "
          "one reduction of the summed branch outputs on the critical path");
      break;
  }
  return m;
}

// Chips per TPU slice, from the record's own words ("... = 64 chips per slice", "= 256 chips").
int64_t chips_per_slice(const PublishedRun& r) {
  static const std::regex chips(R"((\d+) chips)");
  std::smatch match;
  if (!std::regex_search(r.intra_slice, match, chips)) {
    throw Unmappable("the TPU slice size is not stated");
  }
  const std::optional<int64_t> count = parse_integer(match[1].str());
  if (!count || *count <= 0) {
    throw Unmappable(
        fmt::format("the TPU slice size \"{} chips\" is not a chip count", match[1].str()));
  }
  return *count;
}

// The torus of a slice of `chips`: the slice topologies Google Cloud's TPU docs list. 2D (v3,
// v5e, v6e; v3's accelerator types count TensorCores, two per chip): 4 chips 2x2, 8 2x4, 16 4x4,
// 32 4x8, 64 8x8, 128 8x16, 256 16x16, and on v3's 32x32 pod 512 16x32, 1024 32x32. 3D (v4 and
// v5p, whose types count TensorCores too: v5p-128 is 4x4x4): 8 chips 2x2x2, 16 2x2x4, 32 2x4x4,
// 64 4x4x4, 128 4x4x8, 256 4x8x8, 512 8x8x8, 1024 8x8x16, 2048 8x16x16, 4096 16x16x16.
std::vector<int64_t> torus_of(const topology::Chip& chip, int64_t chips) {
  static const std::map<int64_t, std::vector<int64_t>> two_d{
      {4, {2, 2}},   {8, {2, 4}},    {16, {4, 4}},     {32, {4, 8}},    {64, {8, 8}},
      {128, {8, 16}}, {256, {16, 16}}, {512, {16, 32}}, {1024, {32, 32}}};
  static const std::map<int64_t, std::vector<int64_t>> three_d{
      {8, {2, 2, 2}},    {16, {2, 2, 4}},    {32, {2, 4, 4}},     {64, {4, 4, 4}},
      {128, {4, 4, 8}},  {256, {4, 8, 8}},   {512, {8, 8, 8}},    {1024, {8, 8, 16}},
      {2048, {8, 16, 16}}, {4096, {16, 16, 16}}};
  // A shape past the chip's pod edge (v3's 16x32 on a v5e) is refused by resize_torus.
  const auto& table = chip.ici->torus_dims == 2 ? two_d : three_d;
  const auto it = table.find(chips);
  if (it == table.end()) {
    throw Unmappable(fmt::format("no torus for a {}-chip {} slice", chips, chip.name));
  }
  return it->second;
}

topology::ClusterSpec tpu_cluster(const PublishedRun& r, const std::string& preset,
                                  const topology::Catalogue& catalogue, int64_t devices) {
  topology::ClusterSpec c = topology::load_cluster(preset, catalogue);
  const int64_t per_slice = chips_per_slice(r);
  if (devices % per_slice != 0) {
    throw Unmappable(fmt::format("{} chips are not whole slices of {}", devices, per_slice));
  }
  c = topology::resize_torus(c, torus_of(c.chip, per_slice));
  if (devices != per_slice) {
    // Several slices joined by DCN (topology::join_slices); the plan shards inside each slice and
    // replicates across them (map_published_run sets fsdp = dp / slices).
    c = topology::join_slices(c, devices / per_slice);
  }
  return c;
}

topology::ClusterSpec gpu_cluster(const std::string& preset, const std::optional<std::string>& chip,
                                  const topology::Catalogue& catalogue, int64_t devices,
                                  std::vector<std::string>& assumptions,
                                  std::optional<int64_t> domain_devices = std::nullopt) {
  topology::ClusterSpec c = topology::load_cluster(preset, catalogue);
  if (chip) {
    c.chip = catalogue.chip(*chip);
  }
  if (domain_devices) {
    c.nvlink_domain_devices = *domain_devices;
  }
  if (devices % c.devices_per_node != 0) {
    throw Unmappable(
        fmt::format("{} GPUs are not whole {}-GPU nodes", devices, c.devices_per_node));
  }
  // A cluster larger than the preset's fat tree attaches gets another switch tier, as real
  // clusters of that size have (e.g. EOS's 3-tier NDR fabric).
  topology::FatTreeSpec& tree = *c.fat_tree;
  while (tree.max_endpoints() < devices * tree.nics_per_device) {
    ++tree.tiers;
    assumptions.push_back(fmt::format("a {}-tier fat tree for {} GPUs", tree.tiers, devices));
  }
  return topology::resize_nodes(c, devices / c.devices_per_node);
}

// GB200 NVL72 runs, 4 GPUs per tray. Up to a rack (72 GPUs) the trays are one NVLink domain.
// Beyond, Megatron-Bridge's launcher asks Slurm for segments of trays in one domain: as many trays
// as the job has up to 18, else the largest divisor of the tray count up to 18
// (scripts/performance/utils/executors.py slurm_executor, since 568b3a3ef of 2025-08-28: 32 trays
// run as 2 segments of 16, 64 GPUs per NVLink domain). Other frameworks' splits are unstated
// unless whole racks.
topology::ClusterSpec gb200_cluster(const PublishedRun& r, const topology::Catalogue& catalogue,
                                    int64_t devices, std::vector<std::string>& assumptions) {
  constexpr int64_t kRack = 72;
  constexpr int64_t kTray = 4;
  constexpr int64_t kTraysPerRack = kRack / kTray;
  if (devices <= kRack) {
    if (devices < kRack) {
      assumptions.push_back(fmt::format(
          "{} GPUs are {} trays of one NVL72 rack: one NVLink domain", devices, devices / kTray));
    }
    return gpu_cluster("gb200-nvl72", std::nullopt, catalogue, devices, assumptions);
  }
  if (contains(r.framework, "Megatron-Bridge") && devices % kTray == 0) {
    const int64_t trays = devices / kTray;
    int64_t segment = kTraysPerRack;
    while (trays % segment != 0) {
      --segment;
    }
    assumptions.push_back(fmt::format(
        "{} trays in Slurm segments of {} (Megatron-Bridge's launcher, "
        "scripts/performance/utils/executors.py): {} NVLink domains of {} GPUs",
        trays, segment, trays / segment, segment * kTray));
    return gpu_cluster("gb200-nvl72", std::nullopt, catalogue, devices, assumptions,
                       segment * kTray);
  }
  if (devices % kRack != 0) {
    throw Unmappable(fmt::format(
        "{} GPUs over 72-GPU NVL72 racks: how they split between the racks is not stated",
        devices));
  }
  return gpu_cluster("gb200-nvl72", std::nullopt, catalogue, devices, assumptions);
}

topology::ClusterSpec cluster_of(const PublishedRun& r, const topology::Catalogue& catalogue,
                                 std::vector<std::string>& assumptions) {
  const int64_t devices = stated(r.devices, "the device count");
  const std::string& key = r.hardware_key;
  if (key == "H100-SXM5-80GB") {
    return gpu_cluster("dgx-h100", std::nullopt, catalogue, devices, assumptions);
  }
  if (key == "A100-SXM4-80GB") {
    return gpu_cluster("dgx-a100", std::nullopt, catalogue, devices, assumptions);
  }
  if (key == "A100-SXM4-40GB") {
    return gpu_cluster("dgx-a100", "a100-40gb", catalogue, devices, assumptions);
  }
  if (key == "B200") {
    return gpu_cluster("dgx-b200", std::nullopt, catalogue, devices, assumptions);
  }
  if (key == "H200-SXM-141GB") {
    return gpu_cluster("h200", std::nullopt, catalogue, devices, assumptions);
  }
  if (key == "TPU-v5p") {
    return tpu_cluster(r, "tpu-v5p", catalogue, devices);
  }
  if (key == "TPU-v5e") {
    return tpu_cluster(r, "tpu-v5e", catalogue, devices);
  }
  if (key == "TPU-v4") {
    return tpu_cluster(r, "tpu-v4", catalogue, devices);
  }
  if (key.rfind("TPU-v6e", 0) == 0) {  // "TPU-v6e (Trillium)"
    return tpu_cluster(r, "tpu-v6e", catalogue, devices);
  }
  if (key == "TPU-v3") {
    return tpu_cluster(r, "tpu-v3", catalogue, devices);
  }
  if (key == "H100-96GB-HBM2e-GrandTeton") {
    throw Unmappable(
        "H100 96 GB HBM2e at 500 W (Meta Grand Teton): its peak rate is unstated (between H100 "
        "SXM and NVL, the source says) and the chip is not in the catalogue");
  }
  if (contains(key, "GB200")) {
    return gb200_cluster(r, catalogue, devices, assumptions);
  }
  throw Unmappable(fmt::format("hardware \"{}\" has no cluster preset", key));
}

// The layers per virtual stage of Megatron-Bridge's DeepSeek-V3 runs on 1024 H100s: TP 2, PP 8,
// VP 4, EP 64, global batch 8192 with pp_layout "Et|(tt|)*30mL" (scripts/performance/configs/
// deepseek/deepseek_workload_base_configs.py, DEEPSEEK_V3_PRETRAIN_CONFIG_H100_V1, at
// 042641823051ce167c52b0ae289941a227c11535): the embedding and one layer, 30 virtual stages of two
// layers, then the MTP module and the loss alone. The same config recomputes the modules
// "mla_up_proj" and "mlp" (recompute_granularity selective; "mlp" covers the 3 dense layers).
// Its base, BASE_DEEPSEEK_V3_CONFIG, sets expert_tensor_parallel_size=1; it dispatches with
// moe_flex_dispatcher_backend "hybridep" and moe_a2a_overlap=False (no EP overlap).
void deepseek_v3_pipeline(const PublishedRun& r, workloads::ParallelPlan& p,
                          std::vector<std::string>& assumptions) {
  if (p.pp != 8 || p.vpp != 4 || r.model.layers != 61) {
    throw Unmappable(fmt::format("no pipeline layout is known for DeepSeek-V3 on pp {} x vpp {}",
                                 p.pp, p.vpp));
  }
  p.stage_layers.assign(32, 2);
  p.stage_layers.front() = 1;
  p.stage_layers.back() = 0;
  p.origins.set(workloads::PlanField::kStageLayers, Origin::file(r.id, "/parallelism"));
  p.ep = stated(r.parallelism.ep, "the expert-parallel degree");
  p.origins.set(workloads::PlanField::kEp, Origin::file(r.id, "/parallelism/ep"));
  p.etp = 1;  // BASE_DEEPSEEK_V3_CONFIG: expert_tensor_parallel_size=1
  p.moe_dispatcher = workloads::MoeDispatcher::kFlex;  // moe_flex_dispatcher_backend="hybridep"
  p.recompute = workloads::Recompute::kSelective;
  p.recompute_modules = {workloads::RecomputeModule::kMlaUpProj, workloads::RecomputeModule::kMlp};
  std::erase_if(assumptions, [](const std::string& a) {
    return a.rfind("no activation recompute", 0) == 0;
  });
  assumptions.push_back(
      "Megatron-Bridge's DeepSeek-V3 H100 config (deepseek_workload_base_configs.py @ 0426418): "
      "pp_layout Et|(tt|)*30mL (1, 30 x 2, 0 layers per virtual stage), EP 64, expert TP 1 (EP "
      "carved out of TP x DP: 64 consecutive ranks), the flex dispatcher (HybridEP: once per "
      "node over InfiniBand, then NVLink; no EP overlap, moe_a2a_overlap=False), selective "
      "recompute of the modules mla_up_proj and mlp");
}

// Mixtral's and Qwen3's MoE runs: EP as stated, expert TP Megatron-Core's default (the TP
// degree), and the token dispatcher the record's notes name. Unnamed, it matters only once the EP
// group leaves the NVLink domain: NeMo's and Megatron-Bridge's MoE recipes set alltoall or flex
// (perf_recipes/qwen/h100/qwen3_moe.py @ 067f987df has both), which inside one domain move the
// same bytes over NVLink.
void routed_moe_plan(const PublishedRun& r, const topology::ClusterSpec& cluster,
                     workloads::ParallelPlan& p, std::vector<std::string>& assumptions) {
  p.ep = stated(r.parallelism.ep, "the expert-parallel degree");
  p.origins.set(workloads::PlanField::kEp, Origin::file(r.id, "/parallelism/ep"));
  const std::string& notes = r.parallelism.notes;
  static const std::regex flex(R"(\bflex\b|DeepEP|HybridEP)", std::regex::icase);
  static const std::regex alltoall(R"(\ball-?to-?all\b)", std::regex::icase);
  if (std::regex_search(notes, flex)) {
    p.moe_dispatcher = workloads::MoeDispatcher::kFlex;
    return;
  }
  if (std::regex_search(notes, alltoall)) {
    return;
  }
  const int64_t span = p.ep * p.tp * p.cp;
  if (span > cluster.scale_up_domain_size()) {
    throw Unmappable(fmt::format(
        "the MoE token dispatcher is not stated; with ep {} x tp {} x cp {} its EP group "
        "leaves the {}-GPU NVLink domain, where alltoall and flex differ",
        p.ep, p.tp, p.cp, cluster.scale_up_domain_size()));
  }
  assumptions.push_back(fmt::format(
      "the alltoall token dispatcher (unstated; the EP group of {} ranks stays in one NVLink "
      "domain, where the recipes' alltoall and flex move the same bytes)",
      span));
}

// Megatron-Bridge's Llama 3 70B recipes for 64 GB200s (Megatron-FSDP over all 64, TP 1, PP 1,
// no recompute) keep their activations in memory by offloading those of 20 (BF16) or 40 (FP8) of
// the 80 layers to the Grace CPUs: cpu_offloading_num_layers in
// llama3_70b_pretrain_64gpu_gb200_{bf16,fp8cs}_config,
// src/megatron/bridge/perf_recipes/llama/gb200/llama3.py @ 067f987df (2026-08); without it they
// need about twice the GPU's memory. A run of another plan is not that recipe: Megatron's default,
// no offloading, holds for it.
void megatron_bridge_offload(const PublishedRun& r, workloads::ParallelPlan& p,
                             std::vector<std::string>& assumptions) {
  const bool recipe_plan = p.tp == 1 && p.pp == 1 && p.cp == 1 && p.dp == 64 &&
                           p.zero == workloads::ZeroStage::kParameters;
  if (!(contains(r.hardware_key, "GB200") && contains(r.framework, "Megatron-Bridge") &&
        r.model.layers == 80 && recipe_plan)) {
    return;
  }
  const bool fp8 = p.matmul_dtype == Dtype::kFp8;
  p.offload_layers = fp8 ? 40 : 20;
  p.origins.set(workloads::PlanField::kOffloadLayers, Origin::file(r.id, "/framework"));
  assumptions.push_back(fmt::format(
      "the activations of {} of the 80 layers offloaded to the Grace CPUs "
      "(cpu_offloading_num_layers of Megatron-Bridge's llama3_70b_pretrain_64gpu_gb200_{}_config, "
      "perf_recipes/llama/gb200/llama3.py @ 067f987df)",
      p.offload_layers, fp8 ? "fp8cs" : "bf16"));
}

}  // namespace

NotExpressible refused_scenario(const std::exception& e) {
  return NotExpressible{fmt::format("meshsim refuses the scenario: {}", e.what())};
}

PublishedMapping map_published_run(const PublishedRun& run, const topology::Catalogue& catalogue) {
  try {
    PublishedScenario s;
    s.model = model_of(run, s.assumptions);
    workloads::validate_model(s.model, run.id);
    s.cluster = cluster_of(run, catalogue, s.assumptions);
    s.plan = detail::plan_of(run, s.cluster, s.assumptions);
    const Family family = family_of(run);
    if (family == Family::kDeepSeekV3) {
      deepseek_v3_pipeline(run, s.plan, s.assumptions);
    }
    if (family == Family::kMixtral || family == Family::kQwen3Moe) {
      routed_moe_plan(run, s.cluster, s.plan, s.assumptions);
    }
    megatron_bridge_offload(run, s.plan, s.assumptions);
    if (s.cluster.slices > 1 && s.plan.zero == workloads::ZeroStage::kParameters &&
        s.plan.dp % s.cluster.slices == 0) {
      s.plan.fsdp = s.plan.dp / s.cluster.slices;
      s.assumptions.push_back(fmt::format(
          "{} slices: FSDP inside each slice, data parallel across them over DCN (MaxText's "
          "ici_fsdp_parallelism x dcn_data_parallelism; plan fsdp = {})",
          s.cluster.slices, s.plan.fsdp));
    }
    if (s.plan.stack == workloads::Stack::kMegatron2021) {
      s.model.dropout = true;
      s.assumptions.push_back(
          "attention and hidden dropout 0.1: Megatron-LM's defaults (megatron/arguments.py "
          "--attention-dropout, --hidden-dropout @ 6985e589), which examples/sc21 does not set");
    }
    s.plan.node_ranks = s.cluster.scale_up_domain_size();  // the flex dispatcher's nodes
    workloads::validate_plan(s.model, s.plan);
    if (s.plan.world() != s.cluster.device_count()) {
      throw Unmappable(fmt::format("tp x cp x dp x pp = {} but the run used {} devices",
                                   s.plan.world(), s.cluster.device_count()));
    }
    const detail::MeasuredStep m = detail::measured_step(run, s.model, s.plan);
    s.measured_step = m.step;
    s.conversion = m.how;
    return s;
  } catch (const Unmappable& e) {
    return NotExpressible{e.what()};
  } catch (const workloads::PlanError& e) {
    return NotExpressible{fmt::format("meshsim rejects the plan: {}", e.what())};
  } catch (const InputError& e) {  // the cluster or model as resized for the run
    return refused_scenario(e);
  } catch (const InfeasibleError& e) {
    return refused_scenario(e);
  }
}

}  // namespace meshsim::validation
