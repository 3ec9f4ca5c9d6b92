// The plan field table (plan_fields.h): one row per user-set field of workloads::ParallelPlan.
#include "meshsim/scenario/plan_fields.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <type_traits>

#include "meshsim/scenario/scenario.h"
#include "meshsim/sim/enum_names.h"
#include "meshsim/sim/error.h"

namespace meshsim::scenario {

using nlohmann::json;
using workloads::ParallelPlan;
using workloads::PlanField;

namespace {

using Echo = bool (*)(const ParallelPlan&);

// Accessors of a plan member of each kind, as the row's get and set.
template <auto Member>
struct Scalar {  // int64_t, double or bool ParallelPlan::*
  using T = std::remove_cvref_t<decltype(std::declval<ParallelPlan&>().*Member)>;
  static json get(const ParallelPlan& p) { return p.*Member; }
  static void set(ParallelPlan& p, const FieldValue& v, const Origin&) {
    p.*Member = std::get<T>(v);
  }
};

template <auto Member>
struct Overlap {  // bool workloads::OverlapOptions::*
  static json get(const ParallelPlan& p) { return p.overlap.*Member; }
  static void set(ParallelPlan& p, const FieldValue& v, const Origin&) {
    p.overlap.*Member = std::get<bool>(v);
  }
};

template <auto Member>
struct Choice {  // a named enum ParallelPlan::*
  using E = std::remove_cvref_t<decltype(std::declval<ParallelPlan&>().*Member)>;
  static json get(const ParallelPlan& p) { return std::string(to_string(p.*Member)); }
  static void set(ParallelPlan& p, const FieldValue& v, const Origin&) {
    p.*Member = *parse_enum<E>(std::get<std::string>(v));
  }
};

template <typename T>
constexpr FieldKind kind_of() {
  if constexpr (std::is_same_v<T, bool>) {
    return FieldKind::kBoolean;
  } else if constexpr (std::is_same_v<T, double>) {
    return FieldKind::kNumber;
  } else {
    return FieldKind::kInteger;
  }
}

template <auto Member>
PlanFieldSpec scalar(PlanField f, FieldBound bound, const char* unit, const char* doc,
                     Echo echoed = nullptr, const char* column = nullptr) {
  using A = Scalar<Member>;
  return {f,       kind_of<typename A::T>(), bound,    unit,   doc, nullptr, nullptr, &A::get,
          &A::set, echoed,                   column};
}

template <auto Member>
PlanFieldSpec overlap(PlanField f, const char* doc, const char* column = nullptr) {
  using A = Overlap<Member>;
  return {f,       FieldKind::kBoolean, FieldBound::kAny, "",    doc, nullptr, nullptr, &A::get,
          &A::set, nullptr,             column};
}

template <auto Member>
PlanFieldSpec choice(PlanField f, const char* doc, Echo echoed = nullptr,
                     const char* column = nullptr) {
  using A = Choice<Member>;
  return {f,
          FieldKind::kChoice,
          FieldBound::kAny,
          "",
          doc,
          &enum_spellings<typename A::E>,
          &describe_choices<typename A::E>,
          &A::get,
          &A::set,
          echoed,
          column};
}

// Echoed when set: a count above 0, a list not empty, MoE routing drawn.
template <auto Member>
bool positive(const ParallelPlan& p) {
  return p.*Member > 0;
}
template <auto Member>
bool not_empty(const ParallelPlan& p) {
  return !(p.*Member).empty();
}
// The routing draw's own fields go with it; alone, when set (they change nothing then).
bool graphs_used(const ParallelPlan& p) { return p.cuda_graphs != workloads::CudaGraphs::kNone; }

bool routing_drawn(const ParallelPlan& p) {
  return p.moe_load_skew.has_value() || p.moe_drop_tokens || p.moe_seed != 0;
}

std::vector<PlanFieldSpec> make_table() {
  using P = ParallelPlan;
  using F = PlanField;
  using B = FieldBound;
  return {
      scalar<&P::tp>(F::kTp, B::kPositive, "ranks", "Tensor-parallel degree", nullptr, "tp"),
      scalar<&P::sp>(F::kSp, B::kAny, "", "Sequence parallelism (with TP)", nullptr, "sp"),
      scalar<&P::cp>(F::kCp, B::kPositive, "ranks", "Context-parallel degree (ring attention)",
                     nullptr, "cp"),
      scalar<&P::pp>(F::kPp, B::kPositive, "ranks", "Pipeline-parallel degree", nullptr, "pp"),
      scalar<&P::vpp>(F::kVpp, B::kPositive, "virtual stages per rank",
                      "Virtual pipeline stages per rank (interleaved)", nullptr, "vpp"),
      choice<&P::schedule>(F::kSchedule,
                           "Pipeline schedule: gpipe, 1f1b, interleaved, zb, zbv (with --vpp 2)",
                           nullptr, "schedule"),
      scalar<&P::dp>(F::kDp, B::kPositive, "ranks", "Data-parallel degree", nullptr, "dp"),
      {F::kZero, FieldKind::kInteger, B::kNonNegative, "",
       "ZeRO stage over the data-parallel group: 0, 1, 2, 3", nullptr, nullptr,
       [](const P& p) -> json { return static_cast<int>(p.zero); },
       [](P& p, const FieldValue& v, const Origin& where) {
         p.zero = zero_stage(std::get<int64_t>(v), where);
       },
       nullptr, "zero"},
      scalar<&P::fsdp>(F::kFsdp, B::kPositive, "ranks",
                       "HSDP: ZeRO shards over groups of this many DP ranks, replicated across "
                       "dp / fsdp (PyTorch HSDP, MaxText ici_fsdp x dcn_data_parallelism); --dp "
                       "stays the total",
                       &positive<&P::fsdp>, "fsdp"),
      scalar<&P::ep>(F::kEp, B::kPositive, "ranks",
                     "Expert-parallel degree (MoE; carved out of DP)", nullptr, "ep"),
      scalar<&P::etp>(F::kEtp, B::kPositive, "ranks",
                      "Expert tensor-parallel degree, 1 or tp (MoE; default tp, as Megatron-Core); "
                      "with 1, EP is carved out of TP x CP x DP",
                      &positive<&P::etp>),
      choice<&P::moe_dispatcher>(
          F::kMoeDispatcher,
          "MoE token dispatcher: alltoall (a copy per token and expert over the EP group), flex "
          "(Megatron's DeepEP/HybridEP: once per node over the network, then NVLink)",
          [](const P& p) { return p.moe_dispatcher != workloads::MoeDispatcher::kAllToAll; }),
      scalar<&P::capacity_factor>(F::kCapacityFactor, B::kPositive, "of the balanced share",
                                  "MoE expert capacity factor"),
      {F::kMoeLoadSkew, FieldKind::kNumber, B::kAny, "sigma of ln(popularity)",
       "MoE routing drawn with lognormal expert popularity of this sigma (0: a uniform router's "
       "sampling noise); absent: balanced",
       nullptr, nullptr,
       [](const P& p) -> json { return p.moe_load_skew ? json(*p.moe_load_skew) : json(); },
       [](P& p, const FieldValue& v, const Origin&) { p.moe_load_skew = std::get<double>(v); },
       [](const P& p) { return p.moe_load_skew.has_value(); }, nullptr},
      scalar<&P::moe_drop_tokens>(F::kMoeDropTokens, B::kAny, "",
                                  "MoE: drop tokens beyond the capacity factor (default: dropless)",
                                  &routing_drawn),
      scalar<&P::moe_seed>(F::kMoeSeed, B::kNonNegative, "", "Seed of the MoE routing draw",
                           &routing_drawn),
      scalar<&P::mbs>(F::kMbs, B::kPositive, "sequences", "Micro-batch size (sequences)", nullptr,
                      "mbs"),
      scalar<&P::gbs>(F::kGbs, B::kPositive, "sequences", "Global batch size (sequences per step)",
                      nullptr, "gbs"),
      scalar<&P::seq>(F::kSeq, B::kPositive, "tokens", "Sequence length (tokens)", nullptr, "seq"),
      choice<&P::recompute>(F::kRecompute,
                            "Activation recompute: none, selective (Megatron), full, dots (JAX "
                            "checkpoint_dots; alias minimal), qkv_out_proj (Q, K, V and output "
                            "projections kept; aliases save_qkv_out_proj, save_dot_except_mlp), "
                            "qkv_proj (Q, K and V kept; alias save_qkv_proj)",
                            nullptr, "recompute"),
      scalar<&P::recompute_num_layers>(
          F::kRecomputeNumLayers, B::kPositive, "layers per model chunk",
          "With --recompute full: recompute only the first N layers of each model chunk "
          "(Megatron's block method); the others keep their activations",
          &positive<&P::recompute_num_layers>),
      {F::kRecomputeModules, FieldKind::kChoiceList, B::kAny, "",
       "With --recompute selective: the modules recomputed, as Megatron-Core lists them "
       "(core_attn, mla_up_proj, mlp, moe_act), e.g. mla_up_proj,mlp; default core_attn",
       &enum_spellings<workloads::RecomputeModule>, &describe_choices<workloads::RecomputeModule>,
       [](const P& p) -> json { return recompute_module_names(p); },
       [](P& p, const FieldValue& v, const Origin&) {
         p.recompute_modules.clear();
         for (const std::string& m : std::get<std::vector<std::string>>(v)) {
           p.recompute_modules.push_back(*parse_enum<workloads::RecomputeModule>(m));
         }
       },
       &not_empty<&P::recompute_modules>, nullptr},
      scalar<&P::offload_layers>(
          F::kOffloadLayers, B::kPositive, "layers per model chunk",
          "Offload the saved activations of the first N layers of each model chunk to host "
          "memory between their forward and backward (Megatron-Core's "
          "cpu_offloading_num_layers), over the chip's host link",
          &positive<&P::offload_layers>),
      {F::kDtype, FieldKind::kChoice, B::kAny, "",
       "Training precision: bf16, fp16 (with loss scaling) or fp8 (mixed precision: 16-bit "
       "activations, fp32 master weights; fp8 GEMMs in the linear layers), fp32 or tf32 (fp32 "
       "activations; tf32 matmuls on tensor cores)",
       &enum_spellings<Dtype>, &describe_choices<Dtype>,
       [](const P& p) -> json { return std::string(to_string(p.matmul_dtype)); },
       [](P& p, const FieldValue& v, const Origin&) {
         p.set_training_dtype(*parse_enum<Dtype>(std::get<std::string>(v)));
       },
       nullptr, nullptr},
      choice<&P::attention>(F::kAttention,
                            "Attention kernel: flash (FlashAttention-2), flash3, cudnn, splash "
                            "(TPU), triton (FlashAttention's Triton port) or naive (s x s scores "
                            "through memory); default: the stack's"),
      choice<&P::stack>(
          F::kStack,
          "Software stack: megatron (Megatron-Core + Transformer Engine), "
          "megatron-2021, megatron-2022, megatron-2023, deepspeed-zero3-2021, fsdp (PyTorch FSDP "
          "eager), llm-foundry-2023, fsdp-compile (torchtitan), maxtext and paxml "
          "(JAX/XLA); `meshsim presets` says what each runs; default: megatron on "
          "GPUs, maxtext on TPUs"),
      choice<&P::fp8_scaling>(F::kFp8Recipe,
                              "FP8 scaling of fp8 runs: delayed (amax history), current (an amax "
                              "pass before each cast) or rowwise (torchao's per-row scales: two "
                              "cast passes); default: the stack's"),
      choice<&P::cuda_graphs>(F::kCudaGraphs,
                              "CUDA graphs: none (every kernel issued by the host), layers (each "
                              "layer's forward and backward one graph: Megatron-Core "
                              "--enable-cuda-graph) or step (the whole step one graph: "
                              "--cuda-graph-scope full_iteration); GPU stacks only",
                              &graphs_used),
      scalar<&P::fp8_param_gather>(
          F::kFp8ParamGather, B::kAny, "",
          "ZeRO/FSDP parameter gathers in FP8: the layers' weights kept and all-gathered in FP8 "
          "(Megatron-Core --fp8-param-gather; fp8 training with --zero 1 to 3)",
          &positive<&P::fp8_param_gather>),
      scalar<&P::grad_reduce_fp32>(
          F::kGradReduceFp32, B::kAny, "",
          "Data-parallel gradients accumulated, kept and reduced in fp32 (4 bytes a parameter) "
          "under 16-bit training: Megatron's --accumulate-allreduce-grads-in-fp32 / DDP "
          "grad_reduce_in_fp32, FSDP2's reduce_dtype float32; default: the stack's (on for bf16 "
          "and fp8 on megatron and fsdp-compile); false: in the parameters' 16 bits"),
      scalar<&P::cross_entropy_fusion>(
          F::kCrossEntropyFusion, B::kAny, "",
          "The LM head's cross entropy as one fused pass over the logits (Megatron-Core's "
          "--cross-entropy-loss-fusion, NeMo's and Megatron-Bridge's recipes); false: "
          "Megatron-LM's VocabParallelCrossEntropy as separate passes over an fp32 copy of the "
          "logits, Megatron-LM's own default; default: the stack's (false on megatron-2021 to "
          "2023)"),
      scalar<&P::host_time_scale>(
          F::kHostTimeScale, B::kPositive, "x the reference host's time",
          "The host's time per framework operation relative to the CPU meshsim's host costs were "
          "measured on (a 2026 Intel Xeon): 2 for a host that runs PyTorch's operators twice as "
          "slowly (time validation/microbench/host_dispatch.py there against host_dispatch.csv)",
          [](const P& p) { return p.host_time_scale != 1.0; }),
      choice<&P::kernels>(F::kKernels,
                          "Memory-bound kernels: fused (Megatron/TE, XLA) or eager (PyTorch eager "
                          "mode, one kernel per tensor op)"),
      choice<&P::optimizer_kernels>(F::kOptimizerKernels,
                                    "AdamW: fused (one pass), foreach (torch multi-tensor) or "
                                    "per-tensor (torch foreach=False)"),
      {F::kStageLayers, FieldKind::kIntegerList, B::kNonNegative, "layers",
       "Layers per pipeline stage (uneven split), e.g. 10,11,11; with --vpp V, pp x V entries, one "
       "per virtual stage (chunk-major), 0 for a chunk of only the embedding or the head",
       nullptr, nullptr, [](const P& p) -> json { return p.stage_layers; },
       [](P& p, const FieldValue& v, const Origin&) {
         p.stage_layers = std::get<std::vector<int64_t>>(v);
       },
       &not_empty<&P::stage_layers>, nullptr},
      overlap<&workloads::OverlapOptions::grad_reduce>(
          F::kOverlapGradReduce,
          "Reduce gradients during the backward pass, bucketed (default, except on stacks "
          "whose framework reduced after it: megatron-2021 to 2023, megatron-deepspeed-2022); "
          "false: after it"),
      overlap<&workloads::OverlapOptions::param_gather>(
          F::kOverlapParamGather,
          "Prefetch ZeRO/FSDP parameter gathers ahead of use (default, except on those "
          "stacks); false: just in time"),
      overlap<&workloads::OverlapOptions::pipeline_p2p>(
          F::kOverlapP2p,
          "Pipeline sends and receives on their own stream (default); false: they block the "
          "compute stream"),
      overlap<&workloads::OverlapOptions::tensor_parallel>(
          F::kOverlapTp, "Hide TP communication behind split GEMMs", "overlap_tp"),
  };
}

const std::vector<PlanFieldSpec>& table() {
  static const std::vector<PlanFieldSpec> kTable = make_table();
  return kTable;
}

// A file's value of the row's kind and bound (JsonObject's errors name the file and pointer).
FieldValue read_value(JsonObject& o, const PlanFieldSpec& f, const std::string& key) {
  switch (f.kind) {
    case FieldKind::kInteger:
      return f.bound == FieldBound::kPositive      ? o.positive_integer(key)
             : f.bound == FieldBound::kNonNegative ? o.non_negative_integer(key)
                                                   : o.integer(key);
    case FieldKind::kNumber:
      return f.bound == FieldBound::kPositive ? o.positive_number(key) : o.number(key);
    case FieldKind::kBoolean:
      return o.boolean(key);
    case FieldKind::kChoice: {
      const std::vector<std::string> names = f.spellings();
      std::string s = o.string(key);
      if (std::find(names.begin(), names.end(), s) == names.end()) {
        o.fail(key, "\"" + s + "\" is not one of: " + f.describe_choices());
      }
      return s;
    }
    case FieldKind::kIntegerList:
      return f.bound == FieldBound::kPositive ? o.positive_integer_array(key)
                                              : o.non_negative_integer_array(key);
    case FieldKind::kChoiceList: {
      const nlohmann::json& v = o.raw(key);
      if (!v.is_array()) {
        o.fail(key, "expected an array of names, each one of: " + f.describe_choices());
      }
      const std::vector<std::string> names = f.spellings();
      std::vector<std::string> out;
      for (size_t i = 0; i < v.size(); ++i) {
        if (!v[i].is_string() || std::find(names.begin(), names.end(),
                                           v[i].get<std::string>()) == names.end()) {
          // The entry at fault, as the integer arrays name theirs.
          throw InputError(o.source(), fmt::format("{}/{}", o.pointer_of(key), i),
                           fmt::format("{} is not one of: {}", describe_json(v[i]),
                                       f.describe_choices()));
        }
        out.push_back(v[i].get<std::string>());
      }
      return out;
    }
  }
  SIM_CHECK(false, "plan field {} has no kind", f.key());
}

}  // namespace

std::string flag_of_key(std::string_view key) {
  std::string flag = "--" + std::string(key);
  std::replace(flag.begin(), flag.end(), '_', '-');
  return flag;
}

std::string PlanFieldSpec::key() const { return std::string(to_string(field)); }

std::string PlanFieldSpec::flag() const { return flag_of_key(to_string(field)); }

std::string PlanFieldSpec::negated_flag() const {
  return kind == FieldKind::kBoolean ? "--no-" + flag().substr(2) : "";
}

std::span<const PlanFieldSpec> plan_fields() { return table(); }

const PlanFieldSpec& plan_field(PlanField field) {
  static const std::array<const PlanFieldSpec*, field_count<PlanField>()> kByField = [] {
    std::array<const PlanFieldSpec*, field_count<PlanField>()> by{};
    for (const PlanFieldSpec& f : table()) {
      by[static_cast<size_t>(f.field)] = &f;
    }
    return by;
  }();
  const PlanFieldSpec* f = kByField[static_cast<size_t>(field)];
  SIM_CHECK(f != nullptr, "plan field {} has no row in the plan field table", to_string(field));
  return *f;
}

std::string changing_flag(PlanField field) {
  const PlanFieldSpec& f = plan_field(field);
  if (f.kind == FieldKind::kBoolean && f.get(ParallelPlan{}) == json(true)) {
    return f.negated_flag();
  }
  return f.flag();
}

std::string flag_for(PlanField field, const FieldValue& v) {
  const PlanFieldSpec& f = plan_field(field);
  if (f.kind == FieldKind::kBoolean && !std::get<bool>(v)) {
    return f.negated_flag();
  }
  return f.flag();
}

void set_plan_field(ParallelPlan& p, PlanField field, const FieldValue& v, const Origin& where) {
  plan_field(field).set(p, v, where);
  p.origins.set(field, where);
}

void read_plan_fields(JsonObject& o, ParallelPlan& p) {
  for (const PlanFieldSpec& f : table()) {
    const std::string key = f.key();
    o.ignore(key);  // known even when absent (error messages list it)
    if (o.has(key)) {
      const Origin where = Origin::file(o.source(), o.pointer_of(key));
      set_plan_field(p, f.field, read_value(o, f, key), where);
    }
  }
}

void write_plan_fields(const ParallelPlan& p, nlohmann::json& out) {
  for (const PlanFieldSpec& f : table()) {
    if (f.echoed == nullptr || f.echoed(p)) {
      out[f.key()] = f.get(p);
    }
  }
}

}  // namespace meshsim::scenario
