// The plan search: every valid parallel plan of a model on a cluster, pruned exactly, the
// survivors simulated with the engine (the same code path as `meshsim run`), ranked.
//
// Enumeration (deterministic order): TP (divisors of the device count up to max_tp), SP (on with
// TP > 1), CP, PP (divisors of the layers), the schedule with its virtual stages (1F1B; for PP > 1
// also interleaved with every VPP > 1 dividing the layers per stage, and ZB-H1), DP (the rest of
// the devices), ZeRO 0-3 (with DP > 1), EP (MoE models: divisors of DP and the experts), HSDP
// (with ZeRO 1-3 and EP 1, where the DP group crosses the scale-up domain (a node, an NVLink
// domain, a TPU slice): besides ZeRO over all of DP, shard groups of the largest f dividing DP
// whose TP x CP x f ranks fill a divisor of the domain, replicated across: smaller groups only add
// memory and move more bytes over the slower fabric, so they are not enumerated unless fixed), the
// microbatch (divisors of the global batch per DP rank), recompute none / selective / full
// (selective only with naive attention: with flash attention it saves and recomputes what none
// does), and TP overlap off / on (with TP > 1). Dominated choices are not enumerated unless
// fixed: GPipe (the 1F1B bubble with more activations in flight), TP without SP (the same traffic, more activation
// memory), and the grad-reduce, param-gather and p2p overlaps switched off (each only adds
// exposed time); the base plan's values of those (and of precision, attention, kernels, capacity
// factor) are kept. A fixed field (`Fixed`) takes only its value.
//
// Pruning, in order: plans the plan's software stack does not run (workloads::stack_refusal;
// counted by the rule; the custom stack runs every valid plan); invalid plans
// (workloads::validate_plan; counted by the field at fault);
// memory: a lower bound on the simulated peak (memory_lower_bound) above the chip's memory, or
// above it less the headroom asked for (the closed form of workloads::estimate_step_memory rounds
// the interleaved schedule's chunks in flight up to whole microbatches and adds full recompute's
// working set at the peak, so it can exceed the ledger's peak by several percent: pruning with it
// would drop plans that fit); the bound (step_bound.h): the search stops when no plan left has a
// bound below the objective of the N-th best simulated plan, so no plan it did not simulate could
// have ranked in the top N. It simulates first the plans with the smallest bound times the least
// step/bound ratio simulated so far in their ZeRO stage (the bound is loosest for ZeRO-3), which
// matters only under a cap. `max_simulations` caps the simulations of plans that fit (those out of memory count
// only towards ten times the cap); when the cap ends the search first the result
// says so (`exact` = false).
//
// Objectives: time (step time), cost (USD per step at the price of cost.h) and MFU. On one
// cluster with one global batch all three rank plans alike (cost and MFU are the step time times
// a constant); they differ when sweeps compare clusters.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "meshsim/studies/distribute.h"
#include "meshsim/scenario/scenario.h"
#include "meshsim/scenario/step.h"
#include "meshsim/workloads/parallel.h"
#include "meshsim/workloads/partition.h"

