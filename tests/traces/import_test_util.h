// Shared by the importer's tests: the fixtures directory, exact microseconds, per-class totals
// and the InputError a call throws.
#pragma once

#include <gtest/gtest.h>

#include <array>
#include <fstream>
#include <iterator>
#include <map>
#include <ostream>
#include <string>
#include <utility>

#include "meshsim/sim/error.h"
#include "meshsim/traces/import.h"
#include "temp_file.h"
#include "thrown.h"

namespace meshsim {
// gtest prints these in picoseconds instead of as raw bytes.
inline void PrintTo(const Duration& d, std::ostream* os) { *os << d.ps() << " ps"; }
inline void PrintTo(const SimTime& t, std::ostream* os) { *os << t.ps() << " ps"; }
}  // namespace meshsim

namespace meshsim::traces::testing {

inline const std::string kFixtures = MESHSIM_FIXTURES;

// Microseconds, exactly (every duration in the fixtures is a multiple of 0.25 us).
inline Duration us(double v) { return Duration::from_ps(static_cast<int64_t>(v * 1e6)); }

inline Duration by(const std::array<Duration, kNumOpClasses>& totals, OpClass c) {
  return totals[static_cast<size_t>(c)];
}

// Totals of every class; classes not named are expected to be zero.
inline void expect_totals(const std::array<Duration, kNumOpClasses>& totals,
                   const std::map<OpClass, double>& expected_us) {
  for (int c = 0; c < kNumOpClasses; ++c) {
    const auto oc = static_cast<OpClass>(c);
    const auto it = expected_us.find(oc);
    EXPECT_EQ(by(totals, oc), us(it == expected_us.end() ? 0.0 : it->second)) << to_string(oc);
  }
}

using scratch::write_temp;

inline std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// Runs `f` and returns the InputError it throws (fails the test if it throws nothing).
template <typename F>
InputError input_error(F&& f) {
  return ::meshsim::testing::capture_input_error(std::forward<F>(f));
}

}  // namespace meshsim::traces::testing
