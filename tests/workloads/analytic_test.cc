// Closed forms beyond the workbook's own cases (those run in tests/workbook).
#include "meshsim/workloads/analytic.h"

#include <gtest/gtest.h>

#include <string>

#include "meshsim/sim/error.h"
#include "thrown.h"

namespace meshsim::workloads {
namespace {

TEST(Analytic, MfuBelowPeakIsTheRatio) {
  EXPECT_DOUBLE_EQ(model_flops_utilization(1000.0, Flops::of(1e12), TFlopsPerSec(2000)), 0.5);
  EXPECT_DOUBLE_EQ(model_flops_utilization(1000.0, Flops::of(1e12), TFlopsPerSec(1000)), 1.0);
}

TEST(Analytic, MfuAbovePeakIsInfeasible) {
  const std::string what = meshsim::testing::what_thrown<InfeasibleError>(
      [] { model_flops_utilization(3000.0, Flops::of(1e12), TFlopsPerSec(1000)); },
      "MFU of 3 accepted");
  EXPECT_NE(what.find("peak"), std::string::npos) << what;
  EXPECT_NE(what.find("3.000"), std::string::npos) << what;
}

TEST(Analytic, BubbleBoundIsStrict) {
  // 3 / (57 + 3) is exactly 5%, which is not below 5%.
  EXPECT_DOUBLE_EQ(pipeline_bubble_fraction(4, 57), 0.05);
  EXPECT_EQ(min_microbatches_for_bubble_below(4, 0.05), 58);
  EXPECT_EQ(min_microbatches_for_bubble_below(1, 0.05), 1);  // no pipeline, no bubble
  EXPECT_EQ(min_microbatches_for_bubble_below(2, 0.5), 2);   // 1/2 is not below 1/2; 1/3 is
  for (int64_t pp = 2; pp <= 16; ++pp) {
    const int64_t m = min_microbatches_for_bubble_below(pp, 0.1);
    EXPECT_LT(pipeline_bubble_fraction(pp, m), 0.1);
    EXPECT_GE(pipeline_bubble_fraction(pp, m - 1), 0.1);
  }
}

TEST(Analytic, DecodeBatchScalesWithWeightWidth) {
  const double ridge = TFlopsPerSec(990) / TBps(3.35);
  EXPECT_DOUBLE_EQ(decode_compute_bound_batch(TFlopsPerSec(990), TBps(3.35)), ridge);
  // fp8 weights halve the bytes per token, so the batch that saturates compute halves too.
  EXPECT_DOUBLE_EQ(decode_compute_bound_batch(TFlopsPerSec(990), TBps(3.35), 1), ridge / 2);
}

TEST(Analytic, TrainingTimeAndDaysAgree) {
  const Flops total = Flops::of(6.0 * 8e9 * 1e12);
  const Duration t = training_time(total, 256, TFlopsPerSec(990), 0.4);
  EXPECT_NEAR(t.seconds() / 86400.0, training_days(total, 256, TFlopsPerSec(990), 0.4), 1e-9);
}

TEST(Analytic, HiddenCommunication) {
  EXPECT_DOUBLE_EQ(hidden_comm_fraction(Milliseconds(0.4), Milliseconds(0.1)), 0.25);
  EXPECT_DOUBLE_EQ(hidden_comm_fraction(Milliseconds(0.35), Milliseconds(0.42)), 1.0);
  EXPECT_DOUBLE_EQ(hidden_comm_fraction(Duration::zero(), Milliseconds(1)), 1.0);
}

TEST(Analytic, SimplifiedActivationsAreInputPlusScores) {
  EXPECT_EQ(activation_bytes_per_layer_simplified(4, 4096, 8192, 64, 2).count(),
            268'435'456 + 8'589'934'592);
}

}  // namespace
}  // namespace meshsim::workloads
