// The plan search's lower bound (step_bound.h) against the engine: never above the simulated step,
// over plans of every kind (TP with and without overlap, SP, CP ring attention, pipelines of every
// schedule, ZeRO 0-3 across nodes, recompute, microbatches) on one and on several nodes.
#include <gtest/gtest.h>

#include "meshsim/collectives/comm_model.h"
#include "meshsim/studies/plan_search.h"
#include "meshsim/studies/step.h"
#include "meshsim/studies/step_bound.h"
#include "meshsim/topology/network.h"

namespace meshsim::studies {
namespace {

// Checks every `stride`-th valid plan of the problem (all that fit and some that do not).
void check_bound(const std::string& model, int64_t nodes, int64_t seq, int64_t gbs,
                 size_t stride, size_t min_checked) {
  Scenario base;
  base.model = model;
  base.cluster = "dgx-h100";
  base.nodes = nodes;
  base.plan.seq = seq;
  base.plan.gbs = gbs;
  const LoadedScenario loaded = load_inputs(base);
  const topology::Network net = topology::Network::build(loaded.cluster);
  collectives::NetworkCommModel comm(net,
                                     topology::Placement::in_order(loaded.cluster.device_count()),
                                     collectives::NetworkBackend::kAnalytical);
  StepLowerBound bound(loaded.model, loaded.cluster, &comm);
  const std::vector<workloads::ParallelPlan> plans =
      enumerate_plans(loaded, base.plan, SearchOptions{});
  size_t checked = 0;
  for (size_t i = 0; i < plans.size(); i += stride) {
    Scenario s = base;
    s.plan = plans[i];
    const StepReport r = simulate_step(s, loaded, StepOptions{});
    if (!r.simulated) {
      continue;
    }
    const Duration lb = bound(plans[i]);
    EXPECT_LE(lb, r.step_time) << r.plan_description << ": bound " << lb.seconds() << " s, step "
                               << r.step_time.seconds() << " s";
    EXPECT_GT(lb, Duration::zero()) << r.plan_description;
    ++checked;
  }
  EXPECT_GE(checked, min_checked);
}

TEST(StepLowerBound, NeverExceedsTheSimulatedStepOnOneNode) {
  check_bound("llama3-8b", 1, 4096, 16, 7, 100);
}

TEST(StepLowerBound, NeverExceedsTheSimulatedStepAcrossNodes) {
  // 32 GPUs: data parallelism and ZeRO over the NICs, CP and TP inside nodes.
  check_bound("llama3-8b", 4, 8192, 64, 97, 60);
}

TEST(StepLowerBound, NeverExceedsTheSimulatedStepOfAMixtureOfExperts) {
  check_bound("mixtral-8x7b", 2, 4096, 32, 41, 30);
}

}  // namespace
}  // namespace meshsim::studies
