#include "validate_command.h"

#include <fmt/format.h>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>

#include "meshsim/sim/error.h"
#include "meshsim/traces/import.h"
#include "meshsim/validation/comparison.h"
#include "meshsim/validation/comparison_trace.h"
#include "meshsim/validation/manifest.h"
#include "meshsim/validation/profile.h"
#include "output_file.h"
#include "report.h"
#include "trace_limits.h"
#include "run_command.h"
#include "trace_setup.h"
#include "version.h"

namespace meshsim::cli {
namespace {

using validation::Comparison;
using validation::Manifest;
using validation::Measured;
using validation::Profile;
using validation::Simulated;

constexpr size_t kDiscrepancyRows = 12;

std::string percent(Duration measured, Duration simulated) {
  const auto e = validation::relative_error(measured, simulated);
  return e ? fmt::format("{:+.1f}%", 100 * *e) : "n/a";
}

nlohmann::json error_or_null(Duration measured, Duration simulated) {
  const auto e = validation::relative_error(measured, simulated);
  return e ? nlohmann::json(*e) : nlohmann::json(nullptr);
}

void print_header(const Manifest& m, const Profile& profile, const Measured& measured,
                  std::ostream& out) {
  out << fmt::format("validate {} ({})\n", m.case_name, m.path);
  out << fmt::format("  model      {}\n", scenario::describe_model(m.model));
  out << fmt::format("  hardware   {} ({}); {} {}{}\n", profile.chip.description, profile.path,
                     m.framework, m.framework_version,
                     m.threads ? fmt::format(", {} thread(s)", *m.threads) : "");
  out << fmt::format("  run        {} x {} tokens, {}; {} kernels, {} attention, {} optimizer\n",
                     m.global_batch, m.seq, to_string(m.dtype), workloads::to_string(m.kernels),
                     workloads::to_string(m.attention),
                     workloads::to_string(m.optimizer_kernels));
  out << fmt::format("  trace      {}: {} step(s) of {} ops, median {:.6f} s profiled\n",
                     m.trace_path, measured.steps, measured.op_source,
                     measured.trace_step.seconds());
  if (measured.op_source == "host") {
    if (const auto& c = measured.overhead_per_event) {
      out << fmt::format("  profiler   {:.2f} us per recorded event (measured by the trainer), "
                         "{:.0f} events per step: {:.6f} s removed from each step's ops\n",
                         c->microseconds(), measured.events_per_step,
                         c->seconds() * measured.events_per_step);
    } else {
      out << "  profiler   cost per event not measured by the trainer: none removed\n";
    }
    out << fmt::format("  scaled     op times x {:.3f}: the profiled steps' ops, with the time "
                       "before each, scaled to the unprofiled step\n",
                       measured.scale);
  }
}

nlohmann::json print_classes(const Measured& measured, const Simulated& simulated,
                             std::ostream& out) {
  nlohmann::json classes = nlohmann::json::object();
  out << fmt::format("{:<14}{:>14}{:>14}{:>10}\n", "op class", "measured s", "simulated s",
                     "error");
  for (int c = 0; c < kNumOpClasses; ++c) {
    const auto k = static_cast<size_t>(c);
    const Duration ms = measured.by_class[k];
    const Duration ss = simulated.by_class[k];
    if (ms == Duration::zero() && ss == Duration::zero()) {
      continue;
    }
    const std::string name(to_string(static_cast<OpClass>(c)));
    classes[name] = {{"measured_s", ms.seconds()},
                     {"simulated_s", ss.seconds()},
                     {"error", error_or_null(ms, ss)}};
    out << fmt::format("{:<14}{:>14.6f}{:>14.6f}{:>10}\n", name, ms.seconds(), ss.seconds(),
                       percent(ms, ss));
  }
  if (measured.op_source != "host") {
    out << fmt::format("{:<14}{:>14.6f}{:>14}  (the unprofiled step minus the kernels above: "
                       "gaps and overlap)\n",
                       "unattributed", (measured.step - measured.op_time()).seconds(), "");
  }
  out << fmt::format("{:<14}{:>14.6f}{:>14}  (no classification rule matched; counted as "
                     "elementwise above)\n",
                     "unclassified", measured.unclassified.seconds(), "");
  return classes;
}

nlohmann::json print_gemms(const Measured& measured, const Simulated& simulated,
                           std::ostream& out) {
  const std::vector<validation::GemmRow> rows =
      validation::gemm_rows(measured.gemms, simulated.gemms);
  nlohmann::json json = nlohmann::json::array();
  for (const validation::GemmRow& r : rows) {
    json.push_back({{"shape", r.key.label()},
                    {"op_class", std::string(to_string(r.key.op_class))},
                    {"batch", r.key.batch},
                    {"k", r.key.k},
                    {"mn", {r.key.small, r.key.large}},
                    {"measured_count", r.measured.count},
                    {"measured_s", r.measured.time.seconds()},
                    {"simulated_count", r.simulated.count},
                    {"simulated_s", r.simulated.time.seconds()},
                    {"error", error_or_null(r.measured.time, r.simulated.time)}});
  }
  if (rows.empty()) {
    out << "\nper-op discrepancies: the trace records no GEMM shapes (profile with "
           "record_shapes=True)\n";
    return json;
  }
  out << fmt::format("\nlargest per-op discrepancies: GEMMs by shape, per step ({} shapes; "
                     "all in --json)\n",
                     rows.size());
  out << fmt::format("  {:<36}{:>18}{:>18}{:>10}\n", "GEMM (class, [batch x] MxN, k)",
                     "measured s (n)", "simulated s (n)", "error");
  for (size_t i = 0; i < std::min(kDiscrepancyRows, rows.size()); ++i) {
    const validation::GemmRow& r = rows[i];
    out << fmt::format("  {:<36}{:>12.6f} ({:>3g}){:>12.6f} ({:>3g}){:>10}\n", r.key.label(),
                       r.measured.time.seconds(), r.measured.count, r.simulated.time.seconds(),
                       r.simulated.count, percent(r.measured.time, r.simulated.time));
  }
  return json;
}

std::vector<double> seconds_of(const std::vector<Duration>& v) {
  std::vector<double> out;
  for (const Duration d : v) {
    out.push_back(d.seconds());
  }
  return out;
}

void write_json(const ValidateArgs& args, const Manifest& m, const Profile& profile,
                const Comparison& c, nlohmann::json classes, nlohmann::json gemms) {
  const Measured& measured = c.measured;
  write_json_file(*args.json_path,
                  {{"manifest", args.manifest},
                   {"case", m.case_name},
                   {"hardware_profile", profile.path},
                   {"step_time_error", c.step_time_error},
                   {"measured_step_s", m.median_step.seconds()},
                   {"measured_step_times_s", seconds_of(m.step_times)},
                   {"measured_trace_step_s", measured.trace_step.seconds()},
                   {"simulated_step_s", c.simulated_step.seconds()},
                   {"profiler_overhead_per_event_s",
                    measured.overhead_per_event.value_or(Duration::zero()).seconds()},
                   {"profiler_events_per_step", measured.events_per_step},
                   {"op_classes", std::move(classes)},
                   {"unattributed_measured_s", (measured.step - measured.op_time()).seconds()},
                   {"op_time_scale", measured.scale},
                   {"unclassified_measured_s", measured.unclassified.seconds()},
                   {"gemms", std::move(gemms)}},
                  "--json");
}

void write_trace(const std::string& path, const Manifest& m, const Profile& profile,
                 const traces::MeasuredTrace& trace, const Comparison& c, std::ostream& out) {
  const traces::TraceFormat format = trace_format_of(path, "--trace");
  OutputFile file(path, "--trace");
  validation::write_comparison_trace(
      file.stream(), format, m, profile, trace,
      {{"case", m.case_name},
       {"manifest", m.path},
       {"hardware_profile", profile.path},
       {"measured_step_s", fmt::format("{:.6f}", m.median_step.seconds())},
       {"simulated_step_s", fmt::format("{:.6f}", c.simulated_step.seconds())},
       {"step_time_error", fmt::format("{:+.4f}", c.step_time_error)},
       {"meshsim_version", std::string(version())}});
  file.commit();
  out << fmt::format("\ntrace      {}: the simulated step and the trace's median step, side by "
                     "side from t = 0 (open it in ui.perfetto.dev)\n",
                     path);
}

}  // namespace

int validate_command(const ValidateArgs& args, std::ostream& out) {
  if (args.trace_path) {
    (void)trace_format_of(*args.trace_path, "--trace");  // bad input before any work
  }
  const Manifest m = validation::load_manifest(args.manifest);
  if (args.hardware_profile.empty()) {
    throw InputError("--hardware-profile", "",
                     fmt::format("{} was measured on a {} machine; give its hardware profile (a "
                                 "one-chip catalogue such as validation/profiles/"
                                 "cpu-amd-epyc-2c.json)",
                                 args.manifest, m.platform));
  }
  const Profile profile = validation::load_profile(args.hardware_profile);
  const traces::MeasuredTrace trace =
      with_trace_limit_hint([&] { return traces::import_trace(m.trace_path, args.trace_limits); });
  const Comparison c = validation::compare(m, profile.chip, trace);

  print_header(m, profile, c.measured, out);
  out << fmt::format("\nstep time  measured {:.6f} s (median of {} unprofiled steps), simulated "
                     "{:.6f} s, error {:+.1f}%\n\n",
                     m.median_step.seconds(), m.step_times.size(), c.simulated_step.seconds(),
                     100 * c.step_time_error);
  nlohmann::json classes = print_classes(c.measured, c.simulated, out);
  nlohmann::json gemms = print_gemms(c.measured, c.simulated, out);
  if (args.json_path) {
    write_json(args, m, profile, c, std::move(classes), std::move(gemms));
  }
  if (args.trace_path) {
    write_trace(*args.trace_path, m, profile, trace, c, out);
  }
  if (args.max_step_error && std::fabs(c.step_time_error) > *args.max_step_error) {
    out << fmt::format("\nFAIL: step-time error {:+.1f}% exceeds the threshold +-{:.1f}%\n",
                       100 * c.step_time_error, 100 * *args.max_step_error);
    return kExitThresholdExceeded;
  }
  return 0;
}

}  // namespace meshsim::cli
