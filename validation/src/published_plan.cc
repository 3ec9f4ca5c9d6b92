// The parallel plan of a published run, and its measured metric as a step time: rules over the
// record's fields, the run's framework entry and the source facts that hold for it
// (published_facts.h).
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <tuple>

#include "meshsim/sim/error.h"
#include "meshsim/validation/published_flops.h"
#include "meshsim/workloads/partition.h"
#include "published_internal.h"

namespace meshsim::validation::detail {
namespace {

using workloads::ParallelPlan;

// The precision class as stated, else a source fact's.
Dtype training_dtype(const RunFacts& rf, std::vector<std::string>& assumptions) {
  PublishedRun r = rf.run;
  if (r.precision_class == "unknown") {
    if (const SourceFact* f = rf.setting(&SourceFact::Set::precision)) {
      r.precision_class = *f->set.precision;
      assumptions.push_back(
          fmt::format("precision {}: not in the record, but {}", r.precision_class, f->source));
    }
  }
  if (r.precision_class == "bf16") {
    return Dtype::kBf16;
  }
  if (r.precision_class == "fp8") {
    return Dtype::kFp8;
  }
  if (r.precision_class == "fp16") {
    return Dtype::kFp16;
  }
  throw Unmappable("the training precision is not stated");
}

// The recompute policy: a source fact's, else the record's (its first word: full, selective,
// none; or the framework's alias of the whole text), else the framework's default.
workloads::Recompute recompute_of(const RunFacts& rf, std::vector<std::string>& assumptions) {
  using workloads::Recompute;
  const PublishedRun& r = rf.run;
  const FrameworkFact& fw = *rf.framework;
  if (!r.parallelism.recompute) {
    if (const SourceFact* f = rf.setting(&SourceFact::Set::recompute)) {
      assumptions.push_back(fmt::format("recompute {}: not in the record, but {}",
                                        to_string(*f->set.recompute), f->source));
      return *f->set.recompute;
    }
    if (!fw.recompute_default) {
      throw Unmappable("activation recompute is not stated, and the framework has no default");
    }
    assumptions.push_back(fw.recompute_default->source);
    return fw.recompute_default->value;
  }
  const std::string& text = *r.parallelism.recompute;
  for (const FrameworkFact::RecomputeAlias& a : fw.recompute_aliases) {
    if (text == a.text) {
      assumptions.push_back(a.source);
      return a.recompute;
    }
  }
  if (text.rfind("full", 0) == 0) {
    return Recompute::kFull;
  }
  if (text.rfind("selective", 0) == 0) {
    return Recompute::kSelective;
  }
  if (text == "none") {
    return Recompute::kNone;
  }
  throw Unmappable(fmt::format("activation recompute \"{}\" not recognised", text));
}

// Megatron-Core splits the layers evenly over the pp x vpp virtual stages and refuses a count
// that does not divide, unless the embedding and the loss each count as a layer
// (account_for_embedding_in_pipeline_split, account_for_loss_in_pipeline_split: the first and
// the last virtual stage then hold one transformer layer fewer).
void set_uneven_split(ParallelPlan& p, const RunFacts& rf, int64_t layers,
                      std::vector<std::string>& assumptions) {
  const int64_t chunks = p.pp * p.vpp;
  const auto& rule = rf.framework->embedding_and_loss_in_pipeline_split;
  if (!rule || !rule->value || layers % chunks == 0 || (layers + 2) % chunks != 0 ||
      (layers + 2) / chunks < 2) {
    return;
  }
  p.stage_layers.assign(static_cast<size_t>(chunks), (layers + 2) / chunks);
  p.stage_layers.front() -= 1;
  p.stage_layers.back() -= 1;
  assumptions.push_back(fmt::format(
      "{} layers over pp {} x vpp {}: the embedding and the loss count as a layer each "
      "(Megatron-Core's account_for_embedding/loss_in_pipeline_split), {} layers per virtual "
      "stage and {} on the first and the last; {}",
      layers, p.pp, p.vpp, (layers + 2) / chunks, (layers + 2) / chunks - 1, rule->source));
}

// Where the stages do not divide the layers, the framework's own partition (DeepSpeed's
// PipelineModule balances the transformer layers: deepspeed_type_partition).
void set_framework_partition(ParallelPlan& p, const RunFacts& rf, int64_t layers,
                             std::vector<std::string>& assumptions) {
  const auto& rule = rf.framework->pipeline_partition;
  if (!rule || !p.stage_layers.empty() || p.vpp > 1 || layers % p.pp == 0 || layers < p.pp) {
    return;
  }
  // GPTModelPipe's layer specs around the transformer layers in 16-bit training: the input cast,
  // the embedding and a transpose before; the transpose back, the final LayerNorm, the tied head
  // and the output cast after (megatron/model/gpt_model.py @ 0f23a729).
  constexpr int64_t kLeading = 3;
  constexpr int64_t kTrailing = 4;
  p.stage_layers = workloads::deepspeed_type_partition(layers, p.pp, kLeading, kTrailing);
  assumptions.push_back(fmt::format("{} layers over pp {}: {} per stage ({})", layers, p.pp,
                                    fmt::join(p.stage_layers, ", "), rule->source));
}

// A degree the record states: at most the devices (so that products cannot overflow) and within
// the plan's size bound.
std::optional<int64_t> stated_degree(const std::optional<int64_t>& v, const char* name,
                                     workloads::PlanField field, int64_t devices) {
  if (!v) {
    return std::nullopt;
  }
  if (*v > devices) {
    throw Unmappable(fmt::format("the stated {} {} is more than the {} devices", name, *v, devices));
  }
  workloads::check_plan_size(field, *v);
  return v;
}

// TP and PP where the record states neither but DP (the model-parallel size devices / (dp x cp)
// as a whole): the framework's split rule, else refused.
std::pair<int64_t, int64_t> split_model_parallel(int64_t model_parallel, const RunFacts& rf,
                                                 const topology::ClusterSpec& cluster,
                                                 std::vector<std::string>& assumptions) {
  if (model_parallel == 1) {
    return {1, 1};
  }
  const auto& rule = rf.framework->model_parallel_split;
  if (!rule) {
    throw Unmappable(fmt::format(
        "the tensor- and pipeline-parallel degrees are not stated; their product, {} (devices / "
        "(dp x cp)), could split either way",
        model_parallel));
  }
  int64_t tp = std::min(model_parallel, cluster.scale_up_domain_size());
  while (model_parallel % tp != 0) {
    --tp;
  }
  assumptions.push_back(fmt::format("tp {} x pp {}: the stated model-parallel size {} split by {}",
                                    tp, model_parallel / tp, model_parallel, rule->source));
  return {tp, model_parallel / tp};
}

// The degrees: TP, PP and CP as stated (CP 1 unless stated), DP the rest of the devices. Where the
// layout is stated in part, the unstated degree follows from the devices and the stated ones, or
// takes the framework's default (parallel_defaults); a layout not stated at all is refused.
void set_degrees(ParallelPlan& p, const RunFacts& rf, const topology::ClusterSpec& cluster,
                 std::vector<std::string>& assumptions) {
  using workloads::PlanField;
  const PublishedRun::Parallelism& par = rf.run.parallelism;
  const int64_t devices = cluster.device_count();
  std::optional<int64_t> tp = stated_degree(par.tp, "tp", PlanField::kTp, devices);
  std::optional<int64_t> pp = stated_degree(par.pp, "pp", PlanField::kPp, devices);
  const std::optional<int64_t> dp = stated_degree(par.dp, "dp", PlanField::kDp, devices);
  p.cp = stated_degree(par.cp, "cp", PlanField::kCp, devices).value_or(1);
  if (!par.cp) {
    assumptions.push_back("context parallel 1 (not stated; off unless configured)");
  }
  if ((!tp || !pp) && dp) {
    if (devices % (*dp * p.cp) != 0) {
      throw Unmappable(fmt::format("the stated dp {} x cp {} does not divide the {} devices", *dp,
                                   p.cp, devices));
    }
    const int64_t model_parallel = devices / (*dp * p.cp);
    if (tp || pp) {  // the other follows from the devices
      const int64_t known = tp ? *tp : *pp;
      if (model_parallel % known != 0) {
        throw Unmappable(fmt::format("the stated degrees (tp {}, pp {}, cp {}, dp {}) do not "
                                     "multiply to the {} devices",
                                     tp ? fmt::format("{}", *tp) : "unstated",
                                     pp ? fmt::format("{}", *pp) : "unstated", p.cp, *dp, devices));
      }
      (tp ? pp : tp) = model_parallel / known;
      assumptions.push_back(fmt::format("{} {}: the devices over the stated degrees",
                                        par.tp ? "pp" : "tp", model_parallel / known));
    } else {
      std::tie(tp, pp) = split_model_parallel(model_parallel, rf, cluster, assumptions);
    }
  }
  if (!tp || !pp) {
    const auto& defaults = rf.framework->parallel_defaults;
    if (!par.tp && !par.pp && !par.dp) {
      throw Unmappable("the parallel layout (tp, pp, dp) is not stated");
    }
    if (!defaults) {
      stated(tp, "the tensor-parallel degree");
      stated(pp, "the pipeline-parallel degree");
    }
    for (auto* degree : {&tp, &pp}) {
      if (!*degree) {
        *degree = defaults->value;
        assumptions.push_back(fmt::format("{} {}: not stated; {}", degree == &tp ? "tp" : "pp",
                                          defaults->value, defaults->source));
      }
    }
  }
  p.tp = *tp;
  p.pp = *pp;
  const int64_t model_parallel = p.tp * p.pp * p.cp;
  if (devices % model_parallel != 0) {
    throw Unmappable(fmt::format("tp {} x pp {} x cp {} does not divide {} devices", p.tp, p.pp,
                                 p.cp, devices));
  }
  p.dp = devices / model_parallel;
  if (dp && *dp != p.dp) {
    throw Unmappable(
        fmt::format("the stated degrees (tp {}, pp {}, cp {}, dp {}) do not multiply "
                    "to the {} devices",
                    p.tp, p.pp, p.cp, *dp, devices));
  }
}

// The virtual pipeline size: as stated, else a source fact's; refused when the notes say the
// source's table left it out; else none (Megatron's default).
void set_pipeline(ParallelPlan& p, const RunFacts& rf, int64_t layers,
                  std::vector<std::string>& assumptions) {
  const PublishedRun::Parallelism& par = rf.run.parallelism;
  std::optional<int64_t> vpp = par.vpp;
  if (!vpp) {
    if (const SourceFact* f = rf.setting(&SourceFact::Set::vpp)) {
      vpp = f->set.vpp;
      assumptions.push_back(fmt::format("virtual pipeline size {}: not in the record, but {}",
                                        *vpp, f->source));
    } else if (p.pp > 1 && rf.unstated_in_source(UnstatedField::kVpp)) {
      throw Unmappable(
          fmt::format("the virtual pipeline size is not stated (\"{}\"); with pp {} "
                      "it decides the pipeline bubble",
                      par.notes, p.pp));
    }
  }
  const int64_t size = vpp.value_or(1);
  workloads::check_plan_size(workloads::PlanField::kVpp, size);  // pp x vpp must not overflow
  if (p.pp > 1) {
    p.schedule = size > 1 ? workloads::PipelineSchedule::kInterleaved
                          : workloads::PipelineSchedule::kOneFOneB;
    p.vpp = size;
    set_uneven_split(p, rf, layers, assumptions);
    set_framework_partition(p, rf, layers, assumptions);
  }
}

// Sequence parallelism as stated, else the framework's rule; ZeRO as the record's FSDP flag and
// stage say, the shard group a source fact's, else the framework's distributed optimizer.
void set_sharding(ParallelPlan& p, const RunFacts& rf, const topology::ClusterSpec& cluster,
                  std::vector<std::string>& assumptions) {
  const PublishedRun::Parallelism& par = rf.run.parallelism;
  const FrameworkFact& fw = *rf.framework;
  const auto& sp_rule = fw.sequence_parallel_with_tp;
  p.sp = par.sp.value_or(p.tp > 1 && sp_rule && sp_rule->value);
  if (!par.sp && p.sp) {
    assumptions.push_back(sp_rule->source);
  }
  const SourceFact* group = rf.setting(&SourceFact::Set::fsdp_group);
  if (rf.unstated_in_source(UnstatedField::kFsdpGroup) && group == nullptr) {
    throw Unmappable(fmt::format("how the {} devices split between FSDP and data parallelism is "
                                 "not stated (\"{}\")",
                                 cluster.device_count(), par.notes));
  }
  if (par.fsdp.value_or(false) || par.zero_stage || fw.zero_stage) {
    // The stage as stated (FSDP alone is stage 3), else the one the framework's name states.
    int64_t stage = par.zero_stage.value_or(3);
    if (!par.zero_stage && !par.fsdp.value_or(false)) {
      stage = fw.zero_stage->value;
      assumptions.push_back(fw.zero_stage->source);
    }
    p.zero = static_cast<workloads::ZeroStage>(stage);
    if (group != nullptr) {
      p.fsdp = *group->set.fsdp_group;
      assumptions.push_back(fmt::format(
          "FSDP over groups of {} devices, data parallel across them: not in the record, but {}",
          p.fsdp, group->source));
    }
  } else if (fw.distributed_optimizer && fw.distributed_optimizer->value && p.dp > 1) {
    // With one data-parallel rank meshsim has nothing to shard the optimizer over (Megatron-Core
    // would shard it over the CP ranks alone, which meshsim's ZeRO does not model).
    p.zero = workloads::ZeroStage::kOptimizerStates;
    assumptions.push_back(fw.distributed_optimizer->source);
  }
  if (fw.bf16_shards_optimizer && fw.bf16_shards_optimizer->value &&
      p.matmul_dtype == Dtype::kBf16 && p.zero == workloads::ZeroStage::kNone && p.dp * p.cp > 1) {
    p.zero = workloads::ZeroStage::kOptimizerStates;
    assumptions.push_back(fw.bf16_shards_optimizer->source);
  }
}

// Batch: the global batch in sequences; the micro-batch as stated, or the framework's rule.
void set_batch(ParallelPlan& p, const RunFacts& rf, std::vector<std::string>& assumptions) {
  const PublishedRun& r = rf.run;
  p.seq = stated(r.model.seq_len, "the sequence length");
  if (r.batch.sequences) {
    p.gbs = *r.batch.sequences;
  } else {
    p.gbs = stated(r.batch.tokens, "the global batch") / p.seq;
  }
  const auto& rule = rf.framework->micro_batch;
  if (rule && (rule->value == MicroBatchRule::kPerDeviceShare ||
               (rule->value == MicroBatchRule::kStatedElseShare && !r.batch.micro_batch))) {
    p.mbs = p.gbs / p.dp;
    if (rule->value == MicroBatchRule::kStatedElseShare) {
      assumptions.push_back(fmt::format("micro-batch {} (not stated): {}", p.mbs, rule->source));
    }
    return;
  }
  if (!r.batch.micro_batch && p.gbs == p.dp) {
    // One sequence per data-parallel rank: no other micro-batch size divides it.
    p.mbs = 1;
    return;
  }
  if (const SourceFact* f = rf.setting(&SourceFact::Set::micro_batch);
      f != nullptr && !r.batch.micro_batch) {
    p.mbs = *f->set.micro_batch;
    assumptions.push_back(
        fmt::format("micro-batch {}: not in the record, but {}", p.mbs, f->source));
    return;
  }
  p.mbs = stated(r.batch.micro_batch, "the micro-batch size");
}

// The framework's notes flags (NotesFlag): a refusal, the sharding the notes state (which must
// be the plan's), fp32 gradients. Of each group the first flag found applies.
// A flag's text is looked for in the parallelism notes as written; a flag that names a kernel or
// an option (attention, FP8 parameter gathers) also in the framework text, the precision and the
// model's notes, case-insensitively, where records name the software.
bool flag_found(const NotesFlag& f, const PublishedRun& r) {
  if (f.attention || f.fp8_param_gather) {
    return icontains(r.parallelism.notes, f.text) || icontains(r.framework, f.text) ||
           icontains(r.precision, f.text) || icontains(r.model.arch_notes, f.text);
  }
  return contains(r.parallelism.notes, f.text);
}

void apply_notes_flags(ParallelPlan& p, const RunFacts& rf, std::vector<std::string>& assumptions) {
  const std::string& notes = rf.run.parallelism.notes;
  std::vector<std::string> done;
  for (const NotesFlag& f : rf.framework->notes_flags) {
    if (std::find(done.begin(), done.end(), f.group) != done.end() || !flag_found(f, rf.run)) {
      continue;
    }
    done.push_back(f.group);
    if (f.attention) {
      p.attention = *f.attention;
      p.origins.set(workloads::PlanField::kAttention, Origin::file(rf.run.id, "/framework"));
      assumptions.push_back(fmt::format("attention {}: {}", to_string(p.attention), f.source));
      continue;
    }
    if (f.fp8_param_gather) {
      // Only where Megatron runs it; elsewhere the words are kept as an assumption, with the
      // reason, not a refusal.
      const std::optional<std::string> why = workloads::fp8_param_gather_refusal(p);
      p.fp8_param_gather = !why;
      if (!why) {
        p.origins.set(workloads::PlanField::kFp8ParamGather, Origin::file(rf.run.id, "/framework"));
      }
      assumptions.push_back(
          why ? fmt::format("FP8 parameter gathers named but not run ({}): {}", *why, f.source)
              : fmt::format("FP8 parameter gathers: {}", f.source));
      continue;
    }
    const size_t at = notes.find(f.text);
    if (!f.refuse.empty()) {
      // The notes' words from the flag to the next separator: "sharding_strategy=HYBRID_SHARD".
      const size_t end = notes.find_first_of(",;", at);
      throw Unmappable(fmt::format("{} (the notes: \"{}\")", f.refuse,
                                   notes.substr(at, end == std::string::npos ? end : end - at)));
    }
    if (f.zero_stage && *f.zero_stage != p.zero) {
      throw Unmappable(fmt::format("the notes' {} is ZeRO stage {}, but the run maps to stage {}",
                                   f.text, static_cast<int>(*f.zero_stage),
                                   static_cast<int>(p.zero)));
    }
    if (f.fp32_gradients) {
      p.grad_reduce_fp32 = true;
      p.origins.set(workloads::PlanField::kGradReduceFp32, Origin::file(rf.run.id, "/notes"));
      assumptions.push_back(f.source);
    }
  }
}

// The stack: a source fact's, else the framework's; the kernels a source fact names.
void set_stack(ParallelPlan& p, const RunFacts& rf, std::vector<std::string>& assumptions) {
  const PublishedRun& r = rf.run;
  p.stack = rf.framework->stack;
  if (const SourceFact* f = rf.setting(&SourceFact::Set::stack)) {
    p.stack = *f->set.stack;
    assumptions.push_back(fmt::format("stack {}: {}", to_string(p.stack), f->source));
  }
  if (!rf.framework->stack_assumption.empty()) {
    assumptions.push_back(rf.framework->stack_assumption);
  }
  p.origins.set(workloads::PlanField::kStack, Origin::file(r.id, "/framework"));
  if (const auto& a = rf.framework->attention) {
    p.attention = a->value;
    p.origins.set(workloads::PlanField::kAttention, Origin::file(r.id, "/framework"));
    assumptions.push_back(fmt::format("attention {}: {}", to_string(p.attention), a->source));
  }
  if (const SourceFact* f = rf.setting(&SourceFact::Set::attention)) {
    p.attention = *f->set.attention;
    p.origins.set(workloads::PlanField::kAttention, Origin::file(r.id, "/model/name"));
    assumptions.push_back(fmt::format("attention {}: {}", to_string(p.attention), f->source));
  }
  if (const SourceFact* f = rf.setting(&SourceFact::Set::tp_comm_overlap)) {
    // Megatron-LM's validate_args turns sequence parallelism off at TP 1 and then asserts it for
    // --tp-comm-overlap (megatron/training/arguments.py @ d98e8a64): a TP 1 run of a source that
    // names the flag did not pass it.
    p.overlap.tensor_parallel = *f->set.tp_comm_overlap && p.tp > 1;
    assumptions.push_back(
        p.tp > 1 || !*f->set.tp_comm_overlap
            ? fmt::format("TP communication overlap {}: {}",
                          p.overlap.tensor_parallel ? "on" : "off", f->source)
            : "TP communication overlap off: the run has TP 1, where Megatron-LM disables "
              "sequence parallelism and --tp-comm-overlap would fail its assertion");
  }
  if (const SourceFact* f = rf.setting(&SourceFact::Set::grad_reduce_fp32)) {
    p.grad_reduce_fp32 = *f->set.grad_reduce_fp32;
    p.origins.set(workloads::PlanField::kGradReduceFp32, Origin::file(r.id, "/framework"));
    assumptions.push_back(fmt::format("gradients reduced in {}: {}",
                                      p.grad_reduce_fp32 ? "fp32" : "the parameters' 16 bits",
                                      f->source));
  }
  if (const SourceFact* f = rf.setting(&SourceFact::Set::cross_entropy_fusion)) {
    p.cross_entropy_fusion = *f->set.cross_entropy_fusion;
    p.origins.set(workloads::PlanField::kCrossEntropyFusion, Origin::file(r.id, "/framework"));
    assumptions.push_back(fmt::format("cross entropy {}: {}",
                                      p.cross_entropy_fusion ? "fused" : "unfused", f->source));
  }
  const auto& ddp = rf.framework->ddp_overlaps_without_pipeline;
  if (ddp && ddp->value && p.pp == 1) {
    p.overlap.grad_reduce = true;
    p.origins.set(workloads::PlanField::kOverlapGradReduce, Origin::file(r.id, "/framework"));
    assumptions.push_back(ddp->source);
  }
}

// The FP8 recipe: as the record's precision names it (precision_recipes), else the stack's.
void set_fp8_recipe(ParallelPlan& p, const RunFacts& rf, std::vector<std::string>& assumptions) {
  if (p.matmul_dtype != Dtype::kFp8) {
    return;
  }
  for (const PrecisionRecipe& recipe : rf.facts.precision_recipes) {
    if (!contains(rf.run.precision, recipe.text)) {
      continue;
    }
    if (recipe.recipe == Fp8Recipe::kMxfp8) {  // costed as the stack's recipe, and said so
      assumptions.push_back(recipe.source);
      return;
    }
    p.fp8_scaling = recipe.recipe == Fp8Recipe::kCurrent ? workloads::Fp8Scaling::kCurrent
                                                         : workloads::Fp8Scaling::kRowwise;
    p.origins.set(workloads::PlanField::kFp8Recipe, Origin::file(rf.run.id, "/precision"));
    return;
  }
  assumptions.push_back("the FP8 recipe of the framework's stack (not stated)");
}

// Megatron-Core's own FLOP count of the model (published_flops.h).
Flops megatron_core_flops(int64_t gbs, int64_t seq, const workloads::ModelConfig& m) {
  MegatronCoreShape shape;
  shape.layers = m.num_layers;
  shape.hidden = m.d_model;
  shape.heads = m.num_heads;
  shape.query_groups = m.num_kv_heads;
  shape.kv_channels = m.head_dim;
  shape.ffn = m.d_ff;
  shape.vocab = m.vocab_size;
  shape.gated = workloads::is_gated(m.mlp);
  if (m.moe) {
    shape.ffn = m.moe->expert_d_ff;
    shape.experts_routed_to = m.moe->experts_per_token;
  }
  return megatron_core08_iteration_flops(gbs, seq, shape);
}

}  // namespace

ParallelPlan plan_of(const RunFacts& rf, const workloads::ModelConfig& model,
                     const topology::ClusterSpec& cluster, std::vector<std::string>& assumptions) {
  ParallelPlan p;
  p.set_training_dtype(training_dtype(rf, assumptions));
  set_degrees(p, rf, cluster, assumptions);
  set_pipeline(p, rf, model.num_layers, assumptions);
  set_sharding(p, rf, cluster, assumptions);
  set_batch(p, rf, assumptions);
  p.recompute = recompute_of(rf, assumptions);
  if (const SourceFact* f = rf.setting(&SourceFact::Set::recompute_modules)) {
    p.recompute_modules = *f->set.recompute_modules;
  }
  set_stack(p, rf, assumptions);
  apply_notes_flags(p, rf, assumptions);
  set_fp8_recipe(p, rf, assumptions);
  return p;
}

MeasuredStep measured_step(const RunFacts& rf, const workloads::ModelConfig& m,
                           const ParallelPlan& p) {
  const PublishedRun& r = rf.run;
  const std::string& metric = r.measured.metric;
  const double v = r.measured.value;
  const auto devices = static_cast<double>(p.world());
  const int64_t tokens = p.gbs * p.seq;
  if (metric == "step_time") {
    return {Seconds(v), fmt::format("step time {} s as printed", v)};
  }
  if (metric == "tokens_per_second_per_gpu") {
    return {Seconds(static_cast<double>(tokens) / (v * devices)),
            fmt::format("{} tokens / ({} tokens/s/GPU x {} GPUs)", tokens, v, p.world())};
  }
  const auto& conventions = rf.framework->metric_conventions;
  const auto convention = conventions.find(metric);
  if (convention == conventions.end()) {
    throw Unmappable(fmt::format("metric {} ({}): the source's FLOP convention is not known",
                                 metric, r.measured.unit));
  }
  switch (convention->second.convention) {
    case FlopConvention::kMegatronCore08: {
      const Flops f = megatron_core_flops(p.gbs, p.seq, m);
      const std::string& also = convention->second.source;
      return {f / (TFlopsPerSec(v) * devices),
              fmt::format("Megatron-LM's num_floating_point_operations (megatron/training/"
                          "training.py @ core_r0.8.0{}): {:.4g} FLOPs / ({} TFLOP/s x {} GPUs)",
                          also.empty() ? "" : "; " + also, f.count(), v, p.world())};
    }
    case FlopConvention::kMegatron2021Eq3: {
      const Flops f =
          megatron2021_iteration_flops(p.gbs, p.seq, m.num_layers, m.d_model, m.vocab_size);
      return {f / (TFlopsPerSec(v) * devices),
              fmt::format("Narayanan et al. 2021 eq. 3: {:.4g} FLOPs / ({} TFLOP/s x {} GPUs)",
                          f.count(), v, p.world())};
    }
    case FlopConvention::kMegatronDeepSpeed2022: {
      const bool glu = workloads::is_gated(m.mlp);
      const bool checkpointed = p.recompute == workloads::Recompute::kFull;
      const Flops f = megatron_deepspeed_iteration_flops(p.gbs, p.seq, m.num_layers, m.d_model,
                                                         m.vocab_size, glu, checkpointed);
      return {f / (TFlopsPerSec(v) * devices),
              fmt::format("Megatron-DeepSpeed's TFLOPs (megatron/training.py training_log @ "
                          "0f23a729: eq. 3 with coefficient {} and recompute factor {}): {:.4g} "
                          "FLOPs / ({} TFLOP/s x {} GPUs)",
                          glu ? 32 : 24, checkpointed ? 4 : 3, f.count(), v, p.world())};
    }
    case FlopConvention::kMaxText2023: {
      const int64_t params = maxtext2023_parameters(m.vocab_size, m.d_model, m.num_heads,
                                                    m.head_dim, m.d_ff, m.num_layers, 1);
      const int64_t per_device = p.gbs / p.world();
      const Flops f = maxtext2023_flops_per_device(params, per_device, p.seq, m.num_heads,
                                                   m.num_layers, m.head_dim);
      return {f / TFlopsPerSec(v),
              fmt::format("MaxText 76bd53b0f calculate_training_tflops: {:.4g} FLOPs per chip "
                          "({} parameters) / {} TFLOP/s",
                          f.count(), params, v)};
    }
  }
  throw Unmappable(fmt::format("metric {}: no FLOP convention", metric));
}

}  // namespace meshsim::validation::detail