namespace meshsim::studies {

enum class Objective : uint8_t { kTime, kCost, kMfu };
constexpr auto enum_names(Objective) {
  return std::to_array<EnumName<Objective>>(
      {{Objective::kTime, "time"}, {Objective::kCost, "cost"}, {Objective::kMfu, "mfu"}});
}

// Fields the search holds at one value (the flags --tp 8, --zero 1, ...). fsdp: the HSDP shard
// group (0: ZeRO over all of DP; N > 0: plans with ZeRO 1-3 only). dcn_dp K (MaxText's
// dcn_data_parallelism): DP a multiple of K, and plans with ZeRO 1-3 shard over dp / K ranks with
// K replicas (fsdp = dp / K), those without ZeRO replicate everywhere.
struct Fixed {
  std::optional<int64_t> tp, cp, pp, vpp, dp, ep, mbs, fsdp, dcn_dp;
  // Activation offloading, layers per model chunk (not searched: absent means none).
  std::optional<int64_t> offload_layers;
  std::optional<bool> sp, overlap_tp;
  // FP8 parameter gathers (ParallelPlan::fp8_param_gather): searched where the plan can take them
  // (fp8 training, ZeRO 1-3, a Megatron-Core stack: workloads::fp8_param_gather_refusal).
  std::optional<bool> fp8_param_gather;
  std::optional<workloads::ZeroStage> zero;
  std::optional<workloads::Recompute> recompute;
  std::optional<workloads::PipelineSchedule> schedule;
};

// Bounds on the search's counts, checked where they are read (flags, a sweep spec): a search
// enumerates thousands of plans, so 2^20 ranked plans and 2^30 simulations are never limits in
// practice, and they keep 8 x top inside 64 bits; 1024 simulations at once is more threads than
// any machine meshsim runs on has cores.
inline constexpr int64_t kMaxTop = int64_t{1} << 20;
inline constexpr int64_t kMaxSimulations = int64_t{1} << 30;
// Simulations per ranked plan when no cap is given (`meshsim plan`, the what-ifs' searches): the
// search simulates in the order of its estimates and stops earlier once no plan left is estimated
// to enter the ranking (docs/plan-search.md has the figures).
inline constexpr int64_t kDefaultSimulationsPerTop = 4;
// The memory every command keeps free by default (plan, sweep, the suggestions of an
// out-of-memory run, and run's warning): 5 % of the chip's memory, for what meshsim does not
// model: the CUDA context, NCCL's buffers and the caching allocator's fragmentation. No source
// gives a better single figure (they depend on the framework, the NCCL channels and the model);
// --min-headroom 0 turns it off.
inline constexpr double kDefaultHeadroom = 0.05;
inline constexpr int64_t kMaxJobs = 1024;

struct SearchOptions {
  int64_t top = 20;
  Objective objective = Objective::kTime;
  int64_t max_tp = 0;          // 0: the cluster's scale-up domain
  double min_headroom = kDefaultHeadroom;  // fraction of the chip's memory left free, in [0, 1)
  Fixed fixed;
  int64_t max_simulations = 0;  // 0: no cap (exact); see the file comment
  // Simulations in all, out-of-memory ones too (0: ten times max_simulations).
  int64_t max_all_simulations = 0;
  // Also prune plans whose closed-form memory (workloads::estimate_step_memory, which tends to
  // exceed the simulated peak by a few percent) leaves less than the headroom free: for searches
  // that may simulate only a few plans and must not spend them on plans that do not fit (the
  // out-of-memory suggestions). Some plans that would fit are dropped.
  bool closed_form_memory = false;
  int jobs = 1;                 // threads simulating at once
  // The price of a device-hour for the cost objective (absent: the builtin price table's; the
  // cost objective refuses a chip without one, ScenarioError on the cluster).
  std::optional<double> usd_per_device_hour;
  scenario::StepOptions step;
  // Processes sharing the simulations (distribute.h; not owned; null: this process alone). Each
  // batch of simulations is split over the processes and every report exchanged exactly, so all
  // of them follow the same search and end with the same result as one process.
  Distributor* distributor = nullptr;
};

// A ranked plan.
// Model state plus the saved activations of the most chunk passes the schedule keeps in flight
// (workloads::max_in_flight), on the worst stage: what the ledger holds when the last of those
// forwards has started, so never above the simulated peak (tests/studies/plan_search_test.cc).
Bytes memory_lower_bound(const workloads::ModelConfig& model, const workloads::ParallelPlan& plan);
// The same with the plan's stage partition (workloads::partition_stages) at hand.
Bytes memory_lower_bound(const workloads::ParallelPlan& plan,
                         const std::vector<workloads::StagePartition>& parts);
// The same by pipeline stage.
std::vector<Bytes> memory_lower_bounds(const workloads::ParallelPlan& plan,
                                       const std::vector<workloads::StagePartition>& parts);

struct RankedPlan {
  workloads::ParallelPlan plan;
  Duration lower_bound;
  Bytes memory_estimate;  // memory_lower_bound
  scenario::StepReport report;  // simulated
};

struct SearchResult {
  int64_t considered = 0;  // plans enumerated
  std::map<std::string, int64_t> invalid;  // by plan field at fault (validate_plan)
  // Valid plans the stack does not run, by the rule that refuses them (stack_rules.h: its `what`).
  std::map<std::string, int64_t> refused;
  int64_t pruned_memory = 0;    // memory_lower_bound above the chip's memory
  int64_t pruned_headroom = 0;  // ... above it less the headroom asked for
  int64_t pruned_estimate = 0;  // closed-form memory above it (SearchOptions::closed_form_memory)
  int64_t pruned_bound = 0;     // lower bound above the N-th best simulated
  int64_t not_simulated = 0;    // left by max_simulations (their bound was below the N-th)
  int64_t simulated = 0;
  int64_t simulated_oom = 0;    // simulated peak above the memory
  int64_t simulated_headroom = 0;  // simulated peak within the headroom of the memory
  int64_t probes = 0;           // probe programs built for the lower bound
  // Whether the ranking is proven: every plan not simulated has a lower bound above the N-th
  // best, so none could have entered the top N.
  bool exact = true;
  // Whether the simulation cap ended the search (else, when not exact, no plan left was estimated
  // to enter the ranking).
  bool capped = false;
  std::vector<RankedPlan> top;  // best first (equal objectives: more memory left first)
  int64_t devices = 0;
  Bytes memory_capacity;
  double min_headroom = 0.0;  // the headroom the search kept (SearchOptions::min_headroom)
};

// Why a search ranked nothing: "no valid plan (invalid: gbs 640, tp 2328)" or "no plan fits in
// memory (1200 over memory, 3 out of memory when simulated)".
std::string no_plan_reason(const SearchResult& r);

// Progress: called with (plans done, plans in the phase) and the phase's name.
using ProgressFn = std::function<void(std::string_view phase, int64_t done, int64_t total)>;

// The plans of the search space that pass validate_plan and the device count, each with its
// plan bound to the cluster (bind_to_cluster: its stack and ranks per node, as simulate_step), in
// enumeration order, with the count of invalid ones by field (exposed for tests).
std::vector<workloads::ParallelPlan> enumerate_plans(const scenario::LoadedScenario& loaded,
                                                     const workloads::ParallelPlan& base,
                                                     const SearchOptions& options,
                                                     SearchResult* counts = nullptr);

// The objective of a simulated report (lower is better: seconds, USD, or -MFU).
double objective_value(const scenario::StepReport& r, Objective objective,
                       double usd_per_device_hour);

// Searches the plans of `base` (a scenario whose model, cluster, sequence, global batch and
// precision are the question). Throws what simulate_step throws for the scenario's loaders.
SearchResult search_plans(const scenario::Scenario& base, const SearchOptions& options,
                          const ProgressFn& progress = {});

}  // namespace meshsim::studies
