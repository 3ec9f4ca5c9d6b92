#include "comm_setup.h"

#include <fmt/format.h>

#include "meshsim/collectives/comm_model.h"
#include "meshsim/topology/network.h"
#include "meshsim/sim/error.h"

namespace meshsim::cli {

topology::ClusterSpec load_cluster_for(const Scenario& s) {
  const topology::Catalogue catalogue = s.hardware_catalogue
                                            ? topology::Catalogue::load(*s.hardware_catalogue)
                                            : topology::Catalogue::builtin();
  topology::ClusterSpec c = topology::load_cluster(s.cluster, catalogue);
  if (s.nodes && s.shape) {
    throw InputError("--shape", "", "give --nodes (GPU clusters) or --shape (TPU slices), not both");
  }
  if (s.nodes) {
    if (*s.nodes <= 0) {
      throw InputError("--nodes", "", fmt::format("expected a positive integer, got {}", *s.nodes));
    }
    c = topology::resize_nodes(std::move(c), *s.nodes);
  }
  if (s.shape) {
    std::vector<int64_t> dims;
    std::string_view rest = *s.shape;
    while (!rest.empty()) {
      const size_t x = rest.find('x');
      const std::string part(rest.substr(0, x));
      int64_t v = 0;
      try {
        size_t used = 0;
        v = std::stoll(part, &used);
        if (used != part.size()) {
          v = 0;
        }
      } catch (const std::exception&) {
        v = 0;
      }
      if (v <= 0) {
        throw InputError("--shape", "",
                         fmt::format("\"{}\": expected positive extents joined by 'x', e.g. 8x16x16",
                                     *s.shape));
      }
      dims.push_back(v);
      rest = x == std::string_view::npos ? std::string_view{} : rest.substr(x + 1);
    }
    c = topology::resize_torus(std::move(c), dims);
  }
  return c;
}

nlohmann::json scenario_json(const Scenario& s, const topology::ClusterSpec& cluster) {
  nlohmann::json j = {{"model", s.model},
                      {"cluster", s.cluster},
                      {"nodes", cluster.nodes},
                      {"devices", cluster.device_count()},
                      {"dp", s.dp},
                      {"zero", s.zero},
                      {"tp", s.tp},
                      {"sp", s.sp},
                      {"cp", s.cp},
                      {"pp", s.pp},
                      {"vpp", s.vpp},
                      {"schedule", s.schedule},
                      {"ep", s.ep},
                      {"capacity_factor", s.capacity_factor},
                      {"mbs", s.mbs},
                      {"gbs", s.gbs.value_or(s.dp * s.mbs)},
                      {"seq", s.seq},
                      {"recompute", s.recompute},
                      {"dtype", s.dtype},
                      {"attention", s.attention},
                      {"kernels", s.kernels},
                      {"optimizer_kernels", s.optimizer_kernels},
                      {"overlap_grad_reduce", s.overlap_grad_reduce},
                      {"overlap_param_gather", s.overlap_param_gather},
                      {"overlap_p2p", s.overlap_p2p},
                      {"overlap_tp", s.overlap_tp}};
  if (!cluster.torus_shape.empty()) {
    j["shape"] = cluster.torus_shape;
  }
  if (!s.stage_layers.empty()) {
    j["stage_layers"] = s.stage_layers;
  }
  return j;
}

collectives::NetworkBackend parse_backend_flag(const std::string& name) {
  if (name == "simgrid") {
    return collectives::NetworkBackend::kSimGrid;
  }
  if (name != "analytical") {
    throw InputError("--backend", "",
                     fmt::format("\"{}\" is not one of analytical, simgrid", name));
  }
  return collectives::NetworkBackend::kAnalytical;
}

collectives::Algorithm parse_algo_flag(const std::string& name) {
  const auto algorithm = collectives::parse_algorithm(name);
  if (!algorithm) {
    throw InputError("--algo", "",
                     fmt::format("\"{}\" is not one of {}", name,
                                 collectives::algorithm_choices()));
  }
  return *algorithm;
}

collectives::CollectiveOptions collective_options(const std::string& algorithm,
                                                  const std::string& protocol,
                                                  const std::string& nccl) {
  collectives::CollectiveOptions o;
  o.algorithm = parse_algo_flag(algorithm);
  if (protocol != "auto") {
    o.protocol = collectives::parse_protocol(protocol);
    if (!o.protocol) {
      throw InputError("--proto", "",
                       fmt::format("\"{}\" is not one of auto, ll, ll128, simple", protocol));
    }
  }
  const auto version = collectives::parse_nccl_version(nccl);
  if (!version) {
    throw InputError("--nccl", "",
                     fmt::format("\"{}\" is not an NCCL release from 2.18 on (e.g. 2.30 or "
                                 "2.18.5)",
                                 nccl));
  }
  o.nccl_version = *version;
  return o;
}

struct CommSetup::Impl {
  topology::Network net;
  std::unique_ptr<collectives::TopologyCommModel> model;
};

CommSetup::CommSetup(const topology::ClusterSpec& c, const workloads::StepPlan& plan,
                     const CommOptions& options)
    : impl_(std::make_unique<Impl>(Impl{topology::Network::build(c), nullptr})) {
  const collectives::CollectiveOptions collective =
      collective_options(options.algorithm, options.protocol, options.nccl);
  // Ranks fill devices in order: global rank r is device r.
  impl_->model = std::make_unique<collectives::TopologyCommModel>(
      impl_->net, topology::Placement::in_order(plan.world), parse_backend_flag(options.backend),
      collective);
  for (const auto& family : plan.families) {
    std::vector<std::vector<RankId>> groups;
    for (const auto& g : family) {
      std::vector<RankId> ranks;
      for (const uint32_t r : g) {
        ranks.emplace_back(r);
      }
      groups.push_back(std::move(ranks));
    }
    impl_->model->add_concurrent_family(groups);
  }
}

CommSetup::~CommSetup() = default;

CommCostModel& CommSetup::model() { return *impl_->model; }

}  // namespace meshsim::cli
