// The narrow seam through which the engine asks how long a compute op takes (STYLE A.5). The
// engine knows neither chips nor networks: the composition root (cli/) plugs in a hardware compute
// model (topology/); communication goes through comm_model.h.
#pragma once

#include <span>

#include "meshsim/sim/ids.h"
#include "meshsim/sim/program.h"
#include "meshsim/sim/units.h"

namespace meshsim {

class ComputeCostModel {
 public:
  virtual ~ComputeCostModel() = default;
  // Time of one compute op on the device that runs `rank`.
  virtual Duration compute_time(RankId rank, const ComputeWork& work) const = 0;
};


}  // namespace meshsim
