// Calibration from replayed profiler traces (calibrate.h, calibrate_traces): the fitter of
// calibrate_fit.h on the kernels the replay costs.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "calibrate_fit.h"
#include "meshsim/sim/error.h"
#include "meshsim/validation/calibrate.h"

namespace meshsim::validation {

namespace {

struct Prepared {
  FitCase fit;
  bool has_kernels = false;
  Duration kernels;
};

// A replayed step reduced to the fitter's terms: its compute kernels costed by the chip's model
// (not host copies, not kernels kept as measured) and their measured times.
Prepared prepare(const Replay& r, const topology::Chip& chip) {
  std::vector<StepKernel> kernels;
  Measured m;
  for (const ReplayOp& op : r.ops) {
    const bool fitted = (op.cost == ReplayCost::kGemm || op.cost == ReplayCost::kMemory ||
                         op.cost == ReplayCost::kCopy) &&
                        op.compute.host == HostCopy::kNone;
    if (!fitted) {
      continue;
    }
    kernels.push_back({"", op.compute});
    m.step += op.measured;
    m.by_class[static_cast<size_t>(op.compute.op_class)] += op.measured;
    if (op.compute.shape) {
      GroupTimes& g = m.gemms[gemm_key(op.compute.op_class, *op.compute.shape)];
      g.count += 1;
      g.time += op.measured;
    }
  }
  Prepared p;
  p.has_kernels = !kernels.empty() && m.step > Duration::zero();
  p.kernels = m.step;
  m.steps = 1;
  m.op_source = "device";
  m.trace_step = m.step;
  p.fit = make_fit_case(kernels, chip, m);
  return p;
}

Replay replay_with(const TraceCase& c, int64_t world, const topology::Chip& chip,
                   const topology::Efficiency& e, const CommFactory& comm) {
  topology::Chip with = chip;
  with.efficiency = e;
  const std::unique_ptr<CommModel> model = comm();
  return replay_step(*c.trace, *c.step, c.rank, world, with, *model);
}

double step_error(const Replay& r) {
  return r.measured_step > Duration::zero() ? r.simulated_step / r.measured_step - 1 : 0.0;
}

// The parameters of `e` by name, as FittedParameter::name spells them.
std::vector<std::pair<std::string, double*>> slots(topology::Efficiency& e) {
  std::vector<std::pair<std::string, double*>> out = {{"matmul", &e.matmul},
                                                      {"memory", &e.memory}};
  for (size_t c = 0; c < e.memory_by_class.size(); ++c) {
    if (e.memory_by_class[c]) {
      out.emplace_back(fmt::format("memory/{}", to_string(static_cast<OpClass>(c))),
                       &*e.memory_by_class[c]);
    }
  }
  if (e.matmul_shape) {
    out.emplace_back("k_half", &e.matmul_shape->k_half);
  }
  return out;
}

std::vector<std::pair<std::string, Duration*>> duration_slots(topology::Efficiency& e) {
  std::vector<std::pair<std::string, Duration*>> out = {{"launch_overhead", &e.launch_overhead}};
  if (e.matmul_shape) {
    out.emplace_back("call_overhead", &e.matmul_shape->call_overhead);
  }
  return out;
}

// Whether moving the value moves the loss (calibrate.h); every value the fit does not pin goes
// back to `base`'s (a per-class memory efficiency the base lacks: the class takes the shared one).
// Returns the parameters, pinned or not.
std::vector<FittedParameter> pin(const std::vector<const FitCase*>& cases,
                                 const topology::Efficiency& base, topology::Efficiency& fitted) {
  const double best = fit_loss(cases, fitted);
  const auto moves = [&](const std::function<void(topology::Efficiency&, int)>& change) {
    for (const int dir : {-1, 0, 1}) {  // halved, the catalogue's value, doubled
      topology::Efficiency e = fitted;
      change(e, dir);
      if (fit_loss(cases, e) > best * (1 + 1e-3) + 1e-12) {
        return true;
      }
    }
    return false;
  };
  std::vector<FittedParameter> out;
  topology::Efficiency restored = fitted;
  topology::Efficiency base_copy = base;
  const auto base_values = slots(base_copy);
  const auto fitted_values = slots(fitted);
  for (size_t i = 0; i < fitted_values.size(); ++i) {
    const std::string name = fitted_values[i].first;
    const auto it = std::find_if(base_values.begin(), base_values.end(),
                                 [&name](const auto& b) { return b.first == name; });
    const double before = it != base_values.end() ? *it->second : *fitted_values[i].second;
    const bool pinned = moves([i, &name, before](topology::Efficiency& e, int dir) {
      double& v = *slots(e)[i].second;
      if (dir == 0) {
        v = before;
      } else if (name == "k_half") {
        v = dir > 0 ? v * 2 + 8 : v / 2;
      } else {
        v = dir > 0 ? std::min(1.0, v * 2) : v / 2;  // efficiencies stay in (0, 1]
      }
    });
    out.push_back({name, before, *fitted_values[i].second, pinned});
    if (pinned) {
      continue;
    }
    // By name: a per-class slot of `restored` may be gone (reset below) by now.
    for (auto& [slot_name, value] : slots(restored)) {
      if (slot_name == name && it != base_values.end()) {
        *value = before;
      }
    }
    for (size_t c = 0; c < restored.memory_by_class.size(); ++c) {
      if (it == base_values.end() &&
          name == fmt::format("memory/{}", to_string(static_cast<OpClass>(c)))) {
        restored.memory_by_class[c].reset();
      }
    }
  }
  // Per-class efficiencies of the base that the fit dropped (classes without data): kept.
  for (size_t c = 0; c < base.memory_by_class.size(); ++c) {
    if (base.memory_by_class[c] && !fitted.memory_by_class[c]) {
      out.push_back({fmt::format("memory/{}", to_string(static_cast<OpClass>(c))),
                     *base.memory_by_class[c], *base.memory_by_class[c], false});
      restored.memory_by_class[c] = base.memory_by_class[c];
    }
  }
  const auto fitted_d = duration_slots(fitted);
  const auto base_d = duration_slots(base_copy);
  for (size_t i = 0; i < fitted_d.size(); ++i) {
    const Duration catalogue = *base_d[i].second;
    const bool pinned = moves([i, catalogue](topology::Efficiency& e, int dir) {
      Duration& v = *duration_slots(e)[i].second;
      const Duration step = Duration::from_ps(500'000);  // 0.5 us
      v = dir == 0  ? catalogue
          : dir > 0 ? v * 2 + step
                    : std::max(Duration::zero(), Duration::from_ps(v.ps() / 2) - step);
    });
    out.push_back(
        {fitted_d[i].first, base_d[i].second->seconds(), fitted_d[i].second->seconds(), pinned});
    if (!pinned) {
      *duration_slots(restored)[i].second = *base_d[i].second;
    }
  }
  fitted = restored;
  return out;
}

std::array<std::optional<double>, kNumOpClasses> class_errors(
    const std::vector<const FitCase*>& cases, const topology::Efficiency& e) {
  std::array<double, kNumOpClasses> sim{};
  std::array<double, kNumOpClasses> meas{};
  for (const FitCase* c : cases) {
    const Prediction p = predict(*c, e);
    for (size_t k = 0; k < sim.size(); ++k) {
      sim[k] += p.by_class[k];
      meas[k] += c->measured[k];
    }
  }
  std::array<std::optional<double>, kNumOpClasses> out{};
  for (size_t k = 0; k < sim.size(); ++k) {
    if (meas[k] > 0) {
      out[k] = sim[k] / meas[k] - 1;
    }
  }
  return out;
}

topology::Efficiency fit_pinned(const std::vector<const FitCase*>& cases,
                                const topology::Efficiency& base,
                                std::vector<FittedParameter>* parameters) {
  topology::Efficiency e = fit(cases, base);
  std::vector<FittedParameter> p = pin(cases, base, e);
  if (parameters != nullptr) {
    *parameters = std::move(p);
  }
  return e;
}

}  // namespace

TraceCalibration calibrate_traces(const topology::Chip& base, const std::vector<TraceCase>& cases,
                                  int64_t world, const CommFactory& comm) {
  TraceCalibration out;
  out.before = base.efficiency;
  out.shape_fitted = base.efficiency.matmul_shape.has_value();
  std::vector<Prepared> prepared;
  std::set<int64_t> ranks;
  std::set<int64_t> steps;
  for (const TraceCase& c : cases) {
    const Replay r = replay_with(c, world, base, base.efficiency, comm);
    prepared.push_back(prepare(r, base));
    TraceCalibrationCase row;
    row.rank = c.rank;
    row.step = c.step->number;
    row.measured = r.measured_step;
    row.fitted_kernels = prepared.back().kernels;
    row.error_before = step_error(r);
    out.cases.push_back(row);
    ranks.insert(c.rank);
    steps.insert(c.step->number);
  }
  std::vector<const FitCase*> all;
  for (const Prepared& p : prepared) {
    if (p.has_kernels) {
      all.push_back(&p.fit);
      out.fitted_kernels += static_cast<int64_t>(p.fit.kernels.size());
    }
  }
  if (all.empty()) {
    throw InputError(cases.empty() ? std::string("calibrate") : cases.front().trace->source,
                     "/traceEvents",
                     "no kernel meshsim costs (GEMMs with shapes, memory-bound kernels with their "
                     "operators' tensors, device copies): profile with record_shapes=True");
  }
  out.loss_before = fit_loss(all, out.before);
  out.after = fit_pinned(all, out.before, &out.parameters);
  out.loss_after = fit_loss(all, out.after);
  out.class_errors_before = class_errors(all, out.before);
  out.class_errors_after = class_errors(all, out.after);
  for (size_t i = 0; i < cases.size(); ++i) {
    out.cases[i].error_after = step_error(replay_with(cases[i], world, base, out.after, comm));
  }
  // Leave-one-out by rank, else by step.
  out.held_out_by = ranks.size() > 1 ? "rank" : (steps.size() > 1 ? "step" : "");
  if (out.held_out_by.empty()) {
    return out;
  }
  const auto group = [&out](size_t i) {
    return out.held_out_by == "rank" ? out.cases[i].rank : out.cases[i].step;
  };
  std::map<int64_t, topology::Efficiency> held;
  for (size_t i = 0; i < cases.size(); ++i) {
    const int64_t g = group(i);
    out.cases[i].held_out_with = fmt::format("{} {}", out.held_out_by, g);
    if (!held.contains(g)) {
      std::vector<const FitCase*> others;
      for (size_t j = 0; j < cases.size(); ++j) {
        if (group(j) != g && prepared[j].has_kernels) {
          others.push_back(&prepared[j].fit);
        }
      }
      held.emplace(g, others.empty() ? out.before : fit_pinned(others, out.before, nullptr));
    }
    const double e = step_error(replay_with(cases[i], world, base, held.at(g), comm));
    out.cases[i].error_held_out = e;
    out.max_abs_held_out_error = std::max(out.max_abs_held_out_error.value_or(0.0), std::fabs(e));
  }
  return out;
}

std::string trace_calibration_source(const TraceCalibration& c, const std::string& base,
                                     const std::vector<std::string>& traces,
                                     std::string_view tool) {
  std::vector<std::string> pinned;
  for (const FittedParameter& p : c.parameters) {
    if (p.pinned) {
      pinned.push_back(p.name);
    }
  }
  return fmt::format(
      "fitted by {} from base {} to the kernels of {} profiler trace(s) ({}), {} step(s); "
      "least squares over kernel time per class and per GEMM shape (validation/include/meshsim/"
      "validation/calibrate.h, calibrate_traces); pinned by the traces: {}{}",
      tool, base, traces.size(), fmt::join(traces, ", "), c.cases.size(),
      pinned.empty() ? "none" : fmt::format("{}", fmt::join(pinned, ", ")),
      c.max_abs_held_out_error
          ? fmt::format("; leave-one-{} step-time errors up to {:.1f}%", c.held_out_by,
                        100 * *c.max_abs_held_out_error)
          : "");
}

}  // namespace meshsim::validation
