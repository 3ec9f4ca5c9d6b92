// Fitting a platform's collective figures through the simulator's collective model
// (collective_fit.h).
#include "meshsim/validation/collective_fit.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <memory>

#include "box_search.h"
#include "meshsim/collectives/collective_planner.h"
#include "meshsim/collectives/shared_network.h"
#include "meshsim/sim/error.h"
#include "meshsim/topology/network.h"

namespace meshsim::validation {
namespace {

using P = PlatformParameter;

// A point moves "noticeably" when its predicted time changes by more than this (log ratio).
const double kNoticeable = std::log(1.005);
// The search: Subplex from each start, then a restart with a smaller first step; a fixed budget.
constexpr int kEvaluationsPerSearch = 240;

// The sweep's ranks on `cluster`: node by node, the first ranks / nodes devices of each.
std::vector<DeviceId> group_of(const topology::ClusterSpec& cluster, const CollectiveSweep& s) {
  const int64_t per_node = s.ranks / s.nodes;
  std::vector<DeviceId> group;
  for (int64_t n = 0; n < s.nodes; ++n) {
    for (int64_t d = 0; d < per_node; ++d) {
      group.emplace_back(static_cast<uint32_t>(n * cluster.devices_per_node + d));
    }
  }
  return group;
}

topology::ClusterSpec sized_for(const topology::ClusterSpec& cluster, const CollectiveSweep& s) {
  if (s.nodes == cluster.nodes || cluster.scale_up == topology::ScaleUpFabric::kIciTorus) {
    return cluster;
  }
  return topology::resize_nodes(cluster, s.nodes);
}

// One sweep's model on one cluster: its network and planner, built once per evaluation.
class SweepModel {
 public:
  SweepModel(const topology::ClusterSpec& cluster, const CollectiveSweep& sweep)
      : sweep_(sweep),
        net_(topology::Network::build(sized_for(cluster, sweep))),
        planner_(net_, collectives::CollectiveOptions{sweep.algorithm, sweep.protocol,
                                                      sweep.nccl}),
        group_(group_of(net_.spec(), sweep)) {}

  Duration time(Bytes bytes, std::string* what) const {
    collectives::CommShape shape;
    if (const std::optional<CollectiveKind> kind = collective_kind(sweep_.test)) {
      const std::vector<std::vector<DeviceId>> groups = {group_};
      shape = planner_.collective(*kind, bytes, groups);
    } else {
      // sendrecv_perf: every rank sends to the next and receives from the previous, at once.
      std::vector<std::pair<DeviceId, DeviceId>> pairs;
      for (size_t r = 0; r < group_.size(); ++r) {
        pairs.emplace_back(group_[r], group_[(r + 1) % group_.size()]);
      }
      shape = planner_.send_recv(pairs, bytes);
    }
    if (what != nullptr) {
      *what = shape.protocol ? fmt::format("{}/{}", collectives::to_string(shape.algorithm),
                                           collectives::to_string(*shape.protocol))
                             : std::string(collectives::to_string(shape.algorithm));
    }
    const auto network = collectives::make_fluid_network(planner_.capacities());
    return collectives::run_alone(*network, shape);
  }

 private:
  const CollectiveSweep& sweep_;
  topology::Network net_;
  collectives::CollectivePlanner planner_;
  std::vector<DeviceId> group_;
};

struct FitPoint {
  size_t sweep = 0;
  size_t point = 0;
  double measured_s = 0;
};

// Predicted times (seconds) of `points` on `cluster`.
std::vector<double> predict_all(const topology::ClusterSpec& cluster,
                                std::span<const CollectiveSweep> sweeps,
                                const std::vector<FitPoint>& points) {
  std::map<size_t, std::unique_ptr<SweepModel>> models;
  std::vector<double> out;
  out.reserve(points.size());
  for (const FitPoint& p : points) {
    std::unique_ptr<SweepModel>& m = models[p.sweep];
    if (!m) {
      m = std::make_unique<SweepModel>(cluster, sweeps[p.sweep]);
    }
    const CollectivePoint& cp = sweeps[p.sweep].points[p.point];
    out.push_back(m->time(Bytes::of(cp.bytes), nullptr).seconds());
  }
  return out;
}

double mean_square_log(const std::vector<double>& predicted, const std::vector<FitPoint>& pts) {
  double sum = 0;
  for (size_t i = 0; i < pts.size(); ++i) {
    const double r = std::log(predicted[i] / pts[i].measured_s);
    sum += r * r;
  }
  return sum / static_cast<double>(pts.size());
}

// The largest |log ratio| between two predictions of the same points.
double largest_change(const std::vector<double>& a, const std::vector<double>& b) {
  double worst = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    worst = std::max(worst, std::abs(std::log(a[i] / b[i])));
  }
  return worst;
}

// A fitted value as cluster_fragment writes it: durations to 0.1 ns, fractions to 1e-4.
double rounded(P p, double v) {
  const bool duration = p == P::kLaunchFloor || p == P::kSimpleStepOverhead;
  return duration ? std::round(v * 1e10) / 1e10 : std::round(v * 1e4) / 1e4;
}

using detail::Objective;

// A subplex search in the unit box from `x` with a first step of `step`.
std::vector<double> search(const Objective& f, std::vector<double> x, double step) {
  detail::BoxSearch b;
  b.lower.assign(x.size(), 0.0);
  b.upper.assign(x.size(), 1.0);
  b.initial_step = step;
  b.ftol_rel = 1e-10;
  b.xtol_rel = 1e-8;
  b.max_evaluations = kEvaluationsPerSearch;
  return detail::minimize_in_box(f, std::move(x), b);
}

class Fitter {
 public:
  Fitter(const topology::ClusterSpec& base, std::span<const CollectiveSweep> sweeps,
         std::vector<FitPoint> points)
      : base_(base), sweeps_(sweeps), points_(std::move(points)) {}

