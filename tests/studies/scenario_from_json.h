// A scenario as a test writes it: a JSON document of scenario fields, with the test's own fields
// laid over it, read as a scenario file is read (scenario::apply_scenario_json) and completed.
#pragma once

#include <nlohmann/json.hpp>

#include "meshsim/scenario/scenario.h"

namespace meshsim::testing {

inline scenario::Scenario scenario_from_json(nlohmann::json doc,
                                             const nlohmann::json& extra = nullptr) {
  if (!extra.is_null()) {
    doc.update(extra);
  }
  scenario::Scenario s = scenario::apply_scenario_json(doc, "s.json", "", scenario::Scenario{});
  scenario::complete(s);
  return s;
}

}  // namespace meshsim::testing
