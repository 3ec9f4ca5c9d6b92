// Issue 40's search guarantees on small problems of several models, clusters and stacks: no ranked
// plan is one its stack's own checks refuse; the default (capped) search finds the top plan of
// the exhaustive one (--exact), and when it says its ranking is proven, the whole ranking; every
// ranked plan keeps the default headroom free.
#include <gtest/gtest.h>

#include <string>

#include "meshsim/studies/plan_search.h"
#include "meshsim/workloads/model.h"
#include "meshsim/workloads/stack_rules.h"

namespace meshsim::studies {
namespace {

using scenario::Scenario;

struct Problem {
  std::string model;
  std::string cluster;
  std::optional<int64_t> nodes;
  std::optional<std::string> shape;
  int64_t gbs;
  int64_t seq;
  std::optional<workloads::Stack> stack;  // absent: the chip's default
};

Scenario scenario_of(const Problem& p) {
  Scenario s;
  s.model = p.model;
  s.cluster = p.cluster;
  s.nodes = p.nodes;
  s.shape = p.shape;
  s.plan.gbs = p.gbs;
  s.plan.seq = p.seq;
  if (p.stack) {
    s.plan.stack = *p.stack;
    s.plan.origins.set(workloads::PlanField::kStack, Origin::flag("--stack"));
  }
  return s;
}

SearchOptions capped(int64_t top) {
  SearchOptions o;
  o.top = top;
  o.max_simulations = kDefaultSimulationsPerTop * top;
  o.jobs = 2;
  return o;
}

TEST(StackSearch, NoRankedPlanIsOneItsStackRefuses) {
  using workloads::Stack;
  const std::vector<Problem> problems = {
      {"llama3-8b", "dgx-h100", 2, {}, 32, 4096, Stack::kMegatron},
      {"llama3-8b", "dgx-h100", 2, {}, 32, 4096, Stack::kFsdp},
      {"llama3-8b", "dgx-h100", 2, {}, 32, 4096, Stack::kFsdpCompile},
      {"mixtral-8x7b", "dgx-h100", 4, {}, 64, 4096, Stack::kMegatron},
      {"llama3.2-1b", "tpu-v5e", {}, "4x4", 32, 4096, {}},  // maxtext
  };
  for (const Problem& p : problems) {
    const Scenario s = scenario_of(p);
    SearchOptions o = capped(20);
    o.max_simulations = 20;
    const SearchResult r = search_plans(s, o);
    const std::string what = p.model + " on " + p.cluster;
    ASSERT_FALSE(r.top.empty()) << what;
    EXPECT_FALSE(r.refused.empty()) << what << ": every stack refuses some combination";
    const workloads::ModelConfig model = workloads::load_model(p.model);
    for (const RankedPlan& rp : r.top) {
      const workloads::StackRule* rule = workloads::stack_refusal(model, rp.plan);
      EXPECT_EQ(rule, nullptr) << what << ", " << to_string(rp.plan.stack) << ": "
                               << rp.report.plan_description << " breaks " << rule->what;
      EXPECT_LE(rp.report.peak_memory.as_double(),
                (1.0 - kDefaultHeadroom) * r.memory_capacity.as_double())
          << rp.report.plan_description;
    }
  }
}

TEST(StackSearch, TheCappedSearchFindsTheExactTopPlan) {
  const std::vector<Problem> problems = {
      {"llama3.2-1b", "dgx-h100", 2, {}, 32, 4096, {}},
      {"llama3-8b", "dgx-h100", 2, {}, 32, 8192, {}},
      {"mixtral-8x7b", "dgx-h100", 4, {}, 64, 4096, {}},
  };
  for (const Problem& p : problems) {
    const Scenario s = scenario_of(p);
    const SearchResult quick = search_plans(s, capped(5));
    SearchOptions all = capped(5);
    all.max_simulations = 0;  // --exact
    const SearchResult exact = search_plans(s, all);
    const std::string what = p.model + " on " + p.cluster;
    ASSERT_TRUE(exact.exact) << what;
    ASSERT_FALSE(quick.top.empty()) << what;
    ASSERT_EQ(quick.top.size(), exact.top.size()) << what;
    EXPECT_LE(quick.simulated, exact.simulated) << what;
    EXPECT_EQ(quick.top.front().report.step_time, exact.top.front().report.step_time) << what;
    EXPECT_EQ(quick.top.front().report.plan_description, exact.top.front().report.plan_description)
        << what;
    if (quick.exact) {  // a proven ranking is the exhaustive one
      for (size_t i = 0; i < quick.top.size(); ++i) {
        EXPECT_EQ(quick.top[i].report.step_time, exact.top[i].report.step_time) << what << i;
      }
    }
  }
}

}  // namespace
}  // namespace meshsim::studies
