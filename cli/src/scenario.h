// A scenario: what to simulate. Read from a JSON file (`meshsim run SCENARIO.json`) and/or
// command-line flags; a flag given on the command line overrides the file.
//
// Scenario JSON (strict: unknown keys are errors), every field optional, the keys named like the
// flags:
//   { "model": "llama3-70b" | "path/to/model.json" | "path/to/config.json",
//     "cluster": "dgx-h100" | "path/to/cluster.json", "nodes": 256, "shape": "8x16x16",
//     "dp": 64, "zero": 1, "tp": 8, "sp": true, "cp": 1, "pp": 4, "vpp": 5,
//     "schedule": "gpipe" | "1f1b" | "interleaved" | "zb", "ep": 1, "capacity_factor": 1.0,
//     "mbs": 1, "gbs": 512, "seq": 8192, "recompute": "none" | "selective" | "full",
//     "dtype": "bf16" | "fp8" | "fp32" | "tf32", "attention": "flash" | "naive",
//     "kernels": "fused" | "eager", "optimizer_kernels": "fused" | "foreach" | "per-tensor",
//     "stage_layers": [20, 20, 20, 20],
//     "overlap_grad_reduce": true, "overlap_param_gather": true, "overlap_p2p": true,
//     "overlap_tp": false, "hardware_catalogue": "path/to/chips.json" }
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace meshsim::cli {

// The values of the string fields, shared by the flags, scenario files and validation manifests.
inline const std::vector<std::string> kScheduleChoices = {"gpipe", "1f1b", "interleaved", "zb"};
inline const std::vector<std::string> kRecomputeChoices = {"none", "selective", "full"};
inline const std::vector<std::string> kDtypeChoices = {"bf16", "fp8", "fp32", "tf32"};
inline const std::vector<std::string> kAttentionChoices = {"flash", "naive"};
inline const std::vector<std::string> kKernelsChoices = {"fused", "eager"};
inline const std::vector<std::string> kOptimizerKernelsChoices = {"fused", "foreach", "per-tensor"};

// Two bases: a scenario that names a model or a cluster starts from the neutral values below (every
// degree 1, ZeRO 0, 1F1B, the cluster preset at its own size, a global batch of one microbatch per
// data-parallel rank); one that names neither modifies the built-in default scenario (so that
// `meshsim --pp 8 --dp 32` is a what-if on the default).
struct Scenario {
  std::string model = "llama3-70b";
  std::string cluster = "dgx-h100";
  std::optional<int64_t> nodes;
  std::optional<std::string> shape;  // TPU torus, e.g. "8x16x16"
  int64_t dp = 1;
  int64_t zero = 0;
  int64_t tp = 1;
  bool sp = false;
  int64_t cp = 1;
  int64_t pp = 1;
  int64_t vpp = 1;
  std::string schedule = "1f1b";
  int64_t ep = 1;
  double capacity_factor = 1.0;
  int64_t mbs = 1;
  std::optional<int64_t> gbs;  // unset: dp x mbs
  int64_t seq = 4096;
  std::string recompute = "none";
  std::string dtype = "bf16";
  std::string attention = "flash";
  std::string kernels = "fused";
  std::string optimizer_kernels = "fused";
  std::vector<int64_t> stage_layers;
  bool overlap_grad_reduce = true;
  bool overlap_param_gather = true;
  bool overlap_p2p = true;
  bool overlap_tp = false;
  std::optional<std::string> hardware_catalogue;
};

// The built-in default: Llama-3-70B on 2048 H100s (256 DGX nodes, rail-optimized NDR fat-tree),
// TP 8 with sequence parallelism, PP 4 interleaved with 5 virtual stages, DP 64 with the
// distributed optimizer (ZeRO-1), sequence 8192, global batch 512 sequences.
Scenario default_scenario();

// Fields present in `path` replace those of `base`.
Scenario load_scenario(const std::string& path, Scenario base);

// Whether the scenario file names a model or a cluster (it then starts from the neutral base).
bool scenario_file_names_workload(const std::string& path);

}  // namespace meshsim::cli
