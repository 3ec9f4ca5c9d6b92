// Private: reading numbers that carry their source.
//
// In the chip catalogue and the cluster files every figure is written as
//   "bandwidth": {"value": "3.35TB/s", "source": "NVIDIA H100 datasheet"}
// Each reader below takes the parent object and the key, validates the value (positive where a
// zero would be meaningless), requires a non-empty "source", rejects any other key, and records the
// source in `sources` under the leaf's JSON pointer relative to `base` (the pointer of the chip or
// cluster the figure belongs to). Errors are InputError naming file, pointer and expectation.
//
// Upper bounds (each stated in its error): counts at most kMaxHardwareCount, durations at most
// kMaxHardwareDuration, frequencies at most kMaxFrequencyHz; rates and sizes as sim/unit_parse.h
// bounds them. Far above any real part, they keep every product of two figures in 64 bits.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "meshsim/sim/json_input.h"
#include "meshsim/sim/units.h"

namespace meshsim::topology::detail {

using SourceMap = std::map<std::string, std::string>;

// Where a sourced figure is recorded: the map and the pointer prefix to strip.
// Links, ports, SMs, MXUs, tiles, radixes, chips per host: real ones are below 1,000.
inline constexpr int64_t kMaxHardwareCount = int64_t{1} << 16;
// A latency or fixed overhead of one step or kernel: real ones are microseconds.
inline constexpr double kMaxHardwareDurationSeconds = 1.0;
// 100 GHz: twenty times any clock.
inline constexpr double kMaxFrequencyHz = 1e11;

struct SourceSink {
  SourceMap* sources;
  std::string base;
};

FlopsPerSec sourced_flops(JsonObject& parent, const std::string& key, SourceSink& sink);
BytesPerSec sourced_bandwidth(JsonObject& parent, const std::string& key, SourceSink& sink);
Bytes sourced_bytes(JsonObject& parent, const std::string& key, SourceSink& sink);
// `allow_zero`: launch overheads may be zero; latencies may not.
Duration sourced_duration(JsonObject& parent, const std::string& key, SourceSink& sink,
                          bool allow_zero);
double sourced_fraction(JsonObject& parent, const std::string& key, SourceSink& sink);
double sourced_positive_number(JsonObject& parent, const std::string& key, SourceSink& sink);
int64_t sourced_count(JsonObject& parent, const std::string& key, SourceSink& sink);
double sourced_non_negative_number(JsonObject& parent, const std::string& key, SourceSink& sink);
// A string value that must be one of `choices`.
std::string sourced_choice(JsonObject& parent, const std::string& key,
                           const std::vector<std::string>& choices, SourceSink& sink);
// [[m, n], ...]: GEMM tiles, each extent positive.
std::vector<std::array<int64_t, 2>> sourced_tiles(JsonObject& parent, const std::string& key,
                                                  SourceSink& sink);
// "1.98GHz", "1050MHz", "1.5e9Hz"; returns hertz.
double sourced_frequency(JsonObject& parent, const std::string& key, SourceSink& sink);

// Parses a frequency string; throws UnitParseError with the expected forms.
double parse_frequency_hz(std::string_view text);

}  // namespace meshsim::topology::detail
