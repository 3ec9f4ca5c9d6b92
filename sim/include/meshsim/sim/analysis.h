// Where the time went, per rank, computed from a Timeline after the run (the definitions are in
// breakdown.h). The engine computes the same figures online (RankResult::breakdown) without
// recording anything; this offline analysis is for recorded or imported timelines, and checks the
// online one. Cost: O(n log n) in the number of op records.
#pragma once

#include <array>
#include <vector>

#include "meshsim/sim/breakdown.h"
#include "meshsim/sim/program.h"
#include "meshsim/sim/simulation.h"
#include "meshsim/sim/timeline.h"

namespace meshsim {

// One breakdown per rank, for a step that ends at `step_end`.
std::vector<RankBreakdown> analyze(const Timeline& timeline, const Simulation& sim,
                                   SimTime step_end);

// Length of the union of half-open spans [start, end).
Duration union_length(std::vector<std::pair<SimTime, SimTime>> spans);
// Length of the union of `a` minus the union of `b`.
Duration difference_length(std::vector<std::pair<SimTime, SimTime>> a,
                           std::vector<std::pair<SimTime, SimTime>> b);

}  // namespace meshsim
