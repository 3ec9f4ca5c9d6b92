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
    c = resize(std::move(c), s);
  } catch (const InputError& e) {
    // A size the cluster refuses is reported where the size came from (a flag, or a scenario
    // file's /nodes or /shape), not against the cluster's own file.
    if (e.source() == cluster_source && s.size_origin.given()) {
      throw s.size_origin.error(e.message());
    }
    throw;
  }
  try {
    c = topology::override_fabric(std::move(c), fabric_overrides(s.fabric));
  } catch (const topology::FabricError& e) {
    const Origin& at = s.fabric.origins[e.field()];
    throw (at.given() ? at : Origin::flag(flag_of(e.field()))).error(e.message());
  }
  return c;
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
  const auto algorithm = parse_enum<collectives::Algorithm>(name);
  if (!algorithm) {
    throw InputError("--algo", "",
                     fmt::format("\"{}\" is not one of {}", name,
                                 describe_choices<collectives::Algorithm>()));
  }
  return *algorithm;
}

collectives::CollectiveOptions collective_options(const std::string& algorithm,
                                                  const std::string& protocol,
                                                  const std::string& nccl) {
  collectives::CollectiveOptions o;
  o.algorithm = parse_algo_flag(algorithm);
  if (protocol != "auto") {
    o.protocol = parse_enum<collectives::NcclProtocol>(protocol);
    if (!o.protocol) {
      throw InputError("--proto", "",
                       fmt::format("\"{}\" is not one of auto, {}", protocol,
                                   describe_choices<collectives::NcclProtocol>()));
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

InputError locate(const collectives::CommError& e) {
  return InputError(e.field() == collectives::CommField::kProtocol ? "--proto" : "--algo", "",
                    e.message());
}

struct CommSetup::Impl {
  topology::Network net;
  std::unique_ptr<collectives::NetworkCommModel> model;
};

CommSetup::CommSetup(const topology::ClusterSpec& c, const workloads::StepPlan& plan,
                     const CommOptions& options)
    : impl_(std::make_unique<Impl>(Impl{topology::Network::build(c), nullptr})) {
  const collectives::CollectiveOptions collective =
      collective_options(options.algorithm, options.protocol, options.nccl);
  // Ranks fill devices in order: global rank r is device r.
  impl_->model = std::make_unique<collectives::NetworkCommModel>(
      impl_->net, topology::Placement::in_order(plan.world), parse_backend_flag(options.backend),
      collective);
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

}  // namespace meshsim::cli
