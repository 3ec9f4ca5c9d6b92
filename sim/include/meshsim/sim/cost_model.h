// The narrow seams through which the engine asks how long an op takes (STYLE A.5). The engine
// knows neither chips nor networks: the composition root (cli/) plugs in a hardware compute model
// (topology/) and a collective model (collectives/).
#pragma once

#include <span>

#include "meshsim/sim/ids.h"
#include "meshsim/sim/program.h"
#include "meshsim/sim/units.h"

namespace meshsim {

// What the engine knows about a rank when one of its compute ops starts.
struct ComputeContext {
  // Collectives of the rank in flight on its communication streams (launched, or waiting for
  // their peers: an NCCL kernel holds its SMs from launch to completion).
  int32_t collectives_in_flight = 0;
};

class ComputeCostModel {
 public:
  virtual ~ComputeCostModel() = default;
  // Time of one compute op on the device that runs `rank`.
  virtual Duration compute_time(RankId rank, const ComputeWork& work) const = 0;
  // The same op started while `context` holds (models of interference override it; by default
  // communication does not slow compute).
  virtual Duration compute_time_in(RankId rank, const ComputeWork& work,
                                   const ComputeContext& context) const {
    (void)context;
    return compute_time(rank, work);
  }
};

class CommCostModel {
 public:
  virtual ~CommCostModel() = default;
  // Time of a collective over `group` (ranks in group order), from the moment every member has
  // reached it. Non-const so that implementations can memoize.
  virtual Duration collective_time(CollectiveKind kind, Bytes bytes,
                                   std::span<const RankId> group) = 0;
  // Time to move `bytes` from `src` to `dst`, from the moment both sides have reached the op.
  virtual Duration p2p_time(RankId src, RankId dst, Bytes bytes) = 0;
};

}  // namespace meshsim
