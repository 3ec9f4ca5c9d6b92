// The fit (validation/src/calibrate_fit.h) in process: its fast prediction is the roofline model;
// on measurements the roofline model itself makes, it recovers from a start far off the efficiency
// they were made with, and the same inputs give the same fit, bit for bit. And the source text a
// calibrated profile carries.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "calibrate_fit.h"
#include "meshsim/validation/calibrate.h"
#include "meshsim/validation/comparison.h"
#include "meshsim/validation/profile.h"
#include "validation_test_util.h"

namespace meshsim::validation::test {
namespace {

using ::testing::HasSubstr;

// The smoke fixture's model at several batches and sequence lengths, "measured" by simulating
// its kernels on `truth`.
std::vector<FitCase> synthetic_cases(const Profile& base, const topology::Efficiency& truth) {
  topology::Chip measured_on = base.chip;
  measured_on.efficiency = truth;
  std::vector<FitCase> cases;
  for (const auto& [batch, seq] :
       std::vector<std::pair<int64_t, int64_t>>{{2, 64}, {4, 128}, {1, 256}}) {
    Manifest m = load_manifest(kManifest);
    m.micro_batch = batch;
    m.global_batch = batch;
    m.seq = seq;
    const std::vector<StepKernel> kernels = step_kernels(m);
    const Simulated s = simulate_kernels(kernels, measured_on);
    Measured measured;
    measured.step = s.step;
    measured.by_class = s.by_class;
    measured.gemms = s.gemms;
    cases.push_back(make_fit_case(kernels, base.chip, measured));
  }
  return cases;
}

// The fit's fast prediction (src/calibrate_fit.h: predict) is the roofline model
// (compute_model.h), for any efficiency: the same step and per-class times as simulating the
// kernels on the chip with that efficiency.
TEST(Fit, PredictionIsTheRooflineModel) {
  const Manifest m = load_manifest(kManifest);
  const Profile profile = load_profile(kProfile);
  std::vector<StepKernel> kernels = step_kernels(m);
  // A loss run as element-wise kernels (Megatron-LM's passes over fp32 logits): its time is the
  // loss's, its rate the element-wise class's (ComputeWork::rate_class).
  StepKernel pass{"cross_entropy.sub", {}};
  pass.work.op_class = OpClass::kLoss;
  pass.work.rate_class = OpClass::kElementwise;
  pass.work.dtype = Dtype::kFp32;
  pass.work.bytes = MiB(64);
  kernels.push_back(pass);
  Measured measured;
  measured.step = Seconds(1);
  const FitCase c = make_fit_case(kernels, profile.chip, measured);
  EXPECT_LT(c.kernels.size(), kernels.size());  // identical kernels merged
  topology::Efficiency e =
      efficiency(profile.chip.efficiency, 0.6, 0.3, Microseconds(7), 40, Microseconds(30));
  e.memory_by_class[static_cast<size_t>(OpClass::kOptimizer)] = 0.7;
  e.memory_by_class[static_cast<size_t>(OpClass::kLoss)] = 0.2;
  e.memory_by_class[static_cast<size_t>(OpClass::kElementwise)] = 0.9;
  // Every efficiency 1, no overheads.
  const topology::Efficiency ideal =
      efficiency(profile.chip.efficiency, 1, 1, Duration::zero(), 0, Duration::zero());
  // The simulator rounds each kernel's roofline terms up to whole picoseconds (units.h), the
  // prediction does not: at most 2 ps per kernel apart.
  const double rounding = 2e-12 * static_cast<double>(kernels.size());
  for (const topology::Efficiency& q : {profile.chip.efficiency, e}) {
    const Prediction t = predict(c, q);
    topology::Chip chip = profile.chip;
    chip.efficiency = q;
    const Simulated s = simulate_kernels(kernels, chip);
    EXPECT_NEAR(t.step_s, s.step.seconds(), rounding);
    EXPECT_GT(std::fabs(t.step_s - predict(c, ideal).step_s), 1e-4);  // the parameters matter
    for (size_t k = 0; k < t.by_class.size(); ++k) {
      EXPECT_NEAR(t.by_class[k], s.by_class[k].seconds(), rounding) << k;
    }
  }
}

TEST(Fit, RecoversTheEfficiencyTheMeasurementsWereMadeWith) {
  const Profile base = load_profile(kProfile);
  const topology::Efficiency truth =
      efficiency(base.chip.efficiency, 0.5, 0.7, Microseconds(10), 48, Microseconds(25));
  const topology::Efficiency start =
      efficiency(base.chip.efficiency, 0.05, 0.2, Microseconds(1), 2, Microseconds(1));
  const std::vector<FitCase> cases = synthetic_cases(base, truth);
  const std::vector<const FitCase*> all = {&cases[0], &cases[1], &cases[2]};
  const topology::Efficiency got = fit(all, start);
  EXPECT_NEAR(got.matmul, 0.5, 0.5 * 0.01);
  EXPECT_NEAR(got.memory, 0.7, 0.7 * 0.01);
  EXPECT_NEAR(got.launch_overhead.microseconds(), 10, 10 * 0.01);
  ASSERT_TRUE(got.matmul_shape);
  EXPECT_NEAR(got.matmul_shape->k_half, 48, 48 * 0.01);
  EXPECT_NEAR(got.matmul_shape->call_overhead.microseconds(), 25, 25 * 0.01);
  EXPECT_EQ(got.matmul_shape->tile_m, truth.matmul_shape->tile_m);  // the hardware is kept
  EXPECT_LT(fit_loss(all, got), 1e-8);
  EXPECT_GT(fit_loss(all, start), 1);
  // Deterministic: the same inputs, the same fit to the last bit.
  const topology::Efficiency again = fit(all, start);
  EXPECT_EQ(again.matmul, got.matmul);
  EXPECT_EQ(again.memory, got.memory);
  EXPECT_EQ(again.launch_overhead, got.launch_overhead);
  EXPECT_EQ(again.matmul_shape->k_half, got.matmul_shape->k_half);
  EXPECT_EQ(again.memory_by_class, got.memory_by_class);
}

TEST(Fit, WithoutAMatmulShapeOnlyTheEfficienciesAndTheLaunchOverheadMove) {
  const Profile base = load_profile(kProfile);
  topology::Efficiency truth = base.chip.efficiency;
  truth.matmul_shape.reset();
  truth.matmul = 0.4;
  truth.memory = 0.3;
  truth.memory_by_class = {};
  truth.launch_overhead = Microseconds(4);
  Profile flat = base;
  flat.chip.efficiency = truth;
  const std::vector<FitCase> cases = synthetic_cases(flat, truth);
  const std::vector<const FitCase*> all = {&cases[0], &cases[1], &cases[2]};
  topology::Efficiency start = truth;
  start.matmul = 0.9;
  start.memory = 0.9;
  start.launch_overhead = Microseconds(20);
  const topology::Efficiency got = fit(all, start, /*by_class=*/false);
  EXPECT_FALSE(got.matmul_shape);
  EXPECT_NEAR(got.matmul, 0.4, 0.4 * 0.01);
  EXPECT_NEAR(got.memory, 0.3, 0.3 * 0.01);
  EXPECT_NEAR(got.launch_overhead.microseconds(), 4, 4 * 0.01);
  for (const auto& v : got.memory_by_class) {
    EXPECT_FALSE(v);
  }
}

TEST(Calibration, SourceNamesTheToolTheBaseTheCasesAndTheHeldOutErrors) {
  const Profile base = load_profile(kProfile);
  Calibration c;
  for (const auto& [name, held] : {std::pair{"a", 0.015}, std::pair{"b", -0.02}}) {
    CalibratedCase r;
    r.case_name = name;
    r.step_time_error_held_out = held;
    c.cases.push_back(r);
  }
  const std::string s = calibration_source(c, base, "meshsim calibrate (meshsim 9.9)");
  EXPECT_THAT(s, HasSubstr("fitted by meshsim calibrate (meshsim 9.9) from base profile " +
                           base.path + " to 2 measured run(s): a, b;"));
  EXPECT_THAT(s, HasSubstr("leave-one-out step errors: a +1.5%, b -2.0%"));
  c.cases.pop_back();
  c.cases.front().step_time_error_held_out.reset();
  EXPECT_THAT(calibration_source(c, base, "t"), ::testing::Not(HasSubstr("leave-one-out")));
}

}  // namespace
}  // namespace meshsim::validation::test
