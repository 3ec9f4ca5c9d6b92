// Overflow-checked integer arithmetic for counts and sizes derived from input.
//
// Loaders bound every size and count where they read it, each bound stated in its error (e.g. "at
// most 2^40 parameters per layer"). Products and sums of several bounded values can still pass
// 2^63 - 1; the accounting (workloads/), topology and the trace importer (traces/) compute them
// with these helpers, which give the exact result or throw LimitError (sim/error.h) saying what
// was being computed, never a wrapped value. Duration, SimTime and Bytes check their own
// arithmetic (sim/units.h); these are for the plain int64 counts that become them.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <span>
#include <string_view>

namespace meshsim {

// a + b and a * b when the exact result fits in int64, else nullopt.
constexpr std::optional<int64_t> try_add(int64_t a, int64_t b) {
  int64_t r = 0;
  if (__builtin_add_overflow(a, b, &r)) {
    return std::nullopt;
  }
  return r;
}
constexpr std::optional<int64_t> try_mul(int64_t a, int64_t b) {
  int64_t r = 0;
  if (__builtin_mul_overflow(a, b, &r)) {
    return std::nullopt;
  }
  return r;
}

// The same, or LimitError: "<what>: 3037000500 x 3037000500 does not fit in 64 bits (at most
// 2^63 - 1)".
int64_t checked_add(int64_t a, int64_t b, std::string_view what);
int64_t checked_mul(int64_t a, int64_t b, std::string_view what);
// The product of `factors` (1 for none) and the sum of `terms` (0 for none); LimitError names
// `what` and every operand.
int64_t checked_product(std::span<const int64_t> factors, std::string_view what);
int64_t checked_product(std::initializer_list<int64_t> factors, std::string_view what);
int64_t checked_sum(std::span<const int64_t> terms, std::string_view what);
int64_t checked_sum(std::initializer_list<int64_t> terms, std::string_view what);

}  // namespace meshsim
