// Published real-hardware training runs, and meshsim held to them (`meshsim validate-published`).
//
// validation/published/published_runs.json (README.md beside it states the rules) lists training
// runs with their citation, hardware, model shape, parallel plan, batch, framework, precision and
// one measured metric. For each run this library
//  * reads the record as the source states it: a JSON null stays "not stated" (std::nullopt);
//  * maps it to a scenario meshsim can simulate (PublishedScenario: model, plan, cluster), applying
//    only a framework's documented defaults, or says why it cannot (NotExpressible: an
//    architecture meshsim does not model, hardware the catalogue lacks, a field whose value
//    depends on a choice the source does not state);
//  * converts the measured metric into a step time with the source's own FLOP convention
//    (published_flops.h);
//  * simulates the mapped scenario as `meshsim run` would (scenario/step.h), compares the step with
//    the measured one and summarises the errors: median and 90th percentile of |error|, median
//    signed error, overall, by source, by precision and for long sequences.
// error = simulated / measured - 1: negative when meshsim is too fast.
#pragma once

#include <array>
#include <cstdint>
#include <exception>
#include <map>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "meshsim/scenario/scenario.h"
#include "meshsim/scenario/step.h"
#include "meshsim/sim/program.h"
#include "meshsim/sim/units.h"
#include "meshsim/topology/chip.h"
#include "meshsim/topology/cluster.h"
#include "meshsim/validation/published_facts.h"
#include "meshsim/workloads/model.h"
#include "meshsim/workloads/parallel.h"

namespace meshsim::validation {

// One record of published_runs.json, as stated; std::nullopt where the source says nothing.
struct PublishedRun {
  std::string id;
  std::string citation;
  std::string location;
  std::string hardware_key;  // hardware.json's key, e.g. "H100-SXM5-80GB"
  std::optional<int64_t> devices;
  // TPU records: the slice, in the source's words ("v5p-128 = 128 TensorCores = 64 chips per
  // slice"); empty elsewhere.
  std::string intra_slice;
  struct Model {
    std::string name;
    std::string arch_notes;
    bool moe = false;  // the record describes a mixture of experts
    std::optional<int64_t> layers, hidden, heads, kv_heads, ffn, vocab, seq_len;
    std::optional<int64_t> experts, top_k, expert_ffn;  // MoE: routed experts, top-k, their width
    std::optional<double> params_b;  // the parameter count the source states, in billions
  } model;
  struct Parallelism {
    std::optional<int64_t> tp, pp, dp, cp, ep, zero_stage, vpp;
    std::optional<bool> sp, fsdp;
    std::optional<std::string> recompute;  // free text: "full (...)", "selective", "minimal"
    std::string notes;                     // free text
  } parallelism;
  struct Batch {
    std::optional<int64_t> sequences, tokens, micro_batch, grad_accum;
  } batch;
  std::string precision;        // as the source words it
  std::string precision_class;  // "bf16", "fp16", "fp8" or "unknown"
  std::string framework;
  struct Metric {
    std::string metric;  // tokens_per_second_per_gpu, step_time, tflops_per_chip, ...
    double value = 0;
    std::string unit;
  } measured;

