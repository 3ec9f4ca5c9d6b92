// NetworkCommModel: the engine's CommModel on a network graph (comm_model.h).
//
// Memo keys: (kind, bytes, group ranks) for collectives, (source rank, destination rank, bytes)
// for sends; a group's images are fixed once declared, so they are part of what the key
// stands for. Planning a shape costs routing every flow of its pattern (and of its images); a
// start costs a hash lookup (of the group it is given, in place) and the network's own start.
#include "meshsim/collectives/comm_model.h"

#include <algorithm>
#include <cstring>
#include <type_traits>
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

NetworkCommModel::NetworkCommModel(const topology::Network& net, topology::Placement placement,
                                   NetworkBackend backend, CollectiveOptions options)
    : net_(net),
      placement_(std::move(placement)),
      planner_(net, options),
      network_(make_network(backend, planner_)) {
  placement_.validate(net_.spec(), "placement");
}

void NetworkCommModel::add_images(std::vector<RankId> group,
                                  std::vector<std::vector<RankId>> images) {
  for (const auto& g : images) {
    SIM_CHECK(g.size() == group.size(), "an image of {} ranks for a group of {}", g.size(),
              group.size());
  }
  const auto [it, added] = images_.emplace(rank_ids(group), std::move(images));
  SIM_CHECK(added, "the images of a group of {} ranks from rank {} are declared twice",
            group.size(), group.empty() ? 0u : group.front().value());
}

void NetworkCommModel::add_rank_images(RankId rank, std::vector<RankId> images) {
  const auto [it, added] = rank_images_.emplace(rank.value(), std::move(images));
  SIM_CHECK(added, "the images of rank {} are declared twice", rank.value());
}

void NetworkCommModel::on_utilisation(std::function<void(const LinkUtilisation&)> callback) {
  if (utilisation_subscribers_.empty() && !watched_subscriber_) {
    network_->on_rate([this](const TransferRate& r) { transfer_rate(r); });
  }
  if (utilisation_subscribers_.empty()) {
    kind_capacity_.assign(topology::kNumLinkKinds, 0.0);
    kind_used_.assign(topology::kNumLinkKinds, 0.0);
    for (size_t l = 0; l < net_.num_links(); ++l) {
      kind_capacity_[static_cast<size_t>(net_.link(LinkId(static_cast<uint32_t>(l))).kind)] +=
          planner_.capacities()[l];
    }
  }
  utilisation_subscribers_.push_back(std::move(callback));
}

void NetworkCommModel::watch_links(std::vector<std::vector<LinkId>> sets,
                                   std::function<void(const WatchedUtilisation&)> callback) {
  SIM_CHECK(planned_ == 0 && !watched_subscriber_, "links watched after planning, or twice");
  watched_ = std::move(sets);
  watched_capacity_.assign(watched_.size(), 0.0);
  watched_used_.assign(watched_.size(), 0.0);
  for (size_t s = 0; s < watched_.size(); ++s) {
    for (const LinkId l : watched_[s]) {
      watched_capacity_[s] += planner_.capacities()[l.index()];
    }
  }
  watched_subscriber_ = std::move(callback);
  if (utilisation_subscribers_.empty()) {
    network_->on_rate([this](const TransferRate& r) { transfer_rate(r); });
  }
}

// A transfer at rate r uses weight x r of each link of its shape: per link kind, the shape's
// weights on that kind (summed once per shape) x r; likewise per watched set of links.
void NetworkCommModel::transfer_rate(const TransferRate& r) {
  if (r.transfer.index() >= transfer_rate_.size()) {
    transfer_rate_.resize(r.transfer.index() + 1, 0.0);
  }
  double& previous = transfer_rate_[r.transfer.index()];
  const double delta = r.bytes_per_s - previous;
  previous = r.bytes_per_s;
  if (watched_subscriber_ && delta != 0) {
    for (const auto& [set, weight] : watched_weights_[r.shape.index()]) {
      watched_used_[set] += weight * delta;
      watched_subscriber_(WatchedUtilisation{
          r.from, set,
          watched_capacity_[set] > 0 ? std::max(0.0, watched_used_[set]) / watched_capacity_[set]
                                     : 0.0});
    }
  }
  if (utilisation_subscribers_.empty()) {
    return;
  }
  const KindWeights& w = kind_weights_[r.shape.index()];
  for (size_t kind = 0; kind < w.size(); ++kind) {
    if (w[kind] == 0 || delta == 0) {
      continue;
    }
    kind_used_[kind] += w[kind] * delta;
    const LinkUtilisation u{
        r.from, static_cast<topology::LinkKind>(kind),
        kind_capacity_[kind] > 0 ? std::max(0.0, kind_used_[kind]) / kind_capacity_[kind] : 0.0};
    for (const auto& cb : utilisation_subscribers_) {
      cb(u);
    }
  }
}

