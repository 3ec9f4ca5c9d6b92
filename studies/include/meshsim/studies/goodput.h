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
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "meshsim/sim/provenance.h"
#include "meshsim/sim/units.h"
#include "meshsim/studies/failures.h"
#include "meshsim/workloads/parallel.h"

namespace meshsim::studies {

// The fields of a goodput question, as the error names them (the edge adds the flag).
enum class GoodputField : uint8_t {
  kCheckpointInterval,
  kStorageBandwidth,
  kSnapshotBandwidth,
  kRestartTime,
  kRuns,
  kWork,
  kNodeStorageBandwidth
};
constexpr auto enum_names(GoodputField) {
  using F = GoodputField;
  return std::to_array<EnumName<F>>({{F::kCheckpointInterval, "checkpoint_interval"},
                                     {F::kStorageBandwidth, "storage_bandwidth"},
                                     {F::kSnapshotBandwidth, "snapshot_bandwidth"},
                                     {F::kRestartTime, "restart_time"},
                                     {F::kRuns, "runs"},
                                     {F::kWork, "work"},
                                     {F::kNodeStorageBandwidth, "node_storage_bandwidth"}});
}
using GoodputError = FieldError<GoodputField>;

// Who writes a plan's checkpoint, for goodput-aware plan ranking. State replicated over the DP
// ranks (weights below ZeRO-3; optimizer state without ZeRO) is written by one DP replica only:
// Megatron-LM's legacy torch format saves on data-parallel rank 0 (checkpointing.py,
// save_checkpoint), and PyTorch DCP before its load-balanced dedup kept a replicated item on the
// lowest rank holding it (torch/distributed/checkpoint/_dedup_tensors.py, dedup_tensors). State
// sharded over DP (ZeRO's optimizer shards, ZeRO-3 / FSDP parameters) is written by every rank,
// each its own shard, in parallel. One replica's TP x CP x PP ranks sit on PP x ceil(TP x CP /
// devices per node) nodes (Megatron's tp-cp-dp-pp rank order), at most all of them. Reading the
// checkpoint back moves the same bytes through the same nodes (the replicated part then goes to
// the other replicas over the fabric, not charged). Gradients are not saved.
struct CheckpointWriters {
  Bytes replicated;
  Bytes sharded;
  int64_t nodes = 1;          // nodes of the job (write the sharded state)
  int64_t replica_nodes = 1;  // nodes of one DP replica (write the replicated state)

  // The bytes the busiest node writes: its share of the replicated and of the sharded state.
  Bytes busiest_node() const;
};
CheckpointWriters checkpoint_writers(int64_t parameters, const workloads::ParallelPlan& plan,
                                     int64_t devices_per_node, int64_t nodes);

// How checkpoints are written.
struct CheckpointSetup {
  Bytes state;                    // bytes of one checkpoint, the whole job
  int64_t devices = 1;            // ranks sharing the snapshot (each copies state / devices)
  BytesPerSec storage_bandwidth;  // aggregate write (and read) bandwidth of the storage
  bool async = false;
  BytesPerSec snapshot_bandwidth;  // per device, device -> host memory (async only)
  Duration relaunch;               // after an interruption: rescheduling, init, warm-up
  // Per node, each node's write (and read) bandwidth to the storage; with `writers`, the
  // checkpoint also takes the busiest node's bytes over it. Absent: only the aggregate binds.
  std::optional<BytesPerSec> node_bandwidth;
  std::optional<CheckpointWriters> writers;
};

struct CheckpointCosts {
  Duration write;       // max(state / storage bandwidth, busiest node's bytes / node bandwidth)
  Duration blocking;    // training stops for: write (sync) or state / devices / snapshot bw
  Duration commit_lag;  // after blocking until durable: 0 (sync) or write (async)
  Duration load;        // reading the checkpoint back: state / storage bandwidth
  Duration restart;     // relaunch + load
};
// GoodputError (kStorageBandwidth, kSnapshotBandwidth, kNodeStorageBandwidth) on a non-positive
// bandwidth.
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

// One plan's run under failures, for goodput-aware ranking: the model's expected goodput at its
// optimal interval (closed form) and the expected days to train (work / goodput).
struct PlanGoodput {
  CheckpointCosts costs;
  double interval_s = 0;
  double goodput = 0;
  double days = 0;
};
PlanGoodput plan_goodput(const GoodputModel& m);

}  // namespace meshsim::studies
