// The parallel plan of a published run, and its measured metric as a step time.
#include <fmt/format.h>

#include "meshsim/sim/error.h"
#include "meshsim/validation/published_flops.h"
#include "published_internal.h"

namespace meshsim::validation::detail {
namespace {

using workloads::ParallelPlan;

// The software a run states; it decides the defaults that apply where the record is silent, the
// kernels that run and the conventions of the metric.
enum class Framework {
  kMegatron2021,  // Megatron-LM as of Narayanan et al. 2021
  kMegatronCore,  // Megatron-Core with Transformer Engine: Megatron-LM since 2023, NeMo, Bridge
  kComposer,      // MosaicML Composer / llm-foundry on PyTorch FSDP, eager mode
  kTorchtitan,    // torchtitan: FSDP2, torch.compile
  kJax,           // MaxText or PaxML on XLA
};

Framework framework_of(const PublishedRun& r) {
  const std::string& f = r.framework;
  if (contains(f, "(2021)") || contains(f, "DeepSpeed")) {
    return Framework::kMegatron2021;
  }
  if (contains(f, "Composer")) {
    return Framework::kComposer;
  }
  if (contains(f, "torchtitan")) {
    return Framework::kTorchtitan;
  }
  if (contains(f, "MaxText") || contains(f, "PaxML")) {
    return Framework::kJax;
  }
  if (contains(f, "NeMo") || contains(f, "Megatron")) {
    return Framework::kMegatronCore;
  }
  throw Unmappable(fmt::format("framework \"{}\" not recognised", f));
}

Dtype training_dtype(const PublishedRun& r) {
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

// What a source's table leaves out ("NA", "not stated") but the script that produced the table
// sets, read at the cited commit: the virtual pipeline size, the FSDP shard group of an FSDP + DP
// run, the remat policy; each with where it is set.
struct ScriptFact {
  std::string_view citation;  // a prefix of the run's citation: the file and its commit
  std::string_view model;     // the run's model name
  std::optional<int64_t> vpp;
  std::optional<int64_t> fsdp;  // devices per ZeRO-3 shard group; the rest replicate (HSDP)
  std::optional<workloads::Recompute> recompute;
  std::string_view parallel_source;   // where vpp or fsdp is set
  std::string_view recompute_source;  // where the remat policy is set
};

const std::vector<ScriptFact>& script_facts() {
  using workloads::Recompute;
  static const std::vector<ScriptFact> facts = {
      // DGX Cloud Benchmarking v25.04 (and v25.04.01): nemotron/launch.sh sets VP=12 for
      // MODEL_SIZE 340b and passes it to NeMo's pretrain_nemotron4_340b as -vp 12.
      {"NVIDIA/dgxc-benchmarking nemotron/README.md @ 741c886", "Nemotron-4 340B", 12, {}, {},
       "nemotron/launch.sh @ 741c886 (release v25.04) passes -vp 12 for 340b", ""},
      {"NVIDIA/dgxc-benchmarking nemotron/README.md @ 85380ff", "Nemotron-4 340B", 12, {}, {},
       "nemotron/launch.sh @ 85380ff (release v25.04.01) passes -vp 12 for 340b", ""},
      // DGX Cloud Benchmarking v24.11.1, PaxML: paxml/configure.sh runs paxml.main with
      // DCN_MESH_SHAPE [nodes / FSDP, FSDP, 1] (FSDP=1 for 5b, 16 for 175b) over the GPU
      // configs' ICI_MESH_SHAPE [1, 8, 1] (axes replica, data, mdl; weights sharded over data):
      // the shard group is 8 x FSDP devices. paxml_mod_configs.py sets the remat policy.
      {"NVIDIA/dgxc-benchmarking paxml/README_5b.md @ 35a9aec", "GPT-3 5B (PaxML)", {}, 8,
       Recompute::kDots,
       "paxml/configure.sh @ 35a9aec sets DCN_MESH_SHAPE [nodes, 1, 1] over GPT5B's "
       "ICI_MESH_SHAPE [1, 8, 1] (paxml/contrib/gpu/scripts_gpu/configs.py): FSDP over the 8 "
       "GPUs of a node, data parallel across nodes",
       "paxml_mod_configs.py @ 35a9aec sets Synthetic5BCkpt's CHECKPOINT_POLICY SAVE_DOT_ONLY: "
       "every matmul output kept"},
      {"NVIDIA/dgxc-benchmarking paxml/README_175b.md @ 35a9aec", "GPT-3 175B", {}, 128,
       Recompute::kQkvOutProj,
       "paxml/configure.sh @ 35a9aec sets DCN_MESH_SHAPE [nodes / 16, 16, 1] over GPT175B's "
       "ICI_MESH_SHAPE [1, 8, 1] (paxml/contrib/gpu/scripts_gpu/configs.py): FSDP over 128 "
       "GPUs, data parallel across",
       "paxml_mod_configs.py @ 35a9aec sets Synthetic175BCkpt's CHECKPOINT_POLICY "
       "SAVE_QKV_OUT_PROJ, save_only_these_names of combined_qkv_proj and out_proj "
       "(praxis/layers/checkpoint_policy.py): the QKV and output projections kept, the norms, the "
       "attention core and the MLP up to its down projection re-run"},
  };
  return facts;
}

const ScriptFact* script_fact(const PublishedRun& r) {
  for (const ScriptFact& s : script_facts()) {
    if (r.citation.starts_with(s.citation) && r.model.name == s.model) {
      return &s;
    }
  }
  return nullptr;
}

// The recompute policy, with its modules where a script names them (`script`: the run's
// ScriptFact, or null).
workloads::Recompute recompute_of(const PublishedRun& r, Framework f, const ScriptFact* script,
                                  std::vector<std::string>& assumptions) {
  using workloads::Recompute;
  if (!r.parallelism.recompute && script != nullptr && script->recompute) {
    assumptions.push_back(fmt::format("recompute {}: not in the table, but {}",
                                      to_string(*script->recompute), script->recompute_source));
    return *script->recompute;
  }
  if (!r.parallelism.recompute) {
    if (f == Framework::kJax) {
      // MaxText's base.yml has remat_policy: 'full' (at 76bd53b0f and still at the 2026 head).
      assumptions.push_back("full activation recompute (MaxText's default remat_policy 'full')");
      return Recompute::kFull;
    }
    assumptions.push_back("no activation recompute (the framework's default)");
    return Recompute::kNone;
  }
  const std::string& text = *r.parallelism.recompute;
  if (text.rfind("full", 0) == 0) {
    return Recompute::kFull;
  }
  if (text.rfind("selective", 0) == 0) {
    return Recompute::kSelective;
  }
  if (text == "minimal" && f == Framework::kJax) {
    // MaxText's remat_policy "minimal" is jax.checkpoint_policies
    // .checkpoint_dots_with_no_batch_dims: every matmul output is saved, only element-wise work
    // is recomputed, no GEMM runs twice: meshsim's `dots` policy (the plan's "minimal" alias).
    assumptions.push_back("MaxText remat_policy minimal: matmul outputs saved (recompute dots)");
    return Recompute::kDots;
  }
  if (text == "none") {
    return Recompute::kNone;
  }
  throw Unmappable(fmt::format("activation recompute \"{}\" not recognised", text));
}

// Megatron-Core splits the layers evenly over the pp x vpp virtual stages and refuses a count
// that does not divide, unless the embedding and the loss each count as a layer
// (account_for_embedding_in_pipeline_split, account_for_loss_in_pipeline_split: the first and
// the last virtual stage then hold one transformer layer fewer). Llama 3.1 405B's 126 layers over
// pp 8 x vpp 8 divide only that way, and NVIDIA's NeMo-Run recipe for 405B sets both
// (NVIDIA/cloudai, src/cloudai/workloads/nemo_run/cloudai_nemorun.py @ 443af4a,
// cloudai_llama3_405b_recipe).
void set_uneven_split(ParallelPlan& p, const PublishedRun& r, Framework f,
                      std::vector<std::string>& assumptions) {
  const int64_t layers = stated(r.model.layers, "the number of layers");
  const int64_t chunks = p.pp * p.vpp;
  if (f != Framework::kMegatronCore || layers % chunks == 0 || (layers + 2) % chunks != 0 ||
      (layers + 2) / chunks < 2) {
    return;
  }
  p.stage_layers.assign(static_cast<size_t>(chunks), (layers + 2) / chunks);
  p.stage_layers.front() -= 1;
  p.stage_layers.back() -= 1;
  assumptions.push_back(fmt::format(
      "{} layers over pp {} x vpp {}: the embedding and the loss count as a layer each "
      "(Megatron-Core's account_for_embedding/loss_in_pipeline_split), {} layers per virtual "
      "stage and {} on the first and the last",
      layers, p.pp, p.vpp, (layers + 2) / chunks, (layers + 2) / chunks - 1));
}

// Degrees: TP and PP as stated, CP 1 unless stated, DP the rest of the devices; the virtual
// pipeline size and the FSDP shard group from `script` (the run's ScriptFact, or null) where the
// table leaves them out.
void set_degrees(ParallelPlan& p, const PublishedRun& r, const topology::ClusterSpec& cluster,
                 Framework f, const ScriptFact* script, std::vector<std::string>& assumptions) {
  const PublishedRun::Parallelism& par = r.parallelism;
  const bool scripted_fsdp = script != nullptr && script->fsdp;
  if (contains(par.notes, "FSDP/DP split not stated") && !scripted_fsdp) {
    throw Unmappable(
        fmt::format("how the {} devices split between FSDP and data parallelism is "
                    "not stated (\"{}\")",
                    cluster.device_count(), par.notes));
  }
  p.tp = stated(par.tp, "the tensor-parallel degree");
  p.pp = stated(par.pp, "the pipeline-parallel degree");
  p.cp = par.cp.value_or(1);
  if (!par.cp) {
    assumptions.push_back("context parallel 1 (not stated; off unless configured)");
  }
  // Each degree at most the devices, so that their product cannot overflow, and positive (the
  // plan's own size check), so that it divides the devices.
  for (const auto& [name, degree] : {std::pair{"tp", p.tp}, {"pp", p.pp}, {"cp", p.cp}}) {
    if (degree > cluster.device_count()) {
      throw Unmappable(fmt::format("the stated {} {} is more than the {} devices", name, degree,
                                   cluster.device_count()));
    }
  }
  for (const auto& [field, degree] : {std::pair{workloads::PlanField::kTp, p.tp},
                                      {workloads::PlanField::kPp, p.pp},
                                      {workloads::PlanField::kCp, p.cp}}) {
    workloads::check_plan_size(field, degree);
  }
  const int64_t model_parallel = p.tp * p.pp * p.cp;
  if (cluster.device_count() % model_parallel != 0) {
    throw Unmappable(fmt::format("tp {} x pp {} x cp {} does not divide {} devices", p.tp, p.pp,
                                 p.cp, cluster.device_count()));
  }
  p.dp = cluster.device_count() / model_parallel;
  if (par.dp && *par.dp != p.dp) {
    throw Unmappable(
        fmt::format("the stated degrees (tp {}, pp {}, cp {}, dp {}) do not multiply "
                    "to the {} devices",
                    p.tp, p.pp, p.cp, *par.dp, cluster.device_count()));
  }
  std::optional<int64_t> stated_vpp = par.vpp;
  if (p.pp > 1 && !stated_vpp && contains(par.notes, "VP")) {
    if (script == nullptr || !script->vpp) {
      throw Unmappable(
          fmt::format("the virtual pipeline size is not stated (\"{}\"); with pp {} "
                      "it decides the pipeline bubble",
                      par.notes, p.pp));
    }
    stated_vpp = script->vpp;
    assumptions.push_back(fmt::format("virtual pipeline size {}: not in the table, but {}",
                                      *script->vpp, script->parallel_source));
  }
  const int64_t vpp = stated_vpp.value_or(1);
  workloads::check_plan_size(workloads::PlanField::kVpp, vpp);  // pp x vpp must not overflow
  if (p.pp > 1) {
    p.schedule = vpp > 1 ? workloads::PipelineSchedule::kInterleaved
                         : workloads::PipelineSchedule::kOneFOneB;
    p.vpp = vpp;
    set_uneven_split(p, r, f, assumptions);
  }
  // Sequence parallelism: as stated; NeMo's recipes turn it on with TP > 1; XLA shards the
  // activations' embedding axis over the tensor axis (MaxText's logical axis rules), which moves
  // the same bytes.
  p.sp = par.sp.value_or(p.tp > 1 && (f == Framework::kMegatronCore || f == Framework::kJax));
  if (!par.sp && p.sp) {
    assumptions.push_back("sequence parallelism with TP (the framework's recipes)");
  }
  if (par.fsdp.value_or(false)) {
    p.zero = static_cast<workloads::ZeroStage>(par.zero_stage.value_or(3));
    if (scripted_fsdp) {
      p.fsdp = *script->fsdp;
      assumptions.push_back(fmt::format(
          "FSDP over groups of {} devices, data parallel across them: not in the table, but {}",
          p.fsdp, script->parallel_source));
    }
  } else if (f == Framework::kMegatronCore) {
    p.zero = workloads::ZeroStage::kOptimizerStates;
    assumptions.push_back("distributed optimizer (NeMo's and Megatron-Bridge's default)");
  }
}

// Batch: the global batch in sequences; the micro-batch as stated, except under XLA, where one
// step is one microbatch of the data-parallel rank's whole share.
void set_batch(ParallelPlan& p, const PublishedRun& r, Framework f) {
  p.seq = stated(r.model.seq_len, "the sequence length");
  if (r.batch.sequences) {
    p.gbs = *r.batch.sequences;
  } else {
    p.gbs = stated(r.batch.tokens, "the global batch") / p.seq;
  }
  if (f == Framework::kJax) {
    p.mbs = p.gbs / p.dp;
    return;
  }
  if (!r.batch.micro_batch && p.gbs == p.dp) {
    // One sequence per data-parallel rank: no other micro-batch size divides it.
    p.mbs = 1;
    return;
  }
  p.mbs = stated(r.batch.micro_batch, "the micro-batch size");
}

// The software stack of the framework (workloads/stack_profile.h holds what each runs); recorded as
// given by the run, so that the edge applies it.
workloads::Stack stack_of(Framework f) {
  switch (f) {
    case Framework::kMegatron2021:
      return workloads::Stack::kMegatron2021;
    case Framework::kComposer:
      return workloads::Stack::kFsdp;
    case Framework::kTorchtitan:
      return workloads::Stack::kFsdpCompile;
    case Framework::kJax:
      return workloads::Stack::kMaxText;
    case Framework::kMegatronCore:
      break;
  }
  return workloads::Stack::kMegatron;
}

// The tables' FSDP columns, as the run's notes carry them: the sharding strategy must be the ZeRO
// stage the run states (FULL_SHARD 3, SHARD_GRAD_OP 2, NO_SHARD none), and activation CPU
// offload (Composer's activation_cpu_offload: torch's offload_wrapper around each checkpointed
// block) is not modelled for this framework, whose runs are refused rather than simulated without
// it.
void check_composer_fsdp(const ParallelPlan& p, const PublishedRun& r) {
  const std::string& notes = r.parallelism.notes;
  if (contains(notes, "activation CPU offload=True")) {
    throw Unmappable(
        "the run offloads activations to the CPU (Composer's activation_cpu_offload, the "
        "table's Activation CPUOffload column), which meshsim does not model for Composer");
  }
  const std::string key = "sharding_strategy=";
  const size_t at = notes.find(key);
  if (at == std::string::npos) {
    return;
  }
  const size_t from = at + key.size();
  const std::string strategy = notes.substr(from, notes.find_first_of(", ;", from) - from);
  const auto stage = [&]() -> std::optional<workloads::ZeroStage> {
    if (strategy == "FULL_SHARD") {
      return workloads::ZeroStage::kParameters;
    }
    if (strategy == "SHARD_GRAD_OP") {
      return workloads::ZeroStage::kGradients;
    }
    if (strategy == "NO_SHARD") {
      return workloads::ZeroStage::kNone;
    }
    return std::nullopt;
  }();
  if (!stage) {
    throw Unmappable(fmt::format(
        "FSDP sharding_strategy {} is not modelled for Composer runs (FULL_SHARD, SHARD_GRAD_OP "
        "and NO_SHARD are; a hybrid strategy's shard group is not stated)",
        strategy));
  }
  if (*stage != p.zero) {
    throw Unmappable(fmt::format("the notes' sharding_strategy {} is ZeRO stage {}, but the run "
                                 "maps to stage {}",
                                 strategy, static_cast<int>(*stage), static_cast<int>(p.zero)));
  }
}

// llm-foundry's benchmark tables come from two sweeps (scripts/train/benchmarking/README.md's
// history): the tables of 2023 from submit_benchmarks.py @ b2a43a147 on llm-foundry v0.3.0,
// whose yamls and script run attn_impl: triton (the llm-foundry-2023 stack); the "Large Scale"
// table of 2024-01 from sweep.py @ 5e85bd62d on llm-foundry main with flash-attn 2 installed,
// which passes --attn_impl flash for the 1b, 3b, 7b and 70b models and triton for 13b and 30b.
void set_llm_foundry_stack(ParallelPlan& p, const PublishedRun& r,
                           std::vector<std::string>& assumptions) {
  check_composer_fsdp(p, r);
  if (contains(r.parallelism.notes, "mixed_precision mode=DEFAULT")) {
    // Composer's DEFAULT FSDP mixed precision (composer/trainer/mosaic_fsdp_utils.py @ v0.16.4,
    // get_mixed_precision): bf16 parameters, gradients reduced and kept in fp32.
    p.state.gradient = 4;
    assumptions.push_back(
        "fp32 gradient reduction: Composer's DEFAULT FSDP mixed precision (reduce_dtype float32)");
  }
  if (!contains(r.location, "Large Scale")) {
    p.stack = workloads::Stack::kLlmFoundry2023;
    assumptions.push_back(
        "stack llm-foundry-2023: the 2023 benchmark tables ran llm-foundry v0.3.0 with attn_impl "
        "triton (scripts/train/benchmarking/submit_benchmarks.py @ b2a43a147)");
    return;
  }
  p.stack = workloads::Stack::kFsdp;
  if (contains(r.model.name, "-13b") || contains(r.model.name, "-30b")) {
    p.attention = workloads::AttentionKernel::kTriton;
    p.origins.set(workloads::PlanField::kAttention, Origin::file(r.id, "/model/name"));
    assumptions.push_back("attention triton: sweep.py @ 5e85bd62d runs 13b and 30b with "
                          "--attn_impl triton");
  }
}

}  // namespace

ParallelPlan plan_of(const PublishedRun& r, const topology::ClusterSpec& cluster,
                     std::vector<std::string>& assumptions) {
  const Framework f = framework_of(r);
  ParallelPlan p;
  p.set_training_dtype(training_dtype(r));
  const ScriptFact* script = script_fact(r);
  set_degrees(p, r, cluster, f, script, assumptions);
  set_batch(p, r, f);
  p.recompute = recompute_of(r, f, script, assumptions);
  p.stack = stack_of(f);
  if (f == Framework::kComposer) {
    set_llm_foundry_stack(p, r, assumptions);
  }
  if (f == Framework::kMegatron2021 && p.pp > 1) {
    // Megatron-LM 2021's default DDP, "local" (megatron/arguments.py --DDP-impl @ de7dc40f),
    // which examples/sc21/run_table_1.sh runs for every pipelined model (torch DDP only with PP
    // 1): train_step all-reduces the gradients after the whole forward-backward pass
    // (megatron/training.py), none of it hidden by the backward.
    p.overlap.grad_reduce = false;
    assumptions.push_back(
        "gradients all-reduced after the backward pass, not overlapped: Megatron-LM 2021's local "
        "DDP, which examples/sc21 runs for every pipelined model (megatron/training.py "
        "train_step @ de7dc40f)");
  }
  if (contains(r.framework, "PaxML")) {
    assumptions.push_back(
        "PaxML costed as the maxtext stack: the same XLA compiler and its fused kernels (no "
        "measurement of PaxML's own kernels on GPU)");
  }
  p.origins.set(workloads::PlanField::kStack, Origin::file(r.id, "/framework"));
  if (p.matmul_dtype == Dtype::kFp8 && contains(r.precision, "FP8-CS")) {
    p.fp8_scaling = workloads::Fp8Scaling::kCurrent;
    p.origins.set(workloads::PlanField::kFp8Recipe, Origin::file(r.id, "/precision"));
  } else if (p.matmul_dtype == Dtype::kFp8 &&
             (contains(r.precision, "MXFP8") || contains(r.precision, "FP8-MX"))) {
    // Transformer Engine's MXFP8BlockScaling: one quantize pass writes the row- and column-wise
    // FP8 copies with their per-32-element scales (no amax pass, no history), and Blackwell runs
    // the block-scaled GEMMs at its FP8 rate (B200 datasheet: 4.5 PFLOP/s dense FP8 and MXFP8).
    assumptions.push_back(
        "MXFP8 block scaling costed as the stack's single FP8 cast pass per tensor (the same "
        "bytes) and its GEMMs at the FP8 rate");
  } else if (p.matmul_dtype == Dtype::kFp8) {
    assumptions.push_back("the FP8 recipe of the framework's stack (not stated)");
  }
  return p;
}

MeasuredStep measured_step(const PublishedRun& r, const workloads::ModelConfig& m,
                           const ParallelPlan& p) {
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
  if (metric == "achieved_model_tflops_per_gpu" && contains(r.citation, "Narayanan")) {
    const Flops f =
        megatron2021_iteration_flops(p.gbs, p.seq, m.num_layers, m.d_model, m.vocab_size);
    return {f / (TFlopsPerSec(v) * devices),
            fmt::format("Narayanan et al. 2021 eq. 3: {:.4g} FLOPs / ({} TFLOP/s x {} GPUs)",
                        f.count(), v, p.world())};
  }
  if (metric == "tflops_per_chip" && contains(r.citation, "maxtext")) {
    const int64_t params = maxtext2023_parameters(m.vocab_size, m.d_model, m.num_heads, m.head_dim,
                                                  m.d_ff, m.num_layers, 1);
    const int64_t per_device = p.gbs / p.world();
    const Flops f = maxtext2023_flops_per_device(params, per_device, p.seq, m.num_heads,
                                                 m.num_layers, m.head_dim);
    return {f / TFlopsPerSec(v),
            fmt::format("MaxText 76bd53b0f calculate_training_tflops: {:.4g} FLOPs per chip "
                        "({} parameters) / {} TFLOP/s",
                        f.count(), params, v)};
  }
  throw Unmappable(fmt::format("metric {} ({}): the source's FLOP convention is not known", metric,
                               r.measured.unit));
}

}  // namespace meshsim::validation::detail
