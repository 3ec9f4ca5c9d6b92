#include "meshsim/studies/goodput.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "meshsim/sim/rng.h"

namespace meshsim::studies {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
// The most interruptions the Monte Carlo draws over all its runs (tens of ns each: under a minute),
// and a thousandth of it per run. Llama 3's 405B run saw 419 in 54 days; 10^6 runs of it (the most
// runs) draw 4 x 10^8. An absurd failure table, a restart longer than the mean time between
// failures or an endless token budget thus fails at once instead of looping for hours.
constexpr double kMaxInterruptions = 1e9;

// GoodputError unless `runs` runs of `m` draw at most kMaxInterruptions interruptions, estimated
// from the closed form (rate x failure-free work / expected goodput per run).
void check_interruption_budget(const GoodputModel& m, double interval_s, double rate_per_s,
                               int64_t runs) {
  const double goodput = expected_goodput(m, interval_s);
  const double per_run = rate_per_s > 0 ? rate_per_s * m.work_s / goodput : 0.0;
  const bool one_run_too_many = !(per_run <= kMaxInterruptions / 1000.0);
  if (!one_run_too_many && per_run * static_cast<double>(runs) <= kMaxInterruptions) {
    return;
  }
  // A restart many times the mean time between failures rarely completes (e^(rate x restart)
  // attempts): the restart is at fault rather than the work.
  const bool endless_restarts = !(rate_per_s * m.costs.restart.seconds() <= 10.0);
  const GoodputField field = !one_run_too_many  ? GoodputField::kRuns
                             : endless_restarts ? GoodputField::kRestartTime
                                                : GoodputField::kWork;
  throw GoodputError(
      field,
      fmt::format("each run would be interrupted about {:.3g} times ({:.3g} interruptions a day, "
                  "{:.3g} days of failure-free work, expected goodput {:.3g}); the Monte Carlo "
                  "draws at most {:.0e} interruptions per run and {:.0e} over all runs ({} runs "
                  "here){}",
                  per_run, rate_per_s * kSecondsPerDay, m.work_s / kSecondsPerDay, goodput,
                  kMaxInterruptions / 1000.0, kMaxInterruptions, runs,
                  one_run_too_many ? ": train fewer tokens, or check the failure table's rates "
                                     "and the restart time"
                                   : ": use fewer runs"));
}

double planned_per_s(const GoodputModel& m) { return m.rates.planned_per_day / kSecondsPerDay; }

// What one run needs, in seconds.
struct RunPlan {
  double work = 0;
  double tau = 0;
  double delta = 0;
  double lag = 0;
  double restart = 0;
  double write = 0;
  double rate = 0;                 // interruptions per second, all categories
  std::vector<double> cumulative;  // cumulative rates, for picking the category
};

RunPlan run_plan(const GoodputModel& m, double interval_s) {
  RunPlan p;
  p.work = m.work_s;
  p.tau = interval_s;
  p.delta = m.costs.blocking.seconds();
  p.lag = m.costs.commit_lag.seconds();
  p.restart = m.costs.restart.seconds();
  p.write = m.costs.write.seconds();
  for (const double r : m.rates.per_day) {
    p.rate += r / kSecondsPerDay;
    p.cumulative.push_back(p.rate);
  }
  return p;
}

struct RunTotals {
  double wall = 0;
  double checkpoint = 0;
  double lost = 0;
  double restart = 0;
  double planned_write = 0;
};

size_t pick_category(const RunPlan& p, double u) {
  const double target = u * p.rate;
  const auto it = std::upper_bound(p.cumulative.begin(), p.cumulative.end(), target);
  return std::min(static_cast<size_t>(it - p.cumulative.begin()), p.cumulative.size() - 1);
}

// One run, event-driven over interruptions: each segment (a restart, then periods of work and
// checkpoints until the work is done) either completes or is cut by the next interruption, drawn
// from the exponential distribution of the whole cluster's rate.
RunTotals one_run(const GoodputModel& m, const RunPlan& p, Rng& rng, std::vector<int64_t>& counts) {
  RunTotals t;
  double saved = 0;
  bool restarting = false;
  const double period = p.tau + p.delta;
  while (true) {
    const double restart = restarting ? p.restart : 0.0;
    const double remaining = p.work - saved;
    const double checkpoints = std::max(0.0, std::ceil(remaining / p.tau) - 1.0);
    const double length = restart + remaining + checkpoints * p.delta;
    const double x = p.rate > 0 ? -std::log1p(-rng.uniform()) / p.rate : kInf;
    if (x >= length) {
      t.wall += length;
      t.checkpoint += checkpoints * p.delta;
      t.restart += restart;
      return t;
    }
    t.wall += x;
    const size_t c = pick_category(p, rng.uniform());
    ++counts[c];
    restarting = true;
    if (x < restart) {
      t.restart += x;
      continue;
    }
    t.restart += restart;
    const double y = x - restart;
    const double k = std::floor(y / period);
    const double blocking = std::min(k, checkpoints) * p.delta +
                            (k < checkpoints ? std::max(0.0, y - k * period - p.tau) : 0.0);
    t.checkpoint += blocking;
    const double worked = y - blocking;
    if (m.categories[c].planned) {
      saved += worked;
      t.wall += p.write;
      t.planned_write += p.write;
      continue;
    }
    const double durable =
        y >= p.lag ? std::min(std::floor((y - p.lag) / period), checkpoints) : 0.0;
    saved += durable * p.tau;
    t.lost += worked - durable * p.tau;
  }
}

// Linear interpolation between order statistics (sorted ascending).
double quantile(const std::vector<double>& sorted, double q) {
  const double pos = q * static_cast<double>(sorted.size() - 1);
  const auto lo = static_cast<size_t>(std::floor(pos));
  const size_t hi = std::min(lo + 1, sorted.size() - 1);
  return sorted[lo] + (pos - static_cast<double>(lo)) * (sorted[hi] - sorted[lo]);
}

Spread spread(std::vector<double> v) {
  Spread s;
  double sum = 0;
  for (const double x : v) {
    sum += x;
  }
  s.mean = sum / static_cast<double>(v.size());
  std::sort(v.begin(), v.end());
  s.p10 = quantile(v, 0.1);
  s.p50 = quantile(v, 0.5);
  s.p90 = quantile(v, 0.9);
  return s;
}

void check_interval(const GoodputModel& m, double interval_s) {
  if (!(interval_s > 0) || !std::isfinite(interval_s)) {
    throw GoodputError(GoodputField::kCheckpointInterval,
                       fmt::format("expected a positive interval, got {} s", interval_s));
  }
  const double needed = m.costs.commit_lag.seconds() - m.costs.blocking.seconds();
  if (interval_s < needed) {
    throw GoodputError(
        GoodputField::kCheckpointInterval,
        fmt::format("{:.1f} s is shorter than the asynchronous write ({:.1f} s) less the snapshot "
                    "({:.1f} s): expected at least {:.1f} s, one write in flight at a time",
                    interval_s, m.costs.commit_lag.seconds(), m.costs.blocking.seconds(), needed));
  }
}

nlohmann::json spread_json(const Spread& s) {
  return {{"mean", s.mean}, {"p10", s.p10}, {"p50", s.p50}, {"p90", s.p90}};
}

// Infinity (no failures) as null.
nlohmann::json finite(double v) { return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(); }

}  // namespace

