#include "meshsim/sim/units.h"

#include <fmt/format.h>

#include <cmath>

#include "meshsim/sim/error.h"

namespace meshsim {

void detail::unit_overflow(const char* what) { throw LimitError(what); }

int64_t detail::round_to_int64(double v, const char* what) {
  // 2^63 is exactly representable; every double below it converts to int64 without overflow.
  constexpr double kLimit = 9223372036854775808.0;
  if (!std::isfinite(v)) {
    throw LimitError(fmt::format("{}: got {}", what, v));
  }
  const double r = std::round(v);
  if (r >= kLimit || r < -kLimit) {
    throw LimitError(fmt::format("{}: got {:g}", what, v));
  }
  return static_cast<int64_t>(r);
}

namespace {

// A negative or NaN span is a bug in the caller; one past int64 picoseconds (a huge amount, a tiny
// rate, both from input) is a LimitError.
Duration ceil_seconds_to_duration(double seconds, double amount, double rate) {
  SIM_CHECK(!std::isnan(seconds) && seconds >= 0.0, "duration {} s is not a number >= 0", seconds);
  const double ps = std::ceil(seconds * 1e12);
  if (!(ps < 9.2e18)) {
    throw LimitError(fmt::format("{} over a rate of {} per second takes {:g} s: {}", amount, rate,
                                 seconds, detail::kTimeOverflow));
  }
  return Duration::from_ps(static_cast<int64_t>(ps));
}

}  // namespace

Duration operator/(Bytes b, BytesPerSec r) {
  if (b.count() == 0) {
    return Duration::zero();
  }
  SIM_CHECK(r.value() > 0.0, "{} bytes over a rate of {} B/s", b.count(), r.value());
  return ceil_seconds_to_duration(b.as_double() / r.value(), b.as_double(), r.value());
}

Duration operator/(Flops f, FlopsPerSec r) {
  if (f.count() == 0.0) {
    return Duration::zero();
  }
  SIM_CHECK(r.value() > 0.0, "{} FLOP over a rate of {} FLOP/s", f.count(), r.value());
  return ceil_seconds_to_duration(f.count() / r.value(), f.count(), r.value());
}

BytesPerSec operator/(Bytes b, Duration d) {
  SIM_CHECK(d.ps() > 0, "rate over a non-positive span of {} ps", d.ps());
  return BytesPerSec::of(b.as_double() / d.seconds());
}

Flops operator*(FlopsPerSec r, Duration d) { return Flops::of(r.value() * d.seconds()); }

FlopsPerSec operator/(Flops f, Duration d) {
  SIM_CHECK(d.ps() > 0, "rate over a non-positive span of {} ps", d.ps());
  return FlopsPerSec::of(f.count() / d.seconds());
}

}  // namespace meshsim
