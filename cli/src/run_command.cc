#include "run_command.h"

#include "meshsim/studies/scenario.h"
#include "progress.h"
#include "trace_setup.h"
#include "what_if.h"

namespace meshsim::cli {
namespace {

// The trace writer as the step's observer.
class TraceObserver : public studies::StepObserver {
 public:
  TraceObserver(const TraceRequest& request, const Scenario& s,
                const topology::ClusterSpec& cluster)
      : trace_(request, s.plan, cluster) {}

  bool needs_full_simulation() const override { return trace_.needs_full_simulation(); }
  std::vector<int64_t> ranks_to_simulate() const override { return trace_.ranks_to_simulate(); }
  void attach(Simulation& sim, collectives::NetworkCommModel& comm,
              const StepReport& r) override {
    trace_.attach(sim, comm,
                  {{"meshsim_version", MESHSIM_VERSION},
                   {"model", r.model_description},
                   {"cluster", r.cluster_description},
                   {"plan", r.plan_description},
                   {"scenario", r.inputs.dump()}});
  }
  void finish(SimTime end, StepReport& r) override {
    trace_.finish(end);
    r.trace_path = trace_.path();
    r.trace_events = trace_.events();
    r.trace_description = trace_.description();
  }

 private:
  TraceSetup trace_;
};

}  // namespace

StepReport simulate_step(const Scenario& s, const RunOutputs& outputs) {
  return located(s, [&] {
    const studies::LoadedScenario loaded = studies::load_and_check(s);
    std::optional<TraceObserver> trace;
    if (outputs.trace_path) {
      trace.emplace(TraceRequest{*outputs.trace_path, outputs.trace_ranks}, s, loaded.cluster);
    }
    return studies::simulate_step(s, loaded, outputs.step, trace ? &*trace : nullptr);
  });
}

int run_command(const Scenario& given, const RunOutputs& outputs, std::ostream& out) {
  check_budget(outputs.budget);
  const std::optional<AutoPlan> automatic = auto_plan(given);
  const Scenario& s = automatic ? automatic->scenario : given;
  StepReport report;
  {
    Progress progress(outputs.step.full_simulation ? "full simulation" : "simulation");
    report = simulate_step(s, outputs);
  }
  if (automatic) {
    out << "meshsim: " << automatic->note << "\n";
  }
  print_summary(report, out);
  for (const std::string& w : result_warnings(s, report)) {
    out << "  warning: " << w << "\n";
  }
  if (report.oom) {
    suggest_plans_that_fit(s, out);
  }
  const std::optional<studies::TimeToTrain> ttt = time_to_train(outputs.budget, report);
  if (ttt) {
    print_time_to_train(*ttt, out);
  }
  if (outputs.json_path) {
    nlohmann::json j = to_json(report);
    if (ttt) {
      j["time_to_train"] = studies::to_json(*ttt);
    }
    studies::write_json_file(*outputs.json_path, j, "--json");
  }
  return report.oom ? 3 : 0;
}

}  // namespace meshsim::cli
