// Goodput over a whole run (issue 16): the interruption table (Llama 3's Table 5) scaled to a
// cluster, the Monte Carlo against Daly's closed form on an exponential failure model, the
// optimum interval against Young/Daly, determinism with a seed, and bad tables rejected where
// they are wrong.
#include <gtest/gtest.h>

#include <cmath>
#include <numeric>

#include "meshsim/sim/error.h"
#include "meshsim/studies/goodput.h"

namespace meshsim::studies {
namespace {

constexpr double kDay = 86400.0;
constexpr double kHour = 3600.0;

// One category of interruptions per job at `per_hour` (a pure exponential failure model).
FailureTable exponential_table(double per_hour, bool planned = false) {
  nlohmann::json doc = {
      {"source", "test"},
      {"observed", {{"days", 1}, {"gpus", 1}, {"nodes", 1}, {"switches", 1}, {"source", "test"}}},
      {"categories",
       {{{"name", "any"},
         {"component", "job"},
         {"count", per_hour * 24.0},
         {"planned", planned},
         {"source", "test"}}}}};
  return FailureTable::parse(doc, "test.json");
}

GoodputModel model(const FailureTable& t, const ComponentCounts& c, double work_s,
                   Duration blocking, Duration restart) {
  GoodputModel m;
  m.work_s = work_s;
  m.costs.write = blocking;
  m.costs.blocking = blocking;
  m.costs.restart = restart;
  m.categories = t.categories;
  m.rates = failure_rates(t, c);
  return m;
}

TEST(FailureTable, Llama3TableHas419UnexpectedAnd47PlannedInterruptionsIn54Days) {
  const FailureTable t = FailureTable::builtin();
  double unexpected = 0, planned = 0;
  for (const FailureCategory& c : t.categories) {
    (c.planned ? planned : unexpected) += c.count;
  }
  EXPECT_EQ(unexpected, 419);  // the paper's total, Sec. 3.3.4
  EXPECT_EQ(planned, 47);
  // On the observed cluster the rates give the table back; on half of it, the GPU and node
  // categories halve and the per-job ones do not.
  const FailureRates full = failure_rates(t, t.observed);
  EXPECT_NEAR(full.unexpected_per_day * 54.0, 419.0, 1e-9);
  const FailureRates half = failure_rates(t, {8192, 1024, 640});
  for (size_t i = 0; i < t.categories.size(); ++i) {
    const double ratio = half.per_day[i] / full.per_day[i];
    EXPECT_DOUBLE_EQ(ratio, t.categories[i].unit == FailureUnit::kJob ? 1.0 : 0.5)
        << t.categories[i].name;
  }
  EXPECT_NEAR(full.mtbf_s() / kHour, 54.0 * 24.0 / 419.0, 1e-9);  // ~3.09 h
}

TEST(GoodputMonteCarlo, ReproducesLlama3InterruptionsPer54Days) {
  // No checkpoint or restart cost, checkpoints every second: the wall time is the 54 days (plus
  // under a second lost per interruption), so the run counts the table's interruptions.
  const FailureTable t = FailureTable::builtin();
  const GoodputModel m = model(t, t.observed, 54.0 * kDay, Duration::zero(), Duration::zero());
  const int64_t runs = 200;
  const MonteCarloResult r = monte_carlo(m, 1.0, runs, 7);
  double unexpected = 0, planned = 0;
  for (size_t i = 0; i < t.categories.size(); ++i) {
    (t.categories[i].planned ? planned : unexpected) += r.interruptions[i];
  }
  // Poisson: the mean of `runs` counts has standard deviation sqrt(419 / runs).
  EXPECT_NEAR(unexpected, 419.0, 4.0 * std::sqrt(419.0 / runs));
  EXPECT_NEAR(planned, 47.0, 4.0 * std::sqrt(47.0 / runs));
  EXPECT_NEAR(r.days.mean, 54.0, 0.01);
}

// The standard error of the Monte Carlo's mean goodput.
double standard_error(const MonteCarloResult& r) {
  // p10..p90 of a normal spans 2.563 sigma.
  return (r.goodput.p90 - r.goodput.p10) / 2.563 / std::sqrt(static_cast<double>(r.runs));
}

TEST(GoodputMonteCarlo, AgreesWithDalysClosedFormOnExponentialFailures) {
  // M = 10 h, delta = 6 min, R = 12 min, 2000 h of work: at the optimum and at 3x it.
  const FailureTable t = exponential_table(0.1);
  const GoodputModel m = model(t, {1, 1, 1}, 2000.0 * kHour, Seconds(360), Seconds(720));
  EXPECT_NEAR(m.rates.mtbf_s(), 10.0 * kHour, 1e-6);
  for (const double tau : {optimal_interval_s(m), 3.0 * optimal_interval_s(m), 1800.0}) {
    const MonteCarloResult r = monte_carlo(m, tau, 400, 3);
    const double closed = expected_goodput(m, tau);
    // The closed form charges no partial last period and no restart-free first start: a bias
    // below (tau + R) / work.
    const double edge = (tau + 720.0) / m.work_s;
    EXPECT_NEAR(r.goodput.mean, closed, 4.0 * standard_error(r) + edge) << "tau " << tau;
    EXPECT_LT(closed, 0.95);  // failures matter here: the comparison is not vacuous
  }
}

TEST(GoodputInterval, OptimumIsNearYoungAndDaly) {
  // delta = 60 s, M = 10 h: Young sqrt(2 delta M) = 2078 s.
  const FailureTable t = exponential_table(0.1);
  const GoodputModel m = model(t, {1, 1, 1}, 1000.0 * kHour, Seconds(60), Seconds(600));
  const double young = young_interval_s(60.0, 10.0 * kHour);
  EXPECT_NEAR(young, std::sqrt(2.0 * 60.0 * 36000.0), 1e-9);
  const double opt = optimal_interval_s(m);
  EXPECT_NEAR(opt / young, 1.0, 0.03);
  EXPECT_NEAR(opt / daly_interval_s(60.0, 10.0 * kHour), 1.0, 0.01);
  // The Monte Carlo agrees it is the better interval (same seed: common random numbers).
  const double at_opt = monte_carlo(m, opt, 200, 5).goodput.mean;
  EXPECT_GT(at_opt, monte_carlo(m, opt / 4.0, 200, 5).goodput.mean);
  EXPECT_GT(at_opt, monte_carlo(m, opt * 4.0, 200, 5).goodput.mean);
}

TEST(GoodputMonteCarlo, IsDeterministicWithASeed) {
  const FailureTable t = FailureTable::builtin();
  const GoodputModel m = model(t, t.observed, 60.0 * kDay, Seconds(30), Seconds(900));
  const double tau = optimal_interval_s(m);
  const std::string a = to_json(monte_carlo(m, tau, 50, 11), m).dump();
  EXPECT_EQ(a, to_json(monte_carlo(m, tau, 50, 11), m).dump());
  EXPECT_NE(a, to_json(monte_carlo(m, tau, 50, 12), m).dump());
}

TEST(GoodputMonteCarlo, PlannedInterruptionsLoseNoWork) {
  const FailureTable t = exponential_table(0.5, /*planned=*/true);
  const GoodputModel m = model(t, {1, 1, 1}, 500.0 * kHour, Seconds(60), Seconds(300));
  const MonteCarloResult r = monte_carlo(m, 3600.0, 50, 1);
  EXPECT_EQ(r.lost_days, 0.0);
  EXPECT_GT(r.planned_write_days, 0.0);
  EXPECT_GT(r.restart_days, 0.0);
}

TEST(CheckpointCosts, SynchronousAndAsynchronous) {
  CheckpointSetup s;
  s.state = checkpoint_bytes(405'000'000'000, 2, 12);  // 5.67 TB
  EXPECT_EQ(s.state.count(), 5'670'000'000'000);
  s.devices = 16384;
  s.storage_bandwidth = TBps(2);
  s.snapshot_bandwidth = GBps(64);
  s.relaunch = Seconds(600);
  const CheckpointCosts sync = checkpoint_costs(s);
  EXPECT_NEAR(sync.write.seconds(), 2.835, 1e-9);
  EXPECT_EQ(sync.blocking, sync.write);
  EXPECT_EQ(sync.commit_lag, Duration::zero());
  EXPECT_NEAR(sync.restart.seconds(), 602.835, 1e-9);
  s.async = true;
  const CheckpointCosts async = checkpoint_costs(s);
  EXPECT_NEAR(async.blocking.seconds(), 5.67e12 / 16384 / 64e9, 1e-9);
  EXPECT_EQ(async.commit_lag, sync.write);
  // An interval shorter than the write in flight is rejected, naming the field.
  GoodputModel m =
      model(exponential_table(0.1), {1, 1, 1}, 100.0 * kHour, async.blocking, Seconds(600));
  m.costs = async;
  try {
    monte_carlo(m, 1.0, 10, 1);
    FAIL() << "an interval below the write time was accepted";
  } catch (const GoodputError& e) {
    EXPECT_EQ(e.field(), GoodputField::kCheckpointInterval);
  }
  EXPECT_GE(optimal_interval_s(m) + async.blocking.seconds(), async.commit_lag.seconds());
}

TEST(FailureTable, BadTablesAreRejectedWhereTheyAreWrong) {
  const nlohmann::json doc = nlohmann::json::parse(R"({"source": "s", "observed": {"days": 54,
      "gpus": 16384, "nodes": 2048, "switches": 1280, "source": "s"},
      "categories": [{"name": "a", "component": "gpu", "count": 1, "source": "s"}]})");
  ASSERT_NO_THROW(FailureTable::parse(doc, "t.json"));
  const auto expect_error = [](nlohmann::json d, const std::string& where) {
    try {
      FailureTable::parse(d, "t.json");
      ADD_FAILURE() << "accepted: " << d.dump();
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find(where), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("t.json"), std::string::npos) << e.what();
    }
  };
  nlohmann::json bad = doc;
  bad["categories"][0]["component"] = "gpus";
  expect_error(bad, "/categories/0/component");
  bad = doc;
  bad["categories"][0]["count"] = -1;
  expect_error(bad, "/categories/0/count");
  bad = doc;
  bad["observed"]["days"] = 0;
  expect_error(bad, "/observed/days");
  bad = doc;
  bad["categories"][0]["typo"] = 1;
  expect_error(bad, "/categories/0/typo");
  bad = doc;
  bad["categories"] = nlohmann::json::array();
  expect_error(bad, "/categories");
}