  CollectiveFit run() {
    const std::vector<double> at_base = predict_all(base_, sweeps_, points_);
    CollectiveFit fit;
    for (const P p : enum_values<P>()) {
      ParameterResult r{p, has_parameter(base_, p) ? parameter_value(base_, p) : 0, 0, false};
      r.fitted = r.base;
      r.pinned = has_parameter(base_, p) && moves_points(p, at_base);
      fit.parameters.push_back(r);
      if (r.pinned) {
        free_.push_back(p);
      }
    }
    topology::ClusterSpec best = base_;
    if (!free_.empty()) {
      best = optimise();
      drop_flat(best, fit.parameters);
    }
    for (const P p : free_) {  // as a cluster file will hold them (cluster_fragment)
      set_parameter(best, p, rounded(p, parameter_value(best, p)));
    }
    for (ParameterResult& r : fit.parameters) {
      r.fitted = has_parameter(best, r.parameter) ? parameter_value(best, r.parameter) : 0;
    }
    fit.fitted = best;
    fit.rms_base = std::sqrt(mean_square_log(at_base, points_));
    fit.rms_calibrated = std::sqrt(mean_square_log(predict_all(best, sweeps_, points_), points_));
    fit.evaluations = evaluations_;
    fit.fitted_points = static_cast<int64_t>(points_.size());
    return fit;
  }

 private:
  topology::ClusterSpec with(const topology::ClusterSpec& from, P p, double v) const {
    topology::ClusterSpec c = from;
    set_parameter(c, p, v);
    return c;
  }

  // Whether moving `p` to either end of its range moves some fitted point noticeably.
  bool moves_points(P p, const std::vector<double>& at_base) {
    const auto [lo, hi] = parameter_bounds(p);
    for (const double v : {lo, hi}) {
      ++evaluations_;
      if (largest_change(predict_all(with(base_, p, v), sweeps_, points_), at_base) >
          kNoticeable) {
        return true;
      }
    }
    return false;
  }

  topology::ClusterSpec at(const std::vector<double>& x) const {
    topology::ClusterSpec c = base_;
    for (size_t i = 0; i < free_.size(); ++i) {
      const auto [lo, hi] = parameter_bounds(free_[i]);
      set_parameter(c, free_[i], lo + x[i] * (hi - lo));
    }
    return c;
  }

  std::vector<double> coordinates(const topology::ClusterSpec& c) const {
    std::vector<double> x;
    for (const P p : free_) {
      const auto [lo, hi] = parameter_bounds(p);
      x.push_back(std::clamp((parameter_value(c, p) - lo) / (hi - lo), 0.0, 1.0));
    }
    return x;
  }

  topology::ClusterSpec optimise() {
    const Objective f = [this](const std::vector<double>& x) {
      ++evaluations_;
      return mean_square_log(predict_all(at(x), sweeps_, points_), points_);
    };
    // Starts: the base, and the base with its floor at the smallest fitted time (a platform whose
    // floor is far above the base's: the search then starts where the floor binds).
    std::vector<topology::ClusterSpec> starts = {base_};
    if (std::find(free_.begin(), free_.end(), P::kLaunchFloor) != free_.end()) {
      double smallest = points_.front().measured_s;
      for (const FitPoint& p : points_) {
        smallest = std::min(smallest, p.measured_s);
      }
      starts.push_back(with(base_, P::kLaunchFloor, smallest));
    }
    std::vector<double> best;
    double best_value = 0;
    for (const topology::ClusterSpec& s : starts) {
      std::vector<double> x = search(f, coordinates(s), 0.1);
      x = search(f, x, 0.01);
      const double v = f(x);
      if (best.empty() || v < best_value) {
        best = x;
        best_value = v;
      }
    }
    return at(best);
  }

