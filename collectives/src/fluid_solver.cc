#include "fluid_solver.h"

#include <algorithm>
#include <functional>
#include <limits>
#include <queue>
#include <utility>

#include "meshsim/sim/error.h"

namespace meshsim::collectives::detail {
namespace {

// A resource (a link, or an entity's cap) and its users, s.t. users[first, first + count) of the
// solve's flat list are its (entity, normalised weight) pairs in entity order.
struct Resource {
  double left = 0;    // capacity not yet used by frozen entities
  double weight = 0;  // sum of the weights of unfrozen entities on it
  int64_t unfrozen = 0;
  uint32_t first = 0;
  uint32_t count = 0;
};

using Level = std::pair<double, uint32_t>;
using LevelHeap = std::priority_queue<Level, std::vector<Level>, std::greater<>>;

}  // namespace

// Flat lists throughout (an entity's resources, a resource's users): a wide problem's thousands
// of entities and links cost a few allocations, not two per entity and per link.
std::vector<double> max_min_rates(std::span<const FluidEntity> entities,
                                  std::span<const double> capacities) {
  constexpr double kInf = std::numeric_limits<double>::infinity();
  const size_t n = entities.size();
  std::vector<double> rate(n, kInf);
  std::vector<bool> frozen(n, true);
  // Resources: the problem's links that someone crosses (compacted), then one per cap.
  std::vector<int32_t> local(capacities.size(), -1);
  std::vector<Resource> res;
  std::vector<double> norm(n, 1.0);  // W_i: the entity's largest weight
  // Entity e's resources and normalised weights: [entity_first[e], entity_first[e + 1]).
  std::vector<uint32_t> entity_first(n + 1, 0);
  std::vector<uint32_t> entity_res;
  std::vector<double> entity_w;
  for (uint32_t e = 0; e < n; ++e) {
    const FluidEntity& x = entities[e];
    SIM_CHECK(x.links.size() == x.weights.size(), "entity {}: {} links, {} weights", e,
              x.links.size(), x.weights.size());
    double w_max = x.cap > 0 ? 1.0 : 0.0;
    for (const double w : x.weights) {
      w_max = std::max(w_max, w);
    }
    norm[e] = w_max > 0 ? w_max : 1.0;
    auto use = [&](uint32_t r, double w) {
      Resource& rs = res[r];
      rs.weight += w;
      ++rs.unfrozen;
      ++rs.count;
      entity_res.push_back(r);
      entity_w.push_back(w);
      frozen[e] = false;
    };
    for (size_t i = 0; i < x.links.size(); ++i) {
      int32_t& l = local[x.links[i]];
      if (l < 0) {
        l = static_cast<int32_t>(res.size());
        res.push_back(Resource{capacities[x.links[i]], 0, 0, 0, 0});
      }
      use(static_cast<uint32_t>(l), x.weights[i] / norm[e]);
    }
    if (x.cap > 0) {
      res.push_back(Resource{x.cap, 0, 0, 0, 0});
      use(static_cast<uint32_t>(res.size() - 1), 1.0 / norm[e]);
    }
    entity_first[e + 1] = static_cast<uint32_t>(entity_res.size());
  }
  // Each resource's users, in entity order.
  uint32_t next = 0;
  for (Resource& r : res) {
    r.first = next;
    next += r.count;
    r.count = 0;
  }
  std::vector<std::pair<uint32_t, double>> users(next);
  for (uint32_t e = 0; e < n; ++e) {
    for (uint32_t i = entity_first[e]; i < entity_first[e + 1]; ++i) {
      Resource& r = res[entity_res[i]];
      users[r.first + r.count++] = {e, entity_w[i]};
    }
  }
  LevelHeap heap;
  for (uint32_t r = 0; r < res.size(); ++r) {
    heap.emplace(res[r].left / res[r].weight, r);
  }
  while (!heap.empty()) {
    const auto [level, r] = heap.top();
    heap.pop();
    Resource& rs = res[r];
    if (rs.unfrozen == 0) {
      continue;
    }
    const double now = std::max(rs.left, 0.0) / rs.weight;
    if (now > level * (1.0 + 1e-12)) {
      heap.emplace(now, r);  // stale: freezes elsewhere raised this level
      continue;
    }
    SIM_CHECK(now > 0.0, "resource {} full with {} entities unserved", r, rs.unfrozen);
    for (uint32_t u = rs.first; u < rs.first + rs.count; ++u) {
      const uint32_t e = users[u].first;
      if (frozen[e]) {
        continue;
      }
      frozen[e] = true;
      rate[e] = now / norm[e];
      for (uint32_t i = entity_first[e]; i < entity_first[e + 1]; ++i) {
        Resource& other = res[entity_res[i]];
        const double we = entity_w[i];
        other.left -= we * now;
        other.weight -= we;
        if (--other.unfrozen == 0) {
          other.weight = 0;
        }
      }
    }
  }
  return rate;
}

}  // namespace meshsim::collectives::detail
