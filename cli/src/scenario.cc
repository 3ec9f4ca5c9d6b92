#include "scenario.h"

#include "meshsim/sim/json_input.h"

namespace meshsim::cli {

Scenario default_scenario() {
  Scenario s;
  s.model = "llama3-70b";
  s.cluster = "dgx-h100";
  s.nodes = 256;
  s.tp = 8;
  s.sp = true;
  s.pp = 4;
  s.vpp = 5;
  s.schedule = "interleaved";
  s.dp = 64;
  s.zero = 1;
  s.mbs = 1;
  s.gbs = 512;
  s.seq = 8192;
  return s;
}

namespace {

template <typename T>
void read(JsonObject& o, const std::string& key, T& field,
          T (JsonObject::*getter)(const std::string&)) {
  if (auto v = opt(o, key, getter)) {
    field = *v;
  }
}

void read_choice(JsonObject& o, const std::string& key, std::string& field,
                 const std::vector<std::string>& choices) {
  o.ignore(key);  // known even when absent (error messages list it)
  if (o.has(key)) {
    field = o.one_of(key, choices);
  }
}

}  // namespace

bool scenario_file_names_workload(const std::string& path) {
  const nlohmann::json doc = load_json_file(path);
  return doc.is_object() && (doc.contains("model") || doc.contains("cluster"));
}

Scenario load_scenario(const std::string& path, Scenario s) {
  const nlohmann::json doc = load_json_file(path);
  JsonObject o(doc, path);
  read(o, "model", s.model, &JsonObject::string);
  read(o, "cluster", s.cluster, &JsonObject::string);
  if (auto v = opt(o, "nodes", &JsonObject::positive_integer)) {
    s.nodes = *v;
  }
  if (auto v = opt(o, "shape", &JsonObject::string)) {
    s.shape = *v;
  }
  read(o, "dp", s.dp, &JsonObject::positive_integer);
  read(o, "zero", s.zero, &JsonObject::non_negative_integer);
  read(o, "tp", s.tp, &JsonObject::positive_integer);
  read(o, "sp", s.sp, &JsonObject::boolean);
  read(o, "cp", s.cp, &JsonObject::positive_integer);
  read(o, "pp", s.pp, &JsonObject::positive_integer);
  read(o, "vpp", s.vpp, &JsonObject::positive_integer);
  read_choice(o, "schedule", s.schedule, kScheduleChoices);
  read(o, "ep", s.ep, &JsonObject::positive_integer);
  read(o, "capacity_factor", s.capacity_factor, &JsonObject::positive_number);
  read(o, "mbs", s.mbs, &JsonObject::positive_integer);
  if (auto v = opt(o, "gbs", &JsonObject::positive_integer)) {
    s.gbs = *v;
  }
  read(o, "seq", s.seq, &JsonObject::positive_integer);
  read_choice(o, "recompute", s.recompute, kRecomputeChoices);
  read_choice(o, "dtype", s.dtype, kDtypeChoices);
  read_choice(o, "attention", s.attention, kAttentionChoices);
  read_choice(o, "kernels", s.kernels, kKernelsChoices);
  read_choice(o, "optimizer_kernels", s.optimizer_kernels, kOptimizerKernelsChoices);
  read(o, "stage_layers", s.stage_layers, &JsonObject::positive_integer_array);
  read(o, "overlap_grad_reduce", s.overlap_grad_reduce, &JsonObject::boolean);
  read(o, "overlap_param_gather", s.overlap_param_gather, &JsonObject::boolean);
  read(o, "overlap_p2p", s.overlap_p2p, &JsonObject::boolean);
  read(o, "overlap_tp", s.overlap_tp, &JsonObject::boolean);
  if (auto v = opt(o, "hardware_catalogue", &JsonObject::string)) {
    s.hardware_catalogue = *v;
  }
  if (s.zero > 3) {
    o.fail("zero", "expected a ZeRO stage 0, 1, 2 or 3");
  }
  o.finish();
  return s;
}

}  // namespace meshsim::cli
