#include "calibrate_fit.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <optional>
#include <tuple>

#include "box_search.h"
#include "meshsim/topology/compute_model.h"

namespace meshsim::validation {
namespace {

using Vec = std::vector<double>;

// The local search (box_search.h): NLopt's Subplex (LN_SBPLX; T. Rowan's thesis, 1990),
// Nelder-Mead on a sequence of subspaces, derivative-free and bounded. The loss has kinks wherever a kernel turns
// from compute- to memory-bound (the roofline's max), which derivative-free simplex methods take in
// their stride; on the committed CPU traces Subplex, Nelder-Mead and BOBYQA reach the same minimum.
// Deterministic: no random numbers, and stopping by tolerance and evaluation count only.
constexpr int kMaxEvaluations = 20000;

// The fitted parameters as the optimizer sees them: times in seconds.
struct Params {
  double matmul = 1;    // e_m
  double memory = 1;    // e_b, for classes without their own
  double launch_s = 0;  // L
  double k_half = 0;
  double call_s = 0;  // c
  // e_b of one op class (memory_by_class); 0: the class uses `memory`.
  std::array<double, kNumOpClasses> class_memory{};
  double memory_for(size_t op_class) const {
    return class_memory[op_class] > 0 ? class_memory[op_class] : memory;
  }
};

Params params_of(const topology::Efficiency& e) {
  Params p{e.matmul, e.memory, e.launch_overhead.seconds(), 0, 0, {}};
  for (size_t c = 0; c < p.class_memory.size(); ++c) {
    p.class_memory[c] = e.memory_by_class[c].value_or(0.0);
  }
  if (const auto& m = e.matmul_shape) {
    p.k_half = m->k_half;
    p.call_s = m->call_overhead.seconds();
  }
  return p;
}

// `base` (for its matmul_shape's tile, units and batching) with `p`'s values.
topology::Efficiency efficiency_of(const Params& p, topology::Efficiency base) {
  base.matmul = p.matmul;
  base.memory = p.memory;
  for (size_t c = 0; c < p.class_memory.size(); ++c) {
    base.memory_by_class[c] =
        p.class_memory[c] > 0 ? std::optional<double>(p.class_memory[c]) : std::nullopt;
  }
  base.launch_overhead = Seconds(p.launch_s);
  if (auto& m = base.matmul_shape) {
    m->k_half = p.k_half;
    m->call_overhead = Seconds(p.call_s);
  }
  return base;
}

// The fitted parameters as logarithms, each within its bounds: efficiencies in [1e-4, 1], L and
// c in [1e-12 s, 1 s] (1e-12 s reads as zero), k_half in [1e-3, 1e5].
enum class Field : uint8_t { kMatmul, kMemory, kLaunch, kKHalf, kCall, kClassMemory };

struct Dim {
  Field field;
  size_t op_class = 0;  // kClassMemory only
};

struct Space {
  std::vector<Dim> dims;
  Params fixed;  // the values of what is not fitted

