// The engine's CommModel (sim/comm_model.h) on a network graph: every collective and send/recv
// is a coupled transfer on a shared network that re-shares its links whenever one starts or ends.
//
// A collective over a group of ranks is placed on devices and planned (collective_planner.h: what
// NCCL or XLA would run, its latency, rate cap and link loads); the plan is memoized per
// (operation, bytes, group), so a training step plans each distinct question once. Its transfer
// then runs on the SharedNetwork beside everything else in flight.
// Symmetry (representative mode): a simulated group may stand for *images*, groups that are not
// simulated but run the same collectives at the same moments (the other TP groups of a stage,
// say); each of its collectives then also loads the images' links, as one transfer, so that they
// contend where they would. Likewise a simulated rank may stand for image ranks: its send to a
// peer also runs from its i-th image to the peer's i-th image. In full mode nothing has images,
// and the same sharing comes from the transfers themselves.
// Utilisation: the rates the network assigns (the fluid model reports them) are summed per link
// kind and reported as a fraction of that kind's capacity, for the trace's counters.
#pragma once

#include <array>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "meshsim/collectives/collective_planner.h"
#include "meshsim/collectives/shared_network.h"
#include "meshsim/sim/comm_model.h"
#include "meshsim/topology/network.h"

namespace meshsim::collectives {

enum class NetworkBackend : uint8_t { kAnalytical, kSimGrid };
constexpr auto enum_names(NetworkBackend) {
  return std::to_array<EnumName<NetworkBackend>>(
      {{NetworkBackend::kAnalytical, "analytical"}, {NetworkBackend::kSimGrid, "simgrid"}});
}

std::unique_ptr<SharedNetwork> make_network(NetworkBackend backend,
                                            const CollectivePlanner& planner);

// Utilisation of one kind of link from `from` on: the bytes per second the model assigned on the
// links of that kind, over their total capacity (both directions counted).
struct LinkUtilisation {
  SimTime from;
  topology::LinkKind kind = topology::LinkKind::kNvlink;
  double fraction = 0;
};

// Utilisation of one watched set of links (NetworkCommModel::watch_links) from `from` on.
struct WatchedUtilisation {
  SimTime from;
  size_t set = 0;  // index into the sets given to watch_links
  double fraction = 0;
};

class NetworkCommModel final : public CommModel {
 public:
  NetworkCommModel(const topology::Network& net, topology::Placement placement,
                   NetworkBackend backend, CollectiveOptions options = {});

  // `group` (global ranks) stands for `images` (each the same size), which run its collectives.
  void add_images(std::vector<RankId> group, std::vector<std::vector<RankId>> images);
  // `rank` stands for `images`: its sends also run between the corresponding images.
  void add_rank_images(RankId rank, std::vector<RankId> images);
  // Subscribes to utilisation changes per link kind (analytical backend only).
  void on_utilisation(std::function<void(const LinkUtilisation&)> callback);
  // Subscribes to the utilisation of each set of links (a degraded NIC's two directions, say):
  // what the model assigned on them over their capacity. Before anything is planned; once.
  void watch_links(std::vector<std::vector<LinkId>> sets,
                   std::function<void(const WatchedUtilisation&)> callback);

  TransferId start_collective(SimTime now, CollectiveKind kind, Bytes bytes,
                              std::span<const RankId> group) override;
  TransferId start_p2p(SimTime now, RankId src, RankId dst, Bytes bytes) override;
  CommAdvance advance(SimTime limit) override;
  size_t in_flight() const override { return network_->active(); }
  CommPlan plan_collective(CollectiveKind kind, Bytes bytes,
                           std::span<const RankId> group) override;
  CommPlan plan_p2p(RankId src, RankId dst, Bytes bytes) override;
  TransferId start_planned(SimTime now, CommPlan plan) override;

  // The time a collective over `group` (with its images) takes alone on the network: what the
  // engine gives it when nothing overlaps. Runs it on the model's network, which must be idle
  // (SIM_CHECK); for tests and tools, not during a simulation.
  Duration collective_time(CollectiveKind kind, Bytes bytes, std::span<const RankId> group);
  Duration p2p_time(RankId src, RankId dst, Bytes bytes);