  // The part of the id before its first '-': the source family ("mpt", "dgxc2504", ...).
  std::string source_group() const;
};

// Reads the file strictly (every key of the schema, nothing else; the free-text fields are not
// interpreted). InputError naming the file and JSON pointer otherwise.
std::vector<PublishedRun> load_published_runs(const std::string& path);

// A run meshsim can simulate.
struct PublishedScenario {
  workloads::ModelConfig model;
  workloads::ParallelPlan plan;
  topology::ClusterSpec cluster;
  Duration measured_step;
  // How the measured metric became a step time, and every documented default applied.
  std::string conversion;
  std::vector<std::string> assumptions;
};

struct NotExpressible {
  std::string reason;
};

// The reason of a run whose scenario meshsim refuses to build or to simulate (its InputError or
// InfeasibleError: a cluster past the device limit, a kernel past the clock, an attention kernel
// the chip has no measurements of).
NotExpressible refused_scenario(const std::exception& e);

using PublishedMapping = std::variant<PublishedScenario, NotExpressible>;

// Maps a run with chips from `catalogue`, the cluster presets (topology/clusters) and `facts`
// (the built-in run_facts.json unless given).
PublishedMapping map_published_run(const PublishedRun& run, const topology::Catalogue& catalogue);
PublishedMapping map_published_run(const PublishedRun& run, const topology::Catalogue& catalogue,
                                   const PublishedFacts& facts);

struct PublishedPoint {
  std::string id;
  std::string source_group;
  std::string precision_class;  // as mapped: bf16, fp16 or fp8 (a record's "unknown" resolved)
  int64_t seq = 0;
  Duration measured;
  Duration simulated;
  double error = 0;        // simulated / measured - 1
  bool oom = false;        // meshsim's memory model says the configuration does not fit
  Bytes peak_memory;       // meshsim's peak per device (the ledger's, or the estimate if OOM)
  Bytes memory_capacity;   // what the chip offers to the run
  // Where the simulated step goes (its report's): to find which class an error comes from.
  std::array<Duration, kNumOpClasses> time_by_class{};
  Duration exposed_comm;
  std::string conversion;  // PublishedScenario's
  std::vector<std::string> assumptions;  // PublishedScenario's
};

struct ErrorSummary {
  size_t points = 0;
  double median_abs = 0;     // median |error|
  double p90_abs = 0;        // 90th percentile of |error| (nearest rank)
  double median_signed = 0;  // median error
};
// Over `errors` (empty: all zero).
ErrorSummary summarize(const std::vector<double>& errors);

struct PublishedReport {
  std::vector<PublishedPoint> points;                              // in file order
  // Runs meshsim simulates but finds out of memory on their chips: a configuration that trained
  // cannot be one that does not fit, so the step is not a prediction; reported, never scored.
  std::vector<PublishedPoint> out_of_memory;
  std::vector<std::pair<std::string, std::string>> not_expressed;  // id, reason
  ErrorSummary overall;  // every point but fp8 ones: bf16, fp16 (the target set)
  ErrorSummary fp8;
  ErrorSummary long_sequence;  // seq >= 16384, every precision
  std::map<std::string, ErrorSummary> by_source;
  std::map<std::string, ErrorSummary> by_precision;
};

// The scenario a mapped run simulates: its model and cluster by name, its plan.
scenario::Scenario scenario_of(const PublishedScenario& s);

// Simulates a mapped run as `meshsim run` would (an observer, such as a trace writer, may watch),
// without the memory pre-check: a run that was measured did fit, and meshsim's memory estimate is
// reported, not trusted over the measurement. A scenario meshsim refuses (a plan the chip has no
// kernel measurements for, a fabric the collectives cannot run on, a step past the clock) is that
// run's answer, NotExpressible with the reason located where the mapping set the value; the
// observer's own failures (an OutputError: a file it cannot write) propagate.
std::variant<scenario::StepReport, NotExpressible> simulate_published(
    const PublishedScenario& s, scenario::StepOptions options = {},
    scenario::StepObserver* observer = nullptr);

// Maps and simulates every run (simulate_published), each one meshsim cannot express reported
// with its reason while the others go on, and summarises the errors.
PublishedReport evaluate_published(const std::vector<PublishedRun>& runs,
                                   const topology::Catalogue& catalogue);

// What CI holds the report to (validation/thresholds.json, "published"): each a fraction.
struct PublishedThresholds {
  double max_median_abs = 0;
  double max_p90_abs = 0;
  double max_abs_median_signed = 0;
  double max_fp8_median_abs = 0;
  double max_long_sequence_median_abs = 0;
};
// Reads the "published" section of a thresholds file.
PublishedThresholds load_published_thresholds(const std::string& path);
// The thresholds `report` exceeds, one line each (empty: within all of them).
std::vector<std::string> threshold_violations(const PublishedReport& report,
                                              const PublishedThresholds& t);

}  // namespace meshsim::validation
