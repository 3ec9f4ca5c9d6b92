// TopologyCommModel: the engine's CommCostModel on a network graph.
//
// Memo keys: (kind, bytes, family id, {}) for a group of a concurrent family, since the whole
// family is timed together and every member gets the same answer (one evaluation per family and
// question); (kind, bytes, -1, group ranks) for a group on its own. p2p answers by (source device,
// destination device, bytes).
#include "meshsim/collectives/comm_model.h"

#include <utility>

#include "meshsim/sim/error.h"

namespace meshsim::collectives {
namespace {

std::vector<uint32_t> rank_ids(std::span<const RankId> group) {
  std::vector<uint32_t> ids;
  ids.reserve(group.size());
  for (const RankId r : group) {
    ids.push_back(r.value());
  }
  return ids;
}

}  // namespace

std::unique_ptr<SharedNetwork> make_network(NetworkBackend backend,
                                            const CollectivePlanner& planner) {
  return backend == NetworkBackend::kSimGrid ? make_simgrid_network(planner.capacities())
                                             : make_fluid_network(planner.capacities());
}

TopologyCommModel::TopologyCommModel(const topology::Network& net, topology::Placement placement,
                                     NetworkBackend backend, CollectiveOptions options)
    : net_(net),
      placement_(std::move(placement)),
      planner_(net, options),
      network_(make_network(backend, planner_)) {
  placement_.validate(net_.spec(), "placement");
}

void TopologyCommModel::add_concurrent_family(const std::vector<std::vector<RankId>>& groups) {
  SIM_CHECK(!groups.empty(), "an empty concurrent family");
  const size_t id = families_.size();
  for (const auto& g : groups) {
    SIM_CHECK(g.size() == groups.front().size(),
              "concurrent family {} mixes groups of {} and {} ranks", id, groups.front().size(),
              g.size());
    const auto [it, added] = family_of_group_.emplace(rank_ids(g), id);
    SIM_CHECK(added, "a group of {} ranks starting at rank {} is already in family {}", g.size(),
              g.empty() ? 0u : g.front().value(), it->second);
  }
  families_.push_back(groups);
}

std::vector<DeviceId> TopologyCommModel::devices_of(std::span<const RankId> group) const {
  std::vector<DeviceId> out;
  out.reserve(group.size());
  for (const RankId r : group) {
    SIM_CHECK(r.index() < placement_.device_of_rank.size(), "rank {} has no device ({} placed)",
              r.value(), placement_.device_of_rank.size());
    out.push_back(placement_.device_of_rank[r.index()]);
  }
  return out;
}

Duration TopologyCommModel::collective_time(CollectiveKind kind, Bytes bytes,
                                            std::span<const RankId> group) {
  ++queries_;
  if (group.size() <= 1 || bytes.count() == 0) {
    return Duration::zero();
  }
  std::vector<uint32_t> ids = rank_ids(group);
  const auto fam = family_of_group_.find(ids);
  const int64_t family = fam == family_of_group_.end() ? -1 : static_cast<int64_t>(fam->second);
  auto key = std::make_tuple(kind, bytes.count(), family,
                             family >= 0 ? std::vector<uint32_t>{} : std::move(ids));
  if (const auto it = memo_.find(key); it != memo_.end()) {
    last_shape_ = it->second.second;
    return it->second.first;
  }
  ++evaluations_;
  std::vector<std::vector<DeviceId>> groups;
  // The queried group first: it decides the algorithm; its family runs beside it.
  groups.push_back(devices_of(group));
  if (family >= 0) {
    for (const auto& g : families_[static_cast<size_t>(family)]) {
      if (!std::equal(g.begin(), g.end(), group.begin(), group.end())) {
        groups.push_back(devices_of(g));
      }
    }
  }
  CommShape shape = planner_.collective(kind, bytes, groups);
  const Duration t = run_alone(*network_, shape);
  memo_.emplace(std::move(key), std::make_pair(t, shape));
  last_shape_ = std::move(shape);
  return t;
}

Duration TopologyCommModel::p2p_time(RankId src, RankId dst, Bytes bytes) {
  ++queries_;
  const std::vector<DeviceId> ends = devices_of(std::vector<RankId>{src, dst});
  if (ends[0] == ends[1] || bytes.count() == 0) {
    return Duration::zero();
  }
  auto key = std::make_tuple(ends[0].value(), ends[1].value(), bytes.count());
  if (const auto it = p2p_memo_.find(key); it != p2p_memo_.end()) {
    return it->second;
  }
  ++evaluations_;
  const std::pair<DeviceId, DeviceId> pair{ends[0], ends[1]};
  const Duration t = run_alone(*network_, planner_.send_recv({&pair, 1}, bytes));
  p2p_memo_.emplace(key, t);
  return t;
}

}  // namespace meshsim::collectives