// Issue 15: the Monte Carlo draws every interruption, so its count is bounded before it starts.
TEST(GoodputMonteCarlo, RefusesEndlessRunsBeforeDrawingAny) {
  // One interruption a minute against a 20-minute restart: no restart would ever finish.
  const GoodputModel endless =
      model(exponential_table(60.0), {1, 1, 1}, 100.0 * kHour, Seconds(60), Seconds(1200));
  try {
    (void)monte_carlo(endless, 600.0, 1, 1);
    ADD_FAILURE() << "an endless run was drawn";
  } catch (const GoodputError& e) {
    EXPECT_EQ(e.field(), GoodputField::kRestartTime);
    EXPECT_NE(e.message().find("the Monte Carlo draws at most"), std::string::npos) << e.what();
  }
  // Llama 3's rates over 10^7 days of work: ~10^8 interruptions in one run.
  const FailureTable t = FailureTable::builtin();
  const GoodputModel forever = model(t, t.observed, 1e7 * kDay, Seconds(30), Seconds(900));
  try {
    (void)monte_carlo(forever, 3600.0, 1, 1);
    ADD_FAILURE() << "10^8 interruptions were drawn";
  } catch (const GoodputError& e) {
    EXPECT_EQ(e.field(), GoodputField::kWork);
  }
  // Llama 3's table over 54 days (~470 interruptions a run): 10^7 runs are past 10^9 in all.
  const GoodputModel llama = model(t, t.observed, 54.0 * kDay, Seconds(30), Seconds(900));
  try {
    (void)monte_carlo(llama, 3600.0, 10'000'000, 1);
    ADD_FAILURE() << "10^7 runs were drawn";
  } catch (const GoodputError& e) {
    EXPECT_EQ(e.field(), GoodputField::kRuns);
  }
  EXPECT_NO_THROW((void)monte_carlo(llama, 3600.0, 10, 1));
}

}  // namespace
}  // namespace meshsim::studies
