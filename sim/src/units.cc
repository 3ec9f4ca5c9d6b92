#include "meshsim/sim/units.h"

#include <cmath>

#include "meshsim/sim/error.h"

namespace meshsim {
namespace {

Duration ceil_seconds_to_duration(double seconds) {
  SIM_CHECK(std::isfinite(seconds) && seconds >= 0.0, "duration {} s is not finite and >= 0",
            seconds);
  const double ps = std::ceil(seconds * 1e12);
  SIM_CHECK(ps < 9.2e18, "duration {} s overflows int64 picoseconds", seconds);
  return Duration::from_ps(static_cast<int64_t>(ps));
}

}  // namespace

Duration operator/(Bytes b, BytesPerSec r) {
  if (b.count() == 0) {
    return Duration::zero();
  }
  SIM_CHECK(r.value() > 0.0, "{} bytes over a rate of {} B/s", b.count(), r.value());
  return ceil_seconds_to_duration(b.as_double() / r.value());
}

Duration operator/(Flops f, FlopsPerSec r) {
  if (f.count() == 0.0) {
    return Duration::zero();
  }
  SIM_CHECK(r.value() > 0.0, "{} FLOP over a rate of {} FLOP/s", f.count(), r.value());
  return ceil_seconds_to_duration(f.count() / r.value());
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
