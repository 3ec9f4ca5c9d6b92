// Per-rank compute heterogeneity (issue 16): slow ranks and kernel-time jitter, as engine inputs.
//
// A straggler is a rank whose kernels all run slower than the cost model says: thermal or power
// throttling of one GPU, a host with a slow CPU or a noisy neighbour. It is given explicitly
// (rank and factor) or drawn from a seeded distribution: each rank independently with
// probability `fraction`, slowed by a factor uniform in [min_factor, max_factor]. Jitter makes
// every kernel of every rank vary around the cost model's time (lognormal, mean 1, coefficient of
// variation `jitter_cv`; Simulation::set_kernel_jitter). Seeds make both reproducible: the draws
// depend only on (seed, rank, op), never on the order the engine asks for them.
#pragma once

#include <cstdint>
#include <vector>

#include "meshsim/sim/ids.h"

namespace meshsim {

struct SlowRank {
  RankId rank;          // global rank
  double factor = 1.0;  // kernel-time multiplier, >= 1 for a slow rank
};

struct StragglerDistribution {
  double fraction = 0;  // probability that a rank is a straggler, in [0, 1]
  double min_factor = 1.0;
  double max_factor = 1.0;
};

struct Heterogeneity {
  uint64_t seed = 0;
  std::vector<SlowRank> slow_ranks;  // applied after (and multiplied into) the drawn stragglers
  StragglerDistribution stragglers;
  double jitter_cv = 0;

  // True when every rank computes at the cost model's speed without jitter (representative mode
  // stays exact).
  bool is_uniform() const;
  // The kernel-time factor of every global rank in [0, world): 1 for nominal ranks. Throws
  // InternalError for a rank outside the world or a factor that is not > 0.
  std::vector<double> slowdowns(size_t world) const;
};

}  // namespace meshsim
