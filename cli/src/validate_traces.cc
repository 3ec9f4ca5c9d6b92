#include "validate_traces.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <set>

#include "meshsim/sim/error.h"
#include "meshsim/traces/rank_steps.h"
#include "meshsim/validation/comparison_trace.h"
#include "meshsim/validation/trace_replay.h"
#include "output_file.h"
#include "trace_limits.h"
#include "trace_setup.h"
#include "validate_command.h"
#include "version.h"

namespace meshsim::cli {

namespace {

using traces::StepBreakdown;
using validation::KernelRow;
using validation::RankSummary;
using validation::Replay;
using validation::ReplayCost;
using validation::Unmodelled;

constexpr size_t kKernelRows = 8;

double ms(Duration d) { return d.seconds() * 1e3; }

std::string percent(double e) { return fmt::format("{:+.1f}%", 100 * e); }

std::string error_text(Duration measured, Duration simulated) {
  if (measured <= Duration::zero()) {
    return simulated > Duration::zero() ? "new" : "";
  }
  return percent(simulated / measured - 1);
}

nlohmann::json breakdown_json(const StepBreakdown& b) {
  nlohmann::json classes = nlohmann::json::object();
  for (size_t c = 0; c < b.by_class.size(); ++c) {
    if (b.by_class[c] > Duration::zero()) {
      classes[std::string(to_string(static_cast<OpClass>(c)))] = b.by_class[c].seconds();
    }
  }
  return {{"step_s", b.step.seconds()},
          {"compute_s", b.compute.seconds()},
          {"communication_s", b.comm.seconds()},
          {"exposed_communication_s", b.exposed_comm.seconds()},
          {"overlap_s", b.overlap.seconds()},
          {"idle_s", b.idle.seconds()},
          {"exposed_p2p_s", b.exposed_p2p.seconds()},
          {"bubble_s", b.bubble.seconds()},
          {"host_launch_gaps_s", b.host_gap.seconds()},
          {"by_class_s", classes}};
}

void print_breakdown(const RankSummary& s, std::ostream& out) {
  out << fmt::format("  {:<28}{:>12}{:>12}\n", "per step (mean), ms", "measured", "simulated");
  const auto row = [&out](const char* name, Duration m, Duration sim) {
    out << fmt::format("    {:<26}{:>12.3f}{:>12.3f}\n", name, ms(m), ms(sim));
  };
  row("compute (union)", s.measured.compute, s.simulated.compute);
  row("communication (union)", s.measured.comm, s.simulated.comm);
  row("exposed communication", s.measured.exposed_comm, s.simulated.exposed_comm);
  row("overlap (comm under compute)", s.measured.overlap, s.simulated.overlap);
  row("idle", s.measured.idle, s.simulated.idle);
  row("pipeline bubble", s.measured.bubble, s.simulated.bubble);
  row("host-launch gaps", s.measured.host_gap, s.simulated.host_gap);
}

void print_classes(const RankSummary& s, std::ostream& out) {
  out << fmt::format("  {:<28}{:>12}{:>12}{:>9}\n", "op class (all steps), ms", "measured",
                     "simulated", "error");
  for (size_t c = 0; c < s.measured.by_class.size(); ++c) {
    const Duration m = s.measured.by_class[c];
    const Duration sim = s.simulated.by_class[c];
    if (m == Duration::zero() && sim == Duration::zero()) {
      continue;
    }
    out << fmt::format("    {:<26}{:>12.3f}{:>12.3f}{:>9}\n", to_string(static_cast<OpClass>(c)),
                       ms(m), ms(sim), error_text(m, sim));
  }
}

// What find_steps set aside or could not link, for the rank's header line.
std::string steps_notes(const traces::RankSteps& steps) {
  std::string out;
  if (steps.unlinked_ops > 0) {
    out += fmt::format("; {} device ops without a launch in the trace", steps.unlinked_ops);
  }
  if (steps.before_trace_ops > 0) {
    out += fmt::format(
        "; {} device ops launched before the trace began (in no step; the first "
        "step is measured from their end)",
        steps.before_trace_ops);
  }
  if (steps.unfinished_steps > 0) {
    out += fmt::format(
        "; {} step(s) left out: their device work had not run when the trace "
        "ended",
        steps.unfinished_steps);
  }
  return out;
}

std::string modelled_text(const RankSummary& s) {
  const double total = std::max(s.device_time.seconds(), 1e-30);
  std::vector<std::string> parts;
  for (size_t c = 0; c < s.measured_by_cost.size(); ++c) {
    if (c != static_cast<size_t>(ReplayCost::kMeasured) &&
        s.measured_by_cost[c] > Duration::zero()) {
      parts.push_back(fmt::format("{} {:.1f}%", to_string(static_cast<ReplayCost>(c)),
                                  100 * s.measured_by_cost[c].seconds() / total));
    }
  }
  std::vector<std::string> kept;
  for (size_t r = 1; r < s.measured_by_reason.size(); ++r) {
    if (s.measured_by_reason[r] > Duration::zero()) {
      kept.push_back(fmt::format("{} {:.1f}%", to_string(static_cast<Unmodelled>(r)),
                                 100 * s.measured_by_reason[r].seconds() / total));
    }
  }
  const Duration modelled = s.device_time - s.measured_by_cost[static_cast<size_t>(
                                                ReplayCost::kMeasured)];
  return fmt::format("{:.1f}% of the device time ({}); kept as measured: {}",
                     100 * modelled.seconds() / total,
                     parts.empty() ? "none" : fmt::format("{}", fmt::join(parts, ", ")),
                     kept.empty() ? "none" : fmt::format("{}", fmt::join(kept, ", ")));
}

std::string us(const std::optional<Duration>& d, int64_t n) {
  return d ? fmt::format("{:.1f} us (n={})", d->microseconds(), n) : "n/a";
}

nlohmann::json us_json(const std::optional<Duration>& d) {
  return d ? nlohmann::json(d->seconds()) : nlohmann::json(nullptr);
}

void print_rows(const std::vector<KernelRow>& rows, std::ostream& out) {
  if (rows.empty()) {
    out << "  per-kernel: no kernel was modelled (see above why)\n";
    return;
  }
  out << fmt::format("  largest per-kernel discrepancies (all steps; {} groups, all in --json)\n",
                     rows.size());
  out << fmt::format("    {:<44}{:<42}{:>6}{:>12}{:>12} {:>9}\n", "kernel", "costed as", "n",
                     "measured ms", "simulated", "error");
  for (size_t i = 0; i < std::min(kKernelRows, rows.size()); ++i) {
    const KernelRow& r = rows[i];
    std::string name = r.name.size() > 42 ? r.name.substr(0, 39) + "..." : r.name;
    // 41 characters hold a collective with its group ("collective all-reduce 33.6 MB over 2048").
    out << fmt::format("    {:<44}{:<42}{:>6}{:>12.3f}{:>12.3f} {:>9}\n", name,
                       fmt::format("{} {}", to_string(r.cost), r.shape).substr(0, 41), r.count,
                       ms(r.measured), ms(r.simulated), error_text(r.measured, r.simulated));
  }
}

nlohmann::json rows_json(const std::vector<KernelRow>& rows) {
  nlohmann::json a = nlohmann::json::array();
  for (const KernelRow& r : rows) {
    a.push_back({{"kernel", r.name},
                 {"costed_as", std::string(to_string(r.cost))},
                 {"op_class", std::string(to_string(r.op_class))},
                 {"shape", r.shape},
                 {"count", r.count},
                 {"measured_s", r.measured.seconds()},
                 {"simulated_s", r.simulated.seconds()}});
  }
  return a;
}

struct RankResult {
  RankSummary summary;
  nlohmann::json json;
};

RankResult validate_rank(const std::string& file, const traces::RankTrace& t,
                         const traces::RankSteps& steps, const validation::RankIdentity& id,
                         const TracePlatform& platform, std::vector<Replay>& keep_for_trace,
                         bool want_trace, std::ostream& out) {
  // Step by step: a multi-GB trace's replays are summarized, not kept.
  validation::RankSummarizer summarizer;
  validation::KernelRows kernel_rows(t);
  nlohmann::json step_rows = nlohmann::json::array();
  std::vector<std::pair<Duration, size_t>> by_duration;
  for (size_t i = 0; i < steps.steps.size(); ++i) {
    const std::unique_ptr<CommModel> comm = platform.comm();
    const Replay rep =
        validation::replay_step(t, steps.steps[i], id.rank, platform.world, platform.chip, *comm);
    summarizer.add(rep);
    kernel_rows.add(rep);
    by_duration.emplace_back(rep.measured_step, i);
    step_rows.push_back({{"step", rep.step},
                         {"measured_s", rep.measured_step.seconds()},
                         {"simulated_s", rep.simulated_step.seconds()},
                         {"error", rep.measured_step > Duration::zero()
                                       ? nlohmann::json(rep.simulated_step / rep.measured_step - 1)
                                       : nlohmann::json(nullptr)},
                         {"measured", breakdown_json(rep.measured)},
                         {"simulated", breakdown_json(rep.simulated)}});
  }
  RankResult r;
  RankSummary& s = r.summary;
  s = summarizer.summary();
  const std::vector<KernelRow> rows = kernel_rows.rows();
  const traces::HostDispatch h = traces::host_dispatch(t, steps);

  out << fmt::format("\nrank {} ({}{}): {} step(s) by {}{}\n", id.rank, file,
                     id.from_trace ? "" : "; rank from the file's position", steps.steps.size(),
                     steps.method, steps_notes(steps));
  out << fmt::format("  step time    measured {:.3f} ms, simulated {:.3f} ms, error {} (medians; "
                     "worst step {})\n",
                     ms(s.measured_step), ms(s.simulated_step), percent(s.step_error),
                     percent(s.worst_step_error));
  out << fmt::format("  modelled     {}\n", modelled_text(s));
  out << fmt::format(
      "  replay       {} host ops, {} cross-stream waits inferred, {} transfers kept "
      "as measured held to their peers' measured start\n",
      s.host_ops, s.inferred_dependencies, s.anchored_transfers);
  print_breakdown(s, out);
  print_classes(s, out);
  out << fmt::format("  host         operator to launch {}, launch call {}, launch to launch {}, "
                     "launch latency {} (medians)\n",
                     us(h.op_to_launch, h.op_to_launch_samples),
                     us(h.launch_call, h.launch_call_samples),
                     us(h.launch_interval, h.launch_interval_samples),
                     us(h.launch_latency, h.launch_latency_samples));
  print_rows(rows, out);

  nlohmann::json by_cost = nlohmann::json::object();
  for (size_t c = 0; c < s.measured_by_cost.size(); ++c) {
    by_cost[std::string(to_string(static_cast<ReplayCost>(c)))] = s.measured_by_cost[c].seconds();
  }
  nlohmann::json by_reason = nlohmann::json::object();
  for (size_t c = 1; c < s.measured_by_reason.size(); ++c) {
    by_reason[std::string(to_string(static_cast<Unmodelled>(c)))] =
        s.measured_by_reason[c].seconds();
  }
  r.json = {{"rank", id.rank},
            {"rank_from_trace", id.from_trace},
            {"file", file},
            {"step_method", steps.method},
            {"steps", step_rows},
            {"measured_step_s", s.measured_step.seconds()},
            {"simulated_step_s", s.simulated_step.seconds()},
            {"step_time_error", s.step_error},
            {"worst_step_error", s.worst_step_error},
            {"measured_mean", breakdown_json(s.measured)},
            {"simulated_mean", breakdown_json(s.simulated)},
            {"device_time_s", s.device_time.seconds()},
            {"measured_time_by_cost_s", by_cost},
            {"kept_as_measured_by_reason_s", by_reason},
            {"host_ops", s.host_ops},
            {"inferred_cross_stream_waits", s.inferred_dependencies},
            {"anchored_transfers", s.anchored_transfers},
            {"host_dispatch",
             {{"operator_to_launch_s", us_json(h.op_to_launch)},
              {"launch_call_s", us_json(h.launch_call)},
              {"launch_to_launch_s", us_json(h.launch_interval)},
              {"launch_latency_s", us_json(h.launch_latency)}}},
            {"kernels", rows_json(rows)}};
  if (want_trace) {  // the median step (the lower middle of an even count), replayed again
    std::stable_sort(by_duration.begin(), by_duration.end(),
                     [](const auto& a, const auto& b) { return a.first < b.first; });
    const std::unique_ptr<CommModel> comm = platform.comm();
    keep_for_trace.push_back(validation::replay_step(
        t, steps.steps[by_duration[(by_duration.size() - 1) / 2].second], id.rank,
        platform.world, platform.chip, *comm, true));
  }
  return r;
}

}  // namespace

int validate_traces_command(const ValidateTracesArgs& args, std::ostream& out) {
  if (args.trace_path) {
    (void)trace_format_of(*args.trace_path, "--trace");  // bad input before any work
  }
  const std::vector<std::string> files = traces::trace_files(args.inputs.inputs);
  std::optional<TracePlatform> platform;
  std::set<int64_t> ranks_seen;
  std::vector<Replay> for_trace;
  nlohmann::json rank_json = nlohmann::json::array();
  std::vector<double> errors;
  int64_t over = 0;
  for (size_t i = 0; i < files.size(); ++i) {
    const traces::RankTrace t = with_trace_limit_hint(
        [&] { return traces::read_kineto(files[i], args.inputs.limits); });
    const traces::RankSteps steps = traces::find_steps(t);
    const validation::RankIdentity id = validation::rank_identity(
        t, static_cast<int64_t>(i), static_cast<int64_t>(files.size()));
    if (!platform) {
      platform = make_platform(t, id.world, args.inputs);
      out << fmt::format("validate {} rank trace(s)\n  chip     {}\n  cluster  {}: {}\n  world    "
                         "{} rank(s){}\n",
                         files.size(), platform->chip_origin, platform->cluster_origin,
                         platform->cluster.description, platform->world,
                         id.from_trace ? " (distributedInfo)" : " (the number of traces given)");
    } else if (id.world != platform->world) {
      throw InputError(files[i], "/distributedInfo/world_size",
                       fmt::format("{} ranks, where {} says {}", id.world, files.front(),
                                   platform->world));
    }
    if (!ranks_seen.insert(id.rank).second) {
      throw InputError(files[i], "/distributedInfo/rank",
                       fmt::format("rank {} appears in two of the traces given", id.rank));
    }
    if (id.rank >= platform->world) {
      throw InputError(files[i], "/distributedInfo/rank",
                       fmt::format("rank {} outside the world of {}", id.rank, platform->world));
    }
    RankResult r = validate_rank(files[i], t, steps, id, *platform, for_trace,
                                 args.trace_path.has_value(), out);
    errors.push_back(r.summary.step_error);
    if (args.max_step_error && std::fabs(r.summary.step_error) > *args.max_step_error) {
      ++over;
    }
    rank_json.push_back(std::move(r.json));
  }
  std::vector<double> abs_errors;
  for (const double e : errors) {
    abs_errors.push_back(std::fabs(e));
  }
  std::sort(abs_errors.begin(), abs_errors.end());
  const double median_abs = abs_errors[(abs_errors.size() - 1) / 2];
  out << fmt::format("\nstep-time error over {} rank(s): median |error| {:.1f}%, largest {:.1f}%\n",
                     errors.size(), 100 * median_abs, 100 * abs_errors.back());
  if (args.json_path) {
    write_json_file(*args.json_path,
                    {{"traces", files},
                     {"chip", platform->chip.name},
                     {"chip_origin", platform->chip_origin},
                     {"cluster", platform->cluster.name},
                     {"cluster_origin", platform->cluster_origin},
                     {"world_size", platform->world},
                     {"median_abs_step_time_error", median_abs},
                     {"max_abs_step_time_error", abs_errors.back()},
                     {"ranks", rank_json},
                     {"meshsim_version", std::string(version())}},
                    "--json");
  }
  if (args.trace_path) {
    const traces::TraceFormat format = trace_format_of(*args.trace_path, "--trace");
    OutputFile file(*args.trace_path, "--trace");
    validation::write_replay_trace(file.stream(), format, for_trace,
                                   {{"traces", fmt::format("{}", fmt::join(files, ", "))},
                                    {"chip", platform->chip_origin},
                                    {"cluster", platform->cluster_origin},
                                    {"meshsim_version", std::string(version())}});
    file.commit();
    out << fmt::format("trace    {}: each rank's median step, simulated and measured side by "
                       "side from t = 0 (open it in ui.perfetto.dev)\n",
                       *args.trace_path);
  }
  if (over > 0) {
    out << fmt::format("\nFAIL: {} rank(s) with a step-time error beyond +-{:.1f}%\n", over,
                       100 * *args.max_step_error);
    return kExitThresholdExceeded;
  }
  return 0;
}

}  // namespace meshsim::cli
