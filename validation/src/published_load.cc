// Reading published_runs.json (schema: validation/published/README.md).
#include <fmt/format.h>

#include "meshsim/sim/error.h"
#include "meshsim/sim/json_input.h"
#include "meshsim/validation/published.h"

namespace meshsim::validation {
namespace {

// A field the schema always has, which the source may leave null.
std::optional<int64_t> stated_count(JsonObject& o, const std::string& key) {
  if (o.raw(key).is_null()) {
    return std::nullopt;
  }
  return o.non_negative_integer(key);
}

std::optional<bool> stated_flag(JsonObject& o, const std::string& key) {
  if (o.raw(key).is_null()) {
    return std::nullopt;
  }
  return o.boolean(key);
}

std::optional<double> stated_amount(JsonObject& o, const std::string& key) {
  if (!o.has(key) || o.raw(key).is_null()) {
    o.ignore(key);
    return std::nullopt;
  }
  return o.positive_number(key);
}

std::string text_or_empty(JsonObject& o, const std::string& key) {
  if (!o.has(key) || o.raw(key).is_null()) {
    o.ignore(key);
    return "";
  }
  return o.string(key);
}

// Free-text keys of a record that say where a figure comes from or comment on it: read as text
// (or null) so that a typo in a key is still an error, but not interpreted.
void ignore_text(JsonObject& o, std::initializer_list<const char*> keys) {
  for (const char* key : keys) {
    o.ignore(key);
  }
}

PublishedRun::Model read_run_model(JsonObject o) {
  PublishedRun::Model m;
  m.name = text_or_empty(o, "name");
  m.arch_notes = text_or_empty(o, "arch_notes");
  m.layers = stated_count(o, "layers");
  m.hidden = stated_count(o, "hidden");
  m.heads = stated_count(o, "heads");
  m.kv_heads = stated_count(o, "kv_heads");
  m.ffn = stated_count(o, "ffn");
  m.vocab = stated_count(o, "vocab");
  m.seq_len = stated_count(o, "seq_len");
  m.moe = o.has("moe") && !o.raw("moe").is_null();
  if (m.moe) {
    JsonObject e(o.raw("moe"), o.source(), o.pointer_of("moe"));
    m.experts = stated_count(e, "experts_routed");
    m.top_k = stated_count(e, "top_k");
    m.expert_ffn = stated_count(e, "expert_ffn");
    e.finish();
  }
  m.params_b = stated_amount(o, "params_b");
  ignore_text(o, {"shape_source"});
  o.finish();
  return m;
}

PublishedRun::Parallelism read_parallelism(JsonObject o) {
  PublishedRun::Parallelism p;
  p.tp = stated_count(o, "tp");
  p.pp = stated_count(o, "pp");
  p.dp = stated_count(o, "dp");
  p.cp = stated_count(o, "cp");
  p.ep = stated_count(o, "ep");
  p.zero_stage = stated_count(o, "zero_stage");
  p.vpp = stated_count(o, "virtual_pipeline_stages");
  p.sp = stated_flag(o, "sp");
  p.fsdp = stated_flag(o, "fsdp");
  if (!o.raw("activation_recompute").is_null()) {
    p.recompute = o.string("activation_recompute");
  }
  p.notes = text_or_empty(o, "notes");
  o.finish();
  return p;
}

PublishedRun::Batch read_batch(JsonObject o) {
  PublishedRun::Batch b;
  b.sequences = stated_count(o, "global_batch_sequences");
  b.tokens = stated_count(o, "global_batch_tokens");
  b.micro_batch = stated_count(o, "micro_batch");
  b.grad_accum = stated_count(o, "grad_accum");
  ignore_text(o, {"notes"});
  o.finish();
  return b;
}

PublishedRun read_run(JsonObject o) {
  PublishedRun r;
  r.id = o.string("id");
  JsonObject source = o.object("source");
  r.citation = source.string("citation");
  r.location = text_or_empty(source, "location");
  ignore_text(source, {"cross_check"});
  source.finish();
  JsonObject hw = o.object("hardware");
  r.hardware_key = hw.string("hardware_key");
  r.devices = stated_count(hw, "count");
  if (hw.has("interconnect") && !hw.raw("interconnect").is_null()) {
    JsonObject ic = hw.object("interconnect");
    ic.allow_unknown();  // free text about the fabric; only the slice size is read
    r.intra_slice = text_or_empty(ic, "intra_slice");
  }
  ignore_text(hw, {"type", "notes"});
  hw.finish();
  r.model = read_run_model(o.object("model"));
  r.parallelism = read_parallelism(o.object("parallelism"));
  r.batch = read_batch(o.object("batch"));
  r.precision = text_or_empty(o, "precision");
  r.precision_class = o.one_of("precision_class", {"bf16", "fp16", "fp8", "unknown"});
  r.framework = o.string("framework");
  JsonObject measured = o.object("measured");
  r.measured.metric = measured.string("metric");
  r.measured.value = measured.positive_number("value");
  r.measured.unit = measured.string("unit");
  measured.finish();
  ignore_text(o, {"measured_also", "notes", "source_quality"});
  o.finish();
  return r;
}

}  // namespace

std::string PublishedRun::source_group() const { return id.substr(0, id.find('-')); }

std::vector<PublishedRun> load_published_runs(const std::string& path) {
  const nlohmann::json doc = load_json_file(path);
  if (!doc.is_array()) {
    throw InputError(path, "/", "expected an array of published runs");
  }
  std::vector<PublishedRun> runs;
  for (size_t i = 0; i < doc.size(); ++i) {
    runs.push_back(read_run(JsonObject(doc[i], path, fmt::format("/{}", i))));
  }
  return runs;
}

}  // namespace meshsim::validation
