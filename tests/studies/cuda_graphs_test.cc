// CUDA graphs (ParallelPlan::cuda_graphs): the host launches a captured layer (or the whole step)
// with one call instead of issuing its kernels one by one. Where the host is the bottleneck (a
// small model, TP 8, short sequences: kernels shorter than eager PyTorch's per-kernel dispatch)
// graphs give the device back the time it waited; where the device is the bottleneck they change
// nothing; XLA stacks, which have no per-kernel host work, refuse them.
#include <gtest/gtest.h>

#include "meshsim/scenario/scenario.h"
#include "meshsim/scenario/step.h"
#include "scenario_from_json.h"

namespace meshsim::studies {

using namespace meshsim::scenario;  // the step these studies run
namespace {

Scenario scenario(const nlohmann::json& extra) {
  nlohmann::json doc = {{"model", "llama3.2-1b"}, {"cluster", "dgx-h100"}, {"nodes", 1},
                        {"tp", 8},                {"dp", 1},             {"mbs", 1},
                        {"gbs", 4},               {"seq", 128}};
  if (!extra.is_null()) {
    doc.update(extra);
  }
  if (doc["cluster"] != "dgx-h100") {
    doc.erase("nodes");  // a TPU slice takes its preset's shape
  }
  return testing::scenario_from_json(doc);
}

StepReport run(const nlohmann::json& extra) {
  const StepReport r = simulate_step(scenario(extra), StepOptions{});
  EXPECT_TRUE(r.simulated);
  return r;
}

// Launch-bound: eager issue leaves the device waiting for a large part of the step; per-layer
// graphs remove almost all of that wait (what remains is issued outside the layers: the
// embedding, the head, the optimizer), and the step shrinks by about what the device waited.
// The device's own work is the same kernels either way.
TEST(CudaGraphs, RemoveTheHostsPerKernelCostWhereItHoldsTheDeviceBack) {
  const StepReport eager = run({});
  const StepReport layers = run({{"cuda_graphs", "layers"}});
  const StepReport step = run({{"cuda_graphs", "step"}});
  ASSERT_GT(eager.host_wait.seconds(), 0.2 * eager.step_time.seconds());  // launch-bound
  EXPECT_LT(layers.host_wait.seconds(), 0.05 * eager.host_wait.seconds());
  EXPECT_LE(step.host_wait, layers.host_wait);
  EXPECT_EQ(layers.compute, eager.compute);
  EXPECT_LT(layers.step_time.seconds(),
            eager.step_time.seconds() - 0.8 * eager.host_wait.seconds());
  EXPECT_LE(step.step_time, layers.step_time);
}

// Device-bound (long sequences: every kernel outlasts its dispatch): graphs move nothing.
TEST(CudaGraphs, ChangeNothingWhereTheDeviceIsTheBottleneck) {
  const nlohmann::json big = {{"tp", 1}, {"dp", 8}, {"gbs", 8}, {"seq", 4096}};
  nlohmann::json graphed = big;
  graphed["cuda_graphs"] = "layers";
  const StepReport eager = run(big);
  const StepReport layers = run(graphed);
  EXPECT_LT(eager.host_wait.seconds(), 0.01 * eager.step_time.seconds());
  EXPECT_NEAR(layers.step_time / eager.step_time, 1.0, 0.01);
}

TEST(CudaGraphs, XlaStacksRefuseThem) {
  try {
    (void)load_and_check(scenario({{"cluster", "tpu-v5p"}, {"tp", 4}, {"cuda_graphs", "step"}}));
    ADD_FAILURE() << "no error";
  } catch (const workloads::PlanError& e) {
    EXPECT_EQ(e.field(), workloads::PlanField::kCudaGraphs);
  }
}

}  // namespace
// A slower host (host_time_scale): every op's host cost scales; a launch-bound step grows by about
// what the slower host adds to the chain, and the device's own work hardly changes (its kernels
// meet the TP collectives at other times, so their SM sharing differs); a device-bound step stays
// device-bound.
TEST(HostTimeScale, SlowsTheStepOnlyWhereTheHostBoundsIt) {
  const StepReport base = run({});
  const StepReport slow = run({{"host_time_scale", 2.0}});
  ASSERT_GT(base.host_wait.seconds(), 0.2 * base.step_time.seconds());  // launch-bound
  EXPECT_NEAR(slow.compute.seconds(), base.compute.seconds(), 0.05 * base.compute.seconds());
  EXPECT_GT(slow.host_wait.seconds(), base.host_wait.seconds() + 0.3 * base.step_time.seconds());
  EXPECT_GT(slow.step_time.seconds(), 1.3 * base.step_time.seconds());
  const nlohmann::json big = {{"tp", 1}, {"dp", 8}, {"gbs", 8}, {"seq", 4096}};
  nlohmann::json big_slow = big;
  big_slow["host_time_scale"] = 2.0;
  const StepReport device = run(big);
  const StepReport device_slow = run(big_slow);
  EXPECT_LT(device_slow.host_wait.seconds(), 0.01 * device_slow.step_time.seconds());
  EXPECT_NEAR(device_slow.step_time.seconds(), device.step_time.seconds(),
              0.01 * device.step_time.seconds());
}

}  // namespace meshsim::studies
