#include "meshsim/studies/comm_setup.h"

#include <fmt/format.h>

#include "meshsim/collectives/comm_model.h"
#include "meshsim/topology/network.h"
#include "meshsim/sim/error.h"

namespace meshsim::studies {

std::unique_ptr<collectives::NetworkBackend> make_backend(CommBackend backend,
                                                          const topology::Network& net) {
  if (backend == CommBackend::kSimgrid) {
    return collectives::make_simgrid_backend(net);
  }
  return std::make_unique<collectives::AnalyticalBackend>(net);
}

struct CommSetup::Impl {
  topology::Network net;
  std::unique_ptr<collectives::TopologyCommModel> model;
};

CommSetup::CommSetup(const topology::ClusterSpec& c, const workloads::StepPlan& plan,
                     const CommOptions& options)
    : impl_(std::make_unique<Impl>(Impl{topology::Network::build(c), nullptr})) {
  std::unique_ptr<collectives::NetworkBackend> backend = make_backend(options.backend, impl_->net);
  // Ranks fill devices in order: global rank r is device r.
  impl_->model = std::make_unique<collectives::TopologyCommModel>(
      impl_->net, topology::Placement::in_order(plan.world), std::move(backend), options.algorithm);
  for (const auto& family : plan.families) {
    impl_->model->add_concurrent_family(family);
  }
}

CommSetup::~CommSetup() = default;

CommCostModel& CommSetup::model() { return *impl_->model; }

}  // namespace meshsim::studies
