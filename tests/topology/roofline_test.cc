#include "meshsim/topology/roofline.h"

#include <gtest/gtest.h>

#include "meshsim/sim/error.h"

namespace meshsim::topology {
namespace {

TEST(Roofline, RidgePointH100) {
  // Workbook 0.2: 990 TFLOP/s over 3.35 TB/s.
  EXPECT_NEAR(ridge_point(FlopsPerSec::of(990e12), BytesPerSec::of(3.35e12)), 295.5223880597015,
              1e-9);
}

TEST(Roofline, RidgePointTpuV5e) {
  // Workbook 1.2: 197 TFLOP/s over 819 GB/s.
  EXPECT_NEAR(ridge_point(TFlopsPerSec(197), GBps(819)), 240.53724053724054, 1e-9);
}

TEST(Roofline, RidgePointRejectsZeroBandwidth) {
  EXPECT_THROW(ridge_point(TFlopsPerSec(1), BytesPerSec::of(0.0)), InternalError);
}

TEST(Roofline, SystolicPeak128At1p1GHz) {
  // Workbook 1.1: 128 x 128 MACs x 2 FLOP x 1.1e9.
  EXPECT_DOUBLE_EQ(systolic_peak(128, 128, 1.1e9).value(), 36.0448e12);
}

TEST(Roofline, SystolicPeakTpuV5eChip) {
  // Four 128x128 MXUs at 1.5 GHz give the published 197 TFLOP/s (to 0.2%).
  EXPECT_NEAR(systolic_peak(128, 128, 1.5e9).value() * 4, 197e12, 0.002 * 197e12);
}

TEST(Roofline, OccupancyWorkbookCase) {
  // Workbook 8.3: 128 threads and 48 KiB of shared memory per block on an SM with 228 KiB and
  // 2048 threads: shared memory allows floor(228/48) = 4 blocks, threads would allow 16.
  const KernelResources kernel{128, KiB(48)};
  const SmLimits h100{2048, KiB(228), 32};
  EXPECT_EQ(blocks_per_sm(kernel, h100), 4);
  EXPECT_DOUBLE_EQ(occupancy(kernel, h100), 0.25);
}

TEST(Roofline, OccupancyLimitedByThreadsAndBlockSlots) {
  const SmLimits sm{2048, KiB(228), 32};
  EXPECT_EQ(blocks_per_sm({1024, Bytes::zero()}, sm), 2);  // thread limit
  EXPECT_DOUBLE_EQ(occupancy({1024, Bytes::zero()}, sm), 1.0);
  EXPECT_EQ(blocks_per_sm({32, Bytes::zero()}, sm), 32);  // block-slot limit
  EXPECT_DOUBLE_EQ(occupancy({32, Bytes::zero()}, sm), 0.5);
  EXPECT_EQ(blocks_per_sm({128, KiB(229)}, sm), 0);  // does not fit at all
  EXPECT_DOUBLE_EQ(occupancy({128, KiB(229)}, sm), 0.0);
}

TEST(Roofline, BlocksPerSmRejectsEmptyBlocks) {
  EXPECT_THROW(blocks_per_sm({0, KiB(1)}, {2048, KiB(228), 32}), InternalError);
}

}  // namespace
}  // namespace meshsim::topology
