// A scenario: what to simulate. Read from a JSON file (`meshsim run SCENARIO.json`) and/or
// command-line flags; a flag given on the command line overrides the file.
//
// Scenario JSON (strict: unknown keys are errors), every field optional:
//   { "model": "llama3-70b" | "path/to/model.json" | "path/to/config.json",
//     "cluster": "dgx-h100" | "path/to/cluster.json", "nodes": 1,
//     "dp": 8, "mbs": 1, "gbs": 64, "seq": 4096, "dtype": "bf16" | "fp8",
//     "attention": "flash" | "naive", "hardware_catalogue": "path/to/chips.json" }
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace meshsim::cli {

struct Scenario {
  std::string model = "llama3.2-1b";
  std::string cluster = "dgx-h100";
  std::optional<int64_t> nodes;
  int64_t dp = 8;
  int64_t mbs = 1;
  int64_t gbs = 64;
  int64_t seq = 4096;
  std::string dtype = "bf16";
  std::string attention = "flash";
  std::optional<std::string> hardware_catalogue;
};

// The built-in default: Llama-3.2-1B, data parallel over one DGX H100 node.
Scenario default_scenario();

// Fields present in `path` replace those of `base`.
Scenario load_scenario(const std::string& path, Scenario base);

}  // namespace meshsim::cli
