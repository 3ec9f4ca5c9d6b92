#include "scenario.h"

#include "meshsim/sim/json_input.h"

namespace meshsim::cli {

Scenario default_scenario() { return Scenario{}; }

Scenario load_scenario(const std::string& path, Scenario s) {
  const nlohmann::json doc = load_json_file(path);
  JsonObject o(doc, path);
  if (auto v = opt(o, "model", &JsonObject::string)) {
    s.model = *v;
  }
  if (auto v = opt(o, "cluster", &JsonObject::string)) {
    s.cluster = *v;
  }
  if (auto v = opt(o, "nodes", &JsonObject::positive_integer)) {
    s.nodes = *v;
  }
  if (auto v = opt(o, "dp", &JsonObject::positive_integer)) {
    s.dp = *v;
  }
  if (auto v = opt(o, "mbs", &JsonObject::positive_integer)) {
    s.mbs = *v;
  }
  if (auto v = opt(o, "gbs", &JsonObject::positive_integer)) {
    s.gbs = *v;
  }
  if (auto v = opt(o, "seq", &JsonObject::positive_integer)) {
    s.seq = *v;
  }
  o.ignore("dtype");  // known keys, read below only when present
  o.ignore("attention");
  if (o.has("dtype")) {
    s.dtype = o.one_of("dtype", {"bf16", "fp8"});
  }
  if (o.has("attention")) {
    s.attention = o.one_of("attention", {"flash", "naive"});
  }
  if (auto v = opt(o, "hardware_catalogue", &JsonObject::string)) {
    s.hardware_catalogue = *v;
  }
  o.finish();
  return s;
}

}  // namespace meshsim::cli
