#include "meshsim/collectives/volume.h"

#include <cmath>

#include "meshsim/sim/error.h"

namespace meshsim::collectives {
namespace {
// (num/den) * n, exact in integers when den divides num * n.
Bytes scaled(Bytes n, int64_t num, int64_t den) {
  SIM_CHECK(den > 0 && num >= 0, "bad scale {}/{}", num, den);
  // n * num / den without overflow: split n into quotient and remainder by den.
  const int64_t q = n.count() / den;
  const int64_t r = n.count() % den;
  if ((r * num) % den == 0) {
    return Bytes::of(q * num + (r * num) / den);
  }
  return Bytes::of(q * num + std::llround(static_cast<double>(r * num) / static_cast<double>(den)));
}
}  // namespace

Bytes ring_allreduce_bytes_per_rank(Bytes buffer, int64_t ranks) {
  SIM_CHECK(ranks >= 1, "all-reduce over {} ranks", ranks);
  return scaled(buffer, 2 * (ranks - 1), ranks);
}

Bytes reduce_scatter_bytes_per_rank(Bytes buffer, int64_t ranks) {
  SIM_CHECK(ranks >= 1, "reduce-scatter over {} ranks", ranks);
  return scaled(buffer, ranks - 1, ranks);
}

Bytes allgather_bytes_per_rank(Bytes buffer, int64_t ranks) {
  SIM_CHECK(ranks >= 1, "all-gather over {} ranks", ranks);
  return scaled(buffer, ranks - 1, ranks);
}

Bytes alltoall_bytes_per_rank(Bytes buffer, int64_t ranks) {
  SIM_CHECK(ranks >= 1, "all-to-all over {} ranks", ranks);
  return scaled(buffer, ranks - 1, ranks);
}

double bus_bandwidth_factor(CollectiveKind kind, int64_t ranks) {
  const double p = static_cast<double>(ranks);
  switch (kind) {
    case CollectiveKind::kAllReduce:
      return 2.0 * (p - 1.0) / p;
    case CollectiveKind::kReduceScatter:
    case CollectiveKind::kAllGather:
    case CollectiveKind::kAllToAll:
      return (p - 1.0) / p;
    case CollectiveKind::kBroadcast:
    case CollectiveKind::kReduce:
      return 1.0;
  }
  return 1.0;
}

}  // namespace meshsim::collectives
