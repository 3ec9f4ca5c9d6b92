#include "sourced.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <utility>

#include "meshsim/sim/error.h"
#include "meshsim/sim/unit_parse.h"

namespace meshsim::topology::detail {
namespace {

bool blank(const std::string& s) {
  for (const char c : s) {
    if (std::isspace(static_cast<unsigned char>(c)) == 0) {
      return false;
    }
  }
  return true;
}

// Opens {"value": ..., "source": ...}, lets `read` parse "value", then checks the source and that
// no other key is present.
template <typename Read>
auto read_sourced(JsonObject& parent, const std::string& key, SourceSink& sink, Read read) {
  JsonObject leaf = parent.object(key);
  auto value = read(leaf);
  const std::string source = leaf.string("source");
  if (blank(source)) {
    leaf.fail("source",
              "expected a non-empty citation (datasheet, paper, measurement or a stated "
              "assumption) for this figure");
  }
  leaf.finish();
  std::string pointer = leaf.pointer();
  if (pointer.compare(0, sink.base.size(), sink.base) == 0) {
    pointer.erase(0, sink.base.size());
  }
  (*sink.sources)[pointer] = source;
  return value;
}

}  // namespace

FlopsPerSec sourced_flops(JsonObject& parent, const std::string& key, SourceSink& sink) {
  return read_sourced(parent, key, sink, [](JsonObject& leaf) {
    const FlopsPerSec v = leaf.flops_rate("value");
    if (!(v.value() > 0.0)) {
      leaf.fail("value", fmt::format("expected a positive rate such as \"989.4TFLOP/s\", got {} "
                                     "FLOP/s",
                                     v.value()));
    }
    return v;
  });
}

BytesPerSec sourced_bandwidth(JsonObject& parent, const std::string& key, SourceSink& sink) {
  return read_sourced(parent, key, sink, [](JsonObject& leaf) {
    const BytesPerSec v = leaf.bandwidth("value");
    if (!(v.value() > 0.0)) {
      leaf.fail("value", fmt::format("expected a positive bandwidth such as \"400Gbps\" or "
                                     "\"900GB/s\", got {} B/s",
                                     v.value()));
    }
    return v;
  });
}

Bytes sourced_bytes(JsonObject& parent, const std::string& key, SourceSink& sink) {
  return read_sourced(parent, key, sink, [](JsonObject& leaf) {
    const Bytes v = leaf.bytes("value");
    if (v.count() <= 0) {
      leaf.fail("value",
                fmt::format("expected a positive size such as \"80GiB\", got {} B", v.count()));
    }
    return v;
  });
}

Duration sourced_duration(JsonObject& parent, const std::string& key, SourceSink& sink,
                          bool allow_zero) {
  return read_sourced(parent, key, sink, [allow_zero](JsonObject& leaf) {
    const Duration v = leaf.duration("value");
    if (v.ps() < 0 || (!allow_zero && v.ps() == 0)) {
      leaf.fail("value", fmt::format("expected a {} duration such as \"3.4us\", got {} ps",
                                     allow_zero ? "non-negative" : "positive", v.ps()));
    }
    if (v > Seconds(kMaxHardwareDurationSeconds)) {
      leaf.fail("value", fmt::format("{} s is above the limit of {} s for a latency or overhead "
                                     "(real ones are microseconds)",
                                     v.seconds(), kMaxHardwareDurationSeconds));
    }
    return v;
  });
}

double sourced_fraction(JsonObject& parent, const std::string& key, SourceSink& sink) {
  return read_sourced(parent, key, sink, [](JsonObject& leaf) { return leaf.fraction("value"); });
}

double sourced_positive_number(JsonObject& parent, const std::string& key, SourceSink& sink) {
  return read_sourced(parent, key, sink,
                      [](JsonObject& leaf) { return leaf.positive_number("value"); });
}

double sourced_non_negative_number(JsonObject& parent, const std::string& key, SourceSink& sink) {
  return read_sourced(parent, key, sink, [](JsonObject& leaf) {
    const double v = leaf.number("value");
    if (!(v >= 0.0) || !std::isfinite(v)) {
      leaf.fail("value", fmt::format("expected a non-negative number, got {}", v));
    }
    if (v > 2147483648.0) {
      leaf.fail("value", fmt::format("{} is above the limit of 2^31 (a matrix dimension)", v));
    }
    return v;
  });
}

std::string sourced_choice(JsonObject& parent, const std::string& key,
                           const std::vector<std::string>& choices, SourceSink& sink) {
  return read_sourced(parent, key, sink,
                      [&choices](JsonObject& leaf) { return leaf.one_of("value", choices); });
}

int64_t sourced_count(JsonObject& parent, const std::string& key, SourceSink& sink) {
  return read_sourced(parent, key, sink, [](JsonObject& leaf) {
    const int64_t v = leaf.positive_integer("value");
    if (v > kMaxHardwareCount) {
      leaf.fail("value", fmt::format("{} is above the limit of {} (2^16) for a count in a hardware "
                                     "description: links, ports, SMs, MXUs and tiles are far "
                                     "fewer",
                                     v, kMaxHardwareCount));
    }
    return v;
  });
}

double sourced_frequency(JsonObject& parent, const std::string& key, SourceSink& sink) {
  return read_sourced(parent, key, sink, [](JsonObject& leaf) {
    const std::string text = leaf.string("value");
    try {
      return parse_frequency_hz(text);
    } catch (const UnitParseError& e) {
      leaf.fail("value", e.what());
    }
  });
}

double parse_frequency_hz(std::string_view text) {
  static constexpr std::string_view kExamples = "\"1.98GHz\", \"1050MHz\"";
  static constexpr std::pair<std::string_view, double> kUnits[] = {
      {"Hz", 1.0}, {"kHz", 1e3}, {"MHz", 1e6}, {"GHz", 1e9}};
  std::string_view s = text;
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front())) != 0) {
    s.remove_prefix(1);
  }
  double value = 0.0;
  const auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), value);
  if (ec != std::errc() || ptr == s.data()) {
    throw UnitParseError(fmt::format("\"{}\": expected a frequency such as {}", text, kExamples));
  }
  std::string_view unit = s.substr(static_cast<size_t>(ptr - s.data()));
  while (!unit.empty() && std::isspace(static_cast<unsigned char>(unit.front())) != 0) {
    unit.remove_prefix(1);
  }
  for (const auto& [name, scale] : kUnits) {
    if (name == unit) {
      if (!std::isfinite(value) || value <= 0.0) {
        throw UnitParseError(fmt::format("\"{}\": expected a positive frequency", text));
      }
      if (value * scale > kMaxFrequencyHz) {
        throw UnitParseError(fmt::format("\"{}\": above the limit of 100 GHz for a clock", text));
      }
      return value * scale;
    }
  }
  throw UnitParseError(fmt::format("\"{}\": unknown frequency unit \"{}\" (expected e.g. {})", text,
                                   unit, kExamples));
}

std::vector<std::array<int64_t, 2>> sourced_tiles(JsonObject& parent, const std::string& key,
                                                  SourceSink& sink) {
  return read_sourced(parent, key, sink, [](JsonObject& leaf) {
    const nlohmann::json& v = leaf.raw("value");
    std::vector<std::array<int64_t, 2>> tiles;
    const bool ok = v.is_array() && std::all_of(v.begin(), v.end(), [](const nlohmann::json& t) {
      return t.is_array() && t.size() == 2 && t[0].is_number_integer() &&
             t[1].is_number_integer() && t[0].get<int64_t>() > 0 && t[1].get<int64_t>() > 0;
    });
    if (!ok) {
      leaf.fail("value", fmt::format("expected tiles as [[rows, columns], ...] of positive "
                                     "integers, got {}",
                                     describe_json(v)));
    }
    for (const nlohmann::json& t : v) {
      tiles.push_back({t[0].get<int64_t>(), t[1].get<int64_t>()});
    }
    return tiles;
  });
}

}  // namespace meshsim::topology::detail
