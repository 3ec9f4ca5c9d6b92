#include "meshsim/sim/checked.h"

#include <fmt/format.h>

#include "meshsim/sim/error.h"

namespace meshsim {
namespace {

[[noreturn]] void overflow(std::string_view what, std::span<const int64_t> operands,
                           std::string_view op) {
  throw LimitError(fmt::format("{}: {} does not fit in 64 bits (at most 2^63 - 1)", what,
                               fmt::join(operands, op)));
}

}  // namespace

int64_t checked_add(int64_t a, int64_t b, std::string_view what) {
  return checked_sum({a, b}, what);
}

int64_t checked_mul(int64_t a, int64_t b, std::string_view what) {
  return checked_product({a, b}, what);
}

int64_t checked_product(std::span<const int64_t> factors, std::string_view what) {
  for (const int64_t f : factors) {
    if (f == 0) {
      return 0;  // exact, even where a partial product of the others would overflow
    }
  }
  int64_t r = 1;
  for (const int64_t f : factors) {
    const std::optional<int64_t> next = try_mul(r, f);
    if (!next) {
      overflow(what, factors, " x ");
    }
    r = *next;
  }
  return r;
}

int64_t checked_product(std::initializer_list<int64_t> factors, std::string_view what) {
  return checked_product(std::span<const int64_t>(factors.begin(), factors.size()), what);
}

int64_t checked_sum(std::span<const int64_t> terms, std::string_view what) {
  int64_t r = 0;
  for (const int64_t t : terms) {
    const std::optional<int64_t> next = try_add(r, t);
    if (!next) {
      overflow(what, terms, " + ");
    }
    r = *next;
  }
  return r;
}

int64_t checked_sum(std::initializer_list<int64_t> terms, std::string_view what) {
  return checked_sum(std::span<const int64_t>(terms.begin(), terms.size()), what);
}

}  // namespace meshsim
