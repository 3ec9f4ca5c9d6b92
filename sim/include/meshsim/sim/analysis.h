// Where the time went, per rank, computed from a Timeline.
//
//   compute      length of the union of compute-op spans
//   comm         length of the union of communication-op spans (collectives, sends, receives),
//                from their start (all parties present) to their end
//   exposed_comm length of (communication union) minus (compute union): communication that no
//                compute hides
//   idle         step - length of (compute union ∪ communication union): bubbles, waits for peers
//   exposed_in(c)  the same difference for the communication ops labelled with category c
//                (OpLabels::category; uncategorised ops count only in exposed_comm). Categories
//                may overlap each other, so they can add up to more than exposed_comm.
// All spans are clipped to nothing: the timeline already starts at t = 0. Cost: O(n log n) in the
// number of op records.
#pragma once

#include <array>
#include <vector>

#include "meshsim/sim/program.h"
#include "meshsim/sim/simulation.h"
#include "meshsim/sim/timeline.h"

namespace meshsim {

struct RankBreakdown {
  Duration compute;
  Duration comm;
  Duration exposed_comm;
  Duration idle;
  std::array<Duration, kNumOpClasses> by_class{};  // summed op durations (not a union)
  Flops flops;                                      // sum of compute-op FLOPs executed
  std::vector<Duration> exposed_by_category;  // indexed by OpCategory; absent ones are zero

  Duration exposed_in(OpCategory category) const {
    return category.index() < exposed_by_category.size() ? exposed_by_category[category.index()]
                                                         : Duration::zero();
  }
};

// One breakdown per rank, for a step that ends at `step_end`.
std::vector<RankBreakdown> analyze(const Timeline& timeline, const Simulation& sim,
                                   SimTime step_end);

// Length of the union of half-open spans [start, end).
Duration union_length(std::vector<std::pair<SimTime, SimTime>> spans);
// Length of the union of `a` minus the union of `b`.
Duration difference_length(std::vector<std::pair<SimTime, SimTime>> a,
                           std::vector<std::pair<SimTime, SimTime>> b);

}  // namespace meshsim
