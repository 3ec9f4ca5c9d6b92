// Errors shared by every module.
//
// * `InputError` is bad input from a user: it names the source (a file, or a command-line flag),
//   the location inside it (a JSON pointer such as "/layers/3/bandwidth", or a flag name) and what
//   was wrong and what was expected. Loaders throw it; only `main` and tests catch it.
// * `SIM_CHECK(cond, fmt, args...)` guards internal invariants, always on (also in Release). A
//   failure is a bug in meshsim, not in the input, and throws `InternalError` naming the state.
#pragma once

#include <fmt/format.h>

#include <stdexcept>
#include <string>

namespace meshsim {

class InputError : public std::runtime_error {
 public:
  InputError(std::string source, std::string location, std::string message);
  const std::string& source() const { return source_; }
  const std::string& location() const { return location_; }
  const std::string& message() const { return message_; }

 private:
  std::string source_;
  std::string location_;
  std::string message_;
};

// A model or plan that is well-formed but cannot run on the hardware (e.g. throughput above peak).
class InfeasibleError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class InternalError : public std::logic_error {
 public:
  using std::logic_error::logic_error;
};

[[noreturn]] void fail_check(const char* file, int line, const char* cond, const std::string& msg);

}  // namespace meshsim

#define SIM_CHECK(cond, ...)                                                               \
  do {                                                                                     \
    if (!(cond)) [[unlikely]] {                                                            \
      ::meshsim::fail_check(__FILE__, __LINE__, #cond, ::fmt::format(__VA_ARGS__));        \
    }                                                                                      \
  } while (false)
