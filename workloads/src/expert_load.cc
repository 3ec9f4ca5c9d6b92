// Tokens per expert: balanced, or a seeded draw; conventions in expert_load.h.
#include "meshsim/workloads/expert_load.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "meshsim/sim/error.h"
#include "meshsim/sim/rng.h"

namespace meshsim::workloads {
namespace {

// Binomial(n, p): exact (n Bernoulli draws) for n <= 64, else the normal approximation with
// continuity correction, clamped to [0, n]. Our own, so that any standard library gives the same
// draws (docs/style.md B.10).
int64_t binomial(Rng& rng, int64_t n, double p) {
  if (n <= 0 || p <= 0.0) {
    return 0;
  }
  if (p >= 1.0) {
    return n;
  }
  if (n <= 64) {
    int64_t k = 0;
    for (int64_t i = 0; i < n; ++i) {
      k += rng.uniform() < p ? 1 : 0;
    }
    return k;
  }
  const double mean = static_cast<double>(n) * p;
  const double sd = std::sqrt(mean * (1.0 - p));
  const auto k = static_cast<int64_t>(std::floor(rng.normal(mean, sd) + 0.5));
  return std::clamp<int64_t>(k, 0, n);
}

// Routing choices per expert: lognormal popularity, then a multinomial of `n` choices as
// conditional binomials (expert e gets Binomial(remaining, p_e / remaining mass)).
std::vector<int64_t> draw_counts(const ParallelPlan& plan, int64_t experts, int64_t n,
                                 int64_t layer) {
  const auto seed = static_cast<uint64_t>(plan.moe_seed);
  Rng popularity(seed, fmt::format("moe_popularity.L{}", layer));
  std::vector<double> p(static_cast<size_t>(experts));
  double sum = 0.0;
  for (double& x : p) {
    x = std::exp(*plan.moe_load_skew * popularity.normal(0.0, 1.0));
    sum += x;
  }
  Rng routing(seed, fmt::format("moe_routing.L{}", layer));
  std::vector<int64_t> counts;
  int64_t remaining = n;
  double mass = sum;
  for (size_t e = 0; e < p.size(); ++e) {
    const int64_t c = e + 1 == p.size() ? remaining : binomial(routing, remaining, p[e] / mass);
    counts.push_back(c);
    remaining -= c;
    mass -= p[e];
  }
  return counts;
}

}  // namespace

ExpertLoad expert_load(const ModelConfig& m, const ParallelPlan& plan, int64_t layer) {
  SIM_CHECK(m.is_moe_layer(layer), "layer {} of {} is not an MoE layer", layer, m.name);
  const int64_t e = m.moe->num_experts;
  const int64_t k = m.moe->experts_per_token;
  const int64_t tokens = plan.moe_tokens();  // per rank per microbatch
  const int64_t local = e / plan.ep;
  ExpertLoad out;
  if (!plan.moe_load_skew) {
    out.rows_per_expert = static_cast<int64_t>(std::ceil(
        static_cast<double>(tokens * k * plan.ep) / static_cast<double>(e) * plan.capacity_factor));
    return out;
  }
  const int64_t choices = tokens * k * plan.ep;
  const std::vector<int64_t> counts = draw_counts(plan, e, choices, layer);
  const int64_t capacity =
      plan.ep * static_cast<int64_t>(std::ceil(static_cast<double>(tokens * k) *
                                               plan.capacity_factor / static_cast<double>(e)));
  const double mean_expert = static_cast<double>(choices) / static_cast<double>(e);
  int64_t dropped = 0;
  int64_t busiest = 0;
  for (int64_t r = 0; r < plan.ep; ++r) {
    int64_t load = 0;
    for (int64_t x = r * local; x < (r + 1) * local; ++x) {
      const int64_t c = counts[static_cast<size_t>(x)];
      const int64_t kept = plan.moe_drop_tokens ? std::min(c, capacity) : c;
      dropped += c - kept;
      load += kept;
    }
    busiest = std::max(busiest, load);
  }
  out.max_expert_over_mean =
      static_cast<double>(*std::max_element(counts.begin(), counts.end())) / mean_expert;
  out.busiest_over_mean = static_cast<double>(busiest) / (mean_expert * static_cast<double>(local));
  out.dropped_fraction = static_cast<double>(dropped) / static_cast<double>(choices);
  out.rows_per_expert = plan.moe_drop_tokens ? capacity : (busiest + local - 1) / local;
  return out;
}

}  // namespace meshsim::workloads
