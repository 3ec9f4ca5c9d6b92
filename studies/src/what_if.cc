#include "meshsim/studies/what_if.h"

#include <fmt/format.h>

#include <algorithm>
#include <thread>

#include "meshsim/scenario/located.h"
#include "meshsim/scenario/step.h"
#include "meshsim/sim/error.h"
#include "meshsim/studies/plan_table.h"
#include "meshsim/workloads/analytic.h"

namespace meshsim::studies {

using scenario::format_bytes;
using scenario::format_duration;
using scenario::located;
using scenario::Scenario;
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
  const Bytes need = memory_lower_bound(l.model, d.plan);
  if (need > l.cluster.chip.hbm_capacity) {
    return fmt::format("it needs at least {} per device, more than the {} of {}",
                       format_bytes(need), format_bytes(l.cluster.chip.hbm_capacity),
                       l.cluster.chip.description);
  }
  return "";
}

SearchOptions quick_search(int64_t top) {
  SearchOptions o;
  o.top = top;
  o.max_simulations = kDefaultSimulationsPerTop * top;
  o.jobs = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  return o;
}

}  // namespace

bool wants_auto_plan(const Scenario& s) {
  const bool names = s.origins[ScenarioField::kModel].given() ||
                     s.origins[ScenarioField::kCluster].given();
  return names && !gives_a_plan_field(s);
}

std::optional<AutoPlan> auto_plan(const Scenario& s, const ProgressFn& progress) {
  if (!wants_auto_plan(s)) {
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
  const SearchResult r =
      located(a.scenario, [&] { return search_plans(a.scenario, quick_search(1), progress); });
  if (r.top.empty()) {
    const ScenarioField named = s.origins[ScenarioField::kCluster].given()
                                    ? ScenarioField::kCluster
                                    : ScenarioField::kModel;
    throw scenario::origin_of(s, named)
        .error(fmt::format("no plan given, the default plan does not apply ({}), and the plan "
                           "search found none: {}",
                           misfit, no_plan_reason(r)));
  }
  a.scenario.plan = r.top.front().plan;
  a.scenario.plan.origins.set_all(Origin::preset("the plan search"));
  a.note = fmt::format("no plan given: the default plan does not apply to {} on {}{} ({}); "
                       "searched {} plans, simulated {} and took the best, {} (meshsim plan ranks "
                       "them)",
                       a.scenario.model, a.scenario.cluster, size, misfit, r.considered,
                       r.simulated, short_plan(a.scenario.plan));
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

SearchResult plans_that_fit(const Scenario& s, const ProgressFn& progress) {
  return located(s, [&] { return search_plans(s, quick_search(3), progress); });
}

}  // namespace meshsim::studies
