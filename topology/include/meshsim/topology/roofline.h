// Closed-form roofline and occupancy helpers.
//
// These are the textbook formulas the compute model is built on, kept separate so that the
// workbook cases (validation/workbook/workbook_cases.json) can check them exactly:
//  * ridge_point: the arithmetic intensity (FLOP per byte of HBM traffic) above which a kernel is
//    compute-bound: peak FLOP/s / HBM bytes/s. H100 with 990e12 and 3.35e12 gives 295.52.
//  * systolic_peak: a rows x cols systolic array does rows*cols multiply-accumulates per cycle, and
//    one MAC is 2 FLOP, so 2 * rows * cols * clock. 128 x 128 at 1.1 GHz gives 36.0448e12.
//  * blocks_per_sm / occupancy: how many thread blocks of one kernel fit on a GPU SM at once, the
//    minimum over the thread, shared-memory and block-slot limits, and the resulting fraction of
//    the SM's thread slots in use. Register pressure is not modelled here.
//
// Units: shared memory is in Bytes (the workbook's "48 KB per block, 228 KB per SM" are KiB:
// write KiB(48) and KiB(228)). The clock is in hertz. All functions are O(1) and pure.
#pragma once

#include <cstdint>

#include "meshsim/sim/units.h"

namespace meshsim::topology {

// FLOP per byte at which compute time equals memory time. Requires bandwidth > 0.
double ridge_point(FlopsPerSec peak, BytesPerSec bandwidth);

// Peak rate of one rows x cols systolic array (2 FLOP per MAC per cycle) at `clock_hz`.
// Requires rows, cols > 0 and clock_hz > 0.
FlopsPerSec systolic_peak(int64_t rows, int64_t cols, double clock_hz);

// What one thread block of a kernel asks of an SM.
struct KernelResources {
  int64_t threads_per_block;
  Bytes smem_per_block;  // dynamic + static shared memory of one block
};

// What one SM offers (per compute capability; see the chip catalogue's "gpu" block).
struct SmLimits {
  int64_t max_threads_per_sm;
  Bytes smem_per_sm;
  int64_t max_blocks_per_sm;
};

// Resident blocks per SM: min(max_threads / threads_per_block, smem_per_sm / smem_per_block,
// max_blocks), each rounded down. A block that uses no shared memory is not limited by it.
// Requires threads_per_block > 0; a block that does not fit at all gives 0.
int64_t blocks_per_sm(const KernelResources& kernel, const SmLimits& sm);

// Resident threads over max threads per SM, in [0, 1].
double occupancy(const KernelResources& kernel, const SmLimits& sm);

}  // namespace meshsim::topology
