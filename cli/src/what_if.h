// What a new user trying what-ifs needs besides the step itself:
//  * a scenario that names a model or a cluster but no plan field (`meshsim --cluster h200`,
//    `meshsim --model llama3-405b`) becomes the default scenario with them swapped in (a named GPU
//    cluster keeps the default's 2048 devices when it can be resized to them; a TPU slice its
//    preset shape), with the default plan when it is valid and fits there, else the best plan
//    the plan search finds, and a note saying which;
//  * warnings about silent traps in a result;
//  * for an out-of-memory verdict, plans that would fit (the plan search).
#pragma once

#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "meshsim/scenario/step_report.h"
#include "scenario_flags.h"

namespace meshsim::cli {

struct AutoPlan {
  Scenario scenario;
  std::string note;  // "kept the default plan ..." or "searched ... and took ..."
};

// nullopt unless `s` names a model or a cluster and gives no plan field.
std::optional<AutoPlan> auto_plan(const Scenario& s);

// Warnings about `r` of `s`: a global batch nobody set that leaves one microbatch per pipeline
// (the bubble it costs), a peak within 5 % of the chip's memory. One line each, no prefix.
std::vector<std::string> result_warnings(const Scenario& s, const scenario::StepReport& r);

// Up to three plans of `s`'s model, cluster, sequence and batch that fit (a short plan search),
// printed as "  plans that fit ..." lines; nothing when none does.
void suggest_plans_that_fit(const Scenario& s, std::ostream& out);

}  // namespace meshsim::cli