CheckpointCosts checkpoint_costs(const CheckpointSetup& s) {
  if (!(s.storage_bandwidth.value() > 0)) {
    throw GoodputError(GoodputField::kStorageBandwidth, "expected a positive bandwidth");
  }
  CheckpointCosts c;
  c.write = s.state / s.storage_bandwidth;
  if (s.node_bandwidth && s.writers) {
    if (!(s.node_bandwidth->value() > 0)) {
      throw GoodputError(GoodputField::kNodeStorageBandwidth, "expected a positive bandwidth");
    }
    c.write = std::max(c.write, s.writers->busiest_node() / *s.node_bandwidth);
  }
  c.load = c.write;
  if (s.async) {
    if (!(s.snapshot_bandwidth.value() > 0)) {
      throw GoodputError(GoodputField::kSnapshotBandwidth, "expected a positive bandwidth");
    }
    const int64_t devices = std::max<int64_t>(1, s.devices);
    const Bytes shard = Bytes::of((s.state.count() + devices - 1) / devices);
    c.blocking = shard / s.snapshot_bandwidth;
    c.commit_lag = c.write;
  } else {
    c.blocking = c.write;
  }
  c.restart = s.relaunch + c.load;
  return c;
}

Bytes CheckpointWriters::busiest_node() const {
  const auto share = [](Bytes b, int64_t n) {
    return Bytes::of((b.count() + std::max<int64_t>(n, 1) - 1) / std::max<int64_t>(n, 1));
  };
  return share(replicated, replica_nodes) + share(sharded, nodes);
}

