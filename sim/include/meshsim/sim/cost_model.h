// The narrow seam through which the engine asks how long a compute op takes (docs/style.md A.5).
// The engine knows neither chips nor networks: the composition root (cli/) plugs in a hardware
// compute model (topology/); communication goes through comm_model.h.
#pragma once

#include <span>

#include "meshsim/sim/ids.h"
#include "meshsim/sim/program.h"
#include "meshsim/sim/units.h"

namespace meshsim {

// What the engine knows about a rank when one of its compute ops starts.
struct ComputeContext {
  // Collectives of the rank in flight on its communication streams that hold SMs (launched, or
  // waiting for their peers: an NCCL kernel holds its SMs from launch to completion;
  // CollectiveWork::holds_sms).
  int32_t collectives_in_flight = 0;
};

class ComputeCostModel {
 public:
  virtual ~ComputeCostModel() = default;
  // Time of one compute op on a nominal device. The engine asks once per op of each program (for
  // the first rank running it) and applies per-rank differences itself (Simulation::
  // set_compute_slowdown, set_kernel_jitter), so the answer must not depend on `rank`.
  virtual Duration compute_time(RankId rank, const ComputeWork& work) const = 0;
  // The same op started while `context` holds (models of interference override it; by default
  // communication does not slow compute).
  virtual Duration compute_time_in(RankId rank, const ComputeWork& work,
                                   const ComputeContext& context) const {
    (void)context;
    return compute_time(rank, work);
  }
};


}  // namespace meshsim
