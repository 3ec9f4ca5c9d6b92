// Strong unit types shared by every module.
//
// Contract:
//  * Time is integer picoseconds. `SimTime` is a point on the simulation clock, `Duration` a span.
//    int64 ps covers +-106 days, far beyond any training step.
//  * `Bytes` is an exact int64 count. `Flops` (an amount of work) is a double because model FLOP
//    counts exceed 2^63 for full training runs (6ND ~ 1e25).
//  * `BytesPerSec` and `FlopsPerSec` are doubles.
//  * There is no constructor from a bare number: use the factories (`Seconds(1.5)`, `GiB(2)`,
//    `TFlopsPerSec(989)`, `Gbps(400)`). Decimal prefixes are powers of ten, binary prefixes (KiB,
//    GiB) powers of two. Bit rates (`Gbps`) are converted to bytes/s by the factory, once.
//  * Rounding rule (the only one): a duration computed from an amount over a rate is rounded UP to
//    the next whole picosecond, so a non-zero amount never takes zero time.
//  * Integer arithmetic on Duration, SimTime and Bytes is checked: a result past int64 (a time
//    beyond +-106 days, a size beyond 8 EiB) throws LimitError (sim/error.h) instead of wrapping,
//    and so do the factories given a value they cannot hold (Seconds(1e300), a NaN). Inputs are
//    bounded where they are read; this is what keeps a product of bounded values honest.
#pragma once

#include <cmath>
#include <compare>
#include <cstdint>
#include <limits>

namespace meshsim {

// Seconds in a day: whole training runs are counted in days (time to train, goodput), as plain
// doubles, since they outrun the int64-picosecond clock of Duration.
inline constexpr double kSecondsPerDay = 86400.0;

namespace detail {
// Throws LimitError: `what` overflowed int64 (see the file comment). Out of line, so that this
// header needs no formatting library.
[[noreturn]] void unit_overflow(const char* what);
// llround(v) when v is finite and rounds into int64; otherwise unit_overflow(what).
int64_t round_to_int64(double v, const char* what);

inline constexpr const char* kTimeOverflow =
    "a time beyond meshsim's clock, int64 picoseconds (+-2^63 ps, about 106 days): the inputs "
    "make a step, a transfer or a kernel last longer than that";
inline constexpr const char* kBytesOverflow =
    "a size beyond 2^63 - 1 bytes (8 EiB): the inputs make a buffer or a memory total larger "
    "than that";

constexpr int64_t add(int64_t a, int64_t b, const char* what) {
  int64_t r = 0;
  if (__builtin_add_overflow(a, b, &r)) {
    unit_overflow(what);
  }
  return r;
}
constexpr int64_t sub(int64_t a, int64_t b, const char* what) {
  int64_t r = 0;
  if (__builtin_sub_overflow(a, b, &r)) {
    unit_overflow(what);
  }
  return r;
}
constexpr int64_t mul(int64_t a, int64_t b, const char* what) {
  int64_t r = 0;
  if (__builtin_mul_overflow(a, b, &r)) {
    unit_overflow(what);
  }
  return r;
}
}  // namespace detail

class Duration {
 public:
  constexpr Duration() = default;
  static constexpr Duration from_ps(int64_t ps) { return Duration(ps); }
  static constexpr Duration zero() { return Duration(0); }
  static constexpr Duration max() { return Duration(std::numeric_limits<int64_t>::max()); }

  constexpr int64_t ps() const { return ps_; }
  constexpr double seconds() const { return static_cast<double>(ps_) * 1e-12; }
  constexpr double microseconds() const { return static_cast<double>(ps_) * 1e-6; }
  constexpr double milliseconds() const { return static_cast<double>(ps_) * 1e-9; }

  constexpr Duration operator+(Duration o) const {
    return Duration(detail::add(ps_, o.ps_, detail::kTimeOverflow));
  }
  constexpr Duration operator-(Duration o) const {
    return Duration(detail::sub(ps_, o.ps_, detail::kTimeOverflow));
  }
  constexpr Duration& operator+=(Duration o) { return *this = *this + o; }
  constexpr Duration& operator-=(Duration o) { return *this = *this - o; }
  constexpr Duration operator*(int64_t k) const {
    return Duration(detail::mul(ps_, k, detail::kTimeOverflow));
  }
  // Ratio of two spans (e.g. a bubble fraction).
  constexpr double operator/(Duration o) const {
    return static_cast<double>(ps_) / static_cast<double>(o.ps_);
  }
  constexpr auto operator<=>(const Duration&) const = default;

