// Representative mode against full simulation on an ICI torus (scenario/src/step.cc,
// representative_ranks). A simulated group's images run its collectives as one transfer at one
// rate; on a torus the data-parallel groups of the TP positions cross the TP groups' links at
// different places, and tied to one rate they left TP's collectives more bandwidth than they get
// (this plan: 661.09 ms against 686.02 ms with every rank simulated, before the TP group was
// simulated whole). A GPU fat tree keeps the one-rank class: its groups are mirror images.
#include <gtest/gtest.h>

#include "meshsim/scenario/scenario.h"
#include "meshsim/scenario/step.h"
#include "scenario_from_json.h"

namespace meshsim::studies {

using namespace meshsim::scenario;  // the step these studies run
namespace {

using testing::scenario_from_json;

StepReport run(const Scenario& s, bool full) {
  StepOptions options;
  options.full_simulation = full;
  return simulate_step(s, options);
}

TEST(RepresentativeTorus, TpGroupSimulatedWholeMatchesFullSimulation) {
  // TP along one axis of a 4x4x8 v5p slice, FSDP over the other two, sequence parallel.
  const Scenario s = scenario_from_json({{"model", "llama3-8b"},
                                         {"cluster", "tpu-v5p"},
                                         {"shape", "4x4x8"},
                                         {"tp", 8},
                                         {"sp", true},
                                         {"dp", 16},
                                         {"zero", 3},
                                         {"mbs", 4},
                                         {"gbs", 64},
                                         {"seq", 4096},
                                         {"recompute", "full"}});
  const StepReport representative = run(s, false);
  const StepReport full = run(s, true);
  EXPECT_EQ(representative.simulation_mode, "representative");
  EXPECT_EQ(representative.simulated_ranks, 8);  // rank 0's TP group
  EXPECT_EQ(full.simulated_ranks, 128);
  EXPECT_DOUBLE_EQ(representative.step_time.seconds(), full.step_time.seconds());
}

TEST(RepresentativeTorus, FatTreeKeepsOneRankPerClass) {
  const Scenario s = scenario_from_json({{"model", "llama3-8b"},
                                         {"cluster", "dgx-h100"},
                                         {"nodes", 4},
                                         {"tp", 8},
                                         {"dp", 4},
                                         {"mbs", 1},
                                         {"gbs", 16},
                                         {"seq", 4096}});
  const StepReport representative = run(s, false);
  EXPECT_EQ(representative.simulated_ranks, 1);
  EXPECT_DOUBLE_EQ(representative.step_time.seconds(), run(s, true).step_time.seconds());
}

}  // namespace
}  // namespace meshsim::studies