  // A fitted parameter must be determined by the points: moving it either way from the optimum
  // (+-10 %) moves some point noticeably. One that only one side notices is bounded, not
  // determined (an NVLink efficiency above which NCCL's own rate cap binds): it goes back to its
  // base value unless that moves a point noticeably (the base is on the wrong side of the bound),
  // and then stays at the bound the search reached. One that neither side notices goes back too.
  void drop_flat(topology::ClusterSpec& best, std::vector<ParameterResult>& results) {
    for (const P p : free_) {
      const std::vector<double> here = predict_all(best, sweeps_, points_);
      const auto [lo, hi] = parameter_bounds(p);
      const double v = parameter_value(best, p);
      const double step = std::max(0.1 * std::abs(v), 1e-3 * (hi - lo));
      int sides = 0;
      for (const double w : {std::max(lo, v - step), std::min(hi, v + step)}) {
        ++evaluations_;
        sides += largest_change(predict_all(with(best, p, w), sweeps_, points_), here) >
                         kNoticeable
                     ? 1
                     : 0;
      }
      if (sides == 2) {
        continue;
      }
      const topology::ClusterSpec reverted = with(best, p, parameter_value(base_, p));
      ++evaluations_;
      if (sides == 0 ||
          largest_change(predict_all(reverted, sweeps_, points_), here) <= kNoticeable) {
        best = reverted;
        results[static_cast<size_t>(p)].pinned = false;
      }
    }
  }

  const topology::ClusterSpec& base_;
  std::span<const CollectiveSweep> sweeps_;
  std::vector<FitPoint> points_;
  std::vector<P> free_;
  int64_t evaluations_ = 0;
};

// The sweep's shape against the cluster: whole nodes of at most devices_per_node ranks.
void check_fits(const topology::ClusterSpec& cluster, const CollectiveSweep& s) {
  if (s.ranks < 2 || s.nodes < 1 || s.ranks % s.nodes != 0) {
    throw InputError(s.label, "",
                     fmt::format("{} ranks on {} hosts: meshsim needs two ranks or more, the same "
                                 "number on every host",
                                 s.ranks, s.nodes));
  }
  if (s.ranks / s.nodes > cluster.devices_per_node) {
    throw InputError(cluster.source, "",
                     fmt::format("{} has {} devices per node, but {} ran {} ranks on each of its "
                                 "{} host(s)",
                                 cluster.name, cluster.devices_per_node, s.label,
                                 s.ranks / s.nodes, s.nodes));
  }
  if (s.nodes > 1 && cluster.scale_up == topology::ScaleUpFabric::kIciTorus) {
    throw InputError(cluster.source, "",
                     fmt::format("{} is a TPU slice; nccl-tests sweeps are GPU measurements",
                                 cluster.name));
  }
}

}  // namespace

std::string cluster_pointer(PlatformParameter p) {
  switch (p) {
    case P::kLaunchFloor:
      return "/collectives/launch_floor";
    case P::kSimpleStepOverhead:
      return "/collectives/simple_step_overhead";
    case P::kLl128Efficiency:
      return "/collectives/ll128_efficiency";
    case P::kScaleUpEfficiency:
      return "/scale_up/efficiency";
    case P::kNvlsEfficiency:
      return "/scale_up/nvls_efficiency";
    case P::kScaleOutEfficiency:
      return "/scale_out/efficiency";
  }
  return "";
}

bool has_parameter(const topology::ClusterSpec& spec, PlatformParameter p) {
  switch (p) {
    case P::kScaleUpEfficiency:
      return spec.chip.nvlink.has_value() || spec.chip.ici.has_value();
    case P::kNvlsEfficiency:
      return spec.chip.nvlink && spec.chip.nvlink->nvls_efficiency;
    default:
      return true;
  }
}

double parameter_value(const topology::ClusterSpec& spec, PlatformParameter p) {
  const topology::Chip& chip = spec.chip;
  switch (p) {
    case P::kLaunchFloor:
      return spec.collectives.launch_floor.seconds();
    case P::kSimpleStepOverhead:
      return spec.collectives.simple_step_overhead.seconds();
    case P::kLl128Efficiency:
      return spec.collectives.ll128_efficiency;
    case P::kScaleUpEfficiency:
      return chip.nvlink ? chip.nvlink->efficiency : chip.ici->efficiency;
    case P::kNvlsEfficiency:
      return *chip.nvlink->nvls_efficiency;
    case P::kScaleOutEfficiency:
      return spec.scale_out == topology::ScaleOutFabric::kFatTree ? chip.nic_efficiency
                                                                   : chip.dcn_efficiency;
  }
  return 0;
}

