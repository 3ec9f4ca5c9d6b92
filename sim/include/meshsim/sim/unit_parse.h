// Parsing of unit strings ("400Gbps", "900GB/s", "80GiB", "1.5us", "989TFLOP/s").
//
// Only loaders call these (STYLE B.6): the rest of the code handles typed values. Units are case
// sensitive where it matters: "b" is a bit, "B" a byte, so "400Gbps" is 50e9 bytes/s and "400GB/s"
// is 400e9 bytes/s. Decimal prefixes (k/K, M, G, T, P) are powers of ten; binary ones (Ki, Mi, Gi,
// Ti) powers of two. Sizes must be in bytes: "80Gb" is rejected rather than silently converted.
// Each function throws `UnitParseError` with a message that says what was expected.
#pragma once

#include <stdexcept>
#include <string_view>

#include "meshsim/sim/units.h"

namespace meshsim {

class UnitParseError : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

Bytes parse_bytes(std::string_view text);
BytesPerSec parse_bandwidth(std::string_view text);
Duration parse_duration(std::string_view text);
FlopsPerSec parse_flops_rate(std::string_view text);

}  // namespace meshsim
