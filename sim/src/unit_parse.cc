#include "meshsim/sim/unit_parse.h"

#include <fmt/format.h>

#include <array>
#include <cctype>
#include <charconv>
#include <cmath>
#include <string>
#include <type_traits>
#include <utility>

#include "meshsim/sim/text.h"

namespace meshsim {
namespace {

struct Split {
  double value;
  std::string_view unit;
};

// Splits "1.5 us" into {1.5, "us"}. The number must be finite and non-negative.
Split split_number(std::string_view text, std::string_view examples) {
  const std::string_view s = trim(text);
  double value = 0.0;
  const auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), value);
  if (ec != std::errc() || ptr == s.data()) {
    throw UnitParseError(
        fmt::format("\"{}\": expected a number followed by a unit (e.g. {})", text, examples));
  }
  if (!std::isfinite(value) || value < 0.0) {
    throw UnitParseError(fmt::format("\"{}\": expected a finite, non-negative number", text));
  }
  return {value, trim(s.substr(static_cast<size_t>(ptr - s.data())))};
}

template <size_t N>
double lookup(const std::array<std::pair<std::string_view, double>, N>& table,
              std::string_view unit, std::string_view text, std::string_view examples) {
  for (const auto& [name, scale] : table) {
    if (name == unit) {
      return scale;
    }
  }
  throw UnitParseError(fmt::format("\"{}\": unknown unit \"{}\" (expected e.g. {})", text, unit,
                                   examples));
}

constexpr double kKi = 1024.0;

std::optional<std::string> rate_out_of_range(double v, double max, std::string_view unit,
                                             std::string_view bound) {
  if (std::isnan(v) || v < 0.0) {
    return fmt::format("expected a finite, non-negative rate, got {} {}", v, unit);
  }
  if (v > max) {  // +inf too: a finite number times a large unit
    return fmt::format("{} is above the limit of {} ({:g} {}), far beyond any real device",
                       std::isinf(v) ? std::string("the rate") : fmt::format("{:g} {}", v, unit),
                       bound, max, unit);
  }
  return std::nullopt;
}

// A plain number: optional blanks, an optional '+', the digits, nothing after (a double must be
// finite).
template <typename T>
std::optional<T> parse_plain(std::string_view text) {
  std::string_view s = trim(text);
  if (!s.empty() && s.front() == '+') {
    s.remove_prefix(1);
  }
  T value{};
  const auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), value);
  if (ec != std::errc() || s.empty() || ptr != s.data() + s.size()) {
    return std::nullopt;
  }
  if constexpr (std::is_floating_point_v<T>) {
    if (!std::isfinite(value)) {
      return std::nullopt;
    }
  }
  return value;
}

// "<number> <unit>" scaled by the unit's factor in `table`.
template <size_t N>
double scaled(std::string_view text,
              const std::array<std::pair<std::string_view, double>, N>& table,
              std::string_view examples) {
  const Split sp = split_number(text, examples);
  return sp.value * lookup(table, sp.unit, text, examples);
}

// A rate must pass its range check (`why` names what is wrong, nullopt when nothing is).
double checked_rate(std::string_view text, double v, const std::optional<std::string>& why) {
  if (why) {
    throw UnitParseError(fmt::format("\"{}\": {}", text, *why));
  }
  return v;
}

}  // namespace

std::optional<double> parse_number(std::string_view text) { return parse_plain<double>(text); }

std::optional<int64_t> parse_integer(std::string_view text) { return parse_plain<int64_t>(text); }

std::optional<std::string> bandwidth_out_of_range(double bytes_per_s) {
  return rate_out_of_range(bytes_per_s, kMaxBandwidth, "B/s", "1 EB/s");
}

std::optional<std::string> flops_rate_out_of_range(double flops_per_s) {
  return rate_out_of_range(flops_per_s, kMaxFlopsRate, "FLOP/s", "1 ZFLOP/s");
}

