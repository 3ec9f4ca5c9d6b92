// What meshsim knows about published runs beyond their records: validation/published/
// run_facts.json (compiled in), read into these types. Each fact names its source; the mapper
// (published.h) applies them by rules over the records' structured fields, and a fact applied to a
// run is listed in that run's assumptions with its source. docs/published-runs.md describes the
// matching rules for users.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "meshsim/sim/enum_names.h"
#include "meshsim/workloads/model.h"
#include "meshsim/workloads/parallel.h"
#include "meshsim/workloads/stack.h"

namespace meshsim::validation {

// A month, for a framework's era: 2021-04. A year alone reads as its July (docs/published-runs.md).
struct YearMonth {
  int year = 0;
  int month = 0;  // 1..12
  auto operator<=>(const YearMonth&) const = default;
};

template <class T>
struct SourcedFact {
  T value{};
  std::string source;
};

// How a hardware key becomes a cluster.
enum class HardwareLayout : uint8_t {
  kNodes,      // whole scale-up nodes of the preset (a fat tree between them)
  kNvl72,      // GB200 NVL72 trays and racks
  kTpuSlices,  // TPU slices of the record's slice size, joined by DCN
};
constexpr auto enum_names(HardwareLayout) {
  return std::to_array<EnumName<HardwareLayout>>({{HardwareLayout::kNodes, "nodes"},
                                                  {HardwareLayout::kNvl72, "nvl72"},
                                                  {HardwareLayout::kTpuSlices, "tpu-slices"}});
}

struct HardwareFact {
  std::vector<std::string> keys;  // hardware_key values of the records
  std::vector<std::string> key_prefixes;  // or hardware_key values that start with one of these
  std::string cluster;            // the cluster preset (topology/clusters)
  std::optional<std::string> chip;  // the catalogue chip in place of the preset's
  HardwareLayout layout = HardwareLayout::kNodes;
  std::string refuse;             // non-empty: runs on it are not expressible, for this reason
  std::vector<std::string> assumptions;  // said for every run on it
  std::string source;
};

// A text the record's free-text notes may carry, and what it means.
struct NotesFlag {
  std::string text;   // a substring of the notes, as written
  std::string group;  // of the flags of one group, the first that matches applies
  std::optional<workloads::ZeroStage> zero_stage;  // the notes state the sharding
  std::optional<workloads::AttentionKernel> attention;  // the notes name the attention kernel
  bool fp8_param_gather = false;  // the notes name FP8 parameter gathers (--fp8-param-gather)
  bool fp32_gradients = false;                     // gradients reduced and kept in fp32
  std::string refuse;                              // non-empty: not expressible
  std::string source;
};

// How a framework's published TFLOP/s figure counts FLOPs (published_flops.h).
enum class FlopConvention : uint8_t {
  kMegatron2021Eq3,
  kMegatronDeepSpeed2022,
  kMaxText2023,
  kMegatronCore08
};
constexpr auto enum_names(FlopConvention) {
  return std::to_array<EnumName<FlopConvention>>(
      {{FlopConvention::kMegatron2021Eq3, "megatron-2021-eq3"},
       {FlopConvention::kMegatronDeepSpeed2022, "megatron-deepspeed-2022"},
       {FlopConvention::kMaxText2023, "maxtext-2023"},
       {FlopConvention::kMegatronCore08, "megatron-core-0.8"}});
}

// How a framework splits layers over pipeline stages where the stages do not divide them.
enum class PipelinePartition : uint8_t { kDeepSpeedTypeTransformer };
constexpr auto enum_names(PipelinePartition) {
  return std::to_array<EnumName<PipelinePartition>>(
      {{PipelinePartition::kDeepSpeedTypeTransformer, "deepspeed-type-transformer"}});
}

// How a framework splits a model-parallel size (devices / (dp x cp)) that a record states only as
// a whole between TP and PP.
enum class ModelParallelSplit : uint8_t { kTpWithinNode };
constexpr auto enum_names(ModelParallelSplit) {
  return std::to_array<EnumName<ModelParallelSplit>>(
      {{ModelParallelSplit::kTpWithinNode, "tp-within-node"}});
}

// kPerDeviceShare: one microbatch of the data-parallel rank's whole share (XLA: what a record
// calls the micro-batch is per chip). kStatedElseShare: as stated, else that share (no gradient
// accumulation unless configured).
enum class MicroBatchRule : uint8_t { kStated, kPerDeviceShare, kStatedElseShare };
constexpr auto enum_names(MicroBatchRule) {
  return std::to_array<EnumName<MicroBatchRule>>(
      {{MicroBatchRule::kStated, "stated"},
       {MicroBatchRule::kPerDeviceShare, "per-device-share"},
       {MicroBatchRule::kStatedElseShare, "stated-else-share"}});
}

struct FrameworkFact {
  std::string id;
  std::vector<std::string> names;  // any occurring (case-insensitively) in the framework text
  // None of these may occur in it (case-insensitively): a later product named beside the
  // framework ("NeMo / Megatron-Core").
  std::vector<std::string> except_names;
  std::optional<YearMonth> from, until;  // the era: the run's date must lie in it
  // Matches only a run without model parallelism: ZeRO stage 3 stated, TP and PP stated 1, or DP
  // stated as all the devices.
  bool data_parallel_only = false;
  // The ZeRO stage the framework's name itself states (DeepSpeed ZeRO-3), where the record's is
  // unstated.
  std::optional<SourcedFact<int64_t>> zero_stage;
  workloads::Stack stack = workloads::Stack::kMegatron;
  std::string stack_assumption;  // said when the stack stands in for the framework's own
  // The attention kernel of the framework's era where the stack's own would be later (XLA's
  // einsums and softmax before Pallas kernels existed).
  std::optional<SourcedFact<workloads::AttentionKernel>> attention;
  std::string source;
  std::optional<SourcedFact<bool>> dropout;
  // The framework's runs without a pipeline overlapped the data-parallel gradient reduction with
  // the backward (PyTorch's DDP), where the stack's default reduces after it.
  std::optional<SourcedFact<bool>> ddp_overlaps_without_pipeline;
  std::optional<SourcedFact<bool>> distributed_optimizer;
  std::optional<SourcedFact<bool>> sequence_parallel_with_tp;
  std::optional<SourcedFact<bool>> embedding_and_loss_in_pipeline_split;
  std::optional<SourcedFact<workloads::Recompute>> recompute_default;
  std::optional<SourcedFact<MicroBatchRule>> micro_batch;
  std::optional<SourcedFact<int64_t>> nvl72_segment_trays;
  // The TP and PP degrees where a record states part of the layout (1 in every framework here).
  std::optional<SourcedFact<int64_t>> parallel_defaults;
  std::optional<SourcedFact<ModelParallelSplit>> model_parallel_split;
  // The stages' layers where the pipeline size does not divide them (workloads'
  // deepspeed_type_partition).
  std::optional<SourcedFact<PipelinePartition>> pipeline_partition;
  // bf16 training shards the optimizer state over the data-parallel group whatever ZeRO stage the
  // record states (DeepSpeed's BF16_Optimizer): ZeRO-1.
  std::optional<SourcedFact<bool>> bf16_shards_optimizer;
  struct RecomputeAlias {
    std::string text;  // the record's activation_recompute, exactly
    workloads::Recompute recompute = workloads::Recompute::kNone;
    std::string source;
  };
  std::vector<RecomputeAlias> recompute_aliases;
  std::vector<NotesFlag> notes_flags;
  // How the source counted the FLOPs of a measured metric, and where that count is written (empty
  // where the convention's name says it).
  struct MetricConvention {
    FlopConvention convention = FlopConvention::kMegatronCore08;
    std::string source;
  };
  std::map<std::string, MetricConvention> metric_conventions;  // by measured metric
};

// The decoder a model entry describes; published_map.cc builds the ModelConfig of each.
enum class ModelArchitecture : uint8_t {
  kGpt,             // Megatron's GPT: LayerNorm, learned positions, GeLU MLP, biases, tied
  kLlama,           // RMSNorm, RoPE, SwiGLU, untied
  kNemotron,        // LayerNorm, RoPE, squared-ReLU (non-gated) MLP
  kMaxTextDecoder,  // MaxText's default decoder: parallel block, head_dim 256, ReLU
  kDeepSeekV3,
  kMixtral,
  kQwen3Moe,
};
constexpr auto enum_names(ModelArchitecture) {
  return std::to_array<EnumName<ModelArchitecture>>(
      {{ModelArchitecture::kGpt, "gpt"},
       {ModelArchitecture::kLlama, "llama"},
       {ModelArchitecture::kNemotron, "nemotron"},
       {ModelArchitecture::kMaxTextDecoder, "maxtext-decoder"},
       {ModelArchitecture::kDeepSeekV3, "deepseek-v3"},
       {ModelArchitecture::kMixtral, "mixtral"},
       {ModelArchitecture::kQwen3Moe, "qwen3-moe"}});
}

struct ModelFact {
  std::string id;
  std::vector<std::vector<std::string>> names;  // each a run of words (name_words)
  bool moe = false;  // matches MoE records only, dense records only otherwise
  ModelArchitecture architecture = ModelArchitecture::kGpt;
  std::optional<workloads::MlaConfig> mla;
  int64_t shared_experts = 0;
  int64_t first_dense_layers = 0;
  bool router_bias = false;
  int64_t routing_groups = 0;
  int64_t routing_group_topk = 0;
  int64_t mtp_layers = 0;
  std::optional<int64_t> head_dim;
  bool qk_norm = false;
  // The published shape of the model the name gives, where the record leaves it out.
  std::optional<int64_t> layers, hidden, heads;
  std::optional<SourcedFact<int64_t>> ffn_default_ratio;  // ffn = ratio x hidden if unstated
  std::optional<SourcedFact<int64_t>> kv_default;         // 0: the query heads (multi-head)
  bool needs_pipeline_layout = false;  // pipelined runs need a source fact's stage_layers
  std::string source;
};

// A fact about one source (a table, a script at a commit): when every condition holds, its
// settings apply where the record is silent.
struct SourceFact {
  struct Match {
    std::string citation_prefix;
    std::string location_contains;
    std::vector<std::string> model_names;  // exact; any
    std::string model_name_prefix;
    std::string framework;  // a FrameworkFact id
    std::string framework_text;  // in the record's framework text, case-insensitively
    std::string model;      // a ModelFact id
    std::string hardware_key;
    std::string precision_class;
    std::optional<YearMonth> from, until;
    std::optional<int64_t> layers, tp, pp, cp, vpp, devices;
    std::optional<bool> fsdp;
  } match;
  struct Set {
    std::optional<int64_t> vpp, fsdp_group, offload_layers, expert_tp;
    std::optional<workloads::Recompute> recompute;
    std::optional<std::vector<workloads::RecomputeModule>> recompute_modules;
    std::optional<workloads::Stack> stack;
    std::optional<workloads::AttentionKernel> attention;
    std::optional<workloads::MoeDispatcher> moe_dispatcher;
    std::optional<std::vector<int64_t>> stage_layers;
    bool vocab_gpt2_padded = false;  // GPT-2's BPE padded to 128 x TP (Megatron's rule)
    std::optional<bool> dropout;
    std::optional<std::string> precision;  // a precision_class: bf16, fp16, fp8
    std::optional<int64_t> micro_batch;
    std::optional<bool> tp_comm_overlap;  // TP communication overlapped with the GEMMs
    std::optional<bool> grad_reduce_fp32;  // ParallelPlan::grad_reduce_fp32, as the recipe sets it
    std::optional<bool> cross_entropy_fusion;  // ParallelPlan::cross_entropy_fusion
  } set;
  std::string source;
};

// A marker in the record's notes that a field the source's table has was left out of it (so no
// framework default may stand in for it).
enum class UnstatedField : uint8_t { kFsdpGroup, kVpp };
constexpr auto enum_names(UnstatedField) {
  return std::to_array<EnumName<UnstatedField>>(
      {{UnstatedField::kFsdpGroup, "fsdp_group"}, {UnstatedField::kVpp, "virtual_pipeline_stages"}});
}
struct UnstatedNote {
  std::string text;
  UnstatedField field = UnstatedField::kVpp;
  bool when_pipelined = false;  // only for runs with pp > 1
};

enum class Fp8Recipe : uint8_t { kCurrent, kRowwise, kMxfp8 };
constexpr auto enum_names(Fp8Recipe) {
  return std::to_array<EnumName<Fp8Recipe>>({{Fp8Recipe::kCurrent, "current"},
                                             {Fp8Recipe::kRowwise, "rowwise"},
                                             {Fp8Recipe::kMxfp8, "mxfp8"}});
}
struct PrecisionRecipe {
  std::string text;  // a substring of the record's precision, as written
  Fp8Recipe recipe = Fp8Recipe::kCurrent;
  std::string source;
};

struct DispatcherNote {
  std::string text;  // in the notes, case-insensitively
  workloads::MoeDispatcher dispatcher = workloads::MoeDispatcher::kAllToAll;
};

struct ArchitectureNote {
  std::string text;  // in the architecture notes, as written
  ModelArchitecture architecture = ModelArchitecture::kLlama;
  std::string source;
};

struct PublishedFacts {
  std::vector<HardwareFact> hardware;
  std::map<int64_t, std::vector<int64_t>> tpu_slices_2d, tpu_slices_3d;  // chips -> torus
  std::string tpu_slices_source;
  std::vector<FrameworkFact> frameworks;
  std::vector<ModelFact> models;
  // The entry (an index into models) for a dense model no entry names and no note describes: its
  // stated shape costed as this architecture. Absent: such a model is refused.
  std::optional<size_t> default_model;
  std::vector<ArchitectureNote> architecture_from_notes;
  std::vector<std::string> moe_notes;
  std::vector<UnstatedNote> unstated_notes;
  std::vector<PrecisionRecipe> precision_recipes;
  std::vector<DispatcherNote> dispatcher_notes;
  std::vector<SourceFact> source_facts;

  // validation/published/run_facts.json as compiled in.
  static const PublishedFacts& builtin();
  // Reads a facts document strictly (every key known, every value of its type, every reference
  // to a framework or model entry resolved); InputError naming `source` and the JSON pointer.
  static PublishedFacts parse(std::string_view text, const std::string& source);
};

// The words of a model name as model entries match them: lower-cased, split at every character
// that is not a letter or digit and where a letter is followed by a digit ("Llama-3.1-70B" ->
// llama 3 1 70b).
std::vector<std::string> name_words(std::string_view name);

}  // namespace meshsim::validation
