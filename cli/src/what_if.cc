#include "what_if.h"

#include <fmt/format.h>

#include <thread>

#include "meshsim/sim/error.h"
#include "meshsim/studies/plan_search.h"
#include "meshsim/studies/plan_table.h"
#include "meshsim/scenario/step.h"
#include "meshsim/workloads/analytic.h"
#include "progress.h"
#include "report.h"

namespace meshsim::cli {

using scenario::ScenarioField;
using workloads::PlanField;

namespace {

bool gives_a_plan_field(const Scenario& s) {
  for (const PlanField f : enum_values<PlanField>()) {
    if (s.plan.origins[f].given()) {
      return true;
    }
  }
  return false;
}

// The default scenario with the named model, cluster, size, fabric knobs and faults.
Scenario swapped_default(const Scenario& s) {
  Scenario d = scenario::default_scenario();
  for (const ScenarioField f : {ScenarioField::kModel, ScenarioField::kCluster,
                                ScenarioField::kNodes, ScenarioField::kShape,
                                ScenarioField::kSlices, ScenarioField::kHardwareCatalogue}) {
    d.origins.set(f, s.origins[f]);
  }
  d.model = s.model;
  d.cluster = s.cluster;
  d.faults = s.faults;  // the faults apply to whichever plan runs
  d.fabric = s.fabric;  // and the fabric knobs to whichever cluster (with their origins)
  d.hardware_catalogue = s.hardware_catalogue;
  d.slices = s.slices;
  const bool sized = s.origins[ScenarioField::kNodes].given() ||
                     s.origins[ScenarioField::kShape].given();
  if (sized) {
    d.nodes = s.nodes;
    d.shape = s.shape;
  } else if (s.origins[ScenarioField::kCluster].given()) {
    d.nodes.reset();  // the named cluster at its own size, unless it takes the default's below
  }
  if (s.origins[ScenarioField::kCluster].given() && !sized) {
    // A GPU cluster keeps the default's device count when it can be resized to it.
    Scenario preset = d;
    const topology::ClusterSpec c = located(preset, [&] { return scenario::load_cluster(preset); });
    const int64_t devices = scenario::load_cluster(scenario::default_scenario()).device_count();
    if (c.scale_up != topology::ScaleUpFabric::kIciTorus && devices % c.devices_per_node == 0) {
      preset.nodes = devices / c.devices_per_node;
      try {
        scenario::load_cluster(preset);
        d.nodes = preset.nodes;
      } catch (const std::exception&) {
        // It cannot be (an NVLink domain would be split): the preset's own size.
      }
    }
  }
  return d;
}

// Why the default plan does not apply to `d` (empty when it does): invalid, or over memory.
std::string default_plan_misfit(const Scenario& d) {
  const scenario::LoadedScenario l = located(d, [&] { return scenario::load_inputs(d); });
  try {
    scenario::check_plan(l, d.plan);
  } catch (const workloads::PlanError& e) {
    return e.what();
  }
  const Bytes need = studies::memory_lower_bound(l.model, d.plan);
  if (need > l.cluster.chip.hbm_capacity) {
    return fmt::format("it needs at least {} per device, more than the {} of {}",
                       format_bytes(need), format_bytes(l.cluster.chip.hbm_capacity),
                       l.cluster.chip.description);
  }
  return "";
}

studies::SearchOptions quick_search(int64_t top) {
  studies::SearchOptions o;
  o.top = top;
  o.max_simulations = studies::kDefaultSimulationsPerTop * top;
  o.jobs = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  return o;
}

}  // namespace

std::optional<AutoPlan> auto_plan(const Scenario& s) {
  const bool names = s.origins[ScenarioField::kModel].given() ||
                     s.origins[ScenarioField::kCluster].given();
  if (!names || gives_a_plan_field(s)) {
    return std::nullopt;
  }
  AutoPlan a{swapped_default(s), ""};
  const bool sized = s.origins[ScenarioField::kNodes].given() ||
                     s.origins[ScenarioField::kShape].given();
  const std::string size =
      a.scenario.nodes && !sized
          ? fmt::format(" at the default scenario's {} nodes (--nodes for another size)",
                        *a.scenario.nodes)
          : "";
  const std::string misfit = default_plan_misfit(a.scenario);
  if (misfit.empty()) {
    a.note = fmt::format("no plan given: kept the default scenario's plan, which applies to {} on "
                         "{}{}",
                         a.scenario.model, a.scenario.cluster, size);
    return a;
  }
  studies::SearchResult r;
  {
    Progress progress("no plan given: searching for one");
    r = located(a.scenario, [&] { return studies::search_plans(a.scenario, quick_search(1)); });
  }
  if (r.top.empty()) {
    throw origin_of(s, s.origins[ScenarioField::kCluster].given() ? ScenarioField::kCluster
                                                                   : ScenarioField::kModel)
        .error(fmt::format("no plan given, the default plan does not apply ({}), and the plan "
                           "search found none: {}",
                           misfit, studies::no_plan_reason(r)));
  }
  a.scenario.plan = r.top.front().plan;
  a.scenario.plan.origins.set_all(Origin::preset("the plan search"));
  a.note = fmt::format("no plan given: the default plan does not apply to {} on {}{} ({}); "
                       "searched {} plans, simulated {} and took the best, {} (meshsim plan ranks "
                       "them)",
                       a.scenario.model, a.scenario.cluster, size, misfit, r.considered,
                       r.simulated, studies::short_plan(a.scenario.plan));
  return a;
}

std::vector<std::string> result_warnings(const Scenario& s, const scenario::StepReport& r) {
  std::vector<std::string> out;
  const workloads::ParallelPlan& p = s.plan;
  if (p.origins[PlanField::kGbs].kind() == Origin::Kind::kDefault && p.pp > 1) {
    out.push_back(fmt::format(
        "no global batch given: it defaults to one microbatch per data-parallel rank (gbs = dp x "
        "mbs = {}), so each pipeline runs {} microbatch(es) and its bubble is at least (p - 1) / "
        "(m + p - 1) = {:.0f} %; give --gbs",
        p.gbs, p.microbatches(),
        100.0 * workloads::pipeline_bubble_fraction(p.pp, p.microbatches())));
  }
  if (r.simulated && !r.oom && r.peak_memory.as_double() > 0.95 * r.memory_capacity.as_double()) {
    out.push_back(fmt::format(
        "the peak of {} is within 5 % of the {} the chip has: the allocator's fragmentation, the "
        "CUDA context and framework buffers meshsim does not model may not fit",
        format_bytes(r.peak_memory), format_bytes(r.memory_capacity)));
  }
  return out;
}

void suggest_plans_that_fit(const Scenario& s, std::ostream& out) {
  studies::SearchResult r;
  {
    Progress progress("out of memory: searching for plans that fit");
    r = located(s, [&] { return studies::search_plans(s, quick_search(3)); });
  }
  if (r.top.empty()) {
    out << fmt::format("  no plan fits this model on this cluster: {}\n",
                       studies::no_plan_reason(r));
    return;
  }
  out << fmt::format("  plans that fit (the plan search, {} plans considered; meshsim plan ranks "
                     "them):\n",
                     r.considered);
  for (const studies::RankedPlan& p : r.top) {
    out << fmt::format("    {:<36} step {}  peak memory {}\n", studies::short_plan(p.plan),
                       format_duration(p.report.step_time), format_bytes(p.report.peak_memory));
  }
}

}  // namespace meshsim::cli
