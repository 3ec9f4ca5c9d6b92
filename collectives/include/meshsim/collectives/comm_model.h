// The topology-aware communication cost model the engine uses (implements sim's CommCostModel).
//
// A collective over a group of ranks is placed on devices and planned as a coupled transfer
// (collective_planner.h: what NCCL or XLA would run, its latency, rate cap and link loads); its
// time is what the network model (shared_network.h) gives it alone. Groups declared as one
// *concurrent family* (every DP group of a step, every TP group) are assumed to run their
// collectives at the same moment, as SPMD training does: a query for one member is answered by
// timing the whole family as one transfer, so they contend for shared links (an oversubscribed
// spine, a shared NIC). Answers are memoized by (operation, bytes, group or family), so a
// training step asks each distinct question once.
#pragma once

#include <map>
#include <memory>
#include <tuple>
#include <vector>

#include "meshsim/collectives/collective_planner.h"
#include "meshsim/collectives/shared_network.h"
#include "meshsim/sim/cost_model.h"
#include "meshsim/topology/network.h"

namespace meshsim::collectives {

enum class NetworkBackend : uint8_t { kAnalytical, kSimGrid };

std::unique_ptr<SharedNetwork> make_network(NetworkBackend backend,
                                            const CollectivePlanner& planner);

class TopologyCommModel : public CommCostModel {
 public:
  TopologyCommModel(const topology::Network& net, topology::Placement placement,
                    NetworkBackend backend, CollectiveOptions options = {});

  // Declares groups that run the same collectives concurrently. A group may be in one family.
  void add_concurrent_family(const std::vector<std::vector<RankId>>& groups);

  Duration collective_time(CollectiveKind kind, Bytes bytes,
                           std::span<const RankId> group) override;
  Duration p2p_time(RankId src, RankId dst, Bytes bytes) override;

  // The shape of the last collective_time answer (what ran: algorithm, protocol, channels).
  const CommShape& last_shape() const { return last_shape_; }
  int64_t queries() const { return queries_; }
  int64_t evaluations() const { return evaluations_; }
  const CollectivePlanner& planner() const { return planner_; }

 private:
  const topology::Network& net_;
  topology::Placement placement_;
  CollectivePlanner planner_;
  std::unique_ptr<SharedNetwork> network_;
  std::vector<std::vector<std::vector<RankId>>> families_;
  std::map<std::vector<uint32_t>, size_t> family_of_group_;
  std::map<std::tuple<CollectiveKind, int64_t, int64_t, std::vector<uint32_t>>,
           std::pair<Duration, CommShape>>
      memo_;
  std::map<std::tuple<uint32_t, uint32_t, int64_t>, Duration> p2p_memo_;
  CommShape last_shape_;
  int64_t queries_ = 0;
  int64_t evaluations_ = 0;

  std::vector<DeviceId> devices_of(std::span<const RankId> group) const;
};

}  // namespace meshsim::collectives
