#include "meshsim/collectives/ring_model.h"

#include "meshsim/collectives/volume.h"
#include "meshsim/sim/error.h"

namespace meshsim::collectives {

Duration ring_collective_time(CollectiveKind kind, Bytes bytes, int64_t ranks, LinkParams link) {
  SIM_CHECK(ranks >= 1, "collective over {} ranks", ranks);
  SIM_CHECK(link.bandwidth.value() > 0.0, "collective over a link of zero bandwidth");
  if (ranks == 1) {
    return Duration::zero();
  }
  const int64_t steps = ranks - 1;
  switch (kind) {
    case CollectiveKind::kAllReduce:
      return link.latency * (2 * steps) + ring_allreduce_bytes_per_rank(bytes, ranks) / link.bandwidth;
    case CollectiveKind::kReduceScatter:
      return link.latency * steps + reduce_scatter_bytes_per_rank(bytes, ranks) / link.bandwidth;
    case CollectiveKind::kAllGather:
      return link.latency * steps + allgather_bytes_per_rank(bytes, ranks) / link.bandwidth;
    case CollectiveKind::kAllToAll:
      return link.latency * steps + alltoall_bytes_per_rank(bytes, ranks) / link.bandwidth;
    case CollectiveKind::kBroadcast:
    case CollectiveKind::kReduce:
      return link.latency * steps + bytes / link.bandwidth;
  }
  SIM_CHECK(false, "unknown collective kind {}", static_cast<int>(kind));
}

RingAlphaBetaModel::RingAlphaBetaModel(LinkFn link) : link_(std::move(link)) {}

LinkParams RingAlphaBetaModel::ring_bottleneck(std::span<const RankId> group) const {
  SIM_CHECK(group.size() >= 2, "a ring needs two ranks, got {}", group.size());
  LinkParams worst = link_(group[0], group[1]);
  for (size_t i = 0; i < group.size(); ++i) {
    const LinkParams l = link_(group[i], group[(i + 1) % group.size()]);
    if (l.bandwidth < worst.bandwidth) {
      worst.bandwidth = l.bandwidth;
    }
    if (l.latency > worst.latency) {
      worst.latency = l.latency;
    }
  }
  return worst;
}

Duration RingAlphaBetaModel::collective_time(CollectiveKind kind, Bytes bytes,
                                             std::span<const RankId> group) {
  if (group.size() <= 1) {
    return Duration::zero();
  }
  std::vector<uint32_t> ids;
  ids.reserve(group.size());
  for (const RankId r : group) {
    ids.push_back(r.value());
  }
  auto key = std::make_tuple(kind, bytes.count(), std::move(ids));
  if (const auto it = memo_.find(key); it != memo_.end()) {
    return it->second;
  }
  const Duration d =
      ring_collective_time(kind, bytes, static_cast<int64_t>(group.size()), ring_bottleneck(group));
  memo_.emplace(std::move(key), d);
  return d;
}

Duration RingAlphaBetaModel::p2p_time(RankId src, RankId dst, Bytes bytes) {
  if (src == dst) {
    return Duration::zero();
  }
  const LinkParams l = link_(src, dst);
  return l.latency + bytes / l.bandwidth;
}

IsolatedCommModel RingAlphaBetaModel::comm_model() {
  return IsolatedCommModel(
      [this](CollectiveKind kind, Bytes bytes, std::span<const RankId> group) {
        return collective_time(kind, bytes, group);
      },
      [this](RankId src, RankId dst, Bytes bytes) { return p2p_time(src, dst, bytes); });
}

}  // namespace meshsim::collectives
