#include "meshsim/sim/heterogeneity.h"

#include <cmath>

#include "meshsim/sim/error.h"
#include "meshsim/sim/rng.h"

namespace meshsim {

bool Heterogeneity::is_uniform() const {
  const bool drawn_differ =
      stragglers.fraction > 0 && (stragglers.min_factor != 1.0 || stragglers.max_factor != 1.0);
  if (jitter_cv > 0 || drawn_differ) {
    return false;
  }
  for (const SlowRank& s : slow_ranks) {
    if (s.factor != 1.0) {
      return false;
    }
  }
  return true;
}

std::vector<double> Heterogeneity::slowdowns(size_t world) const {
  std::vector<double> out(world, 1.0);
  const StragglerDistribution& d = stragglers;
  SIM_CHECK(d.fraction >= 0 && d.fraction <= 1, "straggler fraction {} is not in [0, 1]",
            d.fraction);
  SIM_CHECK(d.min_factor > 0 && d.min_factor <= d.max_factor,
            "straggler factors [{}, {}] are not 0 < min <= max", d.min_factor, d.max_factor);
  if (d.fraction > 0) {
    // One independent draw per rank (stateless: the same rank gets the same draw at any world
    // size), so that growing the cluster does not reshuffle who is slow.
    for (size_t r = 0; r < world; ++r) {
      const uint64_t h = hash_draw(seed, 0x5374726167ULL /* "Strag" */, r);
      const double u = static_cast<double>(h >> 11) * 0x1.0p-53;
      if (u < d.fraction) {
        const uint64_t h2 = hash_draw(seed, 0x466163746fULL /* "Facto" */, r);
        const double v = static_cast<double>(h2 >> 11) * 0x1.0p-53;
        out[r] = d.min_factor + (d.max_factor - d.min_factor) * v;
      }
    }
  }
  for (const SlowRank& s : slow_ranks) {
    SIM_CHECK(s.rank.index() < world, "slow rank {} is outside the {} ranks", s.rank.value(),
              world);
    SIM_CHECK(std::isfinite(s.factor) && s.factor > 0, "rank {}: slowdown {} is not > 0",
              s.rank.value(), s.factor);
    out[s.rank.index()] *= s.factor;
  }
  return out;
}

}  // namespace meshsim
