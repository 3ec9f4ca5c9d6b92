// Where the time went on one rank over a step (sim/analysis.h computes it from a Timeline; the
// engine computes the same figures online, RankResult::breakdown).
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
#pragma once

#include <array>
#include <vector>

#include "meshsim/sim/ids.h"
#include "meshsim/sim/program.h"
#include "meshsim/sim/units.h"

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
  bool operator==(const RankBreakdown&) const = default;
};

}  // namespace meshsim
