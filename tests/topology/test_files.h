// Helpers for the topology tests: read the shipped JSON, write mutated copies to a temp dir, and
// capture the InputError a loader throws.
#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>

#include "meshsim/sim/error.h"
#include "meshsim/sim/json_input.h"
#include "temp_file.h"
#include "thrown.h"

namespace meshsim::topology::testing {

inline std::string source_path(const std::string& relative) {
  return std::string(MESHSIM_SOURCE_DIR) + "/" + relative;
}

inline nlohmann::json read_source_json(const std::string& relative) {
  return load_json_file(source_path(relative));
}

// Writes `doc` (or raw `text`) to a fresh file in the process's scratch dir and returns its path.
using scratch::write_temp;

inline std::string write_temp(const std::string& name, const nlohmann::json& doc) {
  return write_temp(name, doc.dump(2));
}

// Runs `load` and returns the InputError it throws; fails the test if it throws nothing.
using ::meshsim::testing::capture_input_error;

// Asserts that the error names the file, the JSON pointer, and what was expected.
using ::meshsim::testing::expect_error;

}  // namespace meshsim::topology::testing
