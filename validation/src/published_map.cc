// A published run as a meshsim scenario: the model, the hardware, the plan (published_plan.cc)
// and the measured step, by rules over the record's structured fields and the facts of
// run_facts.json (published_facts.h). Every default applied is a framework's documented default
// or a sourced fact and is listed in the scenario's assumptions; a value that depends on a choice
// the source does not state makes the run NotExpressible, with the reason.
#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <map>

#include "meshsim/sim/checked.h"
#include "meshsim/sim/error.h"
#include "meshsim/sim/unit_parse.h"
#include "meshsim/validation/published.h"
#include "meshsim/validation/published_flops.h"
#include "meshsim/workloads/accounting.h"
#include "published_internal.h"

namespace meshsim::validation {
namespace {

using detail::contains;
using detail::RunFacts;
using detail::stated;
using detail::Unmappable;
using workloads::Architecture;
using workloads::MlpKind;
using workloads::ModelConfig;
using workloads::NormKind;
using workloads::PositionKind;

// The vocabulary as stated, else the one a source fact gives: GPT-2's 50257 BPE tokens padded to
// a multiple of 128 x TP (make_vocab_size_divisible_by 128, which Megatron multiplies by the
// tensor-parallel degree in _vocab_size_with_padding).
int64_t vocab_of(const RunFacts& rf, std::vector<std::string>& assumptions) {
  const PublishedRun& r = rf.run;
  const SourceFact* padded = rf.flag(&SourceFact::Set::vocab_gpt2_padded);
  if (r.model.vocab || padded == nullptr) {
    return stated(r.model.vocab, "the vocabulary size");
  }
  constexpr int64_t kGpt2BpeTokens = 50257;
  const int64_t tp = r.parallelism.tp.value_or(1);
  workloads::check_plan_size(workloads::PlanField::kTp, tp);  // 128 x tp stays in 64 bits
  const int64_t multiple = 128 * tp;
  const int64_t vocab = (kGpt2BpeTokens + multiple - 1) / multiple * multiple;
  assumptions.push_back(fmt::format("vocabulary {}: not in the record, but {}", vocab,
                                    padded->source));
  return vocab;
}

// A dimension as stated, else the published shape of the model the name gives.
int64_t shape_of(const RunFacts& rf, const std::optional<int64_t>& stated_value,
                 std::optional<int64_t> ModelFact::*fact, const char* what,
                 std::vector<std::string>& assumptions) {
  if (stated_value) {
    return *stated_value;
  }
  if (rf.model != nullptr && rf.model->*fact) {
    const int64_t v = *(rf.model->*fact);
    assumptions.push_back(fmt::format("{} {}: not in the record, but the published shape of {} "
                                      "(run_facts.json's {})",
                                      what, v, rf.run.model.name, rf.model->id));
    return v;
  }
  return stated(stated_value, what);
}

// The common shape; the architecture sets the rest.
ModelConfig base_model(const RunFacts& rf, std::vector<std::string>& assumptions) {
  const PublishedRun& r = rf.run;
  ModelConfig m;
  m.name = r.id;
  m.source = r.citation;
  m.num_layers = shape_of(rf, r.model.layers, &ModelFact::layers, "the number of layers",
                          assumptions);
  m.d_model = shape_of(rf, r.model.hidden, &ModelFact::hidden, "the hidden size", assumptions);
  m.num_heads = shape_of(rf, r.model.heads, &ModelFact::heads, "the number of attention heads",
                         assumptions);
  if (m.num_heads < 1) {  // head_dim below divides by it
    throw Unmappable(fmt::format("the number of attention heads is {}", m.num_heads));
  }
  m.vocab_size = vocab_of(rf, assumptions);
  const int64_t seq = stated(r.model.seq_len, "the sequence length");
  m.max_position_embeddings = seq;
  m.head_dim = m.d_model / m.num_heads;
  if (rf.model != nullptr && rf.model->head_dim) {
    m.head_dim = *rf.model->head_dim;
  }
  return m;
}

// The model entry's source, said once for the run.
void say_model_source(const RunFacts& rf, std::vector<std::string>& assumptions) {
  if (!rf.architecture_basis.empty()) {
    assumptions.push_back(rf.architecture_basis);
  }
  if (rf.model != nullptr && !rf.model->source.empty()) {
    assumptions.push_back(rf.model->source);
  }
}


// The routed experts as the record states them, on every layer.
workloads::MoeConfig routed_experts(const PublishedRun& r) {
  workloads::MoeConfig e;
  e.num_experts = stated(r.model.experts, "the routed experts");
  e.experts_per_token = stated(r.model.top_k, "the experts per token");
  e.expert_d_ff = stated(r.model.expert_ffn, "the experts' width");
  return e;
}

// DeepSeek-V3 (Liu et al. 2024): the record states the layers, widths, heads, vocabulary and the
// routed experts; the model entry the MLA ranks, the shared experts, the dense layers, the router
// and the MTP module.
void deepseek_v3(const RunFacts& rf, ModelConfig& m) {
  const ModelFact& f = *rf.model;
  m.architecture = Architecture::kDeepseekV3;
  m.d_ff = stated(rf.run.model.ffn, "the dense layers' MLP size");
  if (!f.mla) {
    throw Unmappable(fmt::format("run_facts.json's {} gives no MLA ranks", f.id));
  }
  m.mla = f.mla;
  m.head_dim = f.mla->qk_head_dim();
  m.num_kv_heads = m.num_heads;
  m.tied_embeddings = false;
  workloads::MoeConfig e = routed_experts(rf.run);
  e.num_shared_experts = f.shared_experts;
  e.shared_expert_d_ff = e.expert_d_ff;
  e.first_dense_layers = f.first_dense_layers;
  e.router_bias = f.router_bias;
  e.routing_groups = f.routing_groups;
  e.routing_group_topk = f.routing_group_topk;
  m.moe = e;
  m.mtp_layers = f.mtp_layers;
}

// Mixtral and Qwen3's MoE models route every layer's MLP to routed experts alone (no shared
// expert, no dense layer): the record's experts, top-k and widths are the whole MoE. Mixtral is
// Mistral's decoder (RMSNorm, RoPE, GQA, SwiGLU, untied, full attention); Qwen3 adds QK norm.
void routed_only_moe(const RunFacts& rf, ModelConfig& m) {
  const PublishedRun& r = rf.run;
  m.architecture = rf.architecture == ModelArchitecture::kMixtral ? Architecture::kMixtral
                                                                  : Architecture::kQwen3Moe;
  m.moe = routed_experts(r);
  m.d_ff = r.model.ffn.value_or(m.moe->expert_d_ff);
  m.num_kv_heads = stated(r.model.kv_heads, "the number of KV heads");
  m.qk_norm = rf.model->qk_norm;
}

// What the model entry's default says where the record is silent, said with its source.
int64_t ffn_or_default(const RunFacts& rf, const ModelConfig& m,
                       std::vector<std::string>& assumptions) {
  const PublishedRun& r = rf.run;
  if (r.model.ffn || rf.model == nullptr || !rf.model->ffn_default_ratio) {
    return stated(r.model.ffn, "the MLP size");
  }
  const std::optional<int64_t> product = try_mul(rf.model->ffn_default_ratio->value, m.d_model);
  if (!product) {
    throw Unmappable(fmt::format("the hidden size {} is past what meshsim counts", m.d_model));
  }
  const int64_t ffn = *product;
  assumptions.push_back(fmt::format("ffn = {} ({})", ffn, rf.model->ffn_default_ratio->source));
  return ffn;
}

int64_t kv_or_default(const RunFacts& rf, const ModelConfig& m,
                      std::vector<std::string>& assumptions) {
  const PublishedRun& r = rf.run;
  if (r.model.kv_heads) {
    return *r.model.kv_heads;
  }
  if (rf.model == nullptr || !rf.model->kv_default) {
    throw Unmappable(fmt::format(
        "the number of KV heads is not stated, and \"{}\" is not a model whose configuration "
        "gives them",
        r.model.name));
  }
  const int64_t kv = rf.model->kv_default->value == 0 ? m.num_heads : rf.model->kv_default->value;
  const std::string& source = rf.model->kv_default->source;
  assumptions.push_back(source.starts_with("kv heads") ? source
                                                       : fmt::format("kv heads = query heads ({})",
                                                                     source));
  return kv;
}

// Megatron and NeMo tie the LM head to the embedding unless told otherwise
// (--untie-embeddings-and-output-weights, store_true: megatron/training/arguments.py); a source's
// stated parameter count can say which the run had. The untied head is taken where that count
// tells the two apart (they differ by more than 1 %) and the untied total is less than half as far
// from it as the tied one.
void untie_where_the_stated_count_says(const RunFacts& rf, ModelConfig& m,
                                       std::vector<std::string>& assumptions) {
  const std::optional<double>& stated = rf.run.model.params_b;
  if (!stated || !m.tied_embeddings) {
    return;
  }
  workloads::validate_model(m, rf.run.id);  // counts past its limits would overflow
  ModelConfig untied = m;
  untied.tied_embeddings = false;
  const double with_tie = static_cast<double>(workloads::total_parameters(m)) / 1e9;
  const double without = static_cast<double>(workloads::total_parameters(untied)) / 1e9;
  if (without - with_tie <= 0.01 * with_tie ||
      2 * std::abs(without - *stated) >= std::abs(with_tie - *stated)) {
    return;
  }
  m.tied_embeddings = false;
  assumptions.push_back(fmt::format(
      "the LM head untied from the embedding: the source's {:g} B parameters are the untied "
      "count ({:.2f} B), not the tied one ({:.2f} B)",
      *stated, without, with_tie));
}

ModelConfig model_of(const RunFacts& rf, std::vector<std::string>& assumptions) {
  ModelConfig m = base_model(rf, assumptions);
  switch (rf.architecture) {
    case ModelArchitecture::kGpt:
      m.architecture = Architecture::kGpt2;
      m.mlp = MlpKind::kGelu;
      m.norm = NormKind::kLayerNorm;
      m.positions = PositionKind::kLearned;
      m.attention_bias = m.mlp_bias = true;
      m.tied_embeddings = true;
      m.d_ff = ffn_or_default(rf, m, assumptions);
      m.num_kv_heads = kv_or_default(rf, m, assumptions);
      untie_where_the_stated_count_says(rf, m, assumptions);
      break;
    case ModelArchitecture::kLlama:
      m.d_ff = stated(rf.run.model.ffn, "the MLP size");
      m.num_kv_heads = kv_or_default(rf, m, assumptions);
      break;
    case ModelArchitecture::kNemotron:
      // Nemotron-4's squared-ReLU MLP moves the bytes of GeLU's kernel: meshsim costs it as the
      // non-gated MLP's activation.
      m.mlp = MlpKind::kGelu;
      m.norm = NormKind::kLayerNorm;
      m.d_ff = stated(rf.run.model.ffn, "the MLP size");
      m.num_kv_heads = stated(rf.run.model.kv_heads, "the number of KV heads");
      assumptions.push_back(
          "Nemotron's squared-ReLU MLP costed as the non-gated MLP (the same GEMMs; the "
          "activation's element-wise kernel moves the same bytes)");
      break;
    case ModelArchitecture::kDeepSeekV3:
      deepseek_v3(rf, m);
      break;
    case ModelArchitecture::kMixtral:
    case ModelArchitecture::kQwen3Moe:
      routed_only_moe(rf, m);
      break;
    case ModelArchitecture::kMaxTextDecoder:
      // One ReLU input matrix (non-gated), RMSNorm, RoPE, logits through the embedding; a
      // parallel block: with TP, meshsim gathers the normed input once for both branches and
      // reduces their summed partial outputs once; XLA's partitioner reduce-scatters each branch
      // (each output is constrained embed-sharded) and can hide the first behind the other
      // branch's GEMMs, which leaves the same one reduction on the critical path.
      m.mlp = MlpKind::kGelu;
      m.tied_embeddings = true;
      m.d_ff = stated(rf.run.model.ffn, "the MLP size");
      m.num_kv_heads = kv_or_default(rf, m, assumptions);
      m.parallel_blocks = true;
      m.norms_per_layer = 1;
      assumptions.push_back(
          "MaxText's parallel block (models.py DecoderLayer @ 76bd53b0f: attention and MLP on "
          "one RMSNorm's output, one residual add): with TP, one gather of the normed input and "
          "one reduction of the summed branch outputs on the critical path");
      break;
  }
  if (const SourceFact* d = rf.setting(&SourceFact::Set::dropout); d != nullptr) {
    m.dropout = *d->set.dropout;
    assumptions.push_back(fmt::format(
        "dropout {}: {}; the masks of the residual dropouts are costed, the dropout inside the "
        "fused attention kernel is not (no measurement of it)",
        m.dropout ? "on" : "off", d->source));
  } else if (rf.framework->dropout) {
    m.dropout = rf.framework->dropout->value;
    assumptions.push_back(rf.framework->dropout->source);
  }
  say_model_source(rf, assumptions);
  return m;
}

// Chips per TPU slice, from the record's own words ("... = 64 chips per slice", "= 256 chips"):
// the number before the first " chips".
int64_t chips_per_slice(const PublishedRun& r) {
  const size_t at = r.intra_slice.find(" chips");
  size_t from = at;
  while (from != std::string::npos && from > 0 &&
         std::isdigit(static_cast<unsigned char>(r.intra_slice[from - 1])) != 0) {
    --from;
  }
  if (at == std::string::npos || from == at) {
    throw Unmappable("the TPU slice size is not stated");
  }
  const std::string digits = r.intra_slice.substr(from, at - from);
  const std::optional<int64_t> count = parse_integer(digits);
  if (!count || *count <= 0) {
    throw Unmappable(fmt::format("the TPU slice size \"{} chips\" is not a chip count", digits));
  }
  return *count;
}

// The torus of a slice of `chips` (run_facts.json's tpu_slices: Google's slice topologies).
std::vector<int64_t> torus_of(const PublishedFacts& facts, const topology::Chip& chip,
                              int64_t chips) {
  const auto& table = chip.ici->torus_dims == 2 ? facts.tpu_slices_2d : facts.tpu_slices_3d;
  const auto it = table.find(chips);
  if (it == table.end()) {
    throw Unmappable(fmt::format("no torus for a {}-chip {} slice", chips, chip.name));
  }
  return it->second;
}

topology::ClusterSpec tpu_cluster(const RunFacts& rf, const std::string& preset,
                                  const topology::Catalogue& catalogue, int64_t devices) {
  topology::ClusterSpec c = topology::load_cluster(preset, catalogue);
  if (!c.chip.ici) {
    throw Unmappable(fmt::format("cluster preset {} is not a TPU slice", preset));
  }
  const int64_t per_slice = chips_per_slice(rf.run);
  if (devices % per_slice != 0) {
    throw Unmappable(fmt::format("{} chips are not whole slices of {}", devices, per_slice));
  }
  // A shape past the chip's pod edge (v3's 16x32 on a v5e) is refused by resize_torus.
  c = topology::resize_torus(c, torus_of(rf.facts, c.chip, per_slice));
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
    // The chip's own NVLink (an export part has fewer links), unless the preset states its links.
    c.chip = catalogue.chip(*chip);
    if (c.chip.nvlink && !c.sources.contains("/scale_up/links")) {
      c.scale_up_links = c.chip.nvlink->links;
    }
    if (c.chip.nvlink && !c.sources.contains("/scale_up/link_bandwidth")) {
      c.scale_up_link_bandwidth = c.chip.nvlink->link_bandwidth;
    }
  }
  if (domain_devices) {
    c.nvlink_domain_devices = *domain_devices;
  }
  if (devices < c.devices_per_node && c.devices_per_node % devices == 0 &&
      c.scale_up != topology::ScaleUpFabric::kIciTorus) {
    // Part of one node: through the NVSwitch each GPU keeps all its NVLink bandwidth to the others.
    assumptions.push_back(fmt::format(
        "{} GPUs of one {}-GPU node ({}): each keeps its full NVLink bandwidth through the "
        "NVSwitch",
        devices, c.devices_per_node, preset));
    return topology::resize_devices(c, devices);
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
// Beyond, a framework whose launcher places trays in segments (FrameworkFact::
// nvl72_segment_trays: as many trays as the job has up to the segment, else the largest divisor
// of the tray count up to it) gets those NVLink domains; other frameworks' splits are unstated
// unless whole racks.
topology::ClusterSpec gb200_cluster(const RunFacts& rf, const HardwareFact& hw,
                                    const topology::Catalogue& catalogue, int64_t devices,
                                    std::vector<std::string>& assumptions) {
  constexpr int64_t kRack = 72;
  constexpr int64_t kTray = 4;
  if (devices <= kRack) {
    if (devices < kRack) {
      assumptions.push_back(fmt::format(
          "{} GPUs are {} trays of one NVL72 rack: one NVLink domain", devices, devices / kTray));
    }
    return gpu_cluster(hw.cluster, hw.chip, catalogue, devices, assumptions);
  }
  if (const auto& seg = rf.framework->nvl72_segment_trays; seg && devices % kTray == 0) {
    const int64_t trays = devices / kTray;
    int64_t segment = seg->value;
    while (trays % segment != 0) {
      --segment;
    }
    assumptions.push_back(fmt::format("{} trays in Slurm segments of {}: {} NVLink domains of {} "
                                      "GPUs ({})",
                                      trays, segment, trays / segment, segment * kTray,
                                      seg->source));
    return gpu_cluster(hw.cluster, hw.chip, catalogue, devices, assumptions, segment * kTray);
  }
  if (devices % kRack != 0) {
    throw Unmappable(fmt::format(
        "{} GPUs over 72-GPU NVL72 racks: how they split between the racks is not stated",
        devices));
  }
  return gpu_cluster(hw.cluster, hw.chip, catalogue, devices, assumptions);
}

const HardwareFact& hardware_of(const RunFacts& rf) {
  const std::string& key = rf.run.hardware_key;
  for (const HardwareFact& h : rf.facts.hardware) {
    const bool prefixed = std::any_of(h.key_prefixes.begin(), h.key_prefixes.end(),
                                      [&](const std::string& p) { return key.starts_with(p); });
    if (prefixed || std::find(h.keys.begin(), h.keys.end(), key) != h.keys.end()) {
      if (!h.refuse.empty()) {
        throw Unmappable(h.refuse);
      }
      return h;
    }
  }
  throw Unmappable(fmt::format("hardware \"{}\" has no cluster preset", rf.run.hardware_key));
}

topology::ClusterSpec cluster_of(const RunFacts& rf, const topology::Catalogue& catalogue,
                                 std::vector<std::string>& assumptions) {
  const int64_t devices = stated(rf.run.devices, "the device count");
  if (devices < 1) {
    throw Unmappable(fmt::format("the device count {} is not a count of devices", devices));
  }
  const HardwareFact& hw = hardware_of(rf);
  for (const std::string& a : hw.assumptions) {
    assumptions.push_back(a);
  }
  switch (hw.layout) {
    case HardwareLayout::kTpuSlices:
      return tpu_cluster(rf, hw.cluster, catalogue, devices);
    case HardwareLayout::kNvl72:
      return gb200_cluster(rf, hw, catalogue, devices, assumptions);
    case HardwareLayout::kNodes:
      break;
  }
  return gpu_cluster(hw.cluster, hw.chip, catalogue, devices, assumptions);
}

// MoE runs: EP as stated, expert TP Megatron-Core's default (the TP degree) unless a source fact
// sets it, and the token dispatcher a source fact or the record's notes name. Unnamed, it matters
// only once the EP group leaves the NVLink domain: NeMo's and Megatron-Bridge's MoE recipes set
// alltoall or flex (perf_recipes/qwen/h100/qwen3_moe.py @ 067f987df has both), which inside one
// domain move the same bytes over NVLink.
void moe_plan(const RunFacts& rf, const topology::ClusterSpec& cluster, workloads::ParallelPlan& p,
              std::vector<std::string>& assumptions) {
  const PublishedRun& r = rf.run;
  p.ep = stated(r.parallelism.ep, "the expert-parallel degree");
  p.origins.set(workloads::PlanField::kEp, Origin::file(r.id, "/parallelism/ep"));
  if (const SourceFact* f = rf.setting(&SourceFact::Set::expert_tp)) {
    p.etp = *f->set.expert_tp;
  }
  if (const SourceFact* f = rf.setting(&SourceFact::Set::moe_dispatcher)) {
    p.moe_dispatcher = *f->set.moe_dispatcher;
    return;
  }
  for (const DispatcherNote& d : rf.facts.dispatcher_notes) {
    if (detail::icontains(r.parallelism.notes, d.text)) {
      p.moe_dispatcher = d.dispatcher;
      return;
    }
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

// The source facts of the plan that hold for one recipe's configuration: a pipeline layout,
// activation offloading.
void recipe_plan(const RunFacts& rf, workloads::ParallelPlan& p,
                 std::vector<std::string>& assumptions) {
  const PublishedRun& r = rf.run;
  if (const SourceFact* f = rf.setting(&SourceFact::Set::stage_layers)) {
    p.stage_layers = *f->set.stage_layers;
    p.origins.set(workloads::PlanField::kStageLayers, Origin::file(r.id, "/parallelism"));
    assumptions.push_back(fmt::format("the pipeline layout: {}", f->source));
  } else if (rf.model != nullptr && rf.model->needs_pipeline_layout && p.pp > 1) {
    throw Unmappable(fmt::format("no pipeline layout is known for {} on pp {} x vpp {}",
                                 r.model.name, p.pp, p.vpp));
  }
  if (const SourceFact* f = rf.setting(&SourceFact::Set::offload_layers)) {
    p.offload_layers = *f->set.offload_layers;
    p.origins.set(workloads::PlanField::kOffloadLayers, Origin::file(r.id, "/framework"));
    assumptions.push_back(f->source);
  }
}

}  // namespace

NotExpressible refused_scenario(const std::exception& e) {
  return NotExpressible{fmt::format("meshsim refuses the scenario: {}", e.what())};
}

PublishedMapping map_published_run(const PublishedRun& run, const topology::Catalogue& catalogue) {
  return map_published_run(run, catalogue, PublishedFacts::builtin());
}

PublishedMapping map_published_run(const PublishedRun& run, const topology::Catalogue& catalogue,
                                   const PublishedFacts& facts) {
  try {
    const RunFacts rf = detail::resolve_run(run, facts);
    PublishedScenario s;
    s.model = model_of(rf, s.assumptions);
    workloads::validate_model(s.model, run.id);
    s.cluster = cluster_of(rf, catalogue, s.assumptions);
    s.plan = detail::plan_of(rf, s.model, s.cluster, s.assumptions);
    if (s.model.moe) {
      moe_plan(rf, s.cluster, s.plan, s.assumptions);
    }
    recipe_plan(rf, s.plan, s.assumptions);
    if (s.cluster.slices > 1 && s.plan.zero == workloads::ZeroStage::kParameters &&
        s.plan.dp % s.cluster.slices == 0) {
      s.plan.fsdp = s.plan.dp / s.cluster.slices;
      s.assumptions.push_back(fmt::format(
          "{} slices: FSDP inside each slice, data parallel across them over DCN (MaxText's "
          "ici_fsdp_parallelism x dcn_data_parallelism; plan fsdp = {})",
          s.cluster.slices, s.plan.fsdp));
    }
    s.plan.node_ranks = s.cluster.scale_up_domain_size();  // the flex dispatcher's nodes
    workloads::validate_plan(s.model, s.plan);
    if (s.plan.world() != s.cluster.device_count()) {
      throw Unmappable(fmt::format("tp x cp x dp x pp = {} but the run used {} devices",
                                   s.plan.world(), s.cluster.device_count()));
    }
    const detail::MeasuredStep m = detail::measured_step(rf, s.model, s.plan);
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
