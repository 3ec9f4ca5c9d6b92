// Seeded randomness per named stream (docs/style.md B.10).
//
// Each component derives its own `Rng` from (run_seed, stream_name) and receives it explicitly.
// The generator is xoshiro256** seeded through SplitMix64; the distributions are our own, so the
// same seed gives the same numbers with any standard library.
#pragma once

#include <array>
#include <cstdint>
#include <string_view>

namespace meshsim {

class Rng {
 public:
  Rng(uint64_t run_seed, std::string_view stream_name);

  uint64_t next_u64();
  // Uniform in [0, 1), 53 bits.
  double uniform();
  // Uniform integer in [0, n), without modulo bias. n > 0.
  uint64_t below(uint64_t n);
  // Normal(mean, stddev) by Box-Muller (one value per call; no cached state).
  double normal(double mean, double stddev);

 private:
  std::array<uint64_t, 4> s_{};
};

// Stateless draws for values that must not depend on the order they are asked for: a 64-bit hash
// of (seed, a, b) through SplitMix64's finaliser, and a standard normal from it (Box-Muller).
uint64_t hash_draw(uint64_t seed, uint64_t a, uint64_t b);
double standard_normal_at(uint64_t seed, uint64_t a, uint64_t b);

}  // namespace meshsim