NetworkCommModel::Planned NetworkCommModel::add_shape(CommShape shape) {
  ++planned_;
  const ShapeId id = network_->add_shape(shape);
  if (id.index() >= kind_weights_.size()) {
    kind_weights_.resize(id.index() + 1, KindWeights{});
    KindWeights& w = kind_weights_[id.index()];
    for (const LinkLoad& l : shape.loads) {
      w[static_cast<size_t>(net_.link(l.link).kind)] += l.weight;
    }
    watched_weights_.resize(id.index() + 1);
    for (size_t s = 0; s < watched_.size(); ++s) {
      double on_set = 0;
      for (const LinkLoad& l : shape.loads) {
        if (std::find(watched_[s].begin(), watched_[s].end(), l.link) != watched_[s].end()) {
          on_set += l.weight;
        }
      }
      if (on_set > 0) {
        watched_weights_[id.index()].emplace_back(s, on_set);
      }
    }
  }
  return Planned{id, std::move(shape), std::nullopt};
}

DeviceId NetworkCommModel::device_of(RankId r) const {
  SIM_CHECK(r.index() < placement_.device_of_rank.size(), "rank {} has no device ({} placed)",
            r.value(), placement_.device_of_rank.size());
  return placement_.device_of_rank[r.index()];
}

namespace {

// FNV-1a over 64-bit words: the memo's hash of a collective's kind, size and ranks.
struct Fnv {
  uint64_t h = 1469598103934665603ULL;
  void add(uint64_t x) { h = (h ^ x) * 1099511628211ULL; }
};

}  // namespace

// The hash reads the kind, the size, the group's size and at most four of its ranks (the first, the
// last and two between): every start of a collective looks its plan up, and hashing all 64 ranks of
// a DP group was most of that lookup's cost. Groups that share those samples differ elsewhere and
// are told apart by the comparison, which reads every rank.
namespace {

// The memo's hash of a collective: its kind, size, group size and four of its ranks.
template <typename Ranks, typename Value>
size_t sampled_hash(CollectiveKind kind, int64_t bytes, const Ranks& ranks, Value value) {
  Fnv f;
  f.add(static_cast<uint64_t>(kind));
  f.add(static_cast<uint64_t>(bytes));
  const size_t n = ranks.size();
  f.add(n);
  if (n > 0) {
    for (const size_t i : {size_t{0}, n / 3, 2 * n / 3, n - 1}) {
      f.add(value(ranks[i]));
    }
  }
  return static_cast<size_t>(f.h);
}

}  // namespace

size_t NetworkCommModel::CollectiveHash::operator()(const CollectiveKey& k) const {
  return sampled_hash(k.kind, k.bytes, k.ranks, [](uint32_t r) { return r; });
}

size_t NetworkCommModel::CollectiveHash::operator()(const CollectiveQuery& q) const {
  return sampled_hash(q.kind, q.bytes, q.ranks, [](RankId r) { return r.value(); });
}

bool NetworkCommModel::CollectiveEqual::operator()(const CollectiveKey& a,
                                                   const CollectiveKey& b) const {
  return a.kind == b.kind && a.bytes == b.bytes && a.ranks == b.ranks;
}

bool NetworkCommModel::CollectiveEqual::operator()(const CollectiveQuery& a,
                                                   const CollectiveKey& b) const {
  // A RankId is its uint32_t and nothing else, so the two arrays compare bytewise.
  static_assert(sizeof(RankId) == sizeof(uint32_t) &&
                std::has_unique_object_representations_v<RankId>);
  return a.kind == b.kind && a.bytes == b.bytes && a.ranks.size() == b.ranks.size() &&
         std::memcmp(a.ranks.data(), b.ranks.data(), b.ranks.size() * sizeof(uint32_t)) == 0;
}

size_t NetworkCommModel::P2pHash::operator()(const P2pKey& k) const {
  Fnv f;
  f.add(k.src);
  f.add(k.dst);
  f.add(static_cast<uint64_t>(k.bytes));
  return static_cast<size_t>(f.h);
}

