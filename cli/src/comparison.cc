#include "comparison.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include "meshsim/topology/compute_model.h"

namespace meshsim::cli {
namespace {

void add_group(GemmTimes& g, const GemmKey& key, double count, double time_s) {
  GroupTimes& t = g[key];
  t.count += count;
  t.time_s += time_s;
}

}  // namespace

std::string GemmKey::label() const {
  const std::string batch_text = batch > 1 ? fmt::format("{}x ", batch) : "";
  return fmt::format("{} {}{}x{} k={}", to_string(op_class), batch_text, small, large, k);
}

GemmKey gemm_key(OpClass op_class, const MatmulShape& s) {
  return GemmKey{op_class, s.batch, s.k, std::min(s.m, s.n), std::max(s.m, s.n)};
}

double Measured::op_time_s() const {
  double sum = 0;
  for (const double t : by_class) {
    sum += t;
  }
  return sum;
}

Measured measure(const Manifest& m, const traces::MeasuredTrace& trace) {
  Measured r;
  r.steps = trace.steps.size();
  r.op_source = trace.op_source;
  r.step_s = m.median_step_s;
  std::vector<double> steps;
  std::vector<double> events;
  for (const traces::MeasuredStep& s : trace.steps) {
    steps.push_back(s.duration.seconds());
    events.push_back(static_cast<double>(s.host_events));
  }
  r.trace_step_s = median(steps);
  const bool host = trace.op_source == "host";
  r.events_per_step = host ? median(events) : 0;
  if (host) {
    if (const auto c = m.profiler_overhead_per_event_s) {
      r.overhead_per_event_s = *c;
      r.overhead_measured = true;
    } else if (r.events_per_step > 0) {
      r.overhead_per_event_s = std::max(0.0, (r.trace_step_s - r.step_s) / r.events_per_step);
    }
  }
  const double c = r.overhead_per_event_s;
  auto corrected = [c](Duration d, int64_t n) {
    return std::max(0.0, d.seconds() - c * static_cast<double>(n));
  };
  std::array<std::vector<double>, kNumOpClasses> classes;
  std::vector<double> unclassified;
  std::vector<double> scales;
  std::map<GemmKey, std::pair<std::vector<double>, std::vector<double>>> gemms;  // counts, times
  for (size_t i = 0; i < trace.steps.size(); ++i) {
    const traces::MeasuredStep& s = trace.steps[i];
    ClassTimes t{};
    double unc = 0;
    std::map<int64_t, SimTime> last_end;  // host thread -> end of its previous op
    for (const traces::MeasuredOp& op : s.ops) {
      double d = corrected(op.duration, op.events);
      if (host) {  // the time since the thread's previous op is this op's dispatch
        const auto prev = last_end.try_emplace(op.stream, s.start).first;
        d += std::max(0.0, (op.start - prev->second).seconds());
        prev->second = std::max(prev->second, op.start + op.duration);
      }
      t[static_cast<size_t>(op.op_class)] += d;
      unc += op.classified ? 0 : d;
    }
    // Host ops with the time before them add up to the profiled step: scaled to the unprofiled
    // median, they are the composition of the step the manifest measured.
    double total = 0;
    for (const double v : t) {
      total += v;
    }
    const double scale = host && total > 0 ? r.step_s / total : 1.0;
    scales.push_back(scale);
    for (size_t k = 0; k < t.size(); ++k) {
      classes[k].push_back(t[k] * scale);
    }
    unclassified.push_back(unc * scale);
    GemmTimes step;
    for (const traces::MeasuredGemm& g : s.gemms) {
      add_group(step, gemm_key(g.op_class, g.shape), 1, scale * corrected(g.duration, g.events));
    }
    for (auto& [key, _] : gemms) {  // groups absent from this step count as zero
      step.try_emplace(key);
    }
    for (const auto& [key, v] : step) {
      auto& [counts, times] = gemms[key];
      counts.resize(i, 0.0);  // earlier steps without the group
      times.resize(i, 0.0);
      counts.push_back(v.count);
      times.push_back(v.time_s);
    }
  }
  for (size_t k = 0; k < classes.size(); ++k) {
    r.by_class[k] = median(classes[k]);
  }
  r.unclassified_s = median(unclassified);
  r.scale = median(scales);
  for (auto& [key, v] : gemms) {
    r.gemms[key] = GroupTimes{median(v.first), median(v.second)};
  }
  return r;
}

Simulated simulate_kernels(const std::vector<StepKernel>& kernels, const topology::Chip& chip) {
  const topology::RooflineComputeModel model(chip);
  Simulated s;
  for (const StepKernel& k : kernels) {
    const double t = model.kernel_time(k.work).total().seconds();
    s.by_class[static_cast<size_t>(k.work.op_class)] += t;
    s.step_s += t;
    if (k.work.shape) {
      add_group(s.gemms, gemm_key(k.work.op_class, *k.work.shape), 1, t);
    }
  }
  s.kernels = kernels.size();
  return s;
}

std::vector<GemmRow> gemm_rows(const GemmTimes& measured, const GemmTimes& simulated) {
  std::map<GemmKey, GemmRow> rows;
  for (const auto& [key, t] : measured) {
    rows[key].measured = t;
  }
  for (const auto& [key, t] : simulated) {
    rows[key].simulated = t;
  }
  std::vector<GemmRow> out;
  for (auto& [key, row] : rows) {
    row.key = key;
    out.push_back(row);
  }
  std::stable_sort(out.begin(), out.end(), [](const GemmRow& a, const GemmRow& b) {
    return std::fabs(a.difference_s()) > std::fabs(b.difference_s());
  });
  return out;
}

}  // namespace meshsim::cli
