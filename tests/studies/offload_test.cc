// Activation offloading (Megatron-Core's cpu_offloading_num_layers): the saved activations of the
// first N layers of each chunk leave the device after their forward and come back before their
// backward, on copy streams over the chip's measured host link. Memory drops by what leaves, the
// copies cost what the host link implies (hidden behind compute where the link is fast enough,
// the step's floor where it is not), and chips or plans that cannot offload are refused.
#include <gtest/gtest.h>

#include "meshsim/scenario/scenario.h"
#include "meshsim/scenario/step.h"
#include "meshsim/studies/plan_search.h"
#include "meshsim/workloads/model.h"
#include "meshsim/workloads/partition.h"
#include "scenario_from_json.h"

namespace meshsim::studies {

using namespace meshsim::scenario;  // the step these studies run
namespace {

Scenario scenario(const nlohmann::json& extra) {
  return testing::scenario_from_json({{"model", "llama3-8b"},
                                      {"cluster", "dgx-h100"},
                                      {"nodes", 1},
                                      {"dp", 8},
                                      {"mbs", 2},
                                      {"gbs", 16},
                                      {"seq", 8192},
                                      {"zero", 3}},
                                     extra);
}

// Simulated even where the memory precheck would stop it: the plan without offloading needs
// about 91 GiB of an H100's 80, and the tests compare its simulated step with the offloaded one's.
StepReport run(const Scenario& s) {
  StepOptions o;
  o.skip_memory_precheck = true;
  return simulate_step(s, o);
}

Bytes activations_at_peak(const StepReport& r) {
  return r.peak_breakdown.by_category[static_cast<size_t>(MemoryCategory::kActivations)];
}

// One layer's saved activations and what copying them each way takes on the scenario's chip:
// the catalogue's host_link rate plus the per-op launch overhead.
struct LayerCopy {
  Bytes saved;
  Duration out;
  Duration back;
};

LayerCopy layer_copy(const Scenario& s) {
  const LoadedScenario l = load_and_check(s);
  const Bytes saved = workloads::partition_stage(l.model, s.plan, 0).activations.of(0).saved;
  const topology::Chip& chip = l.cluster.chip;
  return {saved, saved / chip.host_link->to_host + chip.efficiency.launch_overhead,
          saved / chip.host_link->to_device + chip.efficiency.launch_overhead};
}

// On an H100 the 52 GB/s PCIe link is slower than one layer's compute: with 24 of 32 layers
// offloaded (a window of one layer each) the step is held to the copies. The forward cannot pass
// the last offloaded layer before all N copies out are done, nor the backward reach the first
// layer before all N copies back are: the step is at least N x (out + back), and at most the step
// without offloading plus all of them in series.
TEST(Offload, SlowHostLinkHoldsTheStepToTheCopies) {
  const Scenario base = scenario({});
  const Scenario off = scenario({{"offload_layers", 24}});
  const StepReport r0 = run(base);
  const StepReport r1 = run(off);
  ASSERT_TRUE(r0.simulated && r1.simulated);
  const LayerCopy c = layer_copy(off);
  const Duration copies = (c.out + c.back) * int64_t{24};
  EXPECT_GE(r1.step_time, copies);
  EXPECT_LE(r1.step_time, r0.step_time + copies);
  EXPECT_GT(r1.step_time, r0.step_time);
  // The copies are the copy class's time: 24 layers out and back, one microbatch.
  EXPECT_NEAR(r1.time_by_class[static_cast<size_t>(OpClass::kCopy)].seconds(), copies.seconds(),
              1e-9);
  EXPECT_EQ(r0.time_by_class[static_cast<size_t>(OpClass::kCopy)], Duration::zero());
  // The forward waits for each copy at the end of its window, so however slow the link, no more
  // than two offloaded layers are on the device at once.
  EXPECT_LE(activations_at_peak(r1), activations_at_peak(r0) - c.saved * 22);
  // The search's memory bound (and the precheck that uses it) counts only the layers that keep
  // their activations: below the offloaded step's simulated peak, which fits, and above the
  // chip's memory without offloading, which does not.
  const workloads::ModelConfig model = workloads::load_model("llama3-8b");
  EXPECT_LE(memory_lower_bound(model, off.plan), r1.peak_memory);
  EXPECT_FALSE(r1.oom);
  EXPECT_LE(memory_lower_bound(model, base.plan), r0.peak_memory);
  EXPECT_TRUE(r0.oom);
  EXPECT_TRUE(simulate_step(base, StepOptions{}).oom);
  EXPECT_FALSE(simulate_step(off, StepOptions{}).oom);
}

// Memory: the offloaded layers leave the device; at most two of them are in flight (one on its
// way out while the next is computed, one on its way back), so the peak drops by at least N - 2
// layers and at most N.
TEST(Offload, OffloadedLayersLeaveTheDevice) {
  const Scenario off = scenario({{"offload_layers", 8}});
  const Bytes saved = layer_copy(off).saved;
  const Bytes a0 = activations_at_peak(run(scenario({})));
  const Bytes a1 = activations_at_peak(run(off));
  EXPECT_LE(a1, a0 - saved * 6);
  EXPECT_GE(a1, a0 - saved * 8);
}

// On a GB200 (193-201 GB/s over NVLink-C2C, measured) the copies of 8 of 32 layers, each given
// four layers' compute, hide behind it: the step moves by less than 1%. (With 16, a window of two
// layers, the copies outlast the compute and the step grows 6%.)
TEST(Offload, FastHostLinkHidesTheCopies) {
  const nlohmann::json gb200 = {{"cluster", "gb200-nvl72"}, {"nodes", 2}, {"zero", 1}};
  nlohmann::json off = gb200;
  off["offload_layers"] = 8;
  const StepReport r0 = run(scenario(gb200));
  const StepReport r1 = run(scenario(off));
  ASSERT_TRUE(r0.simulated && r1.simulated);
  EXPECT_GT(r1.time_by_class[static_cast<size_t>(OpClass::kCopy)].seconds(),
            0.1 * r0.step_time.seconds());
  EXPECT_NEAR(r1.step_time / r0.step_time, 1.0, 0.01);
}

workloads::PlanField error_field(const nlohmann::json& extra) {
  try {
    (void)load_and_check(scenario(extra));
  } catch (const workloads::PlanError& e) {
    return e.field();
  }
  ADD_FAILURE() << "no error for " << extra.dump();
  return workloads::PlanField::kDp;
}

// Transformer Engine keeps the chunk's last layer on the device; Megatron-Core refuses offloading
// with recompute; a chip without host-link figures cannot offload.
TEST(Offload, RefusesWhatCannotOffload) {
  using workloads::PlanField;
  EXPECT_EQ(error_field({{"offload_layers", 32}}), PlanField::kOffloadLayers);
  EXPECT_EQ(error_field({{"offload_layers", 4}, {"recompute", "selective"}}),
            PlanField::kOffloadLayers);
  EXPECT_NO_THROW((void)load_and_check(scenario({{"offload_layers", 31}})));
  const Scenario tpu = testing::scenario_from_json({{"model", "llama3-8b"},
                                                    {"cluster", "tpu-v5p"},
                                                    {"shape", "2x2x2"},
                                                    {"dp", 8},
                                                    {"mbs", 2},
                                                    {"gbs", 16},
                                                    {"seq", 8192},
                                                    {"recompute", "none"},
                                                    {"offload_layers", 4}});
  try {
    (void)load_and_check(tpu);
    ADD_FAILURE() << "a TPU offloaded";
  } catch (const workloads::PlanError& e) {
    EXPECT_EQ(e.field(), PlanField::kOffloadLayers);
    // MaxText, the TPU's stack, refuses Megatron-Core's offloading (stack_rules.h) before the
    // chip's host link is asked for.
    EXPECT_NE(std::string(e.what()).find("maxtext stack does not run"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace meshsim::studies
