// Helpers of the published-runs tests: the committed dev set's runs by id, and their mapping.
#pragma once

#include <gtest/gtest.h>

#include <stdexcept>
#include <string>
#include <vector>

#include "meshsim/scenario/stack_setup.h"
#include "meshsim/validation/published.h"
#include "validation_test_util.h"

namespace meshsim::validation::test {

inline const std::string& published_runs_path() {
  static const std::string path = kSource + "/validation/published/published_runs.json";
  return path;
}

// A run of the committed dev set.
inline const PublishedRun& dev_run(const std::string& id) {
  static const std::vector<PublishedRun> runs = load_published_runs(published_runs_path());
  for (const PublishedRun& r : runs) {
    if (r.id == id) {
      return r;
    }
  }
  throw std::runtime_error("no run " + id);
}

// The scenario `r` maps to with the built-in catalogue and facts; a run that does not map fails
// the test, with its reason.
inline PublishedScenario mapped(const PublishedRun& r) {
  PublishedMapping m = map_published_run(r, topology::Catalogue::builtin());
  if (const auto* no = std::get_if<NotExpressible>(&m)) {
    ADD_FAILURE() << r.id << " does not map: " << no->reason;
    return {};
  }
  return std::get<PublishedScenario>(std::move(m));
}

// `s`'s plan as meshsim runs it, bound to its cluster (scenario::bind_to_cluster): what the record
// or its facts set stays, the rest is the stack's; and its overlaps.
inline workloads::ParallelPlan bound_plan(const PublishedScenario& s) {
  workloads::ParallelPlan p = s.plan;
  scenario::bind_to_cluster(p, s.cluster);
  return p;
}
inline workloads::OverlapOptions bound_overlaps(const PublishedScenario& s) {
  return bound_plan(s).overlap;
}

// Why `r` does not map; a run that maps fails the test.
inline std::string refusal(const PublishedRun& r) {
  const PublishedMapping m = map_published_run(r, topology::Catalogue::builtin());
  if (const auto* no = std::get_if<NotExpressible>(&m)) {
    return no->reason;
  }
  ADD_FAILURE() << r.id << " maps, but was expected not to";
  return "";
}

}  // namespace meshsim::validation::test
