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

class AnalyticalBackend : public NetworkBackend {
 public:
  explicit AnalyticalBackend(const topology::Network& net);
  std::string_view name() const override { return "analytical"; }
  std::vector<Duration> step_times(std::span<const Step> steps) override;

 private:
  const topology::Network& net_;
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
  Algorithm last_algorithm_ = Algorithm::kRing;
  int64_t queries_ = 0;
  int64_t evaluations_ = 0;
};

}  // namespace meshsim::collectives
