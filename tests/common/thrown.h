// What a call throws, for the tests of errors: the exception itself, or what it says; and what an
// InputError must name.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <utility>

#include "meshsim/sim/error.h"

namespace meshsim::testing {

// Runs `f` and returns a copy of the E it throws; fails the test, and returns `none`, if it throws
// nothing (any other exception propagates and fails the test as well).
template <typename E, typename F>
E caught(F&& f, E none) {
  try {
    std::forward<F>(f)();
  } catch (const E& e) {
    return e;
  }
  ADD_FAILURE() << "expected an exception, and none was thrown";
  return none;
}

// Runs `f` and returns what() of the E it throws, or `none` if it throws nothing.
template <typename E, typename F>
std::string what_thrown(F&& f, const std::string& none) {
  try {
    std::forward<F>(f)();
  } catch (const E& e) {
    return e.what();
  }
  return none;
}

// The InputError a loader throws (fails the test if it throws nothing).
template <typename F>
InputError capture_input_error(F&& f) {
  return caught<InputError>(std::forward<F>(f), InputError("", "", ""));
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

}  // namespace meshsim::testing
