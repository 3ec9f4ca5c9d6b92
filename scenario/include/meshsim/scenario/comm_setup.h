// Wiring of the cluster and its communication model for a run.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "meshsim/collectives/comm_model.h"
#include "meshsim/collectives/schedule.h"
#include "meshsim/topology/cluster.h"
#include "meshsim/topology/network.h"
#include "meshsim/workloads/step.h"

namespace meshsim::scenario {

// How a run's communication is modelled: the network backend (the analytical fluid model or
// SimGrid) and the collective planner's options (algorithm, protocol, NCCL release).
struct CommOptions {
  collectives::NetworkBackend backend = collectives::NetworkBackend::kAnalytical;
  collectives::CollectiveOptions collective;
};

// Owns the communication model of a run: ranks placed on devices in order; the images of the
// plan's simulated groups and ranks (representative mode) declared so that they load the links.
class CommSetup {
 public:
  // `faults`: NICs and links degraded or taken down before the model is built on the network
  // (Network::apply_faults; topology::LinkFaultError where one cannot be applied).
  CommSetup(const topology::ClusterSpec& cluster, const workloads::StepPlan& plan,
            const CommOptions& options, const std::vector<topology::LinkFault>& faults = {});
  ~CommSetup();
  collectives::NetworkCommModel& model();
  const topology::Network& network() const;
  // How the traffic of each failed link is rerouted, in the order of the faults.
  const std::vector<std::string>& reroutes() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace meshsim::scenario