  // The shape of the last collective started or timed (what ran: algorithm, protocol, channels).
  const CommShape& last_shape() const { return last_shape_ ? *last_shape_ : no_shape_; }
  // Distinct collectives and sends planned (memo misses), and communications started.
  int64_t planned() const { return planned_; }
  int64_t started() const { return started_; }
  const CollectivePlanner& planner() const { return planner_; }
  std::string_view backend_name() const { return network_->name(); }

 private:
  struct Planned {
    ShapeId id;
    CommShape shape;
    std::optional<uint32_t> plan;  // its CommPlan id, once planned
  };
  const topology::Network& net_;
  topology::Placement placement_;
  CollectivePlanner planner_;
  std::unique_ptr<SharedNetwork> network_;
  std::map<std::vector<uint32_t>, std::vector<std::vector<RankId>>> images_;
  std::map<uint32_t, std::vector<RankId>> rank_images_;
  // Memo keys. Every start looks its plan up, so a collective's is found from the group it is given
  // (a CollectiveQuery: hashed and compared in place) without building a key; looked up only,
  // never iterated (docs/style.md C.9).
  struct CollectiveKey {
    CollectiveKind kind = CollectiveKind::kAllReduce;
    int64_t bytes = 0;
    std::vector<uint32_t> ranks;
  };
  struct CollectiveQuery {
    CollectiveKind kind = CollectiveKind::kAllReduce;
    int64_t bytes = 0;
    std::span<const RankId> ranks;
  };
  struct CollectiveHash {
    using is_transparent = void;
    size_t operator()(const CollectiveKey& k) const;
    size_t operator()(const CollectiveQuery& q) const;
  };
  struct CollectiveEqual {
    using is_transparent = void;
    bool operator()(const CollectiveKey& a, const CollectiveKey& b) const;
    bool operator()(const CollectiveQuery& a, const CollectiveKey& b) const;
    bool operator()(const CollectiveKey& a, const CollectiveQuery& b) const {
      return (*this)(b, a);
    }
  };
  struct P2pKey {
    uint32_t src = 0;
    uint32_t dst = 0;
    int64_t bytes = 0;
    bool operator==(const P2pKey&) const = default;
  };
  struct P2pHash {
    size_t operator()(const P2pKey& k) const;
  };
  std::unordered_map<CollectiveKey, Planned, CollectiveHash, CollectiveEqual> memo_;
  std::unordered_map<P2pKey, Planned, P2pHash> p2p_memo_;
  std::vector<const Planned*> plans_;  // by CommPlan id: into memo_ or p2p_memo_
  // Into memo_ or p2p_memo_ (their nodes do not move): a start must not copy a shape's loads.
  const CommShape* last_shape_ = nullptr;
  CommShape no_shape_;  // last_shape() before anything started
  int64_t planned_ = 0;
  int64_t started_ = 0;
  std::vector<std::function<void(const LinkUtilisation&)>> utilisation_subscribers_;
  using KindWeights = std::array<double, topology::kNumLinkKinds>;
  std::vector<KindWeights> kind_weights_;  // per shape id: its weights summed per link kind
  std::vector<double> kind_capacity_;      // per link kind, bytes/s
  std::vector<double> kind_used_;          // per link kind, bytes/s assigned now
  std::vector<double> transfer_rate_;      // per transfer id, bytes/s of progress now
  // Watched link sets: per set its capacity and use; per shape id its weight on each set.
  std::vector<std::vector<LinkId>> watched_;
  std::vector<double> watched_capacity_;
  std::vector<double> watched_used_;
  std::vector<std::vector<std::pair<size_t, double>>> watched_weights_;
  std::function<void(const WatchedUtilisation&)> watched_subscriber_;

  DeviceId device_of(RankId r) const;
  Planned& find_collective(CollectiveKind kind, Bytes bytes, std::span<const RankId> group);
  Planned& find_p2p(RankId src, RankId dst, Bytes bytes);
  CommPlan plan_of(Planned& p);
  TransferId start(SimTime now, const Planned& p);
  Planned add_shape(CommShape shape);
  void transfer_rate(const TransferRate& r);
};

}  // namespace meshsim::collectives
