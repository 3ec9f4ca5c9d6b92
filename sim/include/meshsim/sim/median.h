// The median of a sample, as every report of meshsim takes it: the middle value of an odd count,
// the midpoint of the two middle values of an even one; nullopt for an empty sample.
#pragma once

#include <algorithm>
#include <concepts>
#include <numeric>
#include <optional>
#include <vector>

#include "meshsim/sim/units.h"

namespace meshsim {

inline double midpoint_of(double a, double b) { return 0.5 * (a + b); }
template <std::integral T>
T midpoint_of(T a, T b) {
  return std::midpoint(a, b);
}
inline Duration midpoint_of(Duration a, Duration b) {
  return Duration::from_ps(std::midpoint(a.ps(), b.ps()));
}

template <typename T>
std::optional<T> median(std::vector<T> v) {
  if (v.empty()) {
    return std::nullopt;
  }
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : midpoint_of(v[n / 2 - 1], v[n / 2]);
}

}  // namespace meshsim
