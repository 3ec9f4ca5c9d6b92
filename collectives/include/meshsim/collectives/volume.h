// Bytes each rank sends in the bandwidth-optimal algorithms, the quantities the scaling book and
// nccl-tests reason with. For a buffer of n bytes over p ranks:
//   all-reduce (ring):     2 (p-1)/p * n   (a reduce-scatter then an all-gather)
//   reduce-scatter:          (p-1)/p * n   (n is the full, unsharded buffer)
//   all-gather:              (p-1)/p * n   (n is the full, gathered buffer)
//   all-to-all:              (p-1)/p * n   (n is what one rank holds before the exchange)
// Results are exact whenever p divides n (the usual case); otherwise rounded to the nearest byte.
#pragma once

#include <cstdint>

#include "meshsim/sim/program.h"
#include "meshsim/sim/units.h"

namespace meshsim::collectives {

Bytes ring_allreduce_bytes_per_rank(Bytes buffer, int64_t ranks);
Bytes reduce_scatter_bytes_per_rank(Bytes buffer, int64_t ranks);
Bytes allgather_bytes_per_rank(Bytes buffer, int64_t ranks);
Bytes alltoall_bytes_per_rank(Bytes buffer, int64_t ranks);

// nccl-tests' bus bandwidth factor: busbw = algbw * factor (all-reduce 2(p-1)/p; reduce-scatter,
// all-gather and all-to-all (p-1)/p; broadcast and reduce 1).
double bus_bandwidth_factor(CollectiveKind kind, int64_t ranks);

}  // namespace meshsim::collectives
