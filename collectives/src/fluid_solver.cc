#include "fluid_solver.h"

#include <algorithm>
#include <functional>
#include <limits>
#include <queue>
#include <utility>

#include "meshsim/sim/error.h"

namespace meshsim::collectives::detail {
namespace {

struct Resource {
  double left = 0;       // capacity not yet used by frozen entities
  double weight = 0;     // sum of the weights of unfrozen entities on it
  int64_t unfrozen = 0;
  std::vector<std::pair<uint32_t, double>> users;  // (entity, weight)
};

using Level = std::pair<double, uint32_t>;
using LevelHeap = std::priority_queue<Level, std::vector<Level>, std::greater<>>;

}  // namespace

std::vector<double> max_min_rates(std::span<const FluidEntity> entities,
                                  std::span<const double> capacities) {
  constexpr double kInf = std::numeric_limits<double>::infinity();
  std::vector<double> rate(entities.size(), kInf);
  std::vector<bool> frozen(entities.size(), true);
  // Resources: the problem's links that someone crosses (compacted), then one per cap.
  std::vector<int32_t> local(capacities.size(), -1);
  std::vector<Resource> res;
  std::vector<std::vector<uint32_t>> of_entity(entities.size());
  std::vector<double> norm(entities.size(), 1.0);  // W_i: the entity's largest weight
  for (uint32_t e = 0; e < entities.size(); ++e) {
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
      rs.users.emplace_back(e, w);
      of_entity[e].push_back(r);
      frozen[e] = false;
    };
    for (size_t i = 0; i < x.links.size(); ++i) {
      int32_t& l = local[x.links[i]];
      if (l < 0) {
        l = static_cast<int32_t>(res.size());
        res.push_back(Resource{capacities[x.links[i]], 0, 0, {}});
      }
      use(static_cast<uint32_t>(l), x.weights[i] / norm[e]);
    }
    if (x.cap > 0) {
      res.push_back(Resource{x.cap, 0, 0, {}});
      use(static_cast<uint32_t>(res.size() - 1), 1.0 / norm[e]);
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
    for (const auto& [e, w] : rs.users) {
      if (frozen[e]) {
        continue;
      }
      frozen[e] = true;
      rate[e] = now / norm[e];
      for (size_t i = 0; i < of_entity[e].size(); ++i) {
        Resource& other = res[of_entity[e][i]];
        const double we =
            (i < entities[e].weights.size() ? entities[e].weights[i] : 1.0) / norm[e];
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
