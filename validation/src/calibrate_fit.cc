#include "calibrate_fit.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <optional>
#include <tuple>

#include "meshsim/topology/compute_model.h"

namespace meshsim::validation {
namespace {

using Vec = std::vector<double>;

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

// Nelder-Mead on `f` from `x0` with an initial simplex of `step` along each axis; stops after
// `max_iter` iterations or when the simplex's values agree to a relative 1e-12.
Vec nelder_mead(const std::function<double(const Vec&)>& f, Vec x0, double step, int max_iter) {
  const size_t n = x0.size();
  std::vector<Vec> s(n + 1, x0);
  Vec v(n + 1);
  for (size_t i = 0; i < n; ++i) {
    s[i + 1][i] += step;
  }
  for (size_t i = 0; i <= n; ++i) {
    v[i] = f(s[i]);
  }
  std::vector<size_t> order(n + 1);
  for (int it = 0; it < max_iter; ++it) {
    for (size_t i = 0; i <= n; ++i) {
      order[i] = i;
    }
    std::sort(order.begin(), order.end(),
              [&](size_t a, size_t b) { return v[a] != v[b] ? v[a] < v[b] : a < b; });
    const size_t best = order[0];
    const size_t worst = order[n];
    const size_t second = order[n - 1];
    if (std::fabs(v[worst] - v[best]) <= 1e-12 * (std::fabs(v[best]) + 1e-300)) {
      break;
    }
    Vec c(n, 0.0);
    for (size_t i = 0; i <= n; ++i) {
      if (i != worst) {
        for (size_t d = 0; d < n; ++d) {
          c[d] += s[i][d] / static_cast<double>(n);
        }
      }
    }
    auto along = [&](double t) {
      Vec x(n);
      for (size_t d = 0; d < n; ++d) {
        x[d] = c[d] + t * (s[worst][d] - c[d]);
      }
      return x;
    };
    const Vec xr = along(-1);
    const double fr = f(xr);
    if (fr < v[best]) {
      const Vec xe = along(-2);
      const double fe = f(xe);
      s[worst] = fe < fr ? xe : xr;
      v[worst] = std::min(fe, fr);
    } else if (fr < v[second]) {
      s[worst] = xr;
      v[worst] = fr;
    } else {
      const Vec xc = fr < v[worst] ? along(-0.5) : along(0.5);
      const double fc = f(xc);
      if (fc < std::min(fr, v[worst])) {
        s[worst] = xc;
        v[worst] = fc;
      } else {  // shrink towards the best point
        for (size_t i = 0; i <= n; ++i) {
          if (i != best) {
            for (size_t d = 0; d < n; ++d) {
              s[i][d] = s[best][d] + 0.5 * (s[i][d] - s[best][d]);
            }
            v[i] = f(s[i]);
          }
        }
      }
    }
  }
  return s[static_cast<size_t>(std::min_element(v.begin(), v.end()) - v.begin())];
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

// Nelder-Mead from `x`, then again from its end with a smaller simplex.
Vec polish(const std::function<double(const Vec&)>& f, Vec x) {
  x = nelder_mead(f, x, 1.0, 4000);
  return nelder_mead(f, x, 0.1, 4000);
}

// The op classes whose memory efficiency the cases can inform: memory-bound (non-GEMM)
// simulated kernels and measured time.
std::vector<size_t> memory_classes(const std::vector<const FitCase*>& cases) {
  std::vector<bool> seen(kNumOpClasses, false);
  for (const FitCase* c : cases) {
    for (const FitCase::Kernel& k : c->kernels) {
      if (!k.matrix && c->measured[k.op_class] > 0 &&
          k.op_class != static_cast<uint8_t>(OpClass::kCommunication)) {
        seen[k.op_class] = true;
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
  using Key = std::tuple<uint8_t, int32_t, bool, double, double, double, double, double>;
  std::map<Key, size_t> merged;
  for (const StepKernel& sk : kernels) {
    const ComputeWork& w = sk.work;
    FitCase::Kernel k;
    k.op_class = static_cast<uint8_t>(w.op_class);
    k.matrix = w.shape.has_value();
    k.flops_s = (w.flops / model.flop_rate(w)).seconds();
    k.memory_s = (w.bytes / model.memory_bandwidth(w)).seconds();
    if (k.matrix) {
      k.k = static_cast<double>(w.shape->k);
      k.quantization = shape_model ? topology::wave_quantization(*shape_model, *w.shape) : 1.0;
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
    const Key key{k.op_class, k.group,        k.matrix, k.flops_s,
                  k.memory_s, k.quantization, k.k,      k.calls};
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
    const double t = k.count * (std::max(f, k.memory_s / p.memory_for(k.op_class)) + t_extra);
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

Params fit_params(const std::vector<const FitCase*>& cases, const Params& start, bool shape,
                  bool by_class) {
  // Stage 1: one memory efficiency for every class, from the best points of a 3^n grid.
  Params shared_start = start;
  shared_start.class_memory = {};
  Space space{{{Field::kMatmul}, {Field::kMemory}, {Field::kLaunch}}, shared_start};
  if (shape) {
    space.dims.push_back({Field::kKHalf});
    space.dims.push_back({Field::kCall});
  }
  auto loss_in = [&](const Space& sp) {
    return [&cases, &sp](const Vec& x) { return fit_loss(cases, sp.params(x)); };
  };
  const auto f = loss_in(space);
  const std::vector<std::vector<double>> grid = {
      {0.2, 0.5, 0.9}, {0.1, 0.4, 1.0}, {1e-6, 1e-5, 1e-4}, {4, 32, 256}, {1e-6, 1e-5, 1e-4}};
  std::vector<std::pair<double, Vec>> starts = {
      {f(space.point(shared_start)), space.point(shared_start)}};
  const size_t n = space.dims.size();
  size_t total = 1;
  for (size_t d = 0; d < n; ++d) {
    total *= 3;
  }
  for (size_t i = 0; i < total; ++i) {
    Params p = shared_start;
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
    const Vec x = polish(f, starts[s].second);
    if (const double l = f(x); l < best_loss) {
      best_loss = l;
      best = x;
    }
  }
  Params shared = space.params(best);
  const std::vector<size_t> classes = memory_classes(cases);
  if (!by_class || classes.empty()) {
    return shared;
  }
  // Stage 2: every parameter, with a memory efficiency per class, from the shared fit.
  Space all{{{Field::kMatmul}, {Field::kLaunch}}, shared};
  if (shape) {
    all.dims.push_back({Field::kKHalf});
    all.dims.push_back({Field::kCall});
  }
  for (const size_t c : classes) {
    all.dims.push_back({Field::kClassMemory, c});
    all.fixed.class_memory[c] = shared.memory;
  }
  const auto g = loss_in(all);
  Params p = all.params(polish(g, all.point(all.fixed)));
  // Classes the data did not inform keep a memory efficiency: the mean of the fitted ones,
  // weighted by their memory-bound simulated time in the cases.
  double weight = 0;
  double sum = 0;
  for (const FitCase* c : cases) {
    for (const FitCase::Kernel& k : c->kernels) {
      if (!k.matrix && p.class_memory[k.op_class] > 0) {
        weight += k.count * k.memory_s;
        sum += k.count * k.memory_s * p.class_memory[k.op_class];
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
  return efficiency_of(fit_params(cases, params_of(start), shape, by_class), start);
}

}  // namespace meshsim::validation
