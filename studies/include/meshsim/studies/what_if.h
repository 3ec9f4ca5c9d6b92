// What a new user trying what-ifs needs besides the step itself:
//  * a scenario that names a model or a cluster but no plan field (`meshsim --cluster h200`,
//    `meshsim --model llama3-405b`) becomes the default scenario with them swapped in (a named GPU
//    cluster keeps the default's 2048 devices when it can be resized to them; a TPU slice its
//    preset shape), with the default plan when it is valid and fits there, else the best plan
//    the plan search finds, and a note saying which;
//  * warnings about silent traps in a result;
//  * for an out-of-memory verdict, plans that would fit (the plan search).
// Errors are located where the scenario's values came from (meshsim/scenario/located.h).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "meshsim/scenario/scenario.h"
#include "meshsim/scenario/step_report.h"
#include "meshsim/studies/plan_search.h"

namespace meshsim::studies {

struct AutoPlan {
  scenario::Scenario scenario;
  std::string note;  // "kept the default plan ..." or "searched ... and took ..."
};

// Whether auto_plan applies to `s`: it names a model or a cluster and gives no plan field.
bool wants_auto_plan(const scenario::Scenario& s);

// nullopt unless wants_auto_plan(s). `progress` follows the plan search when the default plan
// does not apply. InputError on the model or cluster when no plan applies and the search finds
// none.
std::optional<AutoPlan> auto_plan(const scenario::Scenario& s, const ProgressFn& progress = {});

// Notes on the run's plan the report should carry (a setting that does nothing here, said);
// `ran`: the plan as the step ran it, bound to its cluster (scenario::bind_to_cluster).
std::vector<std::string> run_notes(const workloads::ParallelPlan& ran,
                                   const scenario::StepReport& r);

// Warnings about `r` of `s`: a global batch nobody set that leaves one microbatch per pipeline
// (the bubble it costs), a peak within 5 % of the chip's memory. One line each, no prefix.
std::vector<std::string> result_warnings(const scenario::Scenario& s,
                                         const scenario::StepReport& r);

// The search plans_that_fit runs: the best three with the default headroom, bounded (at most
// three simulations of plans that fit and six in all, plans whose closed-form memory does not
// leave the headroom skipped) so that a problem whose every step is long to simulate answers in
// seconds; on every core.
SearchOptions plans_that_fit_options();

// Up to three plans of `s`'s model, cluster, sequence and batch that fit (plans_that_fit_options),
// best first; SearchResult::top is empty when none does.
SearchResult plans_that_fit(const scenario::Scenario& s, const ProgressFn& progress = {});

}  // namespace meshsim::studies
