// The first collective cost model: a ring alpha-beta model over the group's slowest link.
//
// For p ranks in ring order, per-link latency alpha and per-direction bandwidth B of the slowest
// link between ring neighbours (including the wrap-around pair), and a buffer of n bytes:
//   all-reduce       2(p-1) alpha + 2(p-1)/p * n / B      (reduce-scatter then all-gather)
//   reduce-scatter    (p-1) alpha +  (p-1)/p * n / B
//   all-gather        (p-1) alpha +  (p-1)/p * n / B
//   all-to-all        (p-1) alpha +  (p-1)/p * n / B      (p-1 pairwise exchange steps)
//   broadcast/reduce  (p-1) alpha +          n / B        (pipelined ring, many chunks)
//   send/recv               alpha +          n / B
// A group of one rank costs nothing. Results are memoized by (kind, bytes, group), so a training
// step asks each distinct question once. The topology-aware algorithms (trees, hierarchical,
// torus rings, NVLS) and the contention between concurrent groups are separate models.
#pragma once

#include <functional>
#include <map>
#include <tuple>
#include <vector>

#include "meshsim/sim/comm_model.h"

namespace meshsim::collectives {

struct LinkParams {
  BytesPerSec bandwidth;  // per direction
  Duration latency;       // per message (alpha)
};

// The link a message from `a` to `b` crosses (for a ring: its slowest hop).
using LinkFn = std::function<LinkParams(RankId a, RankId b)>;

class RingAlphaBetaModel {
 public:
  explicit RingAlphaBetaModel(LinkFn link);

  Duration collective_time(CollectiveKind kind, Bytes bytes, std::span<const RankId> group);
  Duration p2p_time(RankId src, RankId dst, Bytes bytes);
  // The model as the engine's CommModel: each communication takes its closed-form time, nothing
  // is shared. The model must outlive it.
  IsolatedCommModel comm_model();

  // The slowest link between ring neighbours of `group`.
  LinkParams ring_bottleneck(std::span<const RankId> group) const;
  size_t memo_size() const { return memo_.size(); }

 private:
  LinkFn link_;
  std::map<std::tuple<CollectiveKind, int64_t, std::vector<uint32_t>>, Duration> memo_;
};

// The closed form itself, for a ring of `ranks` over a link; used by the model and by tests.
Duration ring_collective_time(CollectiveKind kind, Bytes bytes, int64_t ranks, LinkParams link);

}  // namespace meshsim::collectives
