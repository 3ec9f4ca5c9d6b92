// A scenario: what to simulate. Read from a JSON file (`meshsim run SCENARIO.json`), a sweep's
// point, and/or command-line flags (the edge applies those).
//
// Scenario JSON (strict: unknown keys are errors), every field optional, the keys named like the
// flags:
//   { "model": "llama3-70b" | "path/to/model.json" | "path/to/config.json",
//     "cluster": "dgx-h100" | "path/to/cluster.json", "nodes": 256, "shape": "8x16x16",
//     "slices": 4 (TPU slices joined by DCN), "dcn_dp": 4 (replicas across slices: fsdp = dp / 4),
//     the plan's fields (plan_fields.h, one key per workloads::PlanField: "dp": 64, "zero": 1,
//     "tp": 8, "sp": true, "pp": 4, "vpp": 5, "schedule": "interleaved", "mbs": 1, "gbs": 512,
//     "seq": 8192, "recompute": "selective", "dtype": "fp8", "stage_layers": [20, 20, 20, 20],
//     "overlap_tp": false, ...),
//     "hardware_catalogue": "path/to/chips.json",
//     "oversubscription": 4, "tiers": 3, "rail_optimized": false, "nics_per_device": 2,
//     "nic_bandwidth": "200Gbps", "sharp": true,
//     "faults": { ... } }  (slow ranks, stragglers, jitter, degraded links: faults.h)
//
// The parallel plan is read straight into the typed workloads::ParallelPlan through the plan field
// table, each field's origin recorded (the file and its JSON pointer); the scenario's own fields
// (model, cluster, nodes, shape, hardware catalogue) likewise in `origins`. Libraries throw a
// PlanError or a ScenarioError naming the field; the edge locates it where the value came from
// (located.h).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "meshsim/scenario/faults.h"
#include "meshsim/sim/provenance.h"
#include "meshsim/topology/cluster.h"
#include "meshsim/workloads/parallel.h"

namespace meshsim::scenario {

// The fields of a Scenario outside the plan, named as the scenario file's keys.
enum class ScenarioField : uint8_t {
  kModel,
  kCluster,
  kNodes,
  kGpus,
  kShape,
  kSlices,
  kDcnDp,
  kHardwareCatalogue
};
constexpr auto enum_names(ScenarioField) {
  using F = ScenarioField;
  return std::to_array<EnumName<F>>({{F::kModel, "model"},
                                     {F::kCluster, "cluster"},
                                     {F::kNodes, "nodes"},
                                     {F::kGpus, "gpus"},
                                     {F::kShape, "shape"},
                                     {F::kSlices, "slices"},
                                     {F::kDcnDp, "dcn_dp"},
                                     {F::kHardwareCatalogue, "hardware_catalogue"}});
}
using ScenarioError = FieldError<ScenarioField>;

// The fabric knobs (topology::FabricOverrides) as written, with where each came from: flags
// --oversubscription, --tiers, --rail-optimized, --nics-per-device, --nic-bandwidth, --sharp, or
// the scenario keys of the same names (oversubscription, tiers, rail_optimized, nics_per_device,
// nic_bandwidth, sharp).
struct FabricKnobs {
  std::optional<double> oversubscription;
  std::optional<int64_t> tiers;
  std::optional<bool> rail_optimized;
  std::optional<int64_t> nics_per_device;
  std::optional<std::string> nic_bandwidth;  // e.g. "400Gbps"
  std::optional<bool> sharp;
  Provenance<topology::FabricField> origins;
};
// The overrides the knobs ask for; topology::FabricError(kNicBandwidth) where a bandwidth is
// malformed.
topology::FabricOverrides fabric_overrides(const FabricKnobs& k);

// Two bases: a scenario that names a model or a cluster starts from the neutral values below (every
// degree 1, ZeRO 0, 1F1B, sequence 4096, the cluster preset at its own size, a global batch of one
// microbatch per data-parallel rank); one that names neither modifies the built-in default scenario
// (so that `meshsim --pp 8 --dp 32` is a what-if on the default).
struct Scenario {
  std::string model = "llama3-70b";
  std::string cluster = "dgx-h100";
  std::optional<int64_t> nodes;
  // GPU clusters: this many GPUs, whole nodes or part of one (topology::resize_devices); not
  // with `nodes`.
  std::optional<int64_t> gpus;
  std::optional<std::string> shape;  // TPU torus, e.g. "8x16x16"
  std::optional<int64_t> slices;     // TPU: identical slices of `shape` joined by DCN
  // MaxText dcn_data_parallelism: data-parallel replicas across slices, FSDP inside (complete()
  // turns it into the plan's fsdp = dp / dcn_dp).
  std::optional<int64_t> dcn_dp;
  std::optional<std::string> hardware_catalogue;
  FabricKnobs fabric;
  workloads::ParallelPlan plan = neutral_plan();
  Provenance<ScenarioField> origins;
  Faults faults;  // slow ranks, stragglers, jitter, degraded links (faults.h)

  static workloads::ParallelPlan neutral_plan();
};

// The built-in default: Llama-3-70B on 2048 H100s (256 DGX nodes, rail-optimized NDR fat-tree),
// TP 8 with sequence parallelism, PP 4 interleaved with 5 virtual stages, DP 64 with the
// distributed optimizer (ZeRO-1), sequence 8192, global batch 512 sequences. Its fields' origin
// is Origin::preset("the default scenario").
Scenario default_scenario();

// Fields present in the JSON object `doc` replace those of `base` (their origin: `source` and the
// key's pointer under `pointer`). InputError on an unknown key or a bad value.
Scenario apply_scenario_json(const nlohmann::json& doc, const std::string& source,
                             const std::string& pointer, Scenario base);
// The same for a file.
Scenario load_scenario(const std::string& path, Scenario base);

// Whether the scenario file names a model or a cluster (it then starts from the neutral base).
bool scenario_file_names_workload(const std::string& path);

// Completes a scenario once the base, the file and the flags are in: a global batch nobody set is
// one microbatch per data-parallel rank (dp x mbs); dcn_dp K sets the plan's fsdp to dp / K
// (ScenarioError(kDcnDp) unless K divides dp and agrees with an fsdp given too).
void complete(Scenario& s);

// A ZeRO stage 0..3 read from `where`; InputError located there otherwise.
workloads::ZeroStage zero_stage(int64_t value, const Origin& where);

// The scenario's cluster: preset or file (InputError from the loaders), resized to `nodes` or
// `gpus` (GPU clusters) or `shape` (TPU slices), then joined into `slices` slices. ScenarioError on
// kNodes / kGpus / kShape / kSlices when they do not apply, or when the cluster refuses the size
// (more devices than meshsim simulates, a slice that does not fill whole hosts): the size is blamed
// where it came from, not the cluster's own file.
topology::ClusterSpec load_cluster(const Scenario& s);

// "8x16x16" -> {8, 16, 16}; ScenarioError(kShape) unless positive extents joined by 'x'.
std::vector<int64_t> parse_shape(const std::string& text);

// The scenario as echoed in reports and trace metadata.
nlohmann::json scenario_json(const Scenario& s, const topology::ClusterSpec& cluster);

// The plan's recompute modules by their Megatron-Core names, in the plan's order (as the scenario
// JSON and the report's plan line write them).
std::vector<std::string> recompute_module_names(const workloads::ParallelPlan& p);

}  // namespace meshsim::scenario