void set_parameter(topology::ClusterSpec& spec, PlatformParameter p, double v) {
  topology::Chip& chip = spec.chip;
  switch (p) {
    case P::kLaunchFloor:
      spec.collectives.launch_floor = Seconds(v);
      break;
    case P::kSimpleStepOverhead:
      spec.collectives.simple_step_overhead = Seconds(v);
      break;
    case P::kLl128Efficiency:
      spec.collectives.ll128_efficiency = v;
      break;
    case P::kScaleUpEfficiency:
      (chip.nvlink ? chip.nvlink->efficiency : chip.ici->efficiency) = v;
      break;
    case P::kNvlsEfficiency:
      chip.nvlink->nvls_efficiency = v;
      break;
    case P::kScaleOutEfficiency:
      (spec.scale_out == topology::ScaleOutFabric::kFatTree ? chip.nic_efficiency
                                                            : chip.dcn_efficiency) = v;
      break;
  }
}

std::pair<double, double> parameter_bounds(PlatformParameter p) {
  switch (p) {
    case P::kLaunchFloor:
      return {0.0, 1e-3};
    case P::kSimpleStepOverhead:
      return {0.0, 100e-6};
    default:
      return {0.05, 1.0};
  }
}

std::optional<CollectiveKind> collective_kind(traces::NcclTest test) {
  using T = traces::NcclTest;
  switch (test) {
    case T::kAllReduce:
      return CollectiveKind::kAllReduce;
    case T::kAllGather:
      return CollectiveKind::kAllGather;
    case T::kReduceScatter:
      return CollectiveKind::kReduceScatter;
    case T::kAllToAll:
      return CollectiveKind::kAllToAll;
    case T::kBroadcast:
      return CollectiveKind::kBroadcast;
    case T::kReduce:
      return CollectiveKind::kReduce;
    case T::kSendRecv:
      return std::nullopt;
  }
  return std::nullopt;
}

Duration predict_collective(const topology::ClusterSpec& cluster, const CollectiveSweep& sweep,
                            Bytes bytes, std::string* what) {
  check_fits(cluster, sweep);
  try {
    return SweepModel(cluster, sweep).time(bytes, what);
  } catch (const collectives::CommError& e) {  // a forced algorithm the cluster cannot run
    throw InputError(sweep.label, "", e.what());
  }
}

CollectiveFit fit_collective_platform(const topology::ClusterSpec& base,
                                      std::span<const CollectiveSweep> sweeps,
                                      const FitOptions& options) {
  std::vector<FitPoint> points;
  for (size_t s = 0; s < sweeps.size(); ++s) {
    (void)predict_collective(base, sweeps[s], Bytes::of(sweeps[s].points.front().bytes));
    for (size_t i = 0; i < sweeps[s].points.size(); ++i) {
      const CollectivePoint& p = sweeps[s].points[i];
      const bool in_range = p.bytes > 0 && p.bytes >= options.min_bytes.count() &&
                            p.bytes <= options.max_bytes.count() && p.time > Duration::zero();
      if (in_range && (!options.use || options.use(s, p))) {
        points.push_back({s, i, p.time.seconds()});
      }
    }
  }
  if (points.empty()) {
    throw InputError(sweeps.empty() ? std::string("calibrate-collectives") : sweeps[0].label, "",
                     "no measured point to fit (every size is outside the sizes fitted)");
  }
  CollectiveFit fit = Fitter(base, sweeps, points).run();
  // Every point, fitted or not, against the model before and after.
  std::vector<bool> used;
  for (size_t s = 0; s < sweeps.size(); ++s) {
    const SweepModel before(base, sweeps[s]);
    const SweepModel after(fit.fitted, sweeps[s]);
    for (size_t i = 0; i < sweeps[s].points.size(); ++i) {
      const CollectivePoint& p = sweeps[s].points[i];
      PointResult r;
      r.sweep = s;
      r.point = p;
      r.fitted = std::any_of(points.begin(), points.end(),
                             [&](const FitPoint& f) { return f.sweep == s && f.point == i; });
      r.base = before.time(Bytes::of(p.bytes), nullptr);
      r.calibrated = after.time(Bytes::of(p.bytes), &r.algorithm);
      fit.points.push_back(std::move(r));
    }
  }
  return fit;
}

}  // namespace meshsim::validation
