// `meshsim goodput`: a scenario's step simulated, then a whole run of --tokens under interruptions
// (studies/failures.h, the Llama 3 table by default), checkpoints and restarts: the checkpoint
// interval that maximises goodput (Young/Daly beside it), the expected goodput in closed form, and
// a seeded Monte Carlo of days to train and goodput with their spread (studies/goodput.h).
#pragma once

#include <cstdint>
#include <ostream>
#include <string>

#include "cli11_fwd.h"
#include "meshsim/studies/failures.h"
#include "meshsim/studies/goodput.h"
#include "meshsim/studies/plan_goodput.h"
#include "run_command.h"

namespace meshsim::cli {

struct GoodputArgs {
  std::string checkpoint_interval = "auto";  // "auto" or a duration: "30min", "1.5h", "600s"
  std::string storage_bandwidth = "2TB/s";
  bool async_checkpoint = false;
  std::string snapshot_bandwidth = "64GB/s";
  std::string restart_time = "10min";
  int64_t runs = 1000;
  uint64_t seed = 1;
  std::string failure_table;  // empty: the builtin (Llama 3)
  std::string node_storage_bandwidth;  // empty: no per-node limit
};

// The goodput flags on `app` (the scenario flags are the run's, added by main).
void add_goodput_options(CLI::App* app, GoodputArgs& a);
// The checkpoint and failure flags alone (--storage-bandwidth, --node-storage-bandwidth,
// --async-checkpoint, --snapshot-bandwidth, --restart-time, --failure-table), which `meshsim
// plan --rank-by goodput` shares.
void add_checkpoint_options(CLI::App* app, GoodputArgs& a);

// The checkpoint flags as the study's policy (InputError naming the flag on a bad value).
studies::CheckpointPolicy checkpoint_policy(const GoodputArgs& a);

// The flag of a goodput field: "--checkpoint-interval", "--tokens" (the work).
std::string flag_of(studies::GoodputField f);

// A span of a run for people: "850.0 ms", "56.2 s", "69.9 min", "2.50 h", or infinite (no
// failures).
std::string format_span(double seconds);

// Simulates the step, then the run. Returns the exit code: 0, or 3 when the plan does not fit.
int goodput_command(const Scenario& s, const RunOutputs& outputs, const GoodputArgs& a,
                    std::ostream& out);

}  // namespace meshsim::cli
