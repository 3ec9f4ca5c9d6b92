#include "meshsim/validation/comparison.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <numeric>

#include "meshsim/sim/error.h"
#include "meshsim/sim/median.h"
#include "meshsim/topology/compute_model.h"

namespace meshsim::validation {
namespace {

void add_group(GemmTimes& g, const GemmKey& key, double count, Duration time) {
  GroupTimes& t = g[key];
  t.count += count;
  t.time += time;
}

Duration sum(const ClassTimes& times) {
  return std::accumulate(times.begin(), times.end(), Duration::zero());
}

Duration abs(Duration d) { return d < Duration::zero() ? Duration::zero() - d : d; }

// `d` times `k`, to the nearest picosecond.
Duration scaled(Duration d, double k) { return Seconds(d.seconds() * k); }

// One profiled step: time per class and per GEMM shape, profiler cost removed; on host-op traces
// with the dispatch before each op, scaled to the unprofiled step.
struct StepTimes {
  ClassTimes by_class{};
  Duration unclassified;
  double scale = 1;
  GemmTimes gemms;
};

StepTimes step_times(const traces::MeasuredStep& s, bool host, Duration overhead_per_event,
                     Duration unprofiled) {
  auto corrected = [overhead_per_event](Duration d, int64_t events) {
    return std::max(Duration::zero(), d - overhead_per_event * events);
  };
  StepTimes r;
  std::map<int64_t, SimTime> last_end;  // host thread -> end of its previous op
  for (const traces::MeasuredOp& op : s.ops) {
    Duration d = corrected(op.duration, op.events);
    if (host) {  // the time since the thread's previous op is this op's dispatch
      const auto prev = last_end.try_emplace(op.stream, s.start).first;
      d += std::max(Duration::zero(), op.start - prev->second);
      prev->second = std::max(prev->second, op.start + op.duration);
    }
    r.by_class[static_cast<size_t>(op.op_class)] += d;
    r.unclassified += op.classified ? Duration::zero() : d;
  }
  // Host ops with the time before them add up to the profiled step: scaled to the unprofiled
  // median, they are the composition of the step the manifest measured.
  const Duration total = sum(r.by_class);
  if (host && total > Duration::zero()) {
    r.scale = unprofiled / total;
  }
  for (Duration& v : r.by_class) {
    v = scaled(v, r.scale);
  }
  r.unclassified = scaled(r.unclassified, r.scale);
  for (const traces::MeasuredGemm& g : s.gemms) {
    add_group(r.gemms, gemm_key(g.op_class, g.shape), 1, corrected(g.duration, g.events));
  }
  for (auto& [key, g] : r.gemms) {
    g.time = scaled(g.time, r.scale);
  }
  return r;
}

// The medians over the steps; a GEMM shape a step lacks counts as zero there.
void take_medians(const std::vector<StepTimes>& steps, Measured& r) {
  auto median_of = [&steps](auto value) {
    std::vector<decltype(value(steps.front()))> v;
    for (const StepTimes& s : steps) {
      v.push_back(value(s));
    }
    return median(std::move(v)).value_or(decltype(value(steps.front())){});
  };
  for (size_t k = 0; k < r.by_class.size(); ++k) {
    r.by_class[k] = median_of([k](const StepTimes& s) { return s.by_class[k]; });
  }
  r.unclassified = median_of([](const StepTimes& s) { return s.unclassified; });
  r.scale = median_of([](const StepTimes& s) { return s.scale; });
  for (const StepTimes& step : steps) {
    for (const auto& [key, unused] : step.gemms) {
      r.gemms.try_emplace(key);
    }
  }
  for (auto& entry : r.gemms) {
    // Not a structured binding: clang 14 (the fuzz build) cannot capture one.
    const auto& key = entry.first;
    auto& g = entry.second;
    auto group = [&key](const StepTimes& s) {
      const auto it = s.gemms.find(key);
      return it == s.gemms.end() ? GroupTimes{} : it->second;
    };
    g.count = median_of([&](const StepTimes& s) { return group(s).count; });
    g.time = median_of([&](const StepTimes& s) { return group(s).time; });
  }
}

}  // namespace

std::string GemmKey::label() const {
  const std::string batch_text = batch > 1 ? fmt::format("{}x ", batch) : "";
  return fmt::format("{} {}{}x{} k={}", to_string(op_class), batch_text, small, large, k);
}

GemmKey gemm_key(OpClass op_class, const MatmulShape& s) {
  return GemmKey{op_class, s.batch, s.k, std::min(s.m, s.n), std::max(s.m, s.n)};
}

Duration Measured::op_time() const { return sum(by_class); }

Measured measure(const Manifest& m, const traces::MeasuredTrace& trace) {
  Measured r;
  r.steps = trace.steps.size();
  r.op_source = trace.op_source;
  r.step = m.median_step;
  const bool host = trace.op_source == "host";
  std::vector<Duration> durations;
  std::vector<double> events;
  for (const traces::MeasuredStep& s : trace.steps) {
    durations.push_back(s.duration);
    events.push_back(static_cast<double>(s.host_events));
  }
  r.trace_step = median(durations).value_or(Duration::zero());
  r.events_per_step = host ? median(events).value_or(0.0) : 0;
  if (host) {
    r.overhead_per_event = m.profiler_overhead_per_event;
  }
  std::vector<StepTimes> steps;
  for (const traces::MeasuredStep& s : trace.steps) {
    steps.push_back(step_times(s, host, r.overhead_per_event.value_or(Duration::zero()), r.step));
  }
  if (!steps.empty()) {
    take_medians(steps, r);
  }
  return r;
}

Simulated simulate_kernels(const std::vector<StepKernel>& kernels, const topology::Chip& chip) {
  const topology::RooflineComputeModel model(chip);
  Simulated s;
  for (const StepKernel& k : kernels) {
    const Duration t = model.kernel_time(k.work).total();
    s.by_class[static_cast<size_t>(k.work.op_class)] += t;
    s.step += t;
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
    return abs(a.difference()) > abs(b.difference());
  });
  return out;
}

std::optional<double> relative_error(Duration measured, Duration simulated) {
  if (measured <= Duration::zero()) {
    return std::nullopt;
  }
  return simulated / measured - 1;
}

Comparison compare(const Manifest& m, const topology::Chip& chip,
                   const traces::MeasuredTrace& trace) {
  Comparison c;
  c.measured = measure(m, trace);
  c.simulated = simulate_kernels(step_kernels(m), chip);
  c.simulated_step = ManifestRun(m, chip).run().end.since_start();
  // One device runs its kernels back to back: the engine's step is the kernels' sum.
  SIM_CHECK(c.simulated_step == c.simulated.step,
            "single-device step {} ps differs from its kernels' sum {} ps", c.simulated_step.ps(),
            c.simulated.step.ps());
  c.step_time_error = c.simulated_step / m.median_step - 1;
  return c;
}

}  // namespace meshsim::validation
