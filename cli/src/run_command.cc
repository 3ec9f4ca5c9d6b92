#include "run_command.h"

#include <fmt/format.h>

#include <algorithm>
#include <iostream>
#include <string_view>

#include "meshsim/scenario/scenario.h"
#include "meshsim/scenario/stack_setup.h"
#include "meshsim/studies/chakra_run.h"
#include "meshsim/studies/plan_table.h"
#include "meshsim/studies/what_if.h"
#include "progress.h"
#include "trace_setup.h"
#include "version.h"

namespace meshsim::cli {
namespace {

// The slowest ranks the faults name or draw (at most 8), for the default trace selection.
std::vector<int64_t> slow_ranks_to_trace(const scenario::Faults& f, int64_t world) {
  const std::vector<double> slowdown = f.compute.slowdowns(static_cast<size_t>(world));
  std::vector<int64_t> ranks;
  for (size_t r = 0; r < slowdown.size(); ++r) {
    if (slowdown[r] > 1.0) {
      ranks.push_back(static_cast<int64_t>(r));
    }
  }
  std::stable_sort(ranks.begin(), ranks.end(), [&slowdown](int64_t a, int64_t b) {
    return slowdown[static_cast<size_t>(a)] > slowdown[static_cast<size_t>(b)];
  });
  ranks.resize(std::min<size_t>(ranks.size(), 8));
  return ranks;
}

// The trace writer as the step's observer: the slow ranks in the default selection, the degraded
// links' utilisation counters.
class TraceObserver : public scenario::StepObserver {
 public:
  TraceObserver(TraceRequest request, const Scenario& s, const topology::ClusterSpec& cluster)
      : trace_(with_slow_ranks(std::move(request), s), s.plan, cluster), links_(s.faults.links) {}

  bool needs_full_simulation() const override { return trace_.needs_full_simulation(); }
  std::vector<int64_t> ranks_to_simulate() const override { return trace_.ranks_to_simulate(); }
  void attach(Simulation& sim, scenario::CommSetup& comm, const StepReport& r) override {
    trace_.attach(sim, comm.model(),
                  {{"meshsim_version", std::string(version())},
                   {"model", r.model_description},
                   {"cluster", r.cluster_description},
                   {"plan", r.plan_description},
                   {"scenario", dump_json(r.inputs)}});
    trace_.watch_degraded(comm.model(), comm.network(), links_);
  }
  void finish(SimTime end, StepReport& r) override {
    trace_.finish(end);
    r.trace_path = trace_.path();
    r.trace_events = trace_.events();
    r.trace_description = trace_.description();
  }

 private:
  static TraceRequest with_slow_ranks(TraceRequest request, const Scenario& s) {
    if (!s.faults.empty()) {
      request.also = slow_ranks_to_trace(s.faults, s.plan.world());
    }
    return request;
  }
  TraceSetup trace_;
  std::vector<topology::LinkFault> links_;
};

// A plan search's progress line, shown once the search reports (a plan search that does not run
// shows none).
class LazyProgress {
 public:
  explicit LazyProgress(std::string what) : what_(std::move(what)) {}
  studies::ProgressFn fn() {
    return [this](std::string_view phase, int64_t done, int64_t total) {
      if (!progress_) {
        progress_.emplace(what_, true);  // plain lines on a non-terminal stderr too
      }
      progress_->update(phase, done, total);
    };
  }

