// The topology-aware communication cost model the engine uses (implements sim's CommCostModel).
//
// A collective over a group of ranks is placed on devices, expanded by its algorithm (or the
// automatic choice) into a schedule of flows, and timed by a network backend. Groups declared as
// one *concurrent family* (every DP group of a step, every TP group) are assumed to run their
// collectives at the same moment, as SPMD training does: a query for one member is answered by
// timing the whole family's flows together, so they contend for shared links (an oversubscribed
// spine, a shared NIC). Answers are memoized by (operation, bytes, group or family), so a
// training step asks each distinct question once.
#pragma once

#include <map>
#include <memory>
#include <tuple>
#include <vector>

#include "meshsim/collectives/algorithms.h"
#include "meshsim/sim/cost_model.h"
#include "meshsim/topology/network.h"

namespace meshsim::collectives {

// Max-min fair sharing by progressive filling (see analytical_backend.cc): per step, every flow
// is routed (route_step in schedule.h: deterministic D-mod-K ECMP), link capacities (derated by a
// BandwidthEfficiency) are shared max-min fairly among the flows crossing them, and each flow
// takes path latency + bytes / rate. Rates stay fixed for the whole step (no re-sharing when a
// flow ends): exact when the flows sharing a link end together, as in the schedules of
// algorithms.h, and an upper bound otherwise. O(sum of path lengths * log links) per step.
class AnalyticalBackend : public NetworkBackend {
 public:
  // Uses BandwidthEfficiency::defaults_for(net.spec()).
  explicit AnalyticalBackend(const topology::Network& net);
  AnalyticalBackend(const topology::Network& net, BandwidthEfficiency efficiency);
  std::string_view name() const override { return "analytical"; }
  std::vector<Duration> step_times(std::span<const Step> steps) override;
  const BandwidthEfficiency& efficiency() const { return efficiency_; }

 private:
  Duration step_time(const Step& step);

  const topology::Network& net_;
  BandwidthEfficiency efficiency_;
  std::vector<int32_t> local_link_;  // scratch: network link -> index among a step's links, or -1
};

// SimGrid's flow-level (max-min) model on the same graph and routes. Defined in
// simgrid_backend.cc; SimGrid stays private to collectives/.
std::unique_ptr<NetworkBackend> make_simgrid_backend(const topology::Network& net);

class TopologyCommModel : public CommCostModel {
 public:
  TopologyCommModel(const topology::Network& net, topology::Placement placement,
                    std::unique_ptr<NetworkBackend> backend, Algorithm algorithm = Algorithm::kAuto);

  // Declares groups that run the same collectives concurrently. A group may be in one family.
  void add_concurrent_family(const std::vector<std::vector<RankId>>& groups);

  Duration collective_time(CollectiveKind kind, Bytes bytes,
                           std::span<const RankId> group) override;
  Duration p2p_time(RankId src, RankId dst, Bytes bytes) override;

  // The algorithm used for the last collective_time answer (auto resolves to a concrete one).
  Algorithm last_algorithm() const { return last_algorithm_; }
  int64_t queries() const { return queries_; }
  int64_t evaluations() const { return evaluations_; }

 private:
  const topology::Network& net_;
  topology::Placement placement_;
  std::unique_ptr<NetworkBackend> backend_;
  Algorithm algorithm_;
  std::vector<std::vector<std::vector<RankId>>> families_;
  std::map<std::vector<uint32_t>, size_t> family_of_group_;
  std::map<std::tuple<CollectiveKind, int64_t, int64_t, std::vector<uint32_t>>,
           std::pair<Duration, Algorithm>>
      memo_;
  // p2p answers by (source device, destination device, bytes).
  std::map<std::tuple<uint32_t, uint32_t, int64_t>, Duration> p2p_memo_;

  std::vector<DeviceId> devices_of(std::span<const RankId> group) const;
  std::pair<Duration, Algorithm> evaluate(CollectiveKind kind, Bytes bytes,
                                          const std::vector<std::vector<DeviceId>>& groups);
  Algorithm last_algorithm_ = Algorithm::kRing;
  int64_t queries_ = 0;
  int64_t evaluations_ = 0;
};

}  // namespace meshsim::collectives
