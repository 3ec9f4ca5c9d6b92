#include "simgrid_plan.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>

#include "meshsim/sim/error.h"

namespace meshsim::collectives::detail {

size_t SgPlan::num_flows() const {
  size_t n = 0;
  for (const SgStep& s : steps) {
    n += s.flows.size();
  }
  return n;
}

namespace {

// Accumulates the links and routes of a batch while its flows are added.
class PlanBuilder {
 public:
  PlanBuilder(const topology::Network& net, const BandwidthEfficiency& efficiency)
      : net_(net), efficiency_(efficiency), plan_link_of_(net.num_links()) {}

  SgPlan& plan() { return plan_; }

  // Adds step `s` of the batch.
  void add_step(size_t s, const Step& step) {
    SgStep out;
    out.flows.reserve(step.flows.size());
    uint64_t multipath = 0;  // ECMP salt: index among the step's multi-path flows
    for (size_t i = 0; i < step.flows.size(); ++i) {
      const Flow& f = step.flows[i];
      SIM_CHECK(f.src.index() < net_.num_vertices() && f.dst.index() < net_.num_vertices(),
                "step {} flow {}: vertex {} -> {} outside the {}-vertex network", s, i,
                f.src.value(), f.dst.value(), net_.num_vertices());
      SIM_CHECK(f.bytes.count() >= 0, "step {} flow {}: {} bytes", s, i, f.bytes.count());
      if (f.src == f.dst || f.bytes.count() == 0) {
        continue;
      }
      const uint64_t salt = net_.path_count(f.src, f.dst) > 1 ? multipath++ : 0;
      const topology::Path path = net_.route(f.src, f.dst, salt);
      SIM_CHECK(!path.empty(), "step {} flow {}: no route from vertex {} to {}", s, i,
                f.src.value(), f.dst.value());
      const double wire = f.bytes.as_double() * flow_weight(net_, f, efficiency_);
      out.flows.push_back(SgFlow{route_of(path), static_cast<uint64_t>(std::llround(wire))});
    }
    const std::vector<SgRoute>& routes = plan_.routes;
    std::stable_sort(out.flows.begin(), out.flows.end(),
                     [&routes](const SgFlow& a, const SgFlow& b) {
                       return routes[a.route].latency_s < routes[b.route].latency_s;
                     });
    plan_.steps.push_back(std::move(out));
  }

 private:
  uint32_t route_of(const topology::Path& path) {
    const auto [it, inserted] =
        route_of_path_.try_emplace(path, static_cast<uint32_t>(plan_.routes.size()));
    if (inserted) {
      SgRoute route;
      route.links.reserve(path.size());
      for (const LinkId l : path) {
        route.links.push_back(plan_link(l));
      }
      route.latency_s = net_.path_latency(path).seconds();
      plan_.routes.push_back(std::move(route));
    }
    return it->second;
  }

  uint32_t plan_link(LinkId l) {
    SIM_CHECK(l.index() < plan_link_of_.size(), "route uses link {} of a {}-link network",
              l.value(), plan_link_of_.size());
    std::optional<uint32_t>& slot = plan_link_of_[l.index()];
    if (!slot) {
      const double bw = effective_bandwidth(net_.link(l), efficiency_).value();
      SIM_CHECK(bw > 0, "link {} has capacity {} B/s", l.value(), bw);
      slot = static_cast<uint32_t>(plan_.links.size());
      plan_.links.push_back(SgLink{l, bw});
    }
    return *slot;
  }

  const topology::Network& net_;
  const BandwidthEfficiency& efficiency_;
  SgPlan plan_;
  std::vector<std::optional<uint32_t>> plan_link_of_;  // meshsim link -> plan link
  std::map<topology::Path, uint32_t> route_of_path_;   // distinct paths -> plan route
};

}  // namespace

SgPlan make_plan(const topology::Network& net, const BandwidthEfficiency& efficiency,
                 std::span<const Step> steps) {
  PlanBuilder builder(net, efficiency);
  builder.plan().steps.reserve(steps.size());
  for (size_t s = 0; s < steps.size(); ++s) {
    builder.add_step(s, steps[s]);
  }
  return std::move(builder.plan());
}

}  // namespace meshsim::collectives::detail
