// Errors shared by every module.
//
// * `InputError` is bad input from a user: it names the source (a file, or a command-line flag),
//   the location inside it (a JSON pointer such as "/layers/3/bandwidth", or a flag name) and what
//   was wrong and what was expected. Loaders throw it; only `main` and tests catch it.
// * `LimitError` is a well-formed input whose consequences exceed what meshsim represents: a count
//   or size past 2^63 - 1, a time past int64 picoseconds (about 106 days). Loaders bound what they
//   read (each bound stated in its error), so this is the backstop for products and sums of
//   bounded values (sim/checked.h). It is an InfeasibleError: exit 2, never a wrapped value.
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

// An input past a size limit (a file larger than the cap on what meshsim reads, a gzip stream that
// inflates past it). The message states the limit; the edge, which knows how the limit was set,
// may add how to raise it.
class InputSizeError : public InputError {
 public:
  using InputError::InputError;
};

// A file meshsim cannot write (an output named by a flag: --json, --trace, --csv): bad input on
// that flag, not on what was being computed, so that a caller which reports the inputs it cannot
// run and goes on (validate-published's runs) lets it through.
class OutputError : public InputError {
 public:
  using InputError::InputError;
};

// A model or plan that is well-formed but cannot run on the hardware (e.g. throughput above peak).
class InfeasibleError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A value beyond meshsim's representation (see the file comment); the message says what was being
// computed and the bound.
class LimitError : public InfeasibleError {
 public:
  using InfeasibleError::InfeasibleError;
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
