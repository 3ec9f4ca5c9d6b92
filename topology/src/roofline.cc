#include "meshsim/topology/roofline.h"

#include <algorithm>

#include "meshsim/sim/error.h"

namespace meshsim::topology {

double ridge_point(FlopsPerSec peak, BytesPerSec bandwidth) {
  SIM_CHECK(bandwidth.value() > 0.0, "ridge_point: bandwidth must be positive, got {} B/s",
            bandwidth.value());
  return peak / bandwidth;
}

FlopsPerSec systolic_peak(int64_t rows, int64_t cols, double clock_hz) {
  SIM_CHECK(rows > 0 && cols > 0 && clock_hz > 0.0,
            "systolic_peak: rows {}, cols {} and clock {} Hz must be positive", rows, cols,
            clock_hz);
  const double macs_per_cycle = static_cast<double>(rows) * static_cast<double>(cols);
  return FlopsPerSec::of(2.0 * macs_per_cycle * clock_hz);
}

int64_t blocks_per_sm(const KernelResources& kernel, const SmLimits& sm) {
  SIM_CHECK(kernel.threads_per_block > 0,
            "blocks_per_sm: threads_per_block must be positive, got {}", kernel.threads_per_block);
  SIM_CHECK(kernel.smem_per_block.count() >= 0, "blocks_per_sm: negative shared memory {} B",
            kernel.smem_per_block.count());
  int64_t blocks = std::min(sm.max_threads_per_sm / kernel.threads_per_block, sm.max_blocks_per_sm);
  if (kernel.smem_per_block.count() > 0) {
    blocks = std::min(blocks, sm.smem_per_sm.count() / kernel.smem_per_block.count());
  }
  return std::max<int64_t>(blocks, 0);
}

double occupancy(const KernelResources& kernel, const SmLimits& sm) {
  SIM_CHECK(sm.max_threads_per_sm > 0, "occupancy: max_threads_per_sm must be positive, got {}",
            sm.max_threads_per_sm);
  const int64_t resident_threads = blocks_per_sm(kernel, sm) * kernel.threads_per_block;
  return static_cast<double>(resident_threads) / static_cast<double>(sm.max_threads_per_sm);
}

}  // namespace meshsim::topology
