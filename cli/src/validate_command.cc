#include "validate_command.h"

#include <fmt/format.h>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>

#include "comparison.h"
#include "manifest.h"
#include "meshsim/sim/error.h"
#include "meshsim/traces/import.h"
#include "run_command.h"
#include "trace_setup.h"
#include "validate_trace.h"

namespace meshsim::cli {
namespace {

constexpr size_t kDiscrepancyRows = 12;

std::string percent(double measured, double simulated) {
  return measured > 0 ? fmt::format("{:+.1f}%", 100 * (simulated / measured - 1)) : "n/a";
}

nlohmann::json error_or_null(double measured, double simulated) {
  return measured > 0 ? nlohmann::json(simulated / measured - 1) : nlohmann::json(nullptr);
}

void print_header(const Manifest& m, const Profile& profile, const Measured& measured,
                  std::ostream& out) {
  out << fmt::format("validate {} ({})\n", m.case_name, m.path);
  out << fmt::format("  model      {}\n", describe_model(m.model));
  out << fmt::format("  hardware   {} ({}); {} {}{}\n", profile.chip.description, profile.path,
                     m.framework, m.framework_version,
                     m.threads ? fmt::format(", {} thread(s)", *m.threads) : "");
  out << fmt::format("  run        {} x {} tokens, {}; {} kernels, {} attention, {} optimizer\n",
                     m.global_batch, m.seq, m.dtype, m.kernels, m.attention, m.optimizer_kernels);
  out << fmt::format("  trace      {}: {} step(s) of {} ops, median {:.6f} s profiled\n",
                     m.trace_path, measured.steps, measured.op_source, measured.trace_step_s);
  if (measured.op_source == "host") {
    if (measured.overhead_measured) {
      out << fmt::format("  profiler   {:.2f} us per recorded event (measured by the trainer), "
                         "{:.0f} events per step: {:.6f} s removed from each step's ops\n",
                         measured.overhead_per_event_s * 1e6, measured.events_per_step,
                         measured.overhead_per_event_s * measured.events_per_step);
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
    const double ms = measured.by_class[k];
    const double ss = simulated.by_class[k];
    if (ms == 0 && ss == 0) {
      continue;
    }
    const std::string name(to_string(static_cast<OpClass>(c)));
    classes[name] = {{"measured_s", ms}, {"simulated_s", ss}, {"error", error_or_null(ms, ss)}};
    out << fmt::format("{:<14}{:>14.6f}{:>14.6f}{:>10}\n", name, ms, ss, percent(ms, ss));
  }
  if (measured.op_source != "host") {
    out << fmt::format("{:<14}{:>14.6f}{:>14}  (the unprofiled step minus the kernels above: "
                       "gaps and overlap)\n",
                       "unattributed", measured.step_s - measured.op_time_s(), "");
  }
  out << fmt::format("{:<14}{:>14.6f}{:>14}  (no classification rule matched; counted as "
                     "elementwise above)\n",
                     "unclassified", measured.unclassified_s, "");
  return classes;
}

nlohmann::json print_gemms(const Measured& measured, const Simulated& simulated,
                           std::ostream& out) {
  const std::vector<GemmRow> rows = gemm_rows(measured.gemms, simulated.gemms);
  nlohmann::json json = nlohmann::json::array();
  for (const GemmRow& r : rows) {
    json.push_back({{"shape", r.key.label()},
                    {"op_class", std::string(to_string(r.key.op_class))},
                    {"batch", r.key.batch},
                    {"k", r.key.k},
                    {"mn", {r.key.small, r.key.large}},
                    {"measured_count", r.measured.count},
                    {"measured_s", r.measured.time_s},
                    {"simulated_count", r.simulated.count},
                    {"simulated_s", r.simulated.time_s},
                    {"error", error_or_null(r.measured.time_s, r.simulated.time_s)}});
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
    const GemmRow& r = rows[i];
    out << fmt::format("  {:<36}{:>12.6f} ({:>3g}){:>12.6f} ({:>3g}){:>10}\n", r.key.label(),
                       r.measured.time_s, r.measured.count, r.simulated.time_s, r.simulated.count,
                       percent(r.measured.time_s, r.simulated.time_s));
  }
  return json;
}

}  // namespace

int validate_command(const ValidateArgs& args, std::ostream& out) {
  if (args.trace_path) {
    (void)trace_format_of(*args.trace_path, "--trace");  // bad input before any work
  }
  const Manifest m = load_manifest(args.manifest);
  if (args.hardware_profile.empty()) {
    throw InputError("--hardware-profile", "",
                     fmt::format("{} was measured on a {} machine; give its hardware profile (a "
                                 "one-chip catalogue such as validation/profiles/"
                                 "cpu-amd-epyc-2c.json)",
                                 args.manifest, m.platform));
  }
  const Profile profile = load_profile(args.hardware_profile);
  const traces::MeasuredTrace trace = traces::import_trace(m.trace_path);
  const Measured measured = measure(m, trace);
  const Simulated simulated = simulate_kernels(step_kernels(m), profile.chip);
  const double simulated_s = ManifestRun(m, profile.chip).run().end.seconds();
  // One device runs its kernels back to back: the engine's step is the kernels' sum.
  SIM_CHECK(std::fabs(simulated_s - simulated.step_s) <=
                1e-12 * static_cast<double>(simulated.kernels) + 1e-9 * simulated.step_s,
            "single-device step {} s differs from its kernels' sum {} s", simulated_s,
            simulated.step_s);

  const double error = simulated_s / m.median_step_s - 1;
  print_header(m, profile, measured, out);
  out << fmt::format("\nstep time  measured {:.6f} s (median of {} unprofiled steps), simulated "
                     "{:.6f} s, error {:+.1f}%\n\n",
                     m.median_step_s, m.step_times_s.size(), simulated_s, 100 * error);
  const nlohmann::json classes = print_classes(measured, simulated, out);
  const nlohmann::json gemms = print_gemms(measured, simulated, out);

  if (args.json_path) {
    write_json_file(*args.json_path,
               {{"manifest", args.manifest},
                {"case", m.case_name},
                {"hardware_profile", profile.path},
                {"step_time_error", error},
                {"measured_step_s", m.median_step_s},
                {"measured_step_times_s", m.step_times_s},
                {"measured_trace_step_s", measured.trace_step_s},
                {"simulated_step_s", simulated_s},
                {"profiler_overhead_per_event_s", measured.overhead_per_event_s},
                {"profiler_events_per_step", measured.events_per_step},
                {"op_classes", classes},
                {"unattributed_measured_s", measured.step_s - measured.op_time_s()},
                {"op_time_scale", measured.scale},
                {"unclassified_measured_s", measured.unclassified_s},
                {"gemms", gemms}},
                    "--json");
  }
  if (args.trace_path) {
    write_comparison_trace(
        *args.trace_path, m, profile, trace,
        {{"case", m.case_name},
         {"manifest", m.path},
         {"hardware_profile", profile.path},
         {"measured_step_s", fmt::format("{:.6f}", m.median_step_s)},
         {"simulated_step_s", fmt::format("{:.6f}", simulated_s)},
         {"step_time_error", fmt::format("{:+.4f}", error)},
         {"meshsim_version", MESHSIM_VERSION}});
    out << fmt::format("\ntrace      {}: the simulated step and the trace's median step, side by "
                       "side from t = 0 (open it in ui.perfetto.dev)\n",
                       *args.trace_path);
  }
  if (args.max_step_error && std::fabs(error) > *args.max_step_error) {
    out << fmt::format("\nFAIL: step-time error {:+.1f}% exceeds the threshold +-{:.1f}%\n",
                       100 * error, 100 * *args.max_step_error);
    return kExitThresholdExceeded;
  }
  return 0;
}

}  // namespace meshsim::cli
