// Issue 15: overflow-checked arithmetic. Products and sums of values read from input, and the unit
// types' own arithmetic, give the exact result or a LimitError saying what overflowed; never a
// wrapped (negative) value.
#include "meshsim/sim/checked.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <utility>

#include "meshsim/sim/error.h"
#include "meshsim/sim/units.h"
#include "thrown.h"

namespace meshsim {
namespace {

using ::testing::HasSubstr;

constexpr int64_t kMax = std::numeric_limits<int64_t>::max();

template <typename F>
std::string limit_error(F&& f) {
  return testing::what_thrown<LimitError>(std::forward<F>(f), "<no LimitError>");
}

TEST(Checked, ExactResultsWithinRange) {
  EXPECT_EQ(try_mul(3037000499, 3037000499), int64_t{9223372030926249001});
  EXPECT_EQ(try_add(kMax - 1, 1), kMax);
  EXPECT_EQ(checked_product({2, 3, 7}, "x"), 42);
  EXPECT_EQ(checked_product({}, "x"), 1);
  EXPECT_EQ(checked_sum({kMax - 2, 1, 1}, "x"), kMax);
  // A zero factor makes the product exact even where the others alone would overflow.
  EXPECT_EQ(checked_product({int64_t{1} << 40, int64_t{1} << 40, 0}, "x"), 0);
}

TEST(Checked, OverflowIsALimitErrorNamingWhatAndTheOperands) {
  EXPECT_FALSE(try_mul(3037000500, 3037000500).has_value());
  EXPECT_FALSE(try_add(kMax, 1).has_value());
  const std::string msg = limit_error([] {
    checked_product({int64_t{1} << 40, int64_t{1} << 30}, "KV cache bytes");
  });
  EXPECT_THAT(msg, HasSubstr("KV cache bytes: 1099511627776 x 1073741824 does not fit in 64 bits"));
  EXPECT_THAT(limit_error([] { checked_add(kMax, 1, "a sum"); }), HasSubstr("a sum: "));
  // A LimitError is an InfeasibleError: main reports it with exit 2.
  EXPECT_THROW(checked_mul(kMax, 2, "x"), InfeasibleError);
}

TEST(CheckedUnits, DurationAndTimeArithmeticThrowInsteadOfWrapping) {
  const Duration big = Duration::from_ps(kMax / 2 + 1);
  EXPECT_THAT(limit_error([&] { (void)(big + big); }), HasSubstr("106 days"));
  EXPECT_THAT(limit_error([&] { (void)(big * 3); }), HasSubstr("106 days"));
  EXPECT_THAT(limit_error([&] { (void)(SimTime::from_ps(kMax) + Picoseconds(1)); }),
              HasSubstr("106 days"));
  EXPECT_THAT(limit_error([&] { (void)(Duration::from_ps(-kMax) - big); }), HasSubstr("106 days"));
  Duration d = big;
  EXPECT_THROW(d += big, LimitError);
  EXPECT_EQ(d, big);  // unchanged by the failed addition
}

TEST(CheckedUnits, BytesArithmeticThrowsInsteadOfWrapping) {
  EXPECT_THAT(limit_error([] { (void)(Bytes::of(kMax) + Bytes::of(1)); }), HasSubstr("8 EiB"));
  EXPECT_THAT(limit_error([] { (void)(GiB(1) * (int64_t{1} << 40)); }), HasSubstr("8 EiB"));
  EXPECT_EQ((GiB(1) * 1024).count(), int64_t{1} << 40);
}

TEST(CheckedUnits, FactoriesRefuseWhatInt64CannotHold) {
  // llround of 1e300 ps was unspecified (garbage); now LimitError.
  EXPECT_THROW(Seconds(1e300), LimitError);
  EXPECT_THROW(Seconds(std::nan("")), LimitError);
  EXPECT_THROW(Microseconds(std::numeric_limits<double>::infinity()), LimitError);
  EXPECT_THROW(GiB(1e30), LimitError);
  EXPECT_EQ(Seconds(9.2e6).ps(), int64_t{9'200'000'000'000'000'000});
  EXPECT_EQ(Seconds(-1.5).ps(), -1'500'000'000'000);
}

TEST(CheckedUnits, AnAmountOverATinyRateIsALimitErrorNotAnInternalError) {
  // 1 TB at 1e-300 B/s: a kernel or transfer past meshsim's clock (before: SIM_CHECK, exit 1).
  EXPECT_THAT(limit_error([] { (void)(TB(1) / BytesPerSec::of(1e-300)); }),
              HasSubstr("over a rate of 1e-300"));
  EXPECT_THROW((void)(Flops::of(1e300) / FlopsPerSec::of(1.0)), LimitError);
  EXPECT_THROW((void)(Flops::of(std::numeric_limits<double>::infinity()) / FlopsPerSec::of(1.0)),
               LimitError);
}

}  // namespace
}  // namespace meshsim
