#include "published_command.h"

#include <fmt/format.h>

#include <algorithm>
#include <utility>

#include "meshsim/sim/enum_names.h"
#include "meshsim/sim/error.h"
#include "meshsim/validation/published.h"
#include "output_file.h"
#include "report.h"
#include "run_command.h"
#include "trace_setup.h"
#include "validate_command.h"

namespace meshsim::cli {
namespace {

using validation::ErrorSummary;
using validation::PublishedReport;

std::string summary_row(const std::string& label, const ErrorSummary& s) {
  return fmt::format("  {:<26} {:>6} {:>10.1f}% {:>8.1f}% {:>+9.1f}%\n", label, s.points,
                     100 * s.median_abs, 100 * s.p90_abs, 100 * s.median_signed);
}

void print_report(const PublishedReport& r, const PublishedArgs& args, std::ostream& out) {
  out << fmt::format(
      "validate-published {}: {} runs, {} simulated, {} out of memory in meshsim (not scored), {} "
      "not expressible\n\n",
      args.runs, r.points.size() + r.out_of_memory.size() + r.not_expressed.size(),
      r.points.size(), r.out_of_memory.size(), r.not_expressed.size());
  out << fmt::format("  {:<58} {:>7} {:>11} {:>11} {:>8}\n", "run", "prec", "measured s",
                     "simulated s", "error");
  for (const validation::PublishedPoint& p : r.points) {
    out << fmt::format("  {:<58} {:>7} {:>11.4f} {:>11.4f} {:>+7.1f}%{}\n", p.id, p.precision_class,
                       p.measured.seconds(), p.simulated.seconds(), 100 * p.error,
                       p.oom ? fmt::format("  (meshsim: out of memory, {:.1f} of {:.1f} GiB)",
                                           p.peak_memory / GiB(1), p.memory_capacity / GiB(1))
                             : "");
    if (args.assumptions) {
      out << fmt::format("      measured: {}\n", p.conversion);
      for (const std::string& a : p.assumptions) {
        out << fmt::format("      assumed:  {}\n", a);
      }
    }
  }
  out << fmt::format("\n  {:<26} {:>6} {:>11} {:>9} {:>10}\n", "summary", "points", "median|e|",
                     "p90|e|", "median e");
  out << summary_row("bf16 and fp16", r.overall);
  out << summary_row("fp8", r.fp8);
  out << summary_row("seq >= 16K (all)", r.long_sequence);
  for (const auto& [k, s] : r.by_precision) {
    out << summary_row("precision " + k, s);
  }
  for (const auto& [k, s] : r.by_source) {
    out << summary_row("source " + k, s);
  }
  out << fmt::format("\nout of memory in meshsim, not scored ({}):\n", r.out_of_memory.size());
  for (const validation::PublishedPoint& p : r.out_of_memory) {
    out << fmt::format("  {}: {:.1f} GiB of {:.1f} (measured {:.4f} s, simulated {:.4f} s)\n", p.id,
                       p.peak_memory / GiB(1), p.memory_capacity / GiB(1), p.measured.seconds(),
                       p.simulated.seconds());
  }
  out << fmt::format("\nnot expressible ({}):\n", r.not_expressed.size());
  for (const auto& [id, reason] : r.not_expressed) {
    out << fmt::format("  {}: {}\n", id, reason);
  }
}

nlohmann::json summary_json(const ErrorSummary& s) {
  return {{"points", s.points},
          {"median_abs_error", s.median_abs},
          {"p90_abs_error", s.p90_abs},
          {"median_error", s.median_signed}};
}

nlohmann::json report_json(const PublishedReport& r) {
  nlohmann::json points = nlohmann::json::array();
  for (const validation::PublishedPoint& p : r.points) {
    nlohmann::json by_class = nlohmann::json::object();
    for (size_t i = 0; i < p.time_by_class.size(); ++i) {
      by_class[std::string(to_string(static_cast<OpClass>(i)))] = p.time_by_class[i].seconds();
    }
    points.push_back({{"id", p.id},
                      {"source", p.source_group},
                      {"precision", p.precision_class},
                      {"seq", p.seq},
                      {"measured_step_s", p.measured.seconds()},
                      {"simulated_step_s", p.simulated.seconds()},
                      {"error", p.error},
                      {"oom", p.oom},
                      {"peak_memory_bytes", p.peak_memory.count()},
                      {"memory_capacity_bytes", p.memory_capacity.count()},
                      {"time_by_op_class_s", by_class},
                      {"exposed_comm_s", p.exposed_comm.seconds()}});
  }
  nlohmann::json oom = nlohmann::json::array();
  for (const validation::PublishedPoint& p : r.out_of_memory) {
    oom.push_back({{"id", p.id},
                   {"peak_memory_bytes", p.peak_memory.count()},
                   {"memory_capacity_bytes", p.memory_capacity.count()},
                   {"measured_step_s", p.measured.seconds()},
                   {"simulated_step_s", p.simulated.seconds()}});
  }
  nlohmann::json no = nlohmann::json::array();
  for (const auto& [id, reason] : r.not_expressed) {
    no.push_back({{"id", id}, {"reason", reason}});
  }
  nlohmann::json by_source, by_precision;
  for (const auto& [k, s] : r.by_source) {
    by_source[k] = summary_json(s);
  }
  for (const auto& [k, s] : r.by_precision) {
    by_precision[k] = summary_json(s);
  }
  return {{"points", points},
          {"out_of_memory", oom},
          {"not_expressible", no},
          {"bf16_fp16", summary_json(r.overall)},
          {"fp8", summary_json(r.fp8)},
          {"long_sequence", summary_json(r.long_sequence)},
          {"by_source", by_source},
          {"by_precision", by_precision}};
}

const validation::PublishedRun& run_named(const std::vector<validation::PublishedRun>& runs,
                                          const std::string& id, const std::string& file) {
  const auto it = std::find_if(runs.begin(), runs.end(),
                               [&id](const validation::PublishedRun& r) { return r.id == id; });
  if (it == runs.end()) {
    throw InputError("--run", "",
                     fmt::format("no run \"{}\" in {} (expected the id of one of its {} runs, "
                                 "e.g. \"{}\")",
                                 id, file, runs.size(), runs.empty() ? "" : runs.front().id));
  }
  return *it;
}

// `--run ID`: the run's mapping (how its metric became a step, what was assumed), then its step as
// `meshsim run` prints it, then the error; its report and timeline when asked.
int one_run(const std::vector<validation::PublishedRun>& runs, const PublishedArgs& args,
            std::ostream& out) {
  const validation::PublishedRun& run = run_named(runs, *args.run_id, args.runs);
  // The outputs are checked before the simulation, whose refusals are the run's answer: a report
  // or a timeline that cannot be written fails at once, as bad input.
  if (args.trace_path) {
    trace_format_of(*args.trace_path, "--trace");
  }
  std::optional<OutputFile> json;
  if (args.json_path) {
    json.emplace(*args.json_path, "--json");
  }
  const validation::PublishedMapping mapping =
      validation::map_published_run(run, topology::Catalogue::builtin());
  out << fmt::format("validate-published {}: run {}\n", args.runs, run.id);
  if (const auto* no = std::get_if<validation::NotExpressible>(&mapping)) {
    out << fmt::format("  not expressible: {}\n", no->reason);
    return 0;
  }
  const auto& s = std::get<validation::PublishedScenario>(mapping);
  out << fmt::format("  measured: {}\n", s.conversion);
  for (const std::string& a : s.assumptions) {
    out << fmt::format("  assumed:  {}\n", a);
  }
  RunOutputs outputs;
  outputs.trace_path = args.trace_path;
  outputs.trace_ranks = args.trace_ranks;
  outputs.step.full_simulation = args.full_simulation;
  // The trace writer's own errors (--trace, --trace-ranks) are bad input of the command, raised
  // here or as OutputErrors; what simulate_published refuses is the run's answer.
  const std::unique_ptr<scenario::StepObserver> trace =
      trace_observer(outputs, validation::scenario_of(s), s.cluster);
  const auto simulated = validation::simulate_published(s, outputs.step, trace.get());
  if (const auto* no = std::get_if<validation::NotExpressible>(&simulated)) {
    out << fmt::format("  not expressible: {}\n", no->reason);
    return 0;
  }
  const auto& report = std::get<scenario::StepReport>(simulated);
  out << "\n";
  print_summary(report, out);
  const double error = report.step_time / s.measured_step - 1;
  out << fmt::format("\n  measured step          {}\n  error                  {:+.1f}% "
                     "(simulated / measured - 1)\n",
                     format_duration(s.measured_step), 100 * error);
  if (json) {
    nlohmann::json j = to_json(report);
    j["published"] = {{"id", run.id},
                      {"measured_step_s", s.measured_step.seconds()},
                      {"error", error},
                      {"conversion", s.conversion},
                      {"assumptions", s.assumptions}};
    write_json(*json, j);
  }
  return 0;
}

}  // namespace

int published_command(const PublishedArgs& args, std::ostream& out) {
  const std::vector<validation::PublishedRun> runs = validation::load_published_runs(args.runs);
  if (args.run_id) {
    if (args.thresholds) {
      throw InputError("--thresholds", "",
                       "the thresholds hold the whole set's summaries; not with --run");
    }
    return one_run(runs, args, out);
  }
  if (args.trace_path || args.trace_ranks) {
    throw InputError(args.trace_path ? "--trace" : "--trace-ranks", "",
                     "a timeline is of one run: give --run ID");
  }
  if (args.full_simulation) {
    throw InputError("--full-simulation", "",
                     "the whole set is simulated in representative mode, as CI holds it: give "
                     "--run ID to simulate one run's every rank");
  }
  std::optional<validation::PublishedThresholds> limits;
  if (args.thresholds) {
    limits = validation::load_published_thresholds(*args.thresholds);
  }
  const topology::Catalogue catalogue = topology::Catalogue::builtin();
  const PublishedReport report = validation::evaluate_published(runs, catalogue);
  print_report(report, args, out);
  if (args.json_path) {
    write_json_file(*args.json_path, report_json(report), "--json");
  }
  if (limits) {
    const std::vector<std::string> over = validation::threshold_violations(report, *limits);
    for (const std::string& v : over) {
      out << "threshold exceeded: " << v << "\n";
    }
    if (!over.empty()) {
      return kExitThresholdExceeded;
    }
  }
  return 0;
}

}  // namespace meshsim::cli