 private:
  constexpr explicit Duration(int64_t ps) : ps_(ps) {}
  int64_t ps_ = 0;
};

// Rounds to the nearest picosecond; for input values and constants (latencies, overheads).
// A value that does not fit (or is not finite) throws LimitError.
inline Duration Picoseconds(int64_t v) { return Duration::from_ps(v); }
inline Duration Nanoseconds(double v) {
  return Duration::from_ps(detail::round_to_int64(v * 1e3, detail::kTimeOverflow));
}
inline Duration Microseconds(double v) {
  return Duration::from_ps(detail::round_to_int64(v * 1e6, detail::kTimeOverflow));
}
inline Duration Milliseconds(double v) {
  return Duration::from_ps(detail::round_to_int64(v * 1e9, detail::kTimeOverflow));
}
inline Duration Seconds(double v) {
  return Duration::from_ps(detail::round_to_int64(v * 1e12, detail::kTimeOverflow));
}

class SimTime {
 public:
  constexpr SimTime() = default;
  static constexpr SimTime zero() { return SimTime(0); }
  static constexpr SimTime from_ps(int64_t ps) { return SimTime(ps); }
  // The end of time: "no limit" where a time bound is expected.
  static constexpr SimTime max() { return SimTime(std::numeric_limits<int64_t>::max()); }
  constexpr int64_t ps() const { return ps_; }
  constexpr double seconds() const { return static_cast<double>(ps_) * 1e-12; }
  constexpr Duration since_start() const { return Duration::from_ps(ps_); }

  constexpr SimTime operator+(Duration d) const {
    return SimTime(detail::add(ps_, d.ps(), detail::kTimeOverflow));
  }
  constexpr Duration operator-(SimTime o) const {
    return Duration::from_ps(detail::sub(ps_, o.ps_, detail::kTimeOverflow));
  }
  constexpr SimTime& operator+=(Duration d) { return *this = *this + d; }
  constexpr auto operator<=>(const SimTime&) const = default;

 private:
  constexpr explicit SimTime(int64_t ps) : ps_(ps) {}
  int64_t ps_ = 0;
};

class Bytes {
 public:
  constexpr Bytes() = default;
  static constexpr Bytes of(int64_t n) { return Bytes(n); }
  static constexpr Bytes zero() { return Bytes(0); }
  constexpr int64_t count() const { return n_; }
  constexpr double as_double() const { return static_cast<double>(n_); }

  constexpr Bytes operator+(Bytes o) const {
    return Bytes(detail::add(n_, o.n_, detail::kBytesOverflow));
  }
  constexpr Bytes operator-(Bytes o) const {
    return Bytes(detail::sub(n_, o.n_, detail::kBytesOverflow));
  }
  constexpr Bytes& operator+=(Bytes o) { return *this = *this + o; }
  constexpr Bytes& operator-=(Bytes o) { return *this = *this - o; }
  constexpr Bytes operator*(int64_t k) const {
    return Bytes(detail::mul(n_, k, detail::kBytesOverflow));
  }
  // Integer division rounding down (a shard of a buffer); callers that need exact division check
  // divisibility first.
  constexpr Bytes operator/(int64_t k) const { return Bytes(n_ / k); }
  constexpr double operator/(Bytes o) const {
    return static_cast<double>(n_) / static_cast<double>(o.n_);
  }
  constexpr auto operator<=>(const Bytes&) const = default;