 private:
  std::string what_;
  std::optional<Progress> progress_;
};

std::optional<studies::AutoPlan> auto_plan(const Scenario& s) {
  LazyProgress progress("no plan given: searching for one");
  return studies::auto_plan(s, progress.fn());
}

// Up to three plans that fit, printed as "  plans that fit ..." lines, after an out-of-memory
// verdict; why none does otherwise. Announced on stderr before it starts (the report on stdout
// may be buffered), with progress lines on a non-terminal stderr too.
void suggest_plans_that_fit(const Scenario& s, std::ostream& out) {
  const studies::SearchOptions o = studies::plans_that_fit_options();
  std::cerr << fmt::format("meshsim: out of memory: searching for plans that fit (the plan "
                           "search: the best {} with {:.0f} % of memory left free, at most {} "
                           "simulations)\n",
                           o.top, 100.0 * o.min_headroom, o.max_all_simulations);
  studies::SearchResult r;
  {
    Progress progress("out of memory: searching for plans that fit", true);
    r = studies::plans_that_fit(s, [&progress](std::string_view phase, int64_t done,
                                               int64_t total) {
      progress.update(phase, done, total);
    });
  }
  if (r.top.empty()) {
    out << fmt::format("  no plan fits this model on this cluster: {}\n",
                       studies::no_plan_reason(r));
    return;
  }
  out << fmt::format("  plans that fit with {:.0f} % of memory left free (the plan search, {} "
                     "plans considered, {} simulated; ranking {}; meshsim plan ranks more):\n",
                     100.0 * r.min_headroom, r.considered, r.simulated,
                     r.exact ? "proven" : "not proven");
  for (const studies::RankedPlan& p : r.top) {
    out << fmt::format("    {:<46} step {:>10}  peak memory {:>10}  headroom {:>5.1f} %\n",
                       studies::short_plan(p.plan), format_duration(p.report.step_time),
                       format_bytes(p.report.peak_memory),
                       100.0 * (1.0 - p.report.peak_memory.as_double() /
                                          p.report.memory_capacity.as_double()));
  }
}

}  // namespace

std::unique_ptr<scenario::StepObserver> trace_observer(const RunOutputs& outputs,
                                                       const Scenario& s,
                                                       const topology::ClusterSpec& cluster) {
  if (!outputs.trace_path) {
    return nullptr;
  }
  return std::make_unique<TraceObserver>(
      TraceRequest{*outputs.trace_path, outputs.trace_ranks, {}, outputs.trace_limit}, s, cluster);
}

scenario::LoadedScenario load_located(const Scenario& s) {
  return located(s, [&] { return scenario::load_and_check(s); });
}

StepReport simulate_step(const Scenario& s, const scenario::LoadedScenario& loaded,
                         const RunOutputs& outputs) {
  return located(s, [&] {
    const std::unique_ptr<scenario::StepObserver> trace =
        trace_observer(outputs, s, loaded.cluster);
    return scenario::simulate_step(s, loaded, outputs.step, trace.get());
  });
}

int run_command(const Scenario& given, const RunOutputs& outputs, std::ostream& out) {
  check_budget(outputs.budget);
  // Created before the simulation: a report that cannot be written fails at once, not after it.
  std::optional<OutputFile> json;
  if (outputs.json_path) {
    json.emplace(*outputs.json_path, "--json");
  }
  const std::optional<studies::AutoPlan> automatic = auto_plan(given);
  const Scenario& s = automatic ? automatic->scenario : given;
  const scenario::LoadedScenario loaded = load_located(s);
  StepReport report;
  {
    Progress progress(outputs.step.full_simulation ? "full simulation" : "simulation");
    report = simulate_step(s, loaded, outputs);
  }
  if (automatic) {
    out << "meshsim: " << automatic->note << "\n";
  }
  print_summary(report, out);
  if (outputs.export_chakra) {
    located(s, [&] { studies::export_step(s, loaded, *outputs.export_chakra); });
    out << fmt::format("  Chakra traces         {}/rank.0.et ... rank.{}.et, comm_group.json (every "
                       "rank's program)\n",
                       *outputs.export_chakra, s.plan.world() - 1);
  }
  for (const std::string& w : studies::result_warnings(s, report)) {
    out << "  warning: " << w << "\n";
  }
  workloads::ParallelPlan ran = s.plan;  // as the step ran it: its stack applied
  scenario::bind_to_cluster(ran, loaded.cluster);
  const std::vector<std::string> notes = studies::run_notes(ran, report);
  for (const std::string& n : notes) {
    out << "  note: " << n << "\n";
  }
  if (report.oom) {
    suggest_plans_that_fit(s, out);
  }
  const std::optional<studies::TimeToTrain> ttt = time_to_train(outputs.budget, report);
  if (ttt) {
    print_time_to_train(*ttt, out);
  }
  if (json) {
    nlohmann::json j = to_json(report);
    if (!notes.empty()) {
      j["notes"] = notes;
    }
    if (ttt) {
      j["time_to_train"] = studies::to_json(*ttt);
    }
    write_json(*json, j);
  }
  return report.oom ? 3 : 0;
}

}  // namespace meshsim::cli
