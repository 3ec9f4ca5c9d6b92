#include <fmt/format.h>

#include <algorithm>
#include <iterator>
#include <optional>
#include <span>
#include <string>

#include "meshsim/sim/checked.h"
#include "meshsim/sim/error.h"
#include "meshsim/workloads/parallel.h"
#include "meshsim/workloads/stack_rules.h"

namespace meshsim::workloads {

std::optional<AttentionImpl> fused_attention(AttentionKernel k) {
  switch (k) {
    case AttentionKernel::kFlash:
      return AttentionImpl::kFlash2;
    case AttentionKernel::kFlash3:
      return AttentionImpl::kFlash3;
    case AttentionKernel::kCudnn:
      return AttentionImpl::kCudnn;
    case AttentionKernel::kSplash:
      return AttentionImpl::kSplash;
    case AttentionKernel::kTriton:
      return AttentionImpl::kTriton;
    case AttentionKernel::kNaive:
      break;
  }
  return std::nullopt;
}

void ParallelPlan::set_training_dtype(Dtype dtype) {
  matmul_dtype = dtype;
  const bool fp32 = dtype == Dtype::kFp32 || dtype == Dtype::kTf32;
  activation_bytes = fp32 ? 4 : 2;
  // Mixed precision: bf16 weights and gradients, fp32 master weights and two fp32 moments
  // (Micikevicius et al. 2018; ZeRO's 2 + 2 + 12 bytes). fp32: weights, gradients, two moments.
  state = fp32 ? ModelStateBytes{4, 4, 8} : ModelStateBytes{2, 2, 12};
}

namespace {

using F = PlanField;

[[noreturn]] void bad(PlanField field, const std::string& message) {
  throw PlanError(field, message);
}

// The limit of each size field (PlanLimits) and why, for the message.
struct SizeLimit {
  int64_t max;
  const char* why;
};

SizeLimit limit_of(PlanField field) {
  switch (field) {
    case F::kVpp:
      return {PlanLimits::kVpp, "one layer per virtual stage at most"};
    case F::kSeq:
      return {PlanLimits::kSeq, "tokens per sequence; the longest trained are ~1 M"};
    case F::kMbs:
      return {PlanLimits::kMbs, "sequences per microbatch"};
    case F::kGbs:
      return {PlanLimits::kGbs, "sequences per step; Llama 3 trained with 2,048"};
    default:
      return {PlanLimits::kRanks, "ranks: the largest cluster meshsim simulates has 131,072 "
                                  "devices"};
  }
}

// Positive and at most its limit.
void check_size(PlanField field, int64_t v) {
  if (v <= 0) {
    bad(field, fmt::format("expected a positive integer, got {}", v));
  }
  const SizeLimit limit = limit_of(field);
  if (v > limit.max) {
    bad(field, fmt::format("{} is above the limit of {} ({})", v, limit.max, limit.why));
  }
}

void check_sizes(const ParallelPlan& p) {
  for (const auto& [field, v] : {std::pair{F::kDp, p.dp}, {F::kTp, p.tp}, {F::kCp, p.cp},
                                 {F::kPp, p.pp}, {F::kVpp, p.vpp}, {F::kEp, p.ep},
                                 {F::kMbs, p.mbs}, {F::kGbs, p.gbs}, {F::kSeq, p.seq}}) {
    check_size(field, v);
  }
  // Each degree is at most 2^17, so the products below are exact before they are compared.
  const std::optional<int64_t> ranks = try_mul(p.tp * p.cp, p.dp * p.pp);
  if (!ranks || *ranks > PlanLimits::kRanks) {
    bad(F::kDp, fmt::format("tp {} x cp {} x dp {} x pp {} is more than {} ranks, the largest "
                            "cluster meshsim simulates",
                            p.tp, p.cp, p.dp, p.pp, PlanLimits::kRanks));
  }
  if (p.gbs % (p.dp * p.mbs) != 0) {
    bad(F::kGbs, fmt::format("global batch {} is not divisible by dp {} x mbs {} = {}; each "
                             "data-parallel rank needs a whole number of microbatches",
                             p.gbs, p.dp, p.mbs, p.dp * p.mbs));
  }
  if (!(p.capacity_factor >= 1.0)) {
    bad(F::kCapacityFactor, fmt::format("expected a factor >= 1, got {}", p.capacity_factor));
  }
  if (!(p.host_time_scale > 0.0 && p.host_time_scale <= 1000.0)) {
    bad(F::kHostTimeScale,
        fmt::format("expected a factor in (0, 1000] of the reference host's time, got {}",
                    p.host_time_scale));
  }
}

}  // namespace

void check_plan_size(PlanField field, int64_t value) { check_size(field, value); }

void validate_sharding(const ModelConfig& m, const ParallelPlan& p) {
  for (const auto& [field, v] :
       {std::pair{F::kTp, p.tp}, {F::kCp, p.cp}, {F::kMbs, p.mbs}, {F::kSeq, p.seq}}) {
    check_size(field, v);
  }
  if (m.num_heads % p.tp != 0) {
    bad(F::kTp, fmt::format("tensor parallel {} does not divide the {} attention heads of {}",
                            p.tp, m.num_heads, m.name));
  }
  if (m.num_kv_heads % p.tp != 0 && p.tp % m.num_kv_heads != 0) {
    bad(F::kTp, fmt::format("tensor parallel {} and the {} KV heads of {}: one must divide the "
                            "other", p.tp, m.num_kv_heads, m.name));
  }
  if (m.d_ff % p.tp != 0) {
    bad(F::kTp, fmt::format("tensor parallel {} does not divide d_ff {} of {}", p.tp, m.d_ff,
                            m.name));
  }
  if (m.moe && (m.moe->expert_d_ff % p.tp != 0 || m.moe->shared_expert_d_ff % p.tp != 0)) {
    bad(F::kTp, fmt::format("tensor parallel {} does not divide the expert width {} (shared "
                            "{}) of {}",
                            p.tp, m.moe->expert_d_ff, m.moe->shared_expert_d_ff, m.name));
  }
  if (m.mtp_layers > 0 && m.d_model % p.tp != 0) {  // MTP's eh_proj: column-parallel 2h -> h
    bad(F::kTp, fmt::format("tensor parallel {} does not divide d_model {} of {}, which the "
                            "multi-token-prediction projection splits",
                            p.tp, m.d_model, m.name));
  }
  if (p.sp && p.tp == 1) {
    bad(F::kSp, "sequence parallelism splits the TP group's activations; it needs tp > 1");
  }
  if (p.seq % (2 * p.cp) != 0 && p.cp > 1) {
    bad(F::kCp, fmt::format("context parallel {} splits the sequence into 2 x {} load-balanced "
                            "chunks; {} tokens do not divide evenly",
                            p.cp, p.cp, p.seq));
  }
  if (p.sp && (p.seq / p.cp) % p.tp != 0) {
    bad(F::kSeq, fmt::format("sequence parallel over tp {} needs the sequence of a context-"
                             "parallel rank ({} tokens) divisible by it",
                             p.tp, p.seq / p.cp));
  }
}

namespace {

void check_pipeline(const ModelConfig& m, const ParallelPlan& p) {
  if (!p.stage_layers.empty()) {
    // With virtual stages the entries are per virtual stage (v = chunk * pp + stage), as
    // Megatron-Core's pipeline layout states them: the first and last can be lighter
    // (Llama 3's 126 layers, Dubey et al. 2024, Sec. 3.3.2), or hold no transformer layer at all
    // (the embedding or the head alone: DeepSeek-V3's "Et|(tt|)*30mL", whose last virtual stage
    // runs only the MTP module and the loss).
    const int64_t entries = p.pp * p.vpp;
    if (static_cast<int64_t>(p.stage_layers.size()) != entries) {
      bad(F::kStageLayers,
          p.vpp > 1
              ? fmt::format("{} entries for pp {} x vpp {} = {} virtual stages (one per "
                            "virtual stage, chunk-major)",
                            p.stage_layers.size(), p.pp, p.vpp, entries)
              : fmt::format("{} entries for {} pipeline stages", p.stage_layers.size(), p.pp));
    }
    for (const int64_t l : p.stage_layers) {
      if (l < 0) {
        bad(F::kStageLayers, fmt::format("expected a layer count >= 0 per stage, got {}", l));
      }
    }
    std::optional<int64_t> sum = 0;
    for (const int64_t l : p.stage_layers) {
      sum = sum ? try_add(*sum, l) : std::nullopt;
    }
    if (sum != m.num_layers) {
      bad(F::kStageLayers,
          fmt::format("the stages hold {} layers in total; {} has {}",
                      sum ? std::to_string(*sum) : "more than 2^63", m.name, m.num_layers));
    }
  } else if (m.num_layers % p.pp != 0) {
    bad(F::kPp, fmt::format("pipeline parallel {} does not divide the {} layers of {}; state an "
                            "uneven split with stage_layers",
                            p.pp, m.num_layers, m.name));
  }
  if (p.vpp > 1 && p.stage_layers.empty() && m.num_layers % (p.pp * p.vpp) != 0) {
    bad(F::kVpp, fmt::format("pp {} x vpp {} = {} virtual stages do not divide the {} layers; "
                             "state an uneven split per virtual stage with stage_layers",
                             p.pp, p.vpp, p.pp * p.vpp, m.num_layers));
  }
  validate(p.pipeline());
  if (p.microbatches() > PlanLimits::kMicrobatchLayers / m.num_layers) {
    bad(F::kGbs, fmt::format("{} microbatches per pipeline x {} layers is more than {} (2^20) "
                             "(microbatch, layer) pairs: each is dozens of simulated ops of "
                             "every rank, and a step that size would not simulate in minutes",
                             p.microbatches(), m.num_layers, PlanLimits::kMicrobatchLayers));
  }
}

// Expert TP (Megatron-Core's expert_tensor_parallel_size): 1 or tp. Megatron-LM asserts SP
// when TP and EP are combined (training/arguments.py: "When using expert parallelism and tensor
// parallelism, sequence parallelism must be used"); with etp 1 the router sees each rank's s/TP
// tokens, which only SP gives.
void check_expert_tp(const ModelConfig& m, const ParallelPlan& p) {
  if (p.etp == 0) {
    return;
  }
  if (p.etp != 1 && p.etp != p.tp) {
    bad(F::kEtp, fmt::format("expert tensor parallel {} is neither 1 nor tp {}: only those are "
                             "modelled", p.etp, p.tp));
  }
  if (!m.moe) {
    bad(F::kEtp, fmt::format("expert tensor parallelism needs a mixture-of-experts model; {} is "
                             "dense", m.name));
  }
  if (!p.experts_tp_split() && !p.sp) {
    bad(F::kEtp, fmt::format("expert TP 1 under tp {} routes each rank's s/TP tokens, which needs "
                             "sequence parallelism (as Megatron-LM asserts); expected sp",
                             p.tp));
  }
}

// The flex dispatcher sends a token once per node: it needs the node size, and nodes holding
// the same number of the EP group's ranks (as every layout meshsim builds on whole nodes does).
void check_dispatcher(const ParallelPlan& p) {
  if (p.moe_dispatcher != MoeDispatcher::kFlex || p.ep == 1) {
    return;
  }
  if (p.node_ranks <= 0) {
    bad(F::kMoeDispatcher, "the flex dispatcher needs the ranks per node, which the cluster "
                           "gives; none was set");
  }
  const RankLayout layout(p);
  const auto ep = static_cast<int64_t>(layout.expert_group(0).size());
  const auto per_node = static_cast<int64_t>(layout.expert_node_group(0).size());
  if (ep % per_node != 0 ||
      static_cast<int64_t>(layout.expert_rail_group(0).size()) != ep / per_node) {
    bad(F::kMoeDispatcher, fmt::format("the EP group of {} ranks does not spread evenly over "
                                       "nodes of {} ranks; the flex dispatcher is not modelled "
                                       "there", ep, p.node_ranks));
  }
}

void check_experts(const ModelConfig& m, const ParallelPlan& p) {
  check_expert_tp(m, p);
  if (p.ep == 1) {
    return;
  }
  if (!m.moe) {
    bad(F::kEp, fmt::format("expert parallelism needs a mixture-of-experts model; {} is dense",
                            m.name));
  }
  if (p.experts_tp_split() && p.dp % p.ep != 0) {
    bad(F::kEp, fmt::format("expert parallel {} is carved out of data parallel {}; it must "
                            "divide it", p.ep, p.dp));
  }
  if (!p.experts_tp_split() && (p.tp * p.cp * p.dp) % p.ep != 0) {
    bad(F::kEp, fmt::format("with expert TP 1, expert parallel {} is carved out of tp {} x cp {} "
                            "x dp {}; it must divide it", p.ep, p.tp, p.cp, p.dp));
  }
  if (m.moe->num_experts % p.ep != 0) {
    bad(F::kEp, fmt::format("expert parallel {} does not divide the {} experts", p.ep,
                            m.moe->num_experts));
  }
  check_dispatcher(p);
}

// Megatron-Core checks its recompute_modules against the model the same way (a module the layers
// lack is refused), and takes them only with selective granularity.
void check_recompute_modules(const ModelConfig& m, const ParallelPlan& p) {
  const std::vector<RecomputeModule>& modules = p.recompute_modules;
  if (modules.empty()) {
    return;
  }
  if (p.recompute != Recompute::kSelective) {
    bad(F::kRecomputeModules,
        fmt::format("recompute modules apply to selective recompute (Megatron-Core's "
                    "recompute_granularity selective); expected recompute selective, got {}",
                    to_string(p.recompute)));
  }
  for (size_t i = 0; i < modules.size(); ++i) {
    const RecomputeModule r = modules[i];
    if (std::find(modules.begin(), modules.begin() + static_cast<std::ptrdiff_t>(i), r) !=
        modules.begin() + static_cast<std::ptrdiff_t>(i)) {
      bad(F::kRecomputeModules, fmt::format("{} is listed twice", to_string(r)));
    }
    if (r == RecomputeModule::kMlaUpProj && !m.mla) {
      bad(F::kRecomputeModules, "mla_up_proj recomputes MLA's up-projections; the model has no "
                                "multi-head latent attention");
    }
    if (r == RecomputeModule::kMoeAct && !m.moe) {
      bad(F::kRecomputeModules, "moe_act recomputes the experts' activation; the model has no "
                                "mixture of experts");
    }
    if (r == RecomputeModule::kMlp && m.moe && m.moe->first_dense_layers == 0) {
      bad(F::kRecomputeModules,
          "mlp recomputes a dense layer's MLP; every layer of the model is a mixture of experts "
          "(Megatron-Core's \"moe\" module, not modelled)");
    }
  }
}

void check_recompute(const ModelConfig& m, const ParallelPlan& p) {
  if (p.recompute_num_layers < 0 ||
      (p.recompute_num_layers > 0 && p.recompute != Recompute::kFull)) {
    bad(F::kRecomputeNumLayers,
        fmt::format("{} layers: recompute_num_layers counts the layers of each model chunk that "
                    "full recompute applies to; expected a positive count with recompute full",
                    p.recompute_num_layers));
  }
  check_recompute_modules(m, p);
  if (p.recompute == Recompute::kDots && p.attention == AttentionKernel::kNaive) {
    bad(F::kRecompute,
        "the dots policy saves matmul outputs, which with naive attention include "
        "the s x s scores; expected a fused attention kernel");
  }
  if (keeps_named_projections(p.recompute) && (m.moe || m.mla)) {
    bad(F::kRecompute,
        fmt::format("{} keeps the Q, K and V projections and re-runs the rest of the layer; its "
                    "re-run of {} is not modelled; expected recompute none, selective, full or "
                    "dots",
                    to_string(p.recompute),
                    m.moe ? "a mixture of experts (the router, dispatch and experts)"
                          : "multi-head latent attention's up-projections"));
  }
}

// Transformer Engine's offload context needs a layer left on the device after the offloaded ones
// (get_cpu_offload_context: num_layers <= model_layers - 1); Megatron-Core refuses it with
// activation recompute (TransformerConfig: "CPU offloading does not work when activation
// recomputation is enabled"), and meshsim models it with whole backward passes.
void check_offload(const ModelConfig& m, const ParallelPlan& p) {
  if (p.offload_layers == 0) {
    return;
  }
  if (p.offload_layers < 0) {
    bad(F::kOffloadLayers,
        fmt::format("expected a layer count >= 0, got {}", p.offload_layers));
  }
  if (p.recompute != Recompute::kNone) {
    bad(F::kOffloadLayers, "activation offloading with activation recompute: Megatron-Core "
                           "refuses the combination; expected recompute none");
  }
  if (splits_backward(p.schedule)) {
    bad(F::kOffloadLayers, "activation offloading is modelled with whole backward passes; "
                           "expected a schedule other than zb or zbv");
  }
  std::vector<int64_t> chunks = p.stage_layers;
  if (chunks.empty()) {
    chunks.assign(1, m.num_layers / (p.pp * p.vpp));
  }
  for (const int64_t layers : chunks) {
    if (layers > 0 && p.offload_layers >= layers) {
      bad(F::kOffloadLayers,
          fmt::format("{} offloaded layers of a model chunk of {}: expected fewer than the "
                      "layers of every chunk (Transformer Engine keeps the last on the device)",
                      p.offload_layers, layers));
    }
  }
}

void check_hsdp(const ParallelPlan& p) {
  if (p.fsdp == 0) {
    return;
  }
  if (p.fsdp < 0 || p.dp % p.fsdp != 0) {
    bad(F::kFsdp,
        fmt::format("an HSDP shard group of {} DP ranks must divide dp {}", p.fsdp, p.dp));
  }
  if (p.zero == ZeroStage::kNone) {
    bad(F::kFsdp,
        "HSDP shards the model state inside each group; it needs zero 1, 2 or 3 (3 is "
        "PyTorch HSDP and MaxText's FSDP)");
  }
  if (p.ep > 1) {
    bad(F::kFsdp, "HSDP with expert parallelism is not modelled; expected ep 1");
  }
}

void check_routing(const ModelConfig& m, const ParallelPlan& p) {
  const bool routing_set = p.moe_load_skew || p.moe_drop_tokens;
  if (routing_set && !m.moe) {
    bad(p.moe_load_skew ? F::kMoeLoadSkew : F::kMoeDropTokens,
        fmt::format("expert routing needs a mixture-of-experts model; {} is dense", m.name));
  }
  if (p.moe_load_skew && !(*p.moe_load_skew >= 0.0 && *p.moe_load_skew <= 3.0)) {
    bad(F::kMoeLoadSkew, fmt::format("expected a lognormal sigma in [0, 3] (0: a uniform "
                                     "router), got {}",
                                     *p.moe_load_skew));
  }
  if (p.moe_drop_tokens && !p.moe_load_skew) {
    bad(F::kMoeDropTokens,
        "dropping at capacity needs a distribution of tokens per expert; set "
        "moe_load_skew (0 for a uniform router)");
  }
  if (p.moe_load_skew && !p.moe_drop_tokens && p.capacity_factor != 1.0) {
    bad(F::kCapacityFactor,
        "a dropless router (the default) has no capacity; set "
        "moe_drop_tokens to cap experts at the capacity factor");
  }
  if (p.moe_seed < 0) {
    bad(F::kMoeSeed, fmt::format("expected a non-negative seed, got {}", p.moe_seed));
  }
}

void check_combinations(const ModelConfig& m, const ParallelPlan& p) {
  if (p.fp8_param_gather) {
    if (const std::optional<std::string> why = fp8_param_gather_refusal(p)) {
      bad(F::kFp8ParamGather, *why);
    }
  }
  if (p.cuda_graphs != CudaGraphs::kNone && p.host.issue == HostIssue::kXla) {
    bad(F::kCudaGraphs, fmt::format("the {} stack runs each step as one XLA executable, which "
                                    "leaves the host nothing per kernel to save; CUDA graphs are "
                                    "an option of the PyTorch stacks",
                                    to_string(p.stack)));
  }
  if (splits_backward(p.schedule) && p.recompute == Recompute::kFull) {
    bad(F::kRecompute, "full recompute with the zero-bubble schedule is not modelled (its "
                       "deferred weight gradients need the re-materialised activations); use "
                       "selective or none");
  }
  if (p.kernels == Kernels::kEager && p.cp > 1) {
    bad(F::kKernels, "eager kernels are modelled without context parallelism (ring attention "
                     "runs as fused chunks); use fused kernels with cp > 1");
  }
  if (p.kernels == Kernels::kEager && m.mla) {
    bad(F::kKernels,
        "eager kernels are modelled for multi-head and grouped-query attention; "
        "multi-head latent attention needs fused kernels");
  }
  if (p.attention == AttentionKernel::kNaive && p.cp > 1) {
    bad(F::kAttention, "naive attention is modelled without context parallelism (ring attention "
                       "runs flash chunks); use a flash kernel with cp > 1");
  }
  if (p.zero != ZeroStage::kNone && p.dp == 1) {
    bad(F::kZero, "ZeRO shards over the data-parallel group; it needs dp > 1");
  }
  if (m.positions == PositionKind::kLearned && p.seq > m.max_position_embeddings) {
    bad(F::kSeq, fmt::format("{} tokens, but {} has learned positions for at most {} tokens",
                             p.seq, m.name, m.max_position_embeddings));
  }
}

}  // namespace

void validate_split(const ModelConfig& model, const ParallelPlan& plan) {
  check_sizes(plan);
  validate_sharding(model, plan);
  check_pipeline(model, plan);
  check_experts(model, plan);
  check_routing(model, plan);
  check_hsdp(plan);
  check_recompute(model, plan);
  check_offload(model, plan);
}

std::optional<std::string> fp8_param_gather_refusal(const ParallelPlan& p) {
  // megatron/training/arguments.py @ d98e8a64: "--fp8-param-gather only supported with
  // distributed optimizer, torch fsdp2, megatron fsdp"; the FP8 weights are Transformer Engine's,
  // which exist only in FP8 training.
  if (p.matmul_dtype != Dtype::kFp8) {
    return fmt::format("FP8 parameter gathers need FP8 weights: fp8 training (dtype fp8), not {}",
                       to_string(p.matmul_dtype));
  }
  if (p.zero == ZeroStage::kNone) {
    return "FP8 parameter gathers are the distributed optimizer's or FSDP's (Megatron: "
           "\"--fp8-param-gather only supported with distributed optimizer, torch fsdp2, megatron "
           "fsdp\"); set zero 1, 2 or 3";
  }
  if (p.stack != Stack::kMegatron && p.stack != Stack::kCustom) {
    return fmt::format(
        "FP8 parameter gathers are Megatron-Core's (--fp8-param-gather with "
        "Transformer Engine); the {} stack does not keep FP8 weights",
        to_string(p.stack));
  }
  return std::nullopt;
}

void validate_plan(const ModelConfig& model, const ParallelPlan& plan) {
  validate_split(model, plan);
  check_combinations(model, plan);
}

std::vector<std::string> plan_caveats(const ModelConfig& m, const ParallelPlan& p) {
  std::vector<std::string> out;
  // The custom stack runs Megatron-Core's kernels without its checks: say which of them the plan
  // breaks (stack_rules.h).
  if (p.stack == Stack::kCustom) {
    for (const StackRule& rule : stack_rules(Stack::kMegatron)) {
      if (rule.refuses(m, p)) {
        out.push_back(refusal_text(Stack::kMegatron, rule));
      }
    }
  }
  if (m.logit_softcapping && p.attention == AttentionKernel::kFlash) {
    out.push_back(
        "attention logit soft-capping (Gemma-2) in a fused attention kernel needs "
        "FlashAttention >= 2.6 or cuDNN with softcap; older stacks run eager attention");
  }
  if (m.parallel_blocks && p.sp) {
    out.push_back(
        "parallel attention + MLP blocks with sequence parallelism: modelled with one "
        "reduce-scatter per layer, as GPT-NeoX's Megatron fork runs them");
  }
  return out;
}

RankLayout::RankLayout(const ParallelPlan& plan)
    : ep_(plan.ep),
      experts_tp_split_(plan.experts_tp_split()),
      node_ranks_(plan.moe_dispatcher == MoeDispatcher::kFlex ? plan.node_ranks : 0),
      fsdp_(plan.fsdp),
      world_(plan.world()) {
  std::array<int64_t, kNumAxes> degree{};
  degree[static_cast<size_t>(Axis::kTensor)] = plan.tp;
  degree[static_cast<size_t>(Axis::kContext)] = plan.cp;
  degree[static_cast<size_t>(Axis::kData)] = plan.dp;
  degree[static_cast<size_t>(Axis::kPipeline)] = plan.pp;
  int64_t stride = 1;
  for (const Axis a : plan.order) {
    const auto i = static_cast<size_t>(a);
    size_[i] = degree[i];
    stride_[i] = stride;
    stride *= degree[i];
  }
  SIM_CHECK(stride == world_, "layout order {} covers {} ranks of {}", plan.order.size(), stride,
            world_);
  for (const Axis a : plan.order) {
    if (a == Axis::kData || (!experts_tp_split_ && a != Axis::kPipeline)) {
      pool_axes_.push_back(a);
    }
  }
}

int64_t RankLayout::digit(int64_t rank, Axis axis) const {
  const auto i = static_cast<size_t>(axis);
  return (rank / stride_[i]) % size_[i];
}

RankCoords RankLayout::coords(int64_t rank) const {
  return RankCoords{digit(rank, Axis::kTensor), digit(rank, Axis::kContext),
                    digit(rank, Axis::kData), digit(rank, Axis::kPipeline)};
}

int64_t RankLayout::rank(const RankCoords& c) const {
  return c.tp * stride_[0] + c.cp * stride_[1] + c.dp * stride_[2] + c.pp * stride_[3];
}

std::vector<int64_t> RankLayout::group_along(int64_t r, Axis axis) const {
  const auto i = static_cast<size_t>(axis);
  const int64_t base = r - digit(r, axis) * stride_[i];
  std::vector<int64_t> out;
  for (int64_t k = 0; k < size_[i]; ++k) {
    out.push_back(base + k * stride_[i]);
  }
  return out;
}

namespace {

// The context groups of `data_ranks`, together, ascending.
std::vector<int64_t> with_context_groups(const RankLayout& layout,
                                         std::span<const int64_t> data_ranks) {
  std::vector<int64_t> out;
  for (const int64_t d : data_ranks) {
    const auto cps = layout.group_along(d, Axis::kContext);
    out.insert(out.end(), cps.begin(), cps.end());
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

std::vector<int64_t> RankLayout::dp_cp_group(int64_t r) const {
  return with_context_groups(*this, group_along(r, Axis::kData));
}

std::vector<int64_t> RankLayout::shard_group(int64_t r) const {
  if (fsdp_ == 0) {
    return dp_cp_group(r);
  }
  const std::vector<int64_t> dp = group_along(r, Axis::kData);
  const auto block = static_cast<size_t>(coords(r).dp / fsdp_);
  const auto width = static_cast<size_t>(fsdp_);
  return with_context_groups(*this, std::span(dp).subspan(block * width, width));
}

std::vector<int64_t> RankLayout::replica_group(int64_t r) const {
  if (fsdp_ == 0) {
    return dp_cp_group(r);
  }
  const std::vector<int64_t> dp = group_along(r, Axis::kData);
  std::vector<int64_t> out;
  for (size_t k = static_cast<size_t>(coords(r).dp % fsdp_); k < dp.size();
       k += static_cast<size_t>(fsdp_)) {
    out.push_back(dp[k]);
  }
  return out;
}

bool op_checkpointing_fits(const ModelConfig& model) {
  return !model.is_moe() && !model.mla && !model.parallel_blocks;
}

bool recomputes(const ParallelPlan& plan, Recompute recompute, RecomputeModule module) {
  if (recompute != Recompute::kSelective) {
    return false;
  }
  if (plan.recompute_modules.empty()) {
    return module == RecomputeModule::kCoreAttn;
  }
  return std::find(plan.recompute_modules.begin(), plan.recompute_modules.end(), module) !=
         plan.recompute_modules.end();
}

bool reruns_core_attention(const ParallelPlan& plan, Recompute recompute) {
  return !plan.selective_by_op && recomputes(plan, recompute, RecomputeModule::kCoreAttn) &&
         (plan.attention == AttentionKernel::kNaive || plan.fused_attention_checkpointed);
}

}  // namespace meshsim::workloads

