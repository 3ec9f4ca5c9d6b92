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
inline InputError capture_input_error(const std::function<void()>& load) {
  try {
    load();
  } catch (const InputError& e) {
    return e;
  }
  ADD_FAILURE() << "expected an InputError";
  return InputError("", "", "");
}

// Asserts that the error names the file, the JSON pointer, and what was expected.
inline void expect_error(const InputError& e, const std::string& file, const std::string& pointer,
                         const std::string& expectation) {
  const std::string what = e.what();
  EXPECT_EQ(e.source(), file) << what;
  EXPECT_EQ(e.location(), pointer) << what;
  EXPECT_NE(what.find(file), std::string::npos) << what;
  EXPECT_NE(what.find(pointer), std::string::npos) << what;
  EXPECT_NE(e.message().find(expectation), std::string::npos)
      << "message \"" << e.message() << "\" lacks \"" << expectation << "\"";
}

}  // namespace meshsim::topology::testing