 private:
  constexpr explicit Bytes(int64_t n) : n_(n) {}
  int64_t n_ = 0;
};

// Rounds to the nearest byte; a value that does not fit (or is not finite) throws LimitError.
namespace detail {
inline Bytes round_bytes(double v) { return Bytes::of(round_to_int64(v, kBytesOverflow)); }
}  // namespace detail
inline Bytes KB(double v) { return detail::round_bytes(v * 1e3); }
inline Bytes MB(double v) { return detail::round_bytes(v * 1e6); }
inline Bytes GB(double v) { return detail::round_bytes(v * 1e9); }
inline Bytes TB(double v) { return detail::round_bytes(v * 1e12); }
inline Bytes KiB(double v) { return detail::round_bytes(v * 1024.0); }
inline Bytes MiB(double v) { return detail::round_bytes(v * 1024.0 * 1024.0); }
inline Bytes GiB(double v) { return detail::round_bytes(v * 1024.0 * 1024.0 * 1024.0); }

class Flops {
 public:
  constexpr Flops() = default;
  static constexpr Flops of(double n) { return Flops(n); }
  static constexpr Flops zero() { return Flops(0.0); }
  constexpr double count() const { return n_; }

  constexpr Flops operator+(Flops o) const { return Flops(n_ + o.n_); }
  constexpr Flops operator-(Flops o) const { return Flops(n_ - o.n_); }
  constexpr Flops& operator+=(Flops o) {
    n_ += o.n_;
    return *this;
  }
  constexpr Flops operator*(double k) const { return Flops(n_ * k); }
  constexpr Flops operator/(double k) const { return Flops(n_ / k); }
  constexpr double operator/(Flops o) const { return n_ / o.n_; }
  // Arithmetic intensity, FLOP per byte.
  constexpr double operator/(Bytes b) const { return n_ / b.as_double(); }
  constexpr auto operator<=>(const Flops&) const = default;

 private:
  constexpr explicit Flops(double n) : n_(n) {}
  double n_ = 0.0;
};

class BytesPerSec {
 public:
  constexpr BytesPerSec() = default;
  static constexpr BytesPerSec of(double v) { return BytesPerSec(v); }
  constexpr double value() const { return v_; }
  constexpr double gb_per_s() const { return v_ * 1e-9; }
  // Derating by an efficiency factor in (0, 1].
  constexpr BytesPerSec operator*(double k) const { return BytesPerSec(v_ * k); }
  constexpr BytesPerSec operator+(BytesPerSec o) const { return BytesPerSec(v_ + o.v_); }
  constexpr double operator/(BytesPerSec o) const { return v_ / o.v_; }
  constexpr auto operator<=>(const BytesPerSec&) const = default;

 private:
  constexpr explicit BytesPerSec(double v) : v_(v) {}
  double v_ = 0.0;
};

inline BytesPerSec GBps(double v) { return BytesPerSec::of(v * 1e9); }  // gigabytes per second
inline BytesPerSec TBps(double v) { return BytesPerSec::of(v * 1e12); }
inline BytesPerSec Gbps(double v) { return BytesPerSec::of(v * 1e9 / 8.0); }  // gigabits per second

class FlopsPerSec {
 public:
  constexpr FlopsPerSec() = default;
  static constexpr FlopsPerSec of(double v) { return FlopsPerSec(v); }
  constexpr double value() const { return v_; }
  constexpr double tflops() const { return v_ * 1e-12; }
  constexpr FlopsPerSec operator*(double k) const { return FlopsPerSec(v_ * k); }
  constexpr double operator/(FlopsPerSec o) const { return v_ / o.v_; }
  // Ridge point of a roofline: FLOP per byte.
  constexpr double operator/(BytesPerSec b) const { return v_ / b.value(); }
  constexpr auto operator<=>(const FlopsPerSec&) const = default;

 private:
  constexpr explicit FlopsPerSec(double v) : v_(v) {}
  double v_ = 0.0;
};

inline FlopsPerSec TFlopsPerSec(double v) { return FlopsPerSec::of(v * 1e12); }

// The single rounding rule: ceil to the next picosecond. A zero amount takes zero time.
Duration operator/(Bytes b, BytesPerSec r);
Duration operator/(Flops f, FlopsPerSec r);
// Work a rate does over a span (a peak over a step: the capacity MFU divides by).
Flops operator*(FlopsPerSec r, Duration d);
// Achieved rates over a span (for reports).
BytesPerSec operator/(Bytes b, Duration d);
FlopsPerSec operator/(Flops f, Duration d);

}  // namespace meshsim