Bytes parse_bytes(std::string_view text) {
  static constexpr std::string_view kExamples = "\"80GiB\", \"512MB\", \"4096B\"";
  static constexpr std::array<std::pair<std::string_view, double>, 11> kTable{{
      {"B", 1.0},
      {"kB", 1e3},
      {"KB", 1e3},
      {"MB", 1e6},
      {"GB", 1e9},
      {"TB", 1e12},
      {"KiB", kKi},
      {"MiB", kKi * kKi},
      {"GiB", kKi * kKi * kKi},
      {"TiB", kKi * kKi * kKi * kKi},
      {"", 1.0},
  }};
  const Split sp = split_number(text, kExamples);
  if (!sp.unit.empty() && sp.unit.back() == 'b') {
    throw UnitParseError(fmt::format(
        "\"{}\": \"{}\" is a number of bits; sizes are given in bytes (e.g. {})", text, sp.unit,
        kExamples));
  }
  const double bytes = sp.value * lookup(kTable, sp.unit, text, kExamples);
  if (bytes > 9.2e18 || bytes != std::floor(bytes)) {
    throw UnitParseError(fmt::format("\"{}\": not a whole number of bytes below 2^63", text));
  }
  return Bytes::of(static_cast<int64_t>(bytes));
}

BytesPerSec parse_bandwidth(std::string_view text) {
  static constexpr std::string_view kExamples = "\"400Gbps\", \"900GB/s\", \"25GiB/s\"";
  // Bits per second: lowercase b. Bytes per second: uppercase B.
  static constexpr std::array<std::pair<std::string_view, double>, 20> kTable{{
      {"bps", 1.0 / 8},          {"Kbps", 1e3 / 8},
      {"kbps", 1e3 / 8},         {"Mbps", 1e6 / 8},
      {"Gbps", 1e9 / 8},         {"Tbps", 1e12 / 8},
      {"Gb/s", 1e9 / 8},         {"Tb/s", 1e12 / 8},
      {"Mb/s", 1e6 / 8},         {"B/s", 1.0},
      {"KB/s", 1e3},             {"kB/s", 1e3},
      {"MB/s", 1e6},             {"GB/s", 1e9},
      {"TB/s", 1e12},            {"GBps", 1e9},
      {"TBps", 1e12},            {"MiB/s", kKi * kKi},
      {"GiB/s", kKi * kKi * kKi}, {"TiB/s", kKi * kKi * kKi * kKi},
  }};
  const double v = scaled(text, kTable, kExamples);
  return BytesPerSec::of(checked_rate(text, v, bandwidth_out_of_range(v)));
}

Duration parse_duration(std::string_view text) {
  static constexpr std::string_view kExamples = "\"1.5us\", \"250ns\", \"2ms\", \"0.5s\"";
  static constexpr std::array<std::pair<std::string_view, double>, 6> kTable{{
      {"ps", 1.0},
      {"ns", 1e3},
      {"us", 1e6},
      {"\u00b5s", 1e6},
      {"ms", 1e9},
      {"s", 1e12},
  }};
  const double ps = scaled(text, kTable, kExamples);
  if (ps > 9.2e18) {
    throw UnitParseError(fmt::format("\"{}\": longer than int64 picoseconds can hold", text));
  }
  return Duration::from_ps(std::llround(ps));
}

FlopsPerSec parse_flops_rate(std::string_view text) {
  static constexpr std::string_view kExamples = "\"989TFLOP/s\", \"197 TFLOPS\"";
  static constexpr std::array<std::pair<std::string_view, double>, 10> kTable{{
      {"FLOP/s", 1.0},
      {"FLOPS", 1.0},
      {"GFLOP/s", 1e9},
      {"GFLOPS", 1e9},
      {"TFLOP/s", 1e12},
      {"TFLOPS", 1e12},
      {"PFLOP/s", 1e15},
      {"PFLOPS", 1e15},
      {"MFLOP/s", 1e6},
      {"MFLOPS", 1e6},
  }};
  const double v = scaled(text, kTable, kExamples);
  return FlopsPerSec::of(checked_rate(text, v, flops_rate_out_of_range(v)));
}

}  // namespace meshsim
