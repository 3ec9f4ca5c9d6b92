// Reading run_facts.json (published_facts.h) strictly: every key known, every value of its type,
// every enum one of its names, every reference to a framework or model entry resolved.
#include "meshsim/validation/published_facts.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <set>

#include "meshsim/sim/error.h"
#include "meshsim/sim/json_input.h"
#include "meshsim/sim/unit_parse.h"
#include "validation_embedded.h"

namespace meshsim::validation {
namespace {

constexpr std::string_view kBuiltinSource = "validation/published/run_facts.json (built in)";

std::vector<std::string> string_array(JsonObject& o, const std::string& key, bool non_empty) {
  const nlohmann::json& v = o.raw(key);
  if (!v.is_array() || (non_empty && v.empty())) {
    o.fail(key, non_empty ? "expected a non-empty array of strings" : "expected an array of strings");
  }
  std::vector<std::string> out;
  for (const nlohmann::json& s : v) {
    if (!s.is_string() || s.get<std::string>().empty()) {
      o.fail(key, "expected an array of non-empty strings, got " + describe_json(s));
    }
    out.push_back(s.get<std::string>());
  }
  return out;
}

std::string non_empty(JsonObject& o, const std::string& key) {
  std::string s = o.string(key);
  if (s.empty()) {
    o.fail(key, "expected a non-empty string");
  }
  return s;
}

std::string opt_text(JsonObject& o, const std::string& key) {
  return o.has(key) ? non_empty(o, key) : (o.ignore(key), std::string());
}

// "2021-04".
YearMonth year_month(JsonObject& o, const std::string& key) {
  const std::string s = o.string(key);
  const std::optional<int64_t> y = s.size() == 7 && s[4] == '-' ? parse_integer(s.substr(0, 4))
                                                                : std::nullopt;
  const std::optional<int64_t> m = y ? parse_integer(s.substr(5, 2)) : std::nullopt;
  if (!y || !m || *y < 1990 || *y > 2100 || *m < 1 || *m > 12) {
    o.fail(key, fmt::format("\"{}\" is not a month (expected e.g. \"2021-04\")", s));
  }
  return {static_cast<int>(*y), static_cast<int>(*m)};
}

std::optional<YearMonth> opt_month(JsonObject& o, const std::string& key) {
  if (!o.has(key)) {
    o.ignore(key);
    return std::nullopt;
  }
  return year_month(o, key);
}

template <class E>
E choice_of(JsonObject& o, const nlohmann::json& v, const std::string& key) {
  if (v.is_string()) {
    if (const std::optional<E> e = parse_enum<E>(v.get<std::string>())) {
      return *e;
    }
  }
  o.fail(key, fmt::format("{} is not one of: {}", describe_json(v), describe_choices<E>()));
}

// {"value": ..., "source": "..."}
template <class T, class Read>
std::optional<SourcedFact<T>> sourced(JsonObject& o, const std::string& key, Read read) {
  if (!o.has(key)) {
    o.ignore(key);
    return std::nullopt;
  }
  JsonObject f = o.object(key);
  SourcedFact<T> out{read(f), non_empty(f, "source")};
  f.finish();
  return out;
}

std::optional<SourcedFact<bool>> sourced_flag(JsonObject& o, const std::string& key) {
  return sourced<bool>(o, key, [](JsonObject& f) { return f.boolean("value"); });
}

HardwareFact read_hardware(JsonObject o) {
  HardwareFact h;
  h.keys = string_array(o, "keys", true);
  if (o.has("key_prefixes")) {
    h.key_prefixes = string_array(o, "key_prefixes", true);
  }
  h.source = non_empty(o, "source");
  h.refuse = opt_text(o, "refuse");
  if (h.refuse.empty()) {
    h.cluster = non_empty(o, "cluster");
  } else {
    o.ignore("cluster");
  }
  if (o.has("chip")) {
    h.chip = non_empty(o, "chip");
  }
  if (o.has("layout")) {
    h.layout = o.choice<HardwareLayout>("layout");
  }
  if (o.has("assumptions")) {
    h.assumptions = string_array(o, "assumptions", false);
  }
  o.finish();
  return h;
}

std::map<int64_t, std::vector<int64_t>> torus_table(JsonObject& o, const std::string& key) {
  const nlohmann::json& v = o.raw(key);
  std::map<int64_t, std::vector<int64_t>> out;
  if (!v.is_array()) {
    o.fail(key, "expected an array of [chips, [dims...]]");
  }
  for (const nlohmann::json& row : v) {
    const bool shape = row.is_array() && row.size() == 2 && row[1].is_array() && !row[1].empty();
    const std::optional<int64_t> chips = shape ? as_int64(row[0]) : std::nullopt;
    std::vector<int64_t> dims;
    int64_t product = 1;
    for (const nlohmann::json& d : shape ? row[1] : nlohmann::json::array()) {
      const std::optional<int64_t> n = as_int64(d);
      if (!n || *n < 1 || *n > 4096) {
        o.fail(key, "a torus dimension must be an integer in [1, 4096], got " + describe_json(d));
      }
      dims.push_back(*n);
      product *= *n;  // at most 3 dims of 4096: no overflow
    }
    if (!chips || dims.size() > 3 || *chips != product || out.contains(*chips)) {
      o.fail(key, "each row must be [chips, [dims...]] with the dims (at most 3) multiplying to "
                  "the chips, each chip count once; got " + describe_json(row));
    }
    out[*chips] = dims;
  }
  return out;
}

NotesFlag read_flag(JsonObject o) {
  NotesFlag f;
  f.text = non_empty(o, "text");
  f.group = non_empty(o, "group");
  f.source = non_empty(o, "source");
  f.refuse = opt_text(o, "refuse");
  if (o.has("zero_stage")) {
    const int64_t z = o.non_negative_integer("zero_stage");
    if (z > 3) {
      o.fail("zero_stage", "expected a ZeRO stage 0-3");
    }
    f.zero_stage = static_cast<workloads::ZeroStage>(z);
  }
  f.fp32_gradients = o.has("fp32_gradients") ? o.boolean("fp32_gradients")
                                             : (o.ignore("fp32_gradients"), false);
  if (o.has("attention")) {
    f.attention = o.choice<workloads::AttentionKernel>("attention");
  }
  f.fp8_param_gather = o.has("fp8_param_gather") ? o.boolean("fp8_param_gather")
                                                 : (o.ignore("fp8_param_gather"), false);
  o.finish();
  return f;
}

FrameworkFact read_framework(JsonObject o) {
  FrameworkFact f;
  f.id = non_empty(o, "id");
  f.names = string_array(o, "names", true);
  f.except_names = o.has("except_names") ? string_array(o, "except_names", true)
                                         : (o.ignore("except_names"), std::vector<std::string>{});
  f.from = opt_month(o, "from");
  f.until = opt_month(o, "until");
  f.stack = o.choice<workloads::Stack>("stack");
  f.stack_assumption = opt_text(o, "stack_assumption");
  f.attention = sourced<workloads::AttentionKernel>(
      o, "attention", [](JsonObject& v) { return v.choice<workloads::AttentionKernel>("value"); });
  f.source = non_empty(o, "source");
  f.dropout = sourced_flag(o, "dropout");
  f.ddp_overlaps_without_pipeline = sourced_flag(o, "ddp_overlaps_without_pipeline");
  f.data_parallel_only = o.has("data_parallel_only") ? o.boolean("data_parallel_only")
                                                     : (o.ignore("data_parallel_only"), false);
  f.zero_stage = sourced<int64_t>(o, "zero_stage", [](JsonObject& v) {
    const int64_t z = v.non_negative_integer("value");
    if (z > 3) {
      v.fail("value", "expected a ZeRO stage 0-3");
    }
    return z;
  });
  f.distributed_optimizer = sourced_flag(o, "distributed_optimizer");
  f.sequence_parallel_with_tp = sourced_flag(o, "sequence_parallel_with_tp");
  f.embedding_and_loss_in_pipeline_split =
      sourced_flag(o, "embedding_and_loss_in_pipeline_split");
  f.recompute_default = sourced<workloads::Recompute>(
      o, "recompute_default", [](JsonObject& v) { return v.choice<workloads::Recompute>("value"); });
  f.micro_batch = sourced<MicroBatchRule>(
      o, "micro_batch", [](JsonObject& v) { return v.choice<MicroBatchRule>("value"); });
  f.nvl72_segment_trays = sourced<int64_t>(o, "nvl72_segment_trays", [](JsonObject& v) {
    const int64_t n = v.positive_integer("value");
    if (n > 18) {
      v.fail("value", "expected at most 18 trays (an NVL72 rack)");
    }
    return n;
  });
  f.parallel_defaults = sourced<int64_t>(o, "parallel_defaults", [](JsonObject& v) {
    const int64_t n = v.positive_integer("value");
    if (n != 1) {
      v.fail("value", "expected 1 (a default degree other than 1 would need the devices to split)");
    }
    return n;
  });
  f.model_parallel_split = sourced<ModelParallelSplit>(
      o, "model_parallel_split", [](JsonObject& v) { return v.choice<ModelParallelSplit>("value"); });
  f.pipeline_partition = sourced<PipelinePartition>(
      o, "pipeline_partition", [](JsonObject& v) { return v.choice<PipelinePartition>("value"); });
  f.bf16_shards_optimizer = sourced_flag(o, "bf16_shards_optimizer");
  if (o.has("recompute_aliases")) {
    for (JsonObject a : o.object_array("recompute_aliases")) {
      f.recompute_aliases.push_back({non_empty(a, "text"), a.choice<workloads::Recompute>("recompute"),
                                     non_empty(a, "source")});
      a.finish();
    }
  }
  if (o.has("notes_flags")) {
    for (JsonObject n : o.object_array("notes_flags")) {
      f.notes_flags.push_back(read_flag(std::move(n)));
    }
  }
  if (o.has("metric_conventions")) {
    for (JsonObject m : o.object_array("metric_conventions")) {
      auto& c = f.metric_conventions[non_empty(m, "metric")];
      c.convention = m.choice<FlopConvention>("convention");
      if (m.has("source")) {
        c.source = non_empty(m, "source");
      }
      m.finish();
    }
  }
  o.finish();
  return f;
}

// A positive integer of at most `max` (a limit of model.h or parallel.h).
int64_t positive_at_most(JsonObject& o, const std::string& key, int64_t max) {
  const int64_t v = o.positive_integer(key);
  if (v > max) {
    o.fail(key, fmt::format("expected at most {}", max));
  }
  return v;
}

int64_t mla_rank(JsonObject& o, const std::string& key) {
  return positive_at_most(o, key, workloads::ModelLimits::kHeadDim);
}

ModelFact read_model_fact(JsonObject o) {
  ModelFact m;
  m.id = non_empty(o, "id");
  for (const std::string& n : string_array(o, "names", true)) {
    m.names.push_back(name_words(n));
    if (m.names.back().empty()) {
      o.fail("names", fmt::format("\"{}\" has no words", n));
    }
  }
  m.moe = o.has("moe") ? o.boolean("moe") : (o.ignore("moe"), false);
  m.architecture = o.choice<ModelArchitecture>("architecture");
  m.source = opt_text(o, "source");
  if (o.has("mla")) {
    JsonObject a = o.object("mla");
    m.mla = workloads::MlaConfig{mla_rank(a, "q_lora_rank"), mla_rank(a, "kv_lora_rank"),
                                 mla_rank(a, "qk_nope_head_dim"), mla_rank(a, "qk_rope_head_dim"),
                                 mla_rank(a, "v_head_dim")};
    a.finish();
  }
  // Counts of experts, groups or layers: each at most a model's layer limit.
  const auto count = [&o](const char* key) {
    if (!o.has(key)) {
      o.ignore(key);
      return int64_t{0};
    }
    const int64_t n = o.non_negative_integer(key);
    if (n > workloads::ModelLimits::kLayers) {
      o.fail(key, fmt::format("expected at most {}", workloads::ModelLimits::kLayers));
    }
    return n;
  };
  m.shared_experts = count("shared_experts");
  m.first_dense_layers = count("first_dense_layers");
  m.routing_groups = count("routing_groups");
  m.routing_group_topk = count("routing_group_topk");
  m.mtp_layers = count("mtp_layers");
  m.router_bias = o.has("router_bias") ? o.boolean("router_bias") : (o.ignore("router_bias"), false);
  m.qk_norm = o.has("qk_norm") ? o.boolean("qk_norm") : (o.ignore("qk_norm"), false);
  m.needs_pipeline_layout = o.has("needs_pipeline_layout") ? o.boolean("needs_pipeline_layout")
                                                           : (o.ignore("needs_pipeline_layout"), false);
  if (o.has("head_dim")) {
    m.head_dim = mla_rank(o, "head_dim");
  }
  if (o.has("shape")) {
    JsonObject shape = o.object("shape");
    const auto bounded = [&shape](const char* key, int64_t limit) {
      const int64_t v = shape.positive_integer(key);
      if (v > limit) {
        shape.fail(key, fmt::format("expected at most {}", limit));
      }
      return v;
    };
    m.layers = bounded("layers", workloads::ModelLimits::kLayers);
    m.hidden = bounded("hidden", workloads::ModelLimits::kDModel);
    m.heads = bounded("heads", workloads::ModelLimits::kHeads);
    shape.finish();
  }
  m.ffn_default_ratio = sourced<int64_t>(o, "ffn_default", [](JsonObject& v) {
    const int64_t r = v.positive_integer("value");
    if (r > 64) {
      v.fail("value", "expected an MLP expansion ratio of at most 64");
    }
    return r;
  });
  m.kv_default = sourced<int64_t>(o, "kv_default", [](JsonObject& v) -> int64_t {
    if (v.raw("value").is_string()) {
      if (v.string("value") != "heads") {
        v.fail("value", "expected \"heads\" or a positive integer");
      }
      return 0;
    }
    const int64_t n = v.positive_integer("value");
    if (n > workloads::ModelLimits::kHeads) {
      v.fail("value", fmt::format("expected at most {}", workloads::ModelLimits::kHeads));
    }
    return n;
  });
  o.finish();
  return m;
}

std::optional<int64_t> opt_count(JsonObject& o, const std::string& key) {
  return opt(o, key, &JsonObject::positive_integer);
}

SourceFact::Match read_match(JsonObject o) {
  SourceFact::Match m;
  m.citation_prefix = opt_text(o, "citation_prefix");
  m.location_contains = opt_text(o, "location_contains");
  if (o.has("model_name")) {
    m.model_names = o.raw("model_name").is_string() ? std::vector{non_empty(o, "model_name")}
                                                    : string_array(o, "model_name", true);
  }
  m.model_name_prefix = opt_text(o, "model_name_prefix");
  m.framework = opt_text(o, "framework");
  m.framework_text = opt_text(o, "framework_text");
  m.model = opt_text(o, "model");
  m.hardware_key = opt_text(o, "hardware_key");
  m.precision_class = opt_text(o, "precision_class");
  m.from = opt_month(o, "from");
  m.until = opt_month(o, "until");
  m.layers = opt_count(o, "layers");
  m.tp = opt_count(o, "tp");
  m.pp = opt_count(o, "pp");
  m.cp = opt_count(o, "cp");
  m.vpp = opt_count(o, "virtual_pipeline_stages");
  m.devices = opt_count(o, "devices");
  m.fsdp = opt(o, "fsdp", &JsonObject::boolean);
  o.finish();
  return m;
}

int64_t plan_count(JsonObject& o, const std::string& key) {
  return positive_at_most(o, key, workloads::PlanLimits::kRanks);
}

SourceFact::Set read_set(JsonObject o) {
  SourceFact::Set s;
  if (o.has("virtual_pipeline_stages")) {
    s.vpp = plan_count(o, "virtual_pipeline_stages");
  }
  if (o.has("fsdp_group")) {
    s.fsdp_group = plan_count(o, "fsdp_group");
  }
  if (o.has("expert_tp")) {
    s.expert_tp = plan_count(o, "expert_tp");
  }
  if (o.has("offload_layers")) {
    s.offload_layers = o.non_negative_integer("offload_layers");
    if (*s.offload_layers > workloads::ModelLimits::kLayers) {
      o.fail("offload_layers", fmt::format("expected at most {}", workloads::ModelLimits::kLayers));
    }
  }
  if (o.has("recompute")) {
    s.recompute = o.choice<workloads::Recompute>("recompute");
  }
  if (o.has("recompute_modules")) {
    s.recompute_modules.emplace();
    for (const std::string& m : string_array(o, "recompute_modules", true)) {
      s.recompute_modules->push_back(
          choice_of<workloads::RecomputeModule>(o, nlohmann::json(m), "recompute_modules"));
    }
  }
  if (o.has("stack")) {
    s.stack = o.choice<workloads::Stack>("stack");
  }
  if (o.has("attention")) {
    s.attention = o.choice<workloads::AttentionKernel>("attention");
  }
  if (o.has("moe_dispatcher")) {
    s.moe_dispatcher = o.choice<workloads::MoeDispatcher>("moe_dispatcher");
  }
  if (o.has("stage_layers")) {
    s.stage_layers = o.non_negative_integer_array("stage_layers");
    if (s.stage_layers->empty() ||
        static_cast<int64_t>(s.stage_layers->size()) > workloads::PlanLimits::kVpp) {
      o.fail("stage_layers", "expected 1 to one entry per layer");
    }
    for (const int64_t n : *s.stage_layers) {
      if (n > workloads::ModelLimits::kLayers) {
        o.fail("stage_layers", fmt::format("expected at most {} layers a stage",
                                           workloads::ModelLimits::kLayers));
      }
    }
  }
  if (o.has("vocab")) {
    if (o.string("vocab") != "gpt2-bpe-padded") {
      o.fail("vocab", "expected \"gpt2-bpe-padded\"");
    }
    s.vocab_gpt2_padded = true;
  }
  s.dropout = opt(o, "dropout", &JsonObject::boolean);
  s.tp_comm_overlap = opt(o, "tp_comm_overlap", &JsonObject::boolean);
  s.grad_reduce_fp32 = opt(o, "grad_reduce_fp32", &JsonObject::boolean);
  s.cross_entropy_fusion = opt(o, "cross_entropy_fusion", &JsonObject::boolean);
  if (o.has("precision")) {
    s.precision = o.one_of("precision", {"bf16", "fp16", "fp8"});
  }
  if (o.has("micro_batch")) {
    s.micro_batch = o.positive_integer("micro_batch");
    if (*s.micro_batch > workloads::PlanLimits::kMbs) {
      o.fail("micro_batch", fmt::format("expected at most {}", workloads::PlanLimits::kMbs));
    }
  }
  o.finish();
  return s;
}

template <class T, class Read>
std::vector<T> entries(JsonObject& root, const std::string& key, Read read) {
  std::vector<T> out;
  for (JsonObject o : root.object_array(key)) {
    out.push_back(read(std::move(o)));
  }
  return out;
}

void check_references(const PublishedFacts& f, JsonObject& root) {
  std::set<std::string> frameworks, models, keys;
  for (const FrameworkFact& fw : f.frameworks) {
    if (!frameworks.insert(fw.id).second) {
      root.fail("frameworks", fmt::format("the id \"{}\" is used twice", fw.id));
    }
  }
  for (const ModelFact& m : f.models) {
    if (!models.insert(m.id).second) {
      root.fail("models", fmt::format("the id \"{}\" is used twice", m.id));
    }
  }
  for (const HardwareFact& h : f.hardware) {
    for (const std::string& k : h.keys) {
      if (!keys.insert(k).second) {
        root.fail("hardware", fmt::format("the key \"{}\" is listed twice", k));
      }
    }
  }
  for (size_t i = 0; i < f.source_facts.size(); ++i) {
    const SourceFact::Match& m = f.source_facts[i].match;
    if (!m.framework.empty() && !frameworks.contains(m.framework)) {
      root.fail("source_facts", fmt::format("/{}/match/framework: no framework \"{}\"", i,
                                            m.framework));
    }
    if (!m.model.empty() && !models.contains(m.model)) {
      root.fail("source_facts", fmt::format("/{}/match/model: no model \"{}\"", i, m.model));
    }
  }
}

}  // namespace

std::vector<std::string> name_words(std::string_view name) {
  std::vector<std::string> words;
  std::string word;
  const auto alpha = [](char c) { return std::isalpha(static_cast<unsigned char>(c)) != 0; };
  const auto digit = [](char c) { return std::isdigit(static_cast<unsigned char>(c)) != 0; };
  for (const char c : name) {
    const bool keep = alpha(c) || digit(c);
    if (!word.empty() && (!keep || (digit(c) && alpha(word.back())))) {
      words.push_back(std::move(word));
      word.clear();
    }
    if (keep) {
      word.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
    }
  }
  if (!word.empty()) {
    words.push_back(std::move(word));
  }
  return words;
}

PublishedFacts PublishedFacts::parse(std::string_view text, const std::string& source) {
  const nlohmann::json doc = parse_json(text, source);
  JsonObject root(doc, source);
  root.ignore("_doc");
  PublishedFacts f;
  f.hardware = entries<HardwareFact>(root, "hardware", read_hardware);
  JsonObject tpu = root.object("tpu_slices");
  f.tpu_slices_source = non_empty(tpu, "source");
  f.tpu_slices_2d = torus_table(tpu, "2d");
  f.tpu_slices_3d = torus_table(tpu, "3d");
  tpu.finish();
  f.frameworks = entries<FrameworkFact>(root, "frameworks", read_framework);
  f.models = entries<ModelFact>(root, "models", read_model_fact);
  if (root.has("default_model")) {
    const std::string id = non_empty(root, "default_model");
    const auto it = std::find_if(f.models.begin(), f.models.end(),
                                 [&](const ModelFact& m) { return m.id == id; });
    if (it == f.models.end() || it->moe) {
      root.fail("default_model", fmt::format("no dense model \"{}\"", id));
    }
    f.default_model = static_cast<size_t>(it - f.models.begin());
  }
  for (JsonObject a : root.object_array("architecture_from_notes")) {
    f.architecture_from_notes.push_back({non_empty(a, "text"),
                                         a.choice<ModelArchitecture>("architecture"),
                                         non_empty(a, "source")});
    a.finish();
  }
  f.moe_notes = string_array(root, "moe_notes", false);
  for (JsonObject u : root.object_array("unstated_notes")) {
    f.unstated_notes.push_back({non_empty(u, "text"), u.choice<UnstatedField>("field"),
                                u.has("when_pp") ? u.boolean("when_pp")
                                                 : (u.ignore("when_pp"), false)});
    u.finish();
  }
  for (JsonObject d : root.object_array("dispatcher_notes")) {
    f.dispatcher_notes.push_back(
        {non_empty(d, "text"), d.choice<workloads::MoeDispatcher>("dispatcher")});
    d.finish();
  }
  for (JsonObject p : root.object_array("precision_recipes")) {
    f.precision_recipes.push_back(
        {non_empty(p, "text"), p.choice<Fp8Recipe>("recipe"), non_empty(p, "source")});
    p.finish();
  }
  for (JsonObject s : root.object_array("source_facts")) {
    SourceFact fact;
    fact.match = read_match(s.object("match"));
    fact.set = read_set(s.object("set"));
    fact.source = non_empty(s, "source");
    s.finish();
    f.source_facts.push_back(std::move(fact));
  }
  root.finish();
  check_references(f, root);
  return f;
}

const PublishedFacts& PublishedFacts::builtin() {
  static const PublishedFacts facts = [] {
    for (const auto& [stem, contents] : detail::embedded_run_facts()) {
      if (stem == "run_facts") {
        return parse(contents, std::string(kBuiltinSource));
      }
    }
    SIM_CHECK(false, "run_facts.json was not embedded");
    return PublishedFacts{};
  }();
  return facts;
}

}  // namespace meshsim::validation
