#include "meshsim/validation/calibrate.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>

#include "calibrate_fit.h"
#include "meshsim/traces/import.h"
#include "meshsim/validation/comparison.h"

namespace meshsim::validation {
namespace {

// The step through the engine on the profile's chip at efficiency `e`, relative to measured.
double engine_step_error(const Manifest& m, const Profile& base, const topology::Efficiency& e) {
  topology::Chip chip = base.chip;
  chip.efficiency = e;
  return ManifestRun(m, chip).run().end.since_start() / m.median_step - 1;
}

std::array<std::optional<double>, kNumOpClasses> class_errors(const FitCase& c,
                                                              const Prediction& t) {
  std::array<std::optional<double>, kNumOpClasses> out{};
  for (size_t k = 0; k < t.by_class.size(); ++k) {
    if (c.measured[k] > 0 && t.by_class[k] > 0) {
      out[k] = t.by_class[k] / c.measured[k] - 1;
    }
  }
  return out;
}

std::vector<const FitCase*> all_but(const std::vector<FitCase>& cases, size_t skip) {
  std::vector<const FitCase*> out;
  for (size_t j = 0; j < cases.size(); ++j) {
    if (j != skip) {
      out.push_back(&cases[j]);
    }
  }
  return out;
}

}  // namespace

Calibration calibrate(const Profile& base, const std::vector<Manifest>& manifests,
                      const traces::ImportLimits& trace_limits) {
  std::vector<FitCase> fit_cases;
  for (const Manifest& m : manifests) {
    const traces::MeasuredTrace trace = traces::import_trace(m.trace_path, trace_limits);
    fit_cases.push_back(make_fit_case(step_kernels(m), base.chip, measure(m, trace)));
  }
  const std::vector<const FitCase*> every = all_but(fit_cases, fit_cases.size());
  Calibration c;
  c.before = base.chip.efficiency;
  c.shape_fitted = c.before.matmul_shape.has_value();
  c.after = fit(every, c.before);
  c.loss_before = fit_loss(every, c.before);
  c.loss_after = fit_loss(every, c.after);
  for (size_t i = 0; i < manifests.size(); ++i) {
    const Manifest& m = manifests[i];
    CalibratedCase r;
    r.case_name = m.case_name;
    r.manifest_path = m.path;
    r.measured_step = m.median_step;
    r.step_time_error_before = engine_step_error(m, base, c.before);
    r.step_time_error_after = engine_step_error(m, base, c.after);
    if (manifests.size() > 1) {
      r.held_out = fit(all_but(fit_cases, i), c.before);
      r.step_time_error_held_out = engine_step_error(m, base, *r.held_out);
      c.max_abs_held_out_error =
          std::max(c.max_abs_held_out_error.value_or(0.0), std::fabs(*r.step_time_error_held_out));
    }
    r.class_errors_after = class_errors(fit_cases[i], predict(fit_cases[i], c.after));
    c.cases.push_back(std::move(r));
  }
  return c;
}

std::string calibration_source(const Calibration& c, const Profile& base, std::string_view tool) {
  std::vector<std::string> names;
  std::vector<std::string> held_out;
  for (const CalibratedCase& r : c.cases) {
    names.push_back(r.case_name);
    if (r.step_time_error_held_out) {
      held_out.push_back(
          fmt::format("{} {:+.1f}%", r.case_name, 100 * *r.step_time_error_held_out));
    }
  }
  return fmt::format(
      "fitted by {} from base profile {} to {} measured run(s): {}; least squares over step, "
      "op-class and GEMM-shape times (validation/include/meshsim/validation/calibrate.h){}",
      tool, base.path, c.cases.size(), fmt::join(names, ", "),
      held_out.empty() ? ""
                       : fmt::format("; leave-one-out step errors: {}", fmt::join(held_out, ", ")));
}

}  // namespace meshsim::validation
