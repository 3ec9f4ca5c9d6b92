// Goodput over a whole training run: interruptions (failures.h), checkpoints, restarts and lost
// work, as a closed form (Young/Daly) and as a seeded Monte Carlo.
//
// The run: `work_s` seconds of failure-free training (tokens / simulated tokens per second). It
// trains in periods of `interval` seconds of work, each followed by a checkpoint that stops
// training for `blocking` (a synchronous write: state / storage bandwidth; an asynchronous one:
// the snapshot of each rank's shard to host memory) and becomes durable `commit_lag` after that
// (0 synchronous; the background write to storage asynchronous). An unexpected interruption
// loses the work since the last durable checkpoint and costs `restart` (relaunch, loading the
// checkpoint, warm-up) before training resumes; an interruption during a restart restarts it. A
// planned interruption first writes a checkpoint synchronously (`write`), so it loses nothing.
// The first launch is not charged.
//
// Interruptions are a Poisson process (failures.h): with rate lambda = 1/M, Daly's exact result
// for this model (Daly 2006, "A higher order estimate of the optimum checkpoint interval for
// restart dumps", Future Generation Computer Systems 22(3), eq. 12 with exponential failures) is
// the wall time per period M e^{R/M} (e^{(tau + delta)/M} - 1), so goodput (work / wall) is
//     G(tau) = tau / (M e^{R/M} (e^{(tau + delta)/M} - 1)),
// with delta = blocking. The commit lag of an asynchronous checkpoint is charged as extra restart
// (a failure in the lag window loses the previous period too: tau x lag / tau on average), a
// first-order term. Planned interruptions multiply G by (1 - rate x (write + restart)).
// Young's first-order optimum is tau = sqrt(2 delta M) (Young 1974, CACM 17(9)); Daly's higher
// order one (eq. 37) is sqrt(2 delta M) [1 + sqrt(delta / 2M) / 3 + (delta / 2M) / 9] - delta for
// delta < 2M, else M. `optimal_interval` maximises G numerically.
//
// Whole runs can exceed the +-106 days `Duration` holds, so run-length quantities are double
// seconds or days, named with their unit (as cost.h's days).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "meshsim/sim/provenance.h"
#include "meshsim/sim/units.h"
#include "meshsim/studies/failures.h"

namespace meshsim::studies {

// The fields of a goodput question, as the error names them (the edge adds the flag).
enum class GoodputField : uint8_t {
  kCheckpointInterval,
  kStorageBandwidth,
  kSnapshotBandwidth,
  kRestartTime,
  kRuns,
  kWork
};
constexpr auto enum_names(GoodputField) {
  using F = GoodputField;
  return std::to_array<EnumName<F>>({{F::kCheckpointInterval, "checkpoint_interval"},
                                     {F::kStorageBandwidth, "storage_bandwidth"},
                                     {F::kSnapshotBandwidth, "snapshot_bandwidth"},
                                     {F::kRestartTime, "restart_time"},
                                     {F::kRuns, "runs"},
                                     {F::kWork, "work"}});
}
using GoodputError = FieldError<GoodputField>;

// How checkpoints are written.
struct CheckpointSetup {
  Bytes state;                    // bytes of one checkpoint, the whole job
  int64_t devices = 1;            // ranks sharing the snapshot (each copies state / devices)
  BytesPerSec storage_bandwidth;  // aggregate write (and read) bandwidth of the storage
  bool async = false;
  BytesPerSec snapshot_bandwidth;  // per device, device -> host memory (async only)
  Duration relaunch;               // after an interruption: rescheduling, init, warm-up
};

struct CheckpointCosts {
  Duration write;       // state / storage bandwidth
  Duration blocking;    // training stops for: write (sync) or state / devices / snapshot bw
  Duration commit_lag;  // after blocking until durable: 0 (sync) or write (async)
  Duration load;        // reading the checkpoint back: state / storage bandwidth
  Duration restart;     // relaunch + load
};
// GoodputError (kStorageBandwidth, kSnapshotBandwidth) on a non-positive bandwidth.
CheckpointCosts checkpoint_costs(const CheckpointSetup& setup);

// Bytes of a checkpoint: every parameter's weight and optimizer state (workloads'
// ModelStateBytes: 2 + 12 in mixed precision); gradients are not saved.
Bytes checkpoint_bytes(int64_t parameters, int64_t weight_bytes, int64_t optimizer_bytes);

struct GoodputModel {
  double work_s = 0;  // failure-free training time
  CheckpointCosts costs;
  std::vector<FailureCategory> categories;  // the table's (names, planned)
  FailureRates rates;                       // per day, for the cluster
};

double young_interval_s(double delta_s, double mtbf_s);
double daly_interval_s(double delta_s, double mtbf_s);
// G(tau) of the file comment, in (0, 1]. tau > 0.
double expected_goodput(const GoodputModel& m, double interval_s);
// The interval maximising expected_goodput (golden-section search; G is unimodal in tau), at
// least the commit lag less the blocking (one asynchronous write in flight at a time).
double optimal_interval_s(const GoodputModel& m);

struct Spread {
  double mean = 0;
  double p10 = 0;
  double p50 = 0;
  double p90 = 0;
};

struct MonteCarloResult {
  int64_t runs = 0;
  uint64_t seed = 0;
  double interval_s = 0;
  Spread days;     // wall-clock days to train
  Spread goodput;  // work / wall
  // Means over the runs: interruptions by category (the model's order), and where wall time went.
  std::vector<double> interruptions;
  double checkpoint_days = 0;  // blocking
  double lost_days = 0;        // work redone after unexpected interruptions
  double restart_days = 0;     // restarts (including ones cut short)
  double planned_write_days = 0;
};

// `runs` independent runs (seeded per run from (seed, "goodput/run/<i>"), so a run's draws do not
// depend on how many runs there are). GoodputError(kRuns) unless runs >= 1;
// GoodputError(kCheckpointInterval) unless interval + blocking >= commit lag and interval > 0;
// GoodputError(kWork) when one run would draw more than 10^6 interruptions, (kRuns) when all runs
// would draw more than 10^9 (estimated from the closed form before any is drawn).
// Cost: O(interruptions) per run.
MonteCarloResult monte_carlo(const GoodputModel& m, double interval_s, int64_t runs, uint64_t seed);

nlohmann::json to_json(const MonteCarloResult& r, const GoodputModel& m);

}  // namespace meshsim::studies
