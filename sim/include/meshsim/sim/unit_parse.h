// Parsing of unit strings ("400Gbps", "900GB/s", "80GiB", "1.5us", "989TFLOP/s").
//
// Only loaders call these (docs/style.md B.6): the rest of the code handles typed values. Units are
// case sensitive where it matters: "b" is a bit, "B" a byte, so "400Gbps" is 50e9 bytes/s and
// "400GB/s" is 400e9 bytes/s. Decimal prefixes (k/K, M, G, T, P) are powers of ten; binary ones
// (Ki, Mi, Gi, Ti) powers of two. Sizes must be in bytes: "80Gb" is rejected rather than silently
// converted. Each function throws `UnitParseError` with a message that says what was expected.
//
// Bounds: every value is finite and non-negative; sizes and durations fit in int64 (bytes,
// picoseconds); rates are at most kMaxBandwidth and kMaxFlopsRate, far above any real device, so
// that a typo ("1e308TB/s") is refused instead of printing "inf" or dividing into zero time.
#pragma once

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>

#include "meshsim/sim/units.h"

namespace meshsim {

class UnitParseError : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

// 1 EB/s: a thousand times NVLink 5's 1.8 TB/s per GPU or HBM3e's 8 TB/s.
inline constexpr double kMaxBandwidth = 1e18;
// 1 ZFLOP/s: about 10^5 times a B200's densest rate (~2e16 FLOP/s at fp4).
inline constexpr double kMaxFlopsRate = 1e21;

// The bound checks of the parsers, for rates given as plain numbers (JsonObject): nullopt when
// `bytes_per_s` (`flops_per_s`) is finite, >= 0 and within the bound, else the reason.
std::optional<std::string> bandwidth_out_of_range(double bytes_per_s);
std::optional<std::string> flops_rate_out_of_range(double flops_per_s);

// The whole of `text` (surrounding spaces allowed) as a finite number, e.g. "1.5", "-2", "1e6";
// nullopt for anything else ("1.5x", "inf", "", an overflow). Callers check the sign and range.
std::optional<double> parse_number(std::string_view text);
// The whole of `text` (surrounding spaces allowed) as a base-10 integer within int64; nullopt
// otherwise ("1.5", "7k", "", past 2^63).
std::optional<int64_t> parse_integer(std::string_view text);

Bytes parse_bytes(std::string_view text);
BytesPerSec parse_bandwidth(std::string_view text);
Duration parse_duration(std::string_view text);
FlopsPerSec parse_flops_rate(std::string_view text);

}  // namespace meshsim
