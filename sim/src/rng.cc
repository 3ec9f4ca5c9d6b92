#include "meshsim/sim/rng.h"

#include <cmath>
#include <numbers>

#include "meshsim/sim/error.h"

namespace meshsim {
namespace {

uint64_t splitmix64(uint64_t& x) {
  uint64_t z = (x += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

// FNV-1a, 64-bit: a stable hash of the stream name (std::hash is not portable).
uint64_t fnv1a(std::string_view s) {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (const char c : s) {
    h ^= static_cast<unsigned char>(c);
    h *= 0x100000001b3ULL;
  }
  return h;
}

uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

}  // namespace

Rng::Rng(uint64_t run_seed, std::string_view stream_name) {
  uint64_t x = run_seed ^ fnv1a(stream_name);
  for (auto& w : s_) {
    w = splitmix64(x);
  }
}

uint64_t Rng::next_u64() {
  const uint64_t result = rotl(s_[1] * 5, 7) * 9;
  const uint64_t t = s_[1] << 17;
  s_[2] ^= s_[0];
  s_[3] ^= s_[1];
  s_[1] ^= s_[2];
  s_[0] ^= s_[3];
  s_[2] ^= t;
  s_[3] = rotl(s_[3], 45);
  return result;
}

double Rng::uniform() { return static_cast<double>(next_u64() >> 11) * 0x1.0p-53; }

uint64_t Rng::below(uint64_t n) {
  SIM_CHECK(n > 0, "Rng::below(0)");
  const uint64_t limit = UINT64_MAX - UINT64_MAX % n;
  uint64_t x = next_u64();
  while (x >= limit) {
    x = next_u64();
  }
  return x % n;
}

double Rng::normal(double mean, double stddev) {
  const double u1 = 1.0 - uniform();  // (0, 1]
  const double u2 = uniform();
  return mean + stddev * std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2);
}

uint64_t hash_draw(uint64_t seed, uint64_t a, uint64_t b) {
  uint64_t x = seed;
  uint64_t h = splitmix64(x);
  x = h ^ a;
  h = splitmix64(x);
  x = h ^ b;
  return splitmix64(x);
}

double standard_normal_at(uint64_t seed, uint64_t a, uint64_t b) {
  const uint64_t h1 = hash_draw(seed, a, b);
  const uint64_t h2 = hash_draw(seed ^ 0x5bd1e995ULL, a, b);
  const double u1 = 1.0 - static_cast<double>(h1 >> 11) * 0x1.0p-53;  // (0, 1]
  const double u2 = static_cast<double>(h2 >> 11) * 0x1.0p-53;
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2);
}

}  // namespace meshsim
