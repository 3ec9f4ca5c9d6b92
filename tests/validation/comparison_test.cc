// Measured against simulated (validation/include/meshsim/validation/comparison.h) on hand-made
// traces whose every number can be worked out: the profiler's cost per event removed, the dispatch
// before each host op charged to it, the host ops scaled to the unprofiled step, medians over the
// steps, and GEMMs grouped by canonical shape.
#include "meshsim/validation/comparison.h"

#include <gtest/gtest.h>

#include "meshsim/validation/profile.h"
#include "validation_test_util.h"

namespace meshsim::validation::test {
namespace {

traces::MeasuredOp host_op(OpClass c, int64_t start_us, int64_t duration_us, int64_t events) {
  traces::MeasuredOp op;
  op.name = std::string(to_string(c));
  op.op_class = c;
  op.start = SimTime::zero() + Microseconds(static_cast<double>(start_us));
  op.duration = Microseconds(static_cast<double>(duration_us));
  op.events = events;
  return op;
}

// One host step from t = 0: a matmul at 10 us for 100 us (2 events), then a norm at 150 us for
// 50 us (1 event, no rule matched), and an mm of [64, 32] x [32, 16] inside the matmul.
traces::MeasuredStep host_step() {
  traces::MeasuredStep s;
  s.duration = Microseconds(200);
  s.host_events = 3;
  s.ops = {host_op(OpClass::kMatmul, 10, 100, 2), host_op(OpClass::kNorm, 150, 50, 1)};
  s.ops[1].classified = false;
  traces::MeasuredGemm g;
  g.op_class = OpClass::kMatmul;
  g.shape = MatmulShape{64, 32, 16, 1};
  g.start = s.ops[0].start;
  g.duration = Microseconds(60);
  g.events = 1;
  s.gemms = {g};
  return s;
}

Manifest manifest(Duration median_step, std::optional<Duration> overhead) {
  Manifest m;
  m.median_step = median_step;
  m.profiler_overhead_per_event = overhead;
  return m;
}

TEST(Measure, HostOpsLoseTheProfilerCostGainTheirDispatchAndScaleToTheUnprofiledStep) {
  traces::MeasuredTrace trace;
  trace.op_source = "host";
  trace.steps = {host_step()};
  // matmul: 100 - 2 x 1 + 10 (dispatch from the step's start) = 108 us; norm: 50 - 1 + 40 (from
  // the matmul's end at 110 us) = 89 us; together 197 us, scaled to the unprofiled 394 us: x 2.
  const Measured r = measure(manifest(Microseconds(394), Microseconds(1)), trace);
  EXPECT_EQ(r.steps, 1u);
  EXPECT_EQ(r.step, Microseconds(394));
  EXPECT_EQ(r.trace_step, Microseconds(200));
  EXPECT_EQ(r.events_per_step, 3);
  EXPECT_EQ(r.overhead_per_event, Microseconds(1));
  EXPECT_DOUBLE_EQ(r.scale, 2.0);
  EXPECT_EQ(r.by_class[static_cast<size_t>(OpClass::kMatmul)], Microseconds(216));
  EXPECT_EQ(r.by_class[static_cast<size_t>(OpClass::kNorm)], Microseconds(178));
  EXPECT_EQ(r.unclassified, Microseconds(178));
  EXPECT_EQ(r.op_time(), Microseconds(394));
  // The GEMM: 60 - 1 us, scaled; keyed by its sorted output dimensions.
  const GemmKey key{OpClass::kMatmul, 1, 32, 16, 64};
  ASSERT_EQ(r.gemms.count(key), 1u);
  EXPECT_EQ(r.gemms.at(key).count, 1);
  EXPECT_EQ(r.gemms.at(key).time, Microseconds(118));
  EXPECT_EQ(key.label(), "matmul 16x64 k=32");
}

TEST(Measure, WithoutTheTrainersMeasurementNoProfilerCostIsRemoved) {
  traces::MeasuredTrace trace;
  trace.op_source = "host";
  trace.steps = {host_step()};
  // 110 + 90 = 200 us of ops and dispatch, scaled to 400 us.
  const Measured r = measure(manifest(Microseconds(400), std::nullopt), trace);
  EXPECT_FALSE(r.overhead_per_event);
  EXPECT_EQ(r.by_class[static_cast<size_t>(OpClass::kMatmul)], Microseconds(220));
  EXPECT_EQ(r.by_class[static_cast<size_t>(OpClass::kNorm)], Microseconds(180));
}

TEST(Measure, DeviceKernelsAreTakenAsTheyAreAndMediansRunOverTheSteps) {
  traces::MeasuredTrace trace;
  trace.op_source = "device";
  for (const int64_t us : {30, 10, 20, 40}) {
    traces::MeasuredStep s = host_step();
    s.ops = {host_op(OpClass::kAttention, 5, us, 0)};
    s.gemms.clear();
    s.duration = Microseconds(static_cast<double>(us + 5));
    trace.steps.push_back(s);
  }
  const Measured r = measure(manifest(Microseconds(50), Microseconds(1)), trace);
  EXPECT_FALSE(r.overhead_per_event);  // device kernels are not corrected
  EXPECT_EQ(r.scale, 1.0);
  EXPECT_EQ(r.by_class[static_cast<size_t>(OpClass::kAttention)], Microseconds(25));
  EXPECT_EQ(r.trace_step, Microseconds(30));
  EXPECT_EQ(r.events_per_step, 0);
}

TEST(Compare, TheSmokeFixturesStepIsItsKernelsSumThroughTheEngine) {
  const Manifest m = load_manifest(kManifest);
  const Profile profile = load_profile(kProfile);
  const Comparison c = compare(m, profile.chip, traces::import_trace(m.trace_path));
  EXPECT_EQ(c.simulated_step, c.simulated.step);
  EXPECT_EQ(c.simulated.kernels, step_kernels(m).size());
  EXPECT_DOUBLE_EQ(c.step_time_error, c.simulated_step / m.median_step - 1);
  EXPECT_EQ(c.measured.step, m.median_step);
  const std::vector<GemmRow> rows = gemm_rows(c.measured.gemms, c.simulated.gemms);
  ASSERT_FALSE(rows.empty());
  for (size_t i = 1; i < rows.size(); ++i) {  // the largest differences first
    const Duration a = rows[i - 1].difference();
    const Duration b = rows[i].difference();
    EXPECT_GE(std::max(a, Duration::zero() - a), std::max(b, Duration::zero() - b));
  }
  EXPECT_EQ(relative_error(Duration::zero(), Microseconds(1)), std::nullopt);
  EXPECT_DOUBLE_EQ(*relative_error(Microseconds(4), Microseconds(5)), 0.25);
}

}  // namespace
}  // namespace meshsim::validation::test
