#include "calibrate_command.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <nlohmann/json.hpp>

#include "meshsim/sim/error.h"
#include "meshsim/validation/calibrate.h"
#include "meshsim/validation/manifest.h"
#include "meshsim/validation/profile.h"
#include "output_file.h"
#include "report.h"
#include "trace_limits.h"
#include "version.h"

namespace meshsim::cli {
namespace {

using validation::CalibratedCase;
using validation::Calibration;

template <typename Fn>
void for_each_class_value(const std::array<std::optional<double>, kNumOpClasses>& values, Fn fn) {
  for (size_t c = 0; c < values.size(); ++c) {
    if (values[c]) {
      fn(std::string(to_string(static_cast<OpClass>(c))), *values[c]);
    }
  }
}

double k_half(const topology::Efficiency& e) {
  return e.matmul_shape ? e.matmul_shape->k_half : 0.0;
}
Duration call_overhead(const topology::Efficiency& e) {
  return e.matmul_shape ? e.matmul_shape->call_overhead : Duration::zero();
}

std::string efficiency_text(const topology::Efficiency& e, bool shape) {
  std::string s = fmt::format("matmul {:.4f}, memory {:.4f}, launch {:.3f} us", e.matmul, e.memory,
                              e.launch_overhead.microseconds());
  if (shape) {
    s += fmt::format(", k_half {:.2f}, call {:.3f} us", k_half(e), call_overhead(e).microseconds());
  }
  std::vector<std::string> classes;
  for_each_class_value(e.memory_by_class, [&classes](const std::string& name, double v) {
    classes.push_back(fmt::format("{} {:.4f}", name, v));
  });
  if (!classes.empty()) {
    s += fmt::format("; memory by class: {}", fmt::join(classes, ", "));
  }
  return s;
}

nlohmann::json efficiency_json(const topology::Efficiency& e) {
  nlohmann::json by_class = nlohmann::json::object();
  for_each_class_value(e.memory_by_class,
                       [&by_class](const std::string& name, double v) { by_class[name] = v; });
  return {{"matmul", e.matmul},
          {"memory", e.memory},
          {"launch_overhead_s", e.launch_overhead.seconds()},
          {"k_half", k_half(e)},
          {"call_overhead_s", call_overhead(e).seconds()},
          {"memory_by_class", by_class}};
}

nlohmann::json case_json(const CalibratedCase& r) {
  nlohmann::json classes = nlohmann::json::object();
  for_each_class_value(r.class_errors_after,
                       [&classes](const std::string& name, double e) { classes[name] = e; });
  nlohmann::json row = {{"case", r.case_name},
                        {"manifest", r.manifest_path},
                        {"measured_step_s", r.measured_step.seconds()},
                        {"step_time_error_before", r.step_time_error_before},
                        {"step_time_error_after", r.step_time_error_after}};
  if (r.step_time_error_held_out) {
    row["step_time_error_held_out"] = *r.step_time_error_held_out;
    row["params_held_out"] = efficiency_json(*r.held_out);
  }
  row["op_class_errors_after"] = classes;
  return row;
}

void print_cases(const Calibration& c, std::ostream& out) {
  out << "\nstep time, simulated / measured - 1 (through the engine); per op class after the "
         "fit:\n";
  out << fmt::format("  {:<28}{:>12}{:>10}{:>10}{:>10}\n", "case", "measured s", "before", "after",
                     "held out");
  for (const CalibratedCase& r : c.cases) {
    const std::string held = r.step_time_error_held_out
                                 ? fmt::format("{:+.1f}%", 100 * *r.step_time_error_held_out)
                                 : "n/a";
    std::string per_class;
    for_each_class_value(r.class_errors_after, [&per_class](const std::string& name, double e) {
      per_class += fmt::format(" {} {:+.0f}%", name, 100 * e);
    });
    out << fmt::format("  {:<28}{:>12.6f}{:>+9.1f}%{:>+9.1f}%{:>10}\n", r.case_name,
                       r.measured_step.seconds(), 100 * r.step_time_error_before,
                       100 * r.step_time_error_after, held);
    out << fmt::format("  {:<28}{}\n", "", per_class);
  }
  if (!c.max_abs_held_out_error) {
    out << "leave-one-out: impossible with one manifest (needs at least two)\n";
  } else {
    out << fmt::format(
        "held out: each case predicted by a fit to the others; the largest "
        "|error| is {:.1f}%\n",
        100 * *c.max_abs_held_out_error);
  }
}

}  // namespace

int calibrate_command(const CalibrateArgs& args, std::ostream& out) {
  if (args.hardware_profile.empty()) {
    throw InputError("--hardware-profile", "",
                     "a base hardware profile is required (a one-chip catalogue such as "
                     "validation/profiles/cpu-amd-epyc-2c.json)");
  }
  const validation::Profile base = validation::load_profile(args.hardware_profile);
  std::vector<validation::Manifest> manifests;
  for (const std::string& path : args.manifests) {
    manifests.push_back(validation::load_manifest(path));
  }
  const Calibration c = with_trace_limit_hint(
      [&] { return validation::calibrate(base, manifests, args.trace_limits); });

  out << fmt::format("calibrate {} ({}) from {} manifest(s){}\n", base.chip_name,
                     base.chip.description, c.cases.size(),
                     c.shape_fitted ? ""
                                    : " (no matmul_shape in the profile: k_half and call "
                                      "overhead not fitted)");
  out << fmt::format("  before: {}; loss {:.4g}\n", efficiency_text(c.before, c.shape_fitted),
                     c.loss_before);
  out << fmt::format("  after:  {}; loss {:.4g}\n", efficiency_text(c.after, c.shape_fitted),
                     c.loss_after);
  print_cases(c, out);

  const std::string source = validation::calibration_source(
      c, base, fmt::format("meshsim calibrate (meshsim {})", version()));
  write_json_file(args.out, validation::profile_document(base, c.after, source), "--out");
  out << fmt::format("wrote {}\n", args.out);
  if (args.json_path) {
    nlohmann::json rows = nlohmann::json::array();
    for (const CalibratedCase& r : c.cases) {
      rows.push_back(case_json(r));
    }
    write_json_file(*args.json_path,
                    {{"hardware_profile", base.path},
                     {"out", args.out},
                     {"params_before", efficiency_json(c.before)},
                     {"params_after", efficiency_json(c.after)},
                     {"loss_before", c.loss_before},
                     {"loss_after", c.loss_after},
                     {"max_abs_held_out_step_error", c.max_abs_held_out_error.value_or(0.0)},
                     {"cases", rows}},
                    "--json");
  }
  return 0;
}

}  // namespace meshsim::cli