CheckpointWriters checkpoint_writers(int64_t parameters, const workloads::ParallelPlan& plan,
                                     int64_t devices_per_node, int64_t nodes) {
  using workloads::ZeroStage;
  const Bytes weights = Bytes::of(parameters * plan.state.weight);
  const Bytes optimizer = Bytes::of(parameters * plan.state.optimizer);
  CheckpointWriters w;
  const bool weights_sharded = plan.zero == ZeroStage::kParameters;
  const bool optimizer_sharded = plan.zero != ZeroStage::kNone;
  w.replicated = (weights_sharded ? Bytes::of(0) : weights) +
                 (optimizer_sharded ? Bytes::of(0) : optimizer);
  w.sharded = (weights_sharded ? weights : Bytes::of(0)) +
              (optimizer_sharded ? optimizer : Bytes::of(0));
  w.nodes = std::max<int64_t>(nodes, 1);
  const int64_t per_node = std::max<int64_t>(devices_per_node, 1);
  w.replica_nodes =
      std::min(w.nodes, plan.pp * ((plan.tp * plan.cp + per_node - 1) / per_node));
  return w;
}

PlanGoodput plan_goodput(const GoodputModel& m) {
  PlanGoodput g;
  g.costs = m.costs;
  g.interval_s = optimal_interval_s(m);
  g.goodput = expected_goodput(m, g.interval_s);
  g.days = m.work_s / kSecondsPerDay / g.goodput;
  return g;
}

Bytes checkpoint_bytes(int64_t parameters, int64_t weight_bytes, int64_t optimizer_bytes) {
  return Bytes::of(parameters * (weight_bytes + optimizer_bytes));
}

double young_interval_s(double delta_s, double mtbf_s) { return std::sqrt(2.0 * delta_s * mtbf_s); }

double daly_interval_s(double delta_s, double mtbf_s) {
  if (delta_s >= 2.0 * mtbf_s) {
    return mtbf_s;
  }
  const double x = delta_s / (2.0 * mtbf_s);
  return std::sqrt(2.0 * delta_s * mtbf_s) * (1.0 + std::sqrt(x) / 3.0 + x / 9.0) - delta_s;
}

double expected_goodput(const GoodputModel& m, double interval_s) {
  const double tau = interval_s;
  const double delta = m.costs.blocking.seconds();
  const double restart = m.costs.restart.seconds() + m.costs.commit_lag.seconds();
  const double mtbf = m.rates.mtbf_s();
  const double per_period = std::isfinite(mtbf)
                                ? mtbf * std::exp(restart / mtbf) * std::expm1((tau + delta) / mtbf)
                                : tau + delta;
  const double planned =
      1.0 - planned_per_s(m) * (m.costs.write.seconds() + m.costs.restart.seconds());
  return tau / per_period * std::max(0.0, planned);
}

double optimal_interval_s(const GoodputModel& m) {
  const double lo_bound = std::max(1e-3, m.costs.commit_lag.seconds() - m.costs.blocking.seconds());
  const double mtbf = m.rates.mtbf_s();
  if (!std::isfinite(mtbf)) {
    return std::max(lo_bound, m.work_s);  // nothing fails: one checkpoint at most
  }
  // Golden-section search on log(tau) over [lo_bound, 100 M].
  double lo = std::log(lo_bound);
  double hi = std::log(std::max(lo_bound, 100.0 * mtbf));
  const double g = (std::sqrt(5.0) - 1.0) / 2.0;
  double a = hi - g * (hi - lo);
  double b = lo + g * (hi - lo);
  double fa = expected_goodput(m, std::exp(a));
  double fb = expected_goodput(m, std::exp(b));
  for (int i = 0; i < 200 && hi - lo > 1e-12; ++i) {
    if (fa < fb) {
      lo = a;
      a = b;
      fa = fb;
      b = lo + g * (hi - lo);
      fb = expected_goodput(m, std::exp(b));
    } else {
      hi = b;
      b = a;
      fb = fa;
      a = hi - g * (hi - lo);
      fa = expected_goodput(m, std::exp(a));
    }
  }
  return std::exp(0.5 * (lo + hi));
}

