#include "meshsim/scenario/comm_setup.h"

#include "meshsim/collectives/comm_model.h"
#include "meshsim/topology/network.h"

namespace meshsim::scenario {

struct CommSetup::Impl {
  topology::Network net;
  std::unique_ptr<collectives::NetworkCommModel> model;
  std::vector<std::string> reroutes;
};

CommSetup::CommSetup(const topology::ClusterSpec& c, const workloads::StepPlan& plan,
                     const CommOptions& options,
                     const std::vector<topology::LinkFault>& faults)
    : impl_(std::make_unique<Impl>(Impl{topology::Network::build(c), nullptr, {}})) {
  impl_->reroutes = impl_->net.apply_faults(faults);
  // Ranks fill devices in order: global rank r is device r.
  impl_->model = std::make_unique<collectives::NetworkCommModel>(
      impl_->net, topology::Placement::in_order(plan.world), options.backend, options.collective);
  // Representative mode: what the simulated groups and ranks stand for loads the links too.
  for (const auto& g : plan.groups) {
    if (!g.images.empty()) {
      impl_->model->add_images(g.global, g.images);
    }
  }
  for (const auto& r : plan.ranks) {
    if (!r.images.empty()) {
      impl_->model->add_rank_images(r.global_rank, r.images);
    }
  }
}

CommSetup::~CommSetup() = default;

collectives::NetworkCommModel& CommSetup::model() { return *impl_->model; }

const topology::Network& CommSetup::network() const { return impl_->net; }

const std::vector<std::string>& CommSetup::reroutes() const { return impl_->reroutes; }

}  // namespace meshsim::scenario
