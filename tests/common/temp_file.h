// Scratch files of a test process.
//
// CTest runs every test as a process of its own, two at a time in CI; tests that wrote the same
// file name under GoogleTest's temp dir raced, one reading the other's half-written file (CI saw
// "not valid JSON: the text ends early" once). Each process writes under a directory of its own,
// removed when it exits.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <system_error>

namespace meshsim::scratch {

inline const std::filesystem::path& temp_dir() {
  struct Dir {
    std::filesystem::path path;
    Dir()
        : path(std::filesystem::path(::testing::TempDir()) /
               ("meshsim-test-" + std::to_string(::getpid()))) {
      std::filesystem::create_directories(path);
    }
    ~Dir() {
      std::error_code ignored;
      std::filesystem::remove_all(path, ignored);
    }
  };
  static const Dir dir;
  return dir.path;
}

// Writes `bytes` to `name` in the process's directory (replacing it) and returns the path.
inline std::string write_temp(const std::string& name, const std::string& bytes) {
  const std::filesystem::path path = temp_dir() / name;
  std::ofstream(path, std::ios::binary) << bytes;
  return path.string();
}

}  // namespace meshsim::scratch