MonteCarloResult monte_carlo(const GoodputModel& m, double interval_s, int64_t runs,
                             uint64_t seed) {
  if (runs < 1) {
    throw GoodputError(GoodputField::kRuns, fmt::format("expected at least 1 run, got {}", runs));
  }
  if (!(m.work_s > 0)) {
    throw GoodputError(GoodputField::kWork, "expected a positive amount of work to train");
  }
  check_interval(m, interval_s);
  const RunPlan p = run_plan(m, interval_s);
  check_interruption_budget(m, interval_s, p.rate, runs);
  MonteCarloResult r;
  r.runs = runs;
  r.seed = seed;
  r.interval_s = interval_s;
  std::vector<double> days, goodput;
  std::vector<int64_t> counts(m.categories.size(), 0);
  RunTotals sum;
  for (int64_t i = 0; i < runs; ++i) {
    Rng rng(seed, fmt::format("goodput/run/{}", i));
    const RunTotals t = one_run(m, p, rng, counts);
    days.push_back(t.wall / kSecondsPerDay);
    goodput.push_back(p.work / t.wall);
    sum.checkpoint += t.checkpoint;
    sum.lost += t.lost;
    sum.restart += t.restart;
    sum.planned_write += t.planned_write;
  }
  const double n = static_cast<double>(runs);
  r.days = spread(days);
  r.goodput = spread(goodput);
  for (const int64_t c : counts) {
    r.interruptions.push_back(static_cast<double>(c) / n);
  }
  r.checkpoint_days = sum.checkpoint / n / kSecondsPerDay;
  r.lost_days = sum.lost / n / kSecondsPerDay;
  r.restart_days = sum.restart / n / kSecondsPerDay;
  r.planned_write_days = sum.planned_write / n / kSecondsPerDay;
  return r;
}

nlohmann::json to_json(const MonteCarloResult& r, const GoodputModel& m) {
  const double mtbf = m.rates.mtbf_s();
  const double delta = m.costs.blocking.seconds();
  nlohmann::json categories = nlohmann::json::array();
  for (size_t i = 0; i < m.categories.size(); ++i) {
    categories.push_back({{"name", m.categories[i].name},
                          {"component", to_string(m.categories[i].unit)},
                          {"planned", m.categories[i].planned},
                          {"per_day", m.rates.per_day[i]},
                          {"mean_interruptions", r.interruptions[i]}});
  }
  return {{"work_days", m.work_s / kSecondsPerDay},
          {"checkpoint",
           {{"write_s", m.costs.write.seconds()},
            {"blocking_s", delta},
            {"commit_lag_s", m.costs.commit_lag.seconds()},
            {"load_s", m.costs.load.seconds()},
            {"restart_s", m.costs.restart.seconds()}}},
          {"failures",
           {{"unexpected_per_day", m.rates.unexpected_per_day},
            {"planned_per_day", m.rates.planned_per_day},
            {"mtbf_hours", finite(mtbf / 3600.0)},
            {"categories", categories}}},
          {"interval",
           {{"used_s", r.interval_s},
            {"optimal_s", optimal_interval_s(m)},
            {"young_s", finite(young_interval_s(delta, mtbf))},
            {"daly_s", finite(daly_interval_s(delta, mtbf))}}},
          {"expected_goodput", expected_goodput(m, r.interval_s)},
          {"monte_carlo",
           {{"runs", r.runs},
            {"seed", r.seed},
            {"days", spread_json(r.days)},
            {"goodput", spread_json(r.goodput)},
            {"mean_days_by_cause",
             {{"checkpoint", r.checkpoint_days},
              {"lost_work", r.lost_days},
              {"restart", r.restart_days},
              {"planned_checkpoint", r.planned_write_days}}}}}};
}

}  // namespace meshsim::studies
