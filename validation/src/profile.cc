#include "meshsim/validation/profile.h"

#include <fmt/format.h>

#include <algorithm>
#include <vector>

#include "meshsim/sim/error.h"
#include "meshsim/sim/json_input.h"

namespace meshsim::validation {
namespace {

nlohmann::json fraction(double v, const std::string& source) {
  return {{"value", std::min(1.0, v)}, {"source", source}};
}

// Microseconds to a tenth of a nanosecond, as the catalogue's duration strings read.
nlohmann::json microseconds(Duration d, const std::string& source) {
  return {{"value", fmt::format("{:.4f}us", d.microseconds())}, {"source", source}};
}

}  // namespace

Profile profile_from(const nlohmann::json& document, const std::string& name) {
  // Validated before it is copied: a copy of an arbitrary document recurses once per level.
  const topology::Catalogue cat = topology::Catalogue::parse(document, name);
  Profile p;
  p.path = name;
  p.document = document;
  const std::vector<std::string> names = cat.names();
  if (names.size() != 1) {
    throw InputError(
        name, "/chips",
        fmt::format("a hardware profile holds exactly one chip, found {}", names.size()));
  }
  p.chip_name = names.front();
  p.chip = cat.chip(p.chip_name);
  return p;
}

Profile load_profile(const std::string& path) { return profile_from(load_json_file(path), path); }

nlohmann::json profile_document(const Profile& base, const topology::Efficiency& e,
                                const std::string& source) {
  nlohmann::json doc = base.document;
  nlohmann::json& eff = doc["chips"][base.chip_name]["efficiency"];
  eff["matmul"] = fraction(e.matmul, source);
  eff["memory"] = fraction(e.memory, source);
  eff.erase("memory_by_class");
  for (size_t c = 0; c < e.memory_by_class.size(); ++c) {
    if (const auto& v = e.memory_by_class[c]) {
      eff["memory_by_class"][std::string(to_string(static_cast<OpClass>(c)))] =
          fraction(*v, source);
    }
  }
  eff["launch_overhead"] = microseconds(e.launch_overhead, source);
  if (base.chip.efficiency.matmul_shape && e.matmul_shape) {
    nlohmann::json& shape = eff["matmul_shape"];
    shape["k_half"] = {{"value", e.matmul_shape->k_half}, {"source", source}};
    shape["call_overhead"] = microseconds(e.matmul_shape->call_overhead, source);
  }
  try {
    (void)profile_from(doc, base.path);
  } catch (const InputError& err) {
    SIM_CHECK(false, "the fitted profile does not load: {}", err.what());
  }
  return doc;
}

}  // namespace meshsim::validation
