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

namespace {

// One profiled step: time per class and per GEMM shape, profiler cost removed; on host-op traces
// with the dispatch before each op, scaled to the unprofiled step.
struct StepTimes {
  ClassTimes by_class{};
  double unclassified = 0;
  double scale = 1;
  GemmTimes gemms;
};

StepTimes step_times(const traces::MeasuredStep& s, bool host, double overhead_per_event,
                     double unprofiled_s) {
  auto corrected = [overhead_per_event](Duration d, int64_t events) {
    return std::max(0.0, d.seconds() - overhead_per_event * static_cast<double>(events));
  };
  StepTimes r;
  std::map<int64_t, SimTime> last_end;  // host thread -> end of its previous op
  for (const traces::MeasuredOp& op : s.ops) {
    double d = corrected(op.duration, op.events);
    if (host) {  // the time since the thread's previous op is this op's dispatch
      const auto prev = last_end.try_emplace(op.stream, s.start).first;
      d += std::max(0.0, (op.start - prev->second).seconds());
      prev->second = std::max(prev->second, op.start + op.duration);
    }
    r.by_class[static_cast<size_t>(op.op_class)] += d;
    r.unclassified += op.classified ? 0 : d;
  }
  // Host ops with the time before them add up to the profiled step: scaled to the unprofiled
  // median, they are the composition of the step the manifest measured.
  double total = 0;
  for (const double v : r.by_class) {
    total += v;
  }
  if (host && total > 0) {
    r.scale = unprofiled_s / total;
  }
  for (double& v : r.by_class) {
    v *= r.scale;
  }
  r.unclassified *= r.scale;
  for (const traces::MeasuredGemm& g : s.gemms) {
    add_group(r.gemms, gemm_key(g.op_class, g.shape), 1, r.scale * corrected(g.duration, g.events));
  }
  return r;
}

}  // namespace

Measured measure(const Manifest& m, const traces::MeasuredTrace& trace) {
  Measured r;
  r.steps = trace.steps.size();
  r.op_source = trace.op_source;
  r.step_s = m.median_step_s;
  const bool host = trace.op_source == "host";
  std::vector<double> durations;
  std::vector<double> events;
  for (const traces::MeasuredStep& s : trace.steps) {
    durations.push_back(s.duration.seconds());
    events.push_back(static_cast<double>(s.host_events));
  }
  r.trace_step_s = median(durations);
  r.events_per_step = host ? median(events) : 0;
  if (host && m.profiler_overhead_per_event_s) {
    r.overhead_per_event_s = *m.profiler_overhead_per_event_s;
    r.overhead_measured = true;
  }
  std::vector<StepTimes> steps;
  for (const traces::MeasuredStep& s : trace.steps) {
    steps.push_back(step_times(s, host, r.overhead_per_event_s, r.step_s));
  }
  // Medians over the steps; a GEMM shape a step lacks counts as zero there.
  auto median_of = [&steps](auto value) {
    std::vector<double> v;
    for (const StepTimes& s : steps) {
      v.push_back(value(s));
    }
    return median(std::move(v));
  };
  for (size_t k = 0; k < r.by_class.size(); ++k) {
    r.by_class[k] = median_of([k](const StepTimes& s) { return s.by_class[k]; });
  }
  r.unclassified_s = median_of([](const StepTimes& s) { return s.unclassified; });
  r.scale = median_of([](const StepTimes& s) { return s.scale; });
  for (const StepTimes& step : steps) {
    for (const auto& [key, unused] : step.gemms) {
      r.gemms.try_emplace(key);
    }
  }
  for (auto& [key, g] : r.gemms) {
    auto field = [&key](const StepTimes& s, double GroupTimes::*f) {
      const auto it = s.gemms.find(key);
      return it == s.gemms.end() ? 0.0 : it->second.*f;
    };
    g.count = median_of([&](const StepTimes& s) { return field(s, &GroupTimes::count); });
    g.time_s = median_of([&](const StepTimes& s) { return field(s, &GroupTimes::time_s); });
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
