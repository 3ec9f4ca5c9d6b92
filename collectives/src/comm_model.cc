// TopologyCommModel: the engine's CommCostModel on a network graph.
//
// Memo keys: (kind, bytes, family id, {}) for a group of a concurrent family, since the whole
// family is timed together and every member gets the same answer (one evaluation per family and
// question); (kind, bytes, -1, group ranks) for a group on its own. p2p answers by (source device,
// destination device, bytes).
// A forced algorithm (not kAuto) that has no schedule for a collective kind at all (NVLS for a
// broadcast, say) leaves that kind to the automatic choice, as NCCL_ALGO only affects the
// operations that have the algorithm; one that has a schedule but does not apply to the group
// throws CommError(CommField::kAlgorithm, ...).
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

TopologyCommModel::TopologyCommModel(const topology::Network& net, topology::Placement placement,
                                     std::unique_ptr<NetworkBackend> backend, Algorithm algorithm)
    : net_(net),
      placement_(std::move(placement)),
      backend_(std::move(backend)),
      algorithm_(algorithm) {
  SIM_CHECK(backend_ != nullptr, "TopologyCommModel without a backend");
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

std::pair<Duration, Algorithm> TopologyCommModel::evaluate(
    CollectiveKind kind, Bytes bytes, const std::vector<std::vector<DeviceId>>& groups) {
  ++evaluations_;
  Algorithm a = algorithm_;
  if (a != Algorithm::kAuto && !supports_kind(a, kind)) {
    a = Algorithm::kAuto;
  }
  if (a == Algorithm::kAuto) {
    const AlgorithmChoice c = choose_and_time(kind, bytes, groups, net_, *backend_);
    return {c.time, c.algorithm};
  }
  return {schedule_time(plan_concurrent(kind, bytes, groups, a, net_), *backend_), a};
}

Duration TopologyCommModel::collective_time(CollectiveKind kind, Bytes bytes,
                                            std::span<const RankId> group) {
  ++queries_;
  if (group.size() <= 1 || bytes.count() == 0) {
    last_algorithm_ = algorithm_ == Algorithm::kAuto ? Algorithm::kRing : algorithm_;
    return Duration::zero();
  }
  std::vector<uint32_t> ids = rank_ids(group);
  const auto fam = family_of_group_.find(ids);
  const int64_t family = fam == family_of_group_.end() ? -1 : static_cast<int64_t>(fam->second);
  auto key = std::make_tuple(kind, bytes.count(), family,
                             family >= 0 ? std::vector<uint32_t>{} : std::move(ids));
  if (const auto it = memo_.find(key); it != memo_.end()) {
    last_algorithm_ = it->second.second;
    return it->second.first;
  }
  std::vector<std::vector<DeviceId>> groups;
  if (family >= 0) {
    for (const auto& g : families_[static_cast<size_t>(family)]) {
      groups.push_back(devices_of(g));
    }
  } else {
    groups.push_back(devices_of(group));
  }
  const auto answer = evaluate(kind, bytes, groups);
  memo_.emplace(std::move(key), answer);
  last_algorithm_ = answer.second;
  return answer.first;
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
  Schedule s;
  Step step;
  step.flows.push_back(Flow{net_.device_vertex(ends[0]), net_.device_vertex(ends[1]), bytes});
  step.label = "send/recv";
  s.steps.push_back(std::move(step));
  const Duration t = schedule_time(s, *backend_);
  p2p_memo_.emplace(key, t);
  return t;
}

}  // namespace meshsim::collectives