  static std::pair<double, double> bounds(Field f) {
    switch (f) {
      case Field::kLaunch:
      case Field::kCall:
        return {std::log(1e-12), 0.0};
      case Field::kKHalf:
        return {std::log(1e-3), std::log(1e5)};
      default:
        return {std::log(1e-4), 0.0};
    }
  }
  static double& slot(Params& p, const Dim& d) {
    switch (d.field) {
      case Field::kMatmul:
        return p.matmul;
      case Field::kMemory:
        return p.memory;
      case Field::kLaunch:
        return p.launch_s;
      case Field::kKHalf:
        return p.k_half;
      case Field::kCall:
        return p.call_s;
      case Field::kClassMemory:
        break;
    }
    return p.class_memory[d.op_class];
  }
  Params params(const Vec& x) const {
    Params p = fixed;
    for (size_t i = 0; i < dims.size(); ++i) {
      const auto [lo, hi] = bounds(dims[i].field);
      slot(p, dims[i]) = std::exp(std::clamp(x[i], lo, hi));
    }
    return p;
  }
  Vec lower() const {
    Vec v;
    for (const Dim& d : dims) {
      v.push_back(bounds(d.field).first);
    }
    return v;
  }
  Vec upper() const {
    Vec v;
    for (const Dim& d : dims) {
      v.push_back(bounds(d.field).second);
    }
    return v;
  }
  Vec point(const Params& p) const {
    Vec x;
    Params q = p;
    for (const Dim& d : dims) {
      const auto [lo, hi] = bounds(d.field);
      x.push_back(std::clamp(std::log(std::max(slot(q, d), 1e-300)), lo, hi));
    }
    return x;
  }
};

using detail::Objective;

// A bounded local search of `f` in `space` from `x` with a first step of `step` along each axis
// (log units), to a relative change of the loss of 1e-12 or kMaxEvaluations evaluations: a
// deterministic number of evaluations, never a time limit.
Vec minimize(const Objective& f, const Space& space, Vec x, double step) {
  detail::BoxSearch b;
  b.lower = space.lower();
  b.upper = space.upper();
  b.initial_step = step;
  b.ftol_rel = 1e-12;
  b.xtol_rel = 1e-10;
  b.max_evaluations = kMaxEvaluations;
  return detail::minimize_in_box(f, std::move(x), b);
}

// A local search from `x`, then again from its end with a smaller first step (a restart rebuilds
// the search's simplex or model around the point reached, as a polish).
Vec polish(const Objective& f, const Space& space, Vec x) {
  x = minimize(f, space, std::move(x), 1.0);
  return minimize(f, space, std::move(x), 0.1);
}

// The op classes whose memory efficiency the cases can inform: memory-bound (non-GEMM)
// simulated kernels and measured time.
std::vector<size_t> memory_classes(const std::vector<const FitCase*>& cases) {
  std::vector<bool> seen(kNumOpClasses, false);
  for (const FitCase* c : cases) {
    for (const FitCase::Kernel& k : c->kernels) {
      if (!k.matrix && c->measured[k.op_class] > 0 &&
          k.op_class != static_cast<uint8_t>(OpClass::kCommunication)) {
        seen[k.rate_class] = true;
      }
    }
  }
  std::vector<size_t> out;
  for (size_t c = 0; c < seen.size(); ++c) {
    if (seen[c]) {
      out.push_back(c);
    }
  }
  return out;
}

}  // namespace

FitCase make_fit_case(const std::vector<StepKernel>& kernels, const topology::Chip& chip,
                      const Measured& measured) {
  const topology::RooflineComputeModel model(chip);
  const auto& shape_model = chip.efficiency.matmul_shape;
  FitCase c;
  c.measured_step_s = measured.step.seconds();
  for (size_t k = 0; k < c.measured.size(); ++k) {
    c.measured[k] = measured.by_class[k].seconds();
  }
  c.measured_ops_s = measured.op_time().seconds();
  std::map<GemmKey, int32_t> group_index;
  using Key = std::tuple<uint8_t, uint8_t, int32_t, bool, double, double, double, double, double>;
  std::map<Key, size_t> merged;
  for (const StepKernel& sk : kernels) {
    const ComputeWork& w = sk.work;
    FitCase::Kernel k;
    k.op_class = static_cast<uint8_t>(w.op_class);
    k.rate_class = static_cast<uint8_t>(w.rate_class.value_or(w.op_class));
    k.matrix = w.shape.has_value();
    k.flops_s = (w.flops / model.flop_rate(w)).seconds();
    k.memory_s = (w.bytes / model.memory_bandwidth(w)).seconds();
    if (k.matrix) {
      // The tile and the split of the reduction depend on the shape and the SMs, not on the
      // parameters fitted; they are fixed per kernel (a k_half far from the base's could in
      // principle pick another of the alternative tiles; the fit keeps the base's choice).
      const topology::GemmTiling tiling =
          shape_model ? topology::gemm_tiling(*shape_model, *w.shape)
                      : topology::GemmTiling{1.0, static_cast<double>(w.shape->k), 1};
      k.k = tiling.k_per_slice;
      k.quantization = tiling.quantization;
      k.calls = static_cast<double>(shape_model ? topology::gemm_calls(*shape_model, *w.shape) : 1);
      const GemmKey key = gemm_key(w.op_class, *w.shape);
      if (const auto m = measured.gemms.find(key);
          m != measured.gemms.end() && m->second.time > Duration::zero()) {
        const auto [it, added] =
            group_index.try_emplace(key, static_cast<int32_t>(c.groups.size()));
        if (added) {
          c.groups.push_back(key);
          c.group_measured.push_back(m->second.time.seconds());
        }
        k.group = it->second;
      }
    }
    const Key key{k.op_class, k.rate_class,   k.group, k.matrix, k.flops_s,
                  k.memory_s, k.quantization, k.k,     k.calls};
    const auto [it, added] = merged.try_emplace(key, c.kernels.size());
    if (added) {
      k.count = 0;
      c.kernels.push_back(k);
    }
    c.kernels[it->second].count += 1;
  }
  return c;
}

namespace {

Prediction predict(const FitCase& c, const Params& p) {
  Prediction r;
  r.groups.assign(c.groups.size(), 0.0);
  for (const FitCase::Kernel& k : c.kernels) {
    double f = k.flops_s;
    double t_extra = p.launch_s;
    if (k.matrix) {
      f /= p.matmul * k.quantization * k.k / (k.k + p.k_half);
      t_extra += k.calls * p.call_s;
    }
    const double t = k.count * (std::max(f, k.memory_s / p.memory_for(k.rate_class)) + t_extra);
    r.step_s += t;
    r.by_class[k.op_class] += t;
    if (k.group >= 0) {
      r.groups[static_cast<size_t>(k.group)] += t;
    }
  }
  return r;
}

double fit_loss(const std::vector<const FitCase*>& cases, const Params& p) {
  double loss = 0;
  for (const FitCase* c : cases) {
    const Prediction t = predict(*c, p);
    const double step = t.step_s / c->measured_step_s - 1;
    loss += kStepWeight * step * step;
    if (c->measured_ops_s <= 0) {
      continue;
    }
    for (size_t k = 0; k < t.by_class.size(); ++k) {
      const double m = c->measured[k];
      if (m > 0 && t.by_class[k] > 0 && k != static_cast<size_t>(OpClass::kCommunication)) {
        const double e = t.by_class[k] / m - 1;
        loss += m / c->measured_ops_s * e * e;
      }
    }
    for (size_t g = 0; g < t.groups.size(); ++g) {
      const double m = c->group_measured[g];
      const double e = t.groups[g] / m - 1;
      loss += m / c->measured_ops_s * e * e;
    }
  }
  return loss;
}

}  // namespace

Prediction predict(const FitCase& c, const topology::Efficiency& e) {
  return predict(c, params_of(e));
}

double fit_loss(const std::vector<const FitCase*>& cases, const topology::Efficiency& e) {
  return fit_loss(cases, params_of(e));
}

namespace {

Objective loss_in(const std::vector<const FitCase*>& cases, const Space& space) {
  return [&cases, &space](const Vec& x) { return fit_loss(cases, space.params(x)); };
}

// Stage 1: one memory efficiency for every class, polished from the best points of a 3^n grid of
// starts (and `start` itself).
Params fit_shared(const std::vector<const FitCase*>& cases, Params start, bool shape) {
  start.class_memory = {};
  Space space{{{Field::kMatmul}, {Field::kMemory}, {Field::kLaunch}}, start};
  if (shape) {
    space.dims.push_back({Field::kKHalf});
    space.dims.push_back({Field::kCall});
  }
  const Objective f = loss_in(cases, space);
  const std::vector<std::vector<double>> grid = {
      {0.2, 0.5, 0.9}, {0.1, 0.4, 1.0}, {1e-6, 1e-5, 1e-4}, {4, 32, 256}, {1e-6, 1e-5, 1e-4}};
  std::vector<std::pair<double, Vec>> starts = {{f(space.point(start)), space.point(start)}};
  const size_t n = space.dims.size();
  size_t total = 1;
  for (size_t d = 0; d < n; ++d) {
    total *= 3;
  }
  for (size_t i = 0; i < total; ++i) {
    Params p = start;
    for (size_t d = 0, rest = i; d < n; ++d, rest /= 3) {
      Space::slot(p, space.dims[d]) = grid[d][rest % 3];
    }
    const Vec x = space.point(p);
    starts.emplace_back(f(x), x);
  }
  std::stable_sort(starts.begin(), starts.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  Vec best = starts.front().second;
  double best_loss = starts.front().first;
  for (size_t s = 0; s < std::min<size_t>(4, starts.size()); ++s) {
    const Vec x = polish(f, space, starts[s].second);
    if (const double l = f(x); l < best_loss) {
      best_loss = l;
      best = x;
    }
  }
  return space.params(best);
}

// Stage 2: every parameter, with a memory efficiency per class in `classes`, from the shared fit.
// Classes the data did not inform keep a memory efficiency: the mean of the fitted ones, weighted
// by their memory-bound simulated time in the cases.
Params fit_by_class(const std::vector<const FitCase*>& cases, const Params& shared, bool shape,
                    const std::vector<size_t>& classes) {
  Space all{{{Field::kMatmul}, {Field::kLaunch}}, shared};
  if (shape) {
    all.dims.push_back({Field::kKHalf});
    all.dims.push_back({Field::kCall});
  }
  for (const size_t c : classes) {
    all.dims.push_back({Field::kClassMemory, c});
    all.fixed.class_memory[c] = shared.memory;
  }
  Params p = all.params(polish(loss_in(cases, all), all, all.point(all.fixed)));
  double weight = 0;
  double sum = 0;
  for (const FitCase* c : cases) {
    for (const FitCase::Kernel& k : c->kernels) {
      if (!k.matrix && p.class_memory[k.rate_class] > 0) {
        weight += k.count * k.memory_s;
        sum += k.count * k.memory_s * p.class_memory[k.rate_class];
      }
    }
  }
  p.memory = weight > 0 ? sum / weight : shared.memory;
  return p;
}

}  // namespace

topology::Efficiency fit(const std::vector<const FitCase*>& cases,
                         const topology::Efficiency& start, bool by_class) {
  const bool shape = start.matmul_shape.has_value();
  const Params shared = fit_shared(cases, params_of(start), shape);
  const std::vector<size_t> classes = memory_classes(cases);
  if (!by_class || classes.empty()) {
    return efficiency_of(shared, start);
  }
  return efficiency_of(fit_by_class(cases, shared, shape, classes), start);
}

}  // namespace meshsim::validation