NetworkCommModel::Planned& NetworkCommModel::find_collective(
    CollectiveKind kind, Bytes bytes, std::span<const RankId> group) {
  if (const auto it = memo_.find(CollectiveQuery{kind, bytes.count(), group}); it != memo_.end()) {
    return it->second;
  }
  std::vector<uint32_t> ids = rank_ids(group);
  auto devices = [this](std::span<const RankId> g) {
    std::vector<DeviceId> out;
    out.reserve(g.size());
    for (const RankId r : g) {
      out.push_back(device_of(r));
    }
    return out;
  };
  std::vector<std::vector<DeviceId>> groups = {devices(group)};
  if (const auto it = images_.find(ids); it != images_.end()) {
    for (const auto& image : it->second) {
      groups.push_back(devices(image));
    }
  }
  Planned planned = add_shape(planner_.collective(kind, bytes, groups));
  return memo_.emplace(CollectiveKey{kind, bytes.count(), std::move(ids)}, std::move(planned))
      .first->second;
}

NetworkCommModel::Planned& NetworkCommModel::find_p2p(RankId src, RankId dst, Bytes bytes) {
  const P2pKey key{src.value(), dst.value(), bytes.count()};
  if (const auto it = p2p_memo_.find(key); it != p2p_memo_.end()) {
    return it->second;
  }
  std::vector<std::pair<DeviceId, DeviceId>> pairs = {{device_of(src), device_of(dst)}};
  const auto si = rank_images_.find(src.value());
  const auto di = rank_images_.find(dst.value());
  if (si != rank_images_.end() && di != rank_images_.end()) {
    SIM_CHECK(si->second.size() == di->second.size(),
              "ranks {} and {} stand for {} and {} images", src.value(), dst.value(),
              si->second.size(), di->second.size());
    for (size_t i = 0; i < si->second.size(); ++i) {
      pairs.emplace_back(device_of(si->second[i]), device_of(di->second[i]));
    }
  }
  return p2p_memo_.emplace(key, add_shape(planner_.send_recv(pairs, bytes))).first->second;
}

TransferId NetworkCommModel::start(SimTime now, const Planned& p) {
  ++started_;
  last_shape_ = &p.shape;
  return network_->start(now, p.id, p.shape.bytes, p.shape.latency, p.shape.floor);
}

TransferId NetworkCommModel::start_collective(SimTime now, CollectiveKind kind, Bytes bytes,
                                              std::span<const RankId> group) {
  return start(now, find_collective(kind, bytes, group));
}

TransferId NetworkCommModel::start_p2p(SimTime now, RankId src, RankId dst, Bytes bytes) {
  return start(now, find_p2p(src, dst, bytes));
}

// A memo entry gets its plan id the first time it is planned, and keeps it.
CommPlan NetworkCommModel::plan_of(Planned& p) {
  if (!p.plan) {
    p.plan = static_cast<uint32_t>(plans_.size());
    plans_.push_back(&p);
  }
  return CommPlan{*p.plan};
}

CommPlan NetworkCommModel::plan_collective(CollectiveKind kind, Bytes bytes,
                                           std::span<const RankId> group) {
  return plan_of(find_collective(kind, bytes, group));
}

CommPlan NetworkCommModel::plan_p2p(RankId src, RankId dst, Bytes bytes) {
  return plan_of(find_p2p(src, dst, bytes));
}

TransferId NetworkCommModel::start_planned(SimTime now, CommPlan plan) {
  SIM_CHECK(plan.id < plans_.size(), "unknown communication plan {}", plan.id);
  return start(now, *plans_[plan.id]);
}

CommAdvance NetworkCommModel::advance(SimTime limit) {
  NetworkAdvance a = network_->advance(limit);
  return CommAdvance{a.time, std::move(a.finished)};
}

Duration NetworkCommModel::collective_time(CollectiveKind kind, Bytes bytes,
                                           std::span<const RankId> group) {
  const Planned& p = find_collective(kind, bytes, group);
  last_shape_ = &p.shape;
  return run_alone(*network_, p.shape);
}

Duration NetworkCommModel::p2p_time(RankId src, RankId dst, Bytes bytes) {
  return run_alone(*network_, find_p2p(src, dst, bytes).shape);
}

}  // namespace meshsim::collectives
