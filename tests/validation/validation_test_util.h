// Shared by the tests of the validation library and of `meshsim validate` / `meshsim calibrate`:
// the committed CPU smoke fixture (a real PyTorch CPU trace and its manifest), the base CPU
// profile, and a fixture that runs the real binary (MESHSIM_BIN) in a fresh temp directory.
#pragma once

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "command_test.h"
#include "meshsim/sim/units.h"
#include "meshsim/topology/chip.h"

namespace meshsim::validation::test {

namespace fs = std::filesystem;
using meshsim::testing::CommandResult;

inline nlohmann::json read_json_file(const fs::path& p) {
  return meshsim::testing::parse_json(meshsim::testing::read_text(p), p.string());
}

inline const std::string kFixtures = MESHSIM_FIXTURES;
inline const std::string kSource = MESHSIM_SOURCE_DIR;
inline const std::string kProfile = kSource + "/validation/profiles/cpu-amd-epyc-2c.json";
inline const std::string kChip = "cpu-amd-epyc-1core";
inline const std::string kManifest = kFixtures + "/torch_cpu_smoke.manifest.json";

// `base` (a chip's efficiency, with a matmul_shape) with the five fitted parameters set and no
// per-class memory efficiencies.
inline topology::Efficiency efficiency(topology::Efficiency base, double matmul, double memory,
                                       Duration launch, double k_half, Duration call) {
  EXPECT_TRUE(base.matmul_shape);
  base.matmul = matmul;
  base.memory = memory;
  base.memory_by_class = {};
  base.launch_overhead = launch;
  if (base.matmul_shape) {
    base.matmul_shape->k_half = k_half;
    base.matmul_shape->call_overhead = call;
  }
  return base;
}

class ValidateTest : public meshsim::testing::CommandTest {
 protected:
  // The smoke manifest with its trace path made absolute, so that the copy can live here.
  nlohmann::json smoke_manifest() const {
    nlohmann::json m = read_json_file(kManifest);
    m["trace"]["path"] = kFixtures + "/torch_cpu_smoke.trace.json.gz";
    return m;
  }

  static void expect_input_error(const CommandResult& r, const std::vector<std::string>& words) {
    meshsim::testing::expect_input_error(r, words);
  }
};

}  // namespace meshsim::validation::test
