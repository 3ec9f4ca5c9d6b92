#include "comm_setup.h"

#include <fmt/format.h>

#include "meshsim/collectives/comm_model.h"
#include "meshsim/topology/network.h"
#include "meshsim/sim/error.h"

namespace meshsim::cli {

namespace {

// "8x16x16" -> {8, 16, 16}; an InputError at `where` otherwise.
std::vector<int64_t> parse_shape(const std::string& shape, const Origin& where) {
  std::vector<int64_t> dims;
  std::string_view rest = shape;
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
      throw where.error(
          fmt::format("\"{}\": expected positive extents joined by 'x', e.g. 8x16x16", shape));
    }
    dims.push_back(v);
    rest = x == std::string_view::npos ? std::string_view{} : rest.substr(x + 1);
  }
  return dims;
}

topology::ClusterSpec resize(topology::ClusterSpec c, const Scenario& s) {
  if (s.nodes) {
    if (*s.nodes <= 0) {
      throw s.size_origin.error(fmt::format("expected a positive integer, got {}", *s.nodes));
    }
    c = topology::resize_nodes(std::move(c), *s.nodes);
  }
  if (s.shape) {
    c = topology::resize_torus(std::move(c), parse_shape(*s.shape, s.size_origin));
  }
  return c;
}

}  // namespace

topology::ClusterSpec load_cluster_for(const Scenario& s) {
  const topology::Catalogue catalogue = s.hardware_catalogue
                                            ? topology::Catalogue::load(*s.hardware_catalogue)
                                            : topology::Catalogue::builtin();
  topology::ClusterSpec c = topology::load_cluster(s.cluster, catalogue);
  if (s.nodes && s.shape) {
    throw InputError("--shape", "", "give --nodes (GPU clusters) or --shape (TPU slices), not both");
  }
  const std::string cluster_source = c.source;
  try {
    return resize(std::move(c), s);
  } catch (const InputError& e) {
    // A size the cluster refuses is reported where the size came from (a flag, or a scenario
    // file's /nodes or /shape), not against the cluster's own file.
    if (e.source() == cluster_source && s.size_origin.given()) {
      throw s.size_origin.error(e.message());
    }
    throw;
  }
}

nlohmann::json scenario_json(const Scenario& s, const topology::ClusterSpec& cluster) {
  const workloads::ParallelPlan& p = s.plan;
  nlohmann::json j = {{"model", s.model},
                      {"cluster", s.cluster},
                      {"nodes", cluster.nodes},
                      {"devices", cluster.device_count()},
                      {"dp", p.dp},
                      {"zero", static_cast<int>(p.zero)},
                      {"tp", p.tp},
                      {"sp", p.sp},
                      {"cp", p.cp},
                      {"pp", p.pp},
                      {"vpp", p.vpp},
                      {"schedule", to_string(p.schedule)},
                      {"ep", p.ep},
                      {"capacity_factor", p.capacity_factor},
                      {"mbs", p.mbs},
                      {"gbs", p.gbs},
                      {"seq", p.seq},
                      {"recompute", to_string(p.recompute)},
                      {"dtype", to_string(p.matmul_dtype)},
                      {"attention", to_string(p.attention)},
                      {"kernels", to_string(p.kernels)},
                      {"optimizer_kernels", to_string(p.optimizer_kernels)},
                      {"overlap_grad_reduce", p.overlap.grad_reduce},
                      {"overlap_param_gather", p.overlap.param_gather},
                      {"overlap_p2p", p.overlap.pipeline_p2p},
                      {"overlap_tp", p.overlap.tensor_parallel}};
  if (!cluster.torus_shape.empty()) {
    j["shape"] = cluster.torus_shape;
  }
  if (!p.stage_layers.empty()) {
    j["stage_layers"] = p.stage_layers;
  }
  return j;
}

std::unique_ptr<collectives::NetworkBackend> make_backend(const std::string& name,
                                                          const topology::Network& net) {
  if (name == "simgrid") {
    return collectives::make_simgrid_backend(net);
  }
  if (name != "analytical") {
    throw InputError("--backend", "",
                     fmt::format("\"{}\" is not one of analytical, simgrid", name));
  }
  return std::make_unique<collectives::AnalyticalBackend>(net);
}

collectives::Algorithm parse_algo_flag(const std::string& name) {
  const auto algorithm = parse_enum<collectives::Algorithm>(name);
  if (!algorithm) {
    throw InputError("--algo", "",
                     fmt::format("\"{}\" is not one of {}", name,
                                 describe_choices<collectives::Algorithm>()));
  }
  return *algorithm;
}

struct CommSetup::Impl {
  topology::Network net;
  std::unique_ptr<collectives::TopologyCommModel> model;
};

CommSetup::CommSetup(const topology::ClusterSpec& c, const workloads::StepPlan& plan,
                     const CommOptions& options)
    : impl_(std::make_unique<Impl>(Impl{topology::Network::build(c), nullptr})) {
  const collectives::Algorithm algorithm = parse_algo_flag(options.algorithm);
  std::unique_ptr<collectives::NetworkBackend> backend = make_backend(options.backend, impl_->net);
  // Ranks fill devices in order: global rank r is device r.
  impl_->model = std::make_unique<collectives::TopologyCommModel>(
      impl_->net, topology::Placement::in_order(plan.world), std::move(backend), algorithm);
  for (const auto& family : plan.families) {
    impl_->model->add_concurrent_family(family);
  }
}

CommSetup::~CommSetup() = default;

CommCostModel& CommSetup::model() { return *impl_->model; }

}  // namespace meshsim::cli
