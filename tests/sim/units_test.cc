#include "meshsim/sim/units.h"

#include <gtest/gtest.h>

#include "meshsim/sim/error.h"
#include "meshsim/sim/unit_parse.h"

namespace meshsim {
namespace {

TEST(Units, DecimalAndBinaryPrefixesDiffer) {
  EXPECT_EQ(GB(1).count(), 1'000'000'000);
  EXPECT_EQ(GiB(1).count(), 1'073'741'824);
  EXPECT_EQ(KiB(1).count(), 1024);
  EXPECT_EQ(MB(1).count(), 1'000'000);
}

TEST(Units, BitsAreConvertedOnceByTheFactory) {
  EXPECT_DOUBLE_EQ(Gbps(400).value(), 50e9);
  EXPECT_DOUBLE_EQ(GBps(900).value(), 900e9);
}

TEST(Units, BytesOverRateRoundsUpToPicoseconds) {
  // 1 byte at 3 B/s is 0.333... s: rounded up to 333333333334 ps.
  EXPECT_EQ((Bytes::of(1) / BytesPerSec::of(3.0)).ps(), 333'333'333'334);
  EXPECT_EQ((Bytes::of(0) / BytesPerSec::of(3.0)).ps(), 0);
  EXPECT_EQ((Flops::of(1e12) / TFlopsPerSec(1)).ps(), 1'000'000'000'000);
}

TEST(Units, DurationArithmetic) {
  const Duration a = Microseconds(1.5);
  EXPECT_EQ(a.ps(), 1'500'000);
  EXPECT_EQ((a + Nanoseconds(500)).ps(), 2'000'000);
  EXPECT_DOUBLE_EQ(Milliseconds(3) / Milliseconds(1.5), 2.0);
  const SimTime t = SimTime::zero() + a;
  EXPECT_EQ((t - SimTime::zero()).ps(), a.ps());
}

TEST(Units, RidgePointIsFlopsOverBandwidth) {
  EXPECT_NEAR(TFlopsPerSec(990) / TBps(3.35), 295.522, 1e-3);
}

TEST(UnitParse, Sizes) {
  EXPECT_EQ(parse_bytes("80GiB").count(), 80LL * 1024 * 1024 * 1024);
  EXPECT_EQ(parse_bytes("80 GB").count(), 80'000'000'000LL);
  EXPECT_EQ(parse_bytes("4096").count(), 4096);
  EXPECT_EQ(parse_bytes("8B").count(), 8);
  EXPECT_THROW(parse_bytes("80Gb"), UnitParseError);  // bits are not a size
  EXPECT_THROW(parse_bytes("-1GB"), UnitParseError);
  EXPECT_THROW(parse_bytes("1.5B"), UnitParseError);
  EXPECT_THROW(parse_bytes("GB"), UnitParseError);
  EXPECT_THROW(parse_bytes("12 parsecs"), UnitParseError);
}

TEST(UnitParse, Bandwidths) {
  EXPECT_DOUBLE_EQ(parse_bandwidth("400Gbps").value(), 50e9);
  EXPECT_DOUBLE_EQ(parse_bandwidth("400Gb/s").value(), 50e9);
  EXPECT_DOUBLE_EQ(parse_bandwidth("900GB/s").value(), 900e9);
  EXPECT_DOUBLE_EQ(parse_bandwidth("1GiB/s").value(), 1073741824.0);
  try {
    parse_bandwidth("10 Gbsp");
    FAIL() << "expected an error";
  } catch (const UnitParseError& e) {
    EXPECT_NE(std::string(e.what()).find("unknown unit \"Gbsp\""), std::string::npos) << e.what();
  }
}

TEST(UnitParse, Durations) {
  EXPECT_EQ(parse_duration("1.5us").ps(), 1'500'000);
  EXPECT_EQ(parse_duration("250ns").ps(), 250'000);
  EXPECT_EQ(parse_duration("2ms").ps(), 2'000'000'000);
  EXPECT_EQ(parse_duration("0.5s").ps(), 500'000'000'000);
  EXPECT_THROW(parse_duration("5 fortnights"), UnitParseError);
}

TEST(UnitParse, FlopRates) {
  EXPECT_DOUBLE_EQ(parse_flops_rate("989TFLOP/s").value(), 989e12);
  EXPECT_DOUBLE_EQ(parse_flops_rate("197 TFLOPS").value(), 197e12);
}

TEST(Check, FailureNamesTheState) {
  try {
    SIM_CHECK(1 + 1 == 3, "arithmetic is off: {}", 42);
    FAIL();
  } catch (const InternalError& e) {
    EXPECT_NE(std::string(e.what()).find("arithmetic is off: 42"), std::string::npos);
  }
}

// Plain numbers in flags ("--stragglers 0.01:1.05:1.3", "--min-headroom 5%", "--group 0-7"): the
// whole string or nothing, finite, integers within int64.
TEST(UnitParse, PlainNumbersAreReadWholeOrNotAtAll) {
  EXPECT_EQ(parse_number("1.5"), 1.5);
  EXPECT_EQ(parse_number(" 2e3 "), 2000.0);
  EXPECT_EQ(parse_number("-0.25"), -0.25);
  EXPECT_EQ(parse_number("+4"), 4.0);
  for (const char* bad : {"", "1.5x", "x1", "inf", "nan", "1e400", "1,5", "+"}) {
    EXPECT_FALSE(parse_number(bad).has_value()) << bad;
  }
  EXPECT_EQ(parse_integer("42"), 42);
  EXPECT_EQ(parse_integer("-7"), -7);
  EXPECT_EQ(parse_integer("9223372036854775807"), INT64_MAX);
  for (const char* bad : {"", "1.5", "7k", "9223372036854775808", "0x10", "--1"}) {
    EXPECT_FALSE(parse_integer(bad).has_value()) << bad;
  }
}

}  // namespace
}  // namespace meshsim
