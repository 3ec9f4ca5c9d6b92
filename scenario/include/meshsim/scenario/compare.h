// Two simulated steps side by side (the JSON `meshsim run --json` writes): what changed in the
// inputs, how every result moved, and why the step moved: its change split into compute, exposed
// communication (by kind) and idle time (step - compute - exposed: the bubble and waits), the
// largest part named, and the kernel classes whose time changed most.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace meshsim::scenario {

// `a` and `b` are run reports; `a_name` / `b_name` name them in errors (InputError with the JSON
// pointer of a missing or mistyped field). The result:
//   {"inputs_changed": [{"field", "a", "b"}], "metrics": [{"name", "unit", "a", "b", "delta"}],
//    "step_change_s", "parts": [{"part", "delta_s"}] (largest |delta| first),
//    "op_classes": [{"class", "delta_s"}] (largest |delta| first), "verdict": "..."}
nlohmann::json compare_reports(const nlohmann::json& a, const std::string& a_name,
                               const nlohmann::json& b, const std::string& b_name);

}  // namespace meshsim::scenario
