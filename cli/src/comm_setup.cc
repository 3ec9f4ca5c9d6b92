#include "comm_setup.h"

#include <fmt/format.h>

#include "meshsim/collectives/ring_model.h"
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

struct CommSetup::Impl {
  std::unique_ptr<CommCostModel> model;
};

CommSetup::CommSetup(const topology::ClusterSpec& c, const workloads::StepPlan& /*plan*/,
                     const CommOptions& /*options*/)
    : impl_(std::make_unique<Impl>()) {
  // Ranks fill devices in order: global rank r is device r.
  const int64_t domain = c.scale_up_domain_size();
  const collectives::LinkParams up{c.intra_node_bandwidth(), c.intra_node_latency()};
  const collectives::LinkParams out{c.inter_node_bandwidth(), c.inter_node_latency()};
  impl_->model = std::make_unique<collectives::RingAlphaBetaModel>([domain, up, out](RankId a,
                                                                                     RankId b) {
    return static_cast<int64_t>(a.value()) / domain == static_cast<int64_t>(b.value()) / domain
               ? up
               : out;
  });
}

CommSetup::~CommSetup() = default;

CommCostModel& CommSetup::model() { return *impl_->model; }

}  // namespace meshsim::cli
