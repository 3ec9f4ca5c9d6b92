// Wiring of the cluster and its communication model for a run.
#pragma once

#include <memory>
#include <string>

#include "meshsim/collectives/algorithms.h"
#include "meshsim/collectives/schedule.h"
#include "meshsim/sim/cost_model.h"
#include "meshsim/topology/cluster.h"
#include "meshsim/workloads/step.h"

namespace meshsim::studies {

// The collective cost backends: the analytical fluid model, or SimGrid's max-min flow model.
enum class CommBackend : uint8_t { kAnalytical, kSimgrid };
constexpr auto enum_names(CommBackend) {
  return std::to_array<EnumName<CommBackend>>(
      {{CommBackend::kAnalytical, "analytical"}, {CommBackend::kSimgrid, "simgrid"}});
}

struct CommOptions {
  CommBackend backend = CommBackend::kAnalytical;
  collectives::Algorithm algorithm = collectives::Algorithm::kAuto;
};

// The collective backend `backend` on `net`.
std::unique_ptr<collectives::NetworkBackend> make_backend(CommBackend backend,
                                                          const topology::Network& net);

// Owns the communication cost model of a run: ranks placed on devices in order; the plan's
// families of concurrent groups declared so that they contend.
class CommSetup {
 public:
  CommSetup(const topology::ClusterSpec& cluster, const workloads::StepPlan& plan,
            const CommOptions& options);
  ~CommSetup();
  CommCostModel& model();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace meshsim::studies
