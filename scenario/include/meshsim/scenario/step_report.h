// The result of simulating one step, as printed and as written with --json.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "meshsim/scenario/faults.h"

#include "meshsim/sim/program.h"
#include "meshsim/sim/units.h"

namespace meshsim::scenario {

struct MemoryBreakdown {
  std::array<Bytes, kNumMemoryCategories> by_category{};
  Bytes total() const;
};

struct StepReport {
  // What was simulated (echoed inputs).
  nlohmann::json inputs;
  std::string model_description;
  std::string cluster_description;
  std::string plan_description;
  int64_t devices = 0;
  int64_t parameters = 0;
  std::string chip;                 // catalogue key of the devices ("h100-sxm")
  Flops model_flops_per_token;      // training FLOPs per token (causal attention), as MFU counts

  // Results. When `oom` is set before simulation, the timing fields stay zero.
  bool simulated = false;
  Duration step_time;
  int64_t tokens_per_step = 0;
  double tokens_per_s = 0;             // tokens per second of simulated time
  double tokens_per_s_per_device = 0;
  double mfu = 0;  // model FLOPs (causal attention) / (peak per device x step time x devices)
  double hfu = 0;  // executed FLOPs (recompute, flash backward) / same
  FlopsPerSec peak_per_device;     // the peak MFU is measured against (dense)
  Dtype peak_dtype = Dtype::kBf16;  // its format: bf16 (also for fp8 runs), fp32 or tf32
  Duration compute;                // per rank (max over ranks), union of compute spans
  Duration exposed_comm;           // per rank (max over ranks)
  // The host model: how long the compute stream's next kernel was ready but not yet issued by
  // the host (RankResult::host_wait), max over ranks.
  Duration host_wait;
  // Mean over the pipeline stages of each stage's bubble_fraction (below): the idle fraction of
  // the stage's worst simulated rank, less the time it waited for its host.
  double bubble_fraction = 0;
  std::array<Duration, kNumOpClasses> time_by_class{};  // rank 0, summed kernel times
  Bytes peak_memory;               // max over ranks, from the ledger (or the estimate if OOM)
  MemoryBreakdown peak_breakdown;  // at the peak, on the rank with the highest peak
  Bytes memory_capacity;
  bool oom = false;
  std::string oom_stage;  // which stage does not fit, when oom
  std::vector<std::string> caveats;  // workloads::plan_caveats: plans no framework runs

  struct Stage {
    int64_t stage = 0;
    // idle (no compute, no communication) less host_wait, / step; the stage's worst rank
    double bubble_fraction = 0;
    Duration compute;
    Bytes peak_memory;
    MemoryBreakdown peak_breakdown;
  };
  std::vector<Stage> stages;
  // Exposed communication by kind (tp, cp, dp, pp, ep): the worst simulated rank's.
  std::vector<std::pair<std::string, Duration>> exposed_by_kind;
  std::string simulation_mode;  // "representative" or "full"
  int64_t simulated_ranks = 0;
  uint64_t events = 0;
  std::string trace_path;
  uint64_t trace_events = 0;
  std::string trace_description;
  std::optional<FaultEffect> faults;  // when the scenario has faults (faults.h)
};

// The report as `meshsim run --json` writes it: the scalar results of report_fields.h under their
// keys, the memory breakdowns, the time by op class, the exposed communication by kind, the
// stages (stages_json), how it was simulated, and the faults' effect when there were faults.
nlohmann::json to_json(const StepReport& r);
// Per pipeline stage: its bubble, compute, peak memory and the peak's breakdown.
nlohmann::json stages_json(const StepReport& r);

// "weights 4.23 GiB, gradients 4.23 GiB, ...": the non-zero categories.
std::string memory_line(const MemoryBreakdown& m);
// "1.23 GiB", "512 MiB"
std::string format_bytes(Bytes b);
// "1.234 s", "12.3 ms", "45.6 us"
std::string format_duration(Duration d);

}  // namespace meshsim::scenario
