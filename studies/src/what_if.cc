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
  for (const ScenarioField f :
       {ScenarioField::kModel, ScenarioField::kCluster, ScenarioField::kNodes, ScenarioField::kGpus,
        ScenarioField::kShape, ScenarioField::kSlices, ScenarioField::kHardwareCatalogue}) {
    d.origins.set(f, s.origins[f]);
  }
  d.model = s.model;
  d.cluster = s.cluster;
  d.faults = s.faults;  // the faults apply to whichever plan runs
  d.fabric = s.fabric;  // and the fabric knobs to whichever cluster (with their origins)
  d.hardware_catalogue = s.hardware_catalogue;
  d.slices = s.slices;
  const bool sized = s.origins[ScenarioField::kNodes].given() ||
                     s.origins[ScenarioField::kGpus].given() ||
                     s.origins[ScenarioField::kShape].given();
  if (sized) {
    d.nodes = s.nodes;
    d.gpus = s.gpus;
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

// For a GPU cluster at its preset's size on which no plan of the default problem is valid: the
// largest node count within the preset whose device count divides the default scenario's (so
// that the default's batch and degrees can split over it), as a hint; empty when there is none or
// the size was given.
std::string size_hint(const Scenario& d, bool sized) {
  if (sized || !d.origins[ScenarioField::kCluster].given()) {
    return "";
  }
  Scenario preset = d;
  preset.nodes.reset();
  topology::ClusterSpec c;
  try {
    c = scenario::load_cluster(preset);
  } catch (const std::exception&) {
    return "";
  }
  if (c.scale_up == topology::ScaleUpFabric::kIciTorus) {
    return "";
  }
  const int64_t devices = scenario::load_cluster(scenario::default_scenario()).device_count();
  for (int64_t n = c.nodes; n >= 1; --n) {
    if (devices % (n * c.devices_per_node) != 0) {
      continue;
    }
    Scenario at = preset;
    at.nodes = n;
    try {
      scenario::load_cluster(at);
    } catch (const std::exception&) {
      continue;
    }
    return fmt::format("; expected a size the default problem divides over, e.g. --nodes {} ({} "
                       "devices, which divide the default scenario's {}), or a plan of your own",
                       n, n * c.devices_per_node, devices);
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

// The suggestions of an out-of-memory run: the plan search for the best three, bounded: it
// simulates only the plans it estimates best (at most kSuggestionSimulations that fit, twice
// that in all), so that a problem whose every step is long to simulate answers in seconds.
constexpr int64_t kSuggestions = 3;
constexpr int64_t kSuggestionSimulations = 3;

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
                     s.origins[ScenarioField::kGpus].given() ||
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
                           "search found none: {}{}",
                           misfit, no_plan_reason(r), size_hint(a.scenario, sized)));
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

std::vector<std::string> run_notes(const workloads::ParallelPlan& p,
                                   const scenario::StepReport& r) {
  std::vector<std::string> out;
  if (!r.simulated || p.recompute != workloads::Recompute::kSelective ||
      !p.recompute_modules.empty() || !workloads::fused_attention(p.attention) ||
      p.selective_by_op) {
    return out;
  }
  // Megatron's selective recompute of the attention core (its default module) with a fused
  // kernel: Megatron-Core re-runs it and frees only its statistics; Megatron-LM's legacy flash
  // path runs outside the checkpoint and nothing changes. Said, not silently so.
  if (workloads::reruns_core_attention(p, p.recompute)) {
    out.push_back(fmt::format(
        "selective recompute (the attention core, Megatron-Core's default module) with {} "
        "attention re-runs the kernel's forward in the backward and frees only its softmax "
        "statistics (the output stays, the output projection's input): compute for almost no "
        "memory (--recompute full, or --recompute-modules mlp, free more)",
        to_string(p.attention)));
  } else {
    out.push_back(fmt::format(
        "selective recompute (the attention core) with {} attention recomputes nothing on this "
        "stack: its fused kernel runs outside the checkpoint, so this step is the same as "
        "--recompute none (--recompute full trades compute for memory)",
        to_string(p.attention)));
  }
  return out;
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
  if (r.simulated && !r.oom &&
      r.peak_memory.as_double() >
          (1.0 - studies::kDefaultHeadroom) * r.memory_capacity.as_double()) {
    out.push_back(fmt::format(
        "the peak of {} is within {:.0f} % of the {} the chip has (the headroom meshsim plan, "
        "sweep and the out-of-memory suggestions keep): the allocator's fragmentation, the CUDA "
        "context and framework buffers meshsim does not model may not fit",
        format_bytes(r.peak_memory), 100.0 * studies::kDefaultHeadroom,
        format_bytes(r.memory_capacity)));
  }
  return out;
}

SearchOptions plans_that_fit_options() {
  SearchOptions o = quick_search(kSuggestions);
  o.max_simulations = kSuggestionSimulations;
  o.max_all_simulations = 2 * kSuggestionSimulations;
  o.closed_form_memory = true;  // spend the few simulations on plans that fit
  return o;
}

SearchResult plans_that_fit(const Scenario& s, const ProgressFn& progress) {
  return located(s, [&] { return search_plans(s, plans_that_fit_options(), progress); });
}

}  // namespace meshsim::studies
