#include "meshsim/sim/json_input.h"

#include <fmt/format.h>

#include <cmath>
#include <limits>

#include "meshsim/sim/error.h"
#include "meshsim/sim/unit_parse.h"

namespace meshsim {

std::string describe_json(const nlohmann::json& v) {
  if (v.is_object()) {
    return "an object";
  }
  if (v.is_array()) {
    return "an array";
  }
  if (v.is_null()) {
    return "null";
  }
  std::string s = v.dump();
  if (s.size() > 60) {
    s = s.substr(0, 57) + "...";
  }
  return s;
}

JsonObject::JsonObject(const nlohmann::json& value, std::string source, std::string pointer)
    : value_(&value), source_(std::move(source)), pointer_(std::move(pointer)) {
  if (!value.is_object()) {
    throw InputError(source_, pointer_.empty() ? "/" : pointer_,
                     fmt::format("expected an object, got {}", describe_json(value)));
  }
}

std::string JsonObject::pointer_of(const std::string& key) const {
  // RFC 6901 escaping: '~' -> "~0", '/' -> "~1".
  std::string escaped;
  for (const char c : key) {
    if (c == '~') {
      escaped += "~0";
    } else if (c == '/') {
      escaped += "~1";
    } else {
      escaped += c;
    }
  }
  return pointer_ + "/" + escaped;
}

bool JsonObject::has(const std::string& key) const { return value_->contains(key); }

void JsonObject::fail(const std::string& key, const std::string& message) const {
  throw InputError(source_, pointer_of(key), message);
}

const nlohmann::json& JsonObject::get(const std::string& key) {
  known_.insert(key);
  auto it = value_->find(key);
  if (it == value_->end()) {
    fail(key, "required field is missing");
  }
  return *it;
}

const nlohmann::json& JsonObject::raw(const std::string& key) { return get(key); }

std::string JsonObject::string(const std::string& key) {
  const auto& v = get(key);
  if (!v.is_string()) {
    fail(key, fmt::format("expected a string, got {}", describe_json(v)));
  }
  return v.get<std::string>();
}

bool JsonObject::boolean(const std::string& key) {
  const auto& v = get(key);
  if (!v.is_boolean()) {
    fail(key, fmt::format("expected true or false, got {}", describe_json(v)));
  }
  return v.get<bool>();
}

double JsonObject::number(const std::string& key) {
  const auto& v = get(key);
  if (!v.is_number()) {
    fail(key, fmt::format("expected a number, got {}", describe_json(v)));
  }
  const double d = v.get<double>();
  if (!std::isfinite(d)) {
    fail(key, "expected a finite number");
  }
  return d;
}

double JsonObject::positive_number(const std::string& key) {
  const double d = number(key);
  if (d <= 0.0) {
    fail(key, fmt::format("expected a positive number, got {}", describe_json(get(key))));
  }
  return d;
}

double JsonObject::fraction(const std::string& key) {
  const double d = number(key);
  if (d <= 0.0 || d > 1.0) {
    fail(key, fmt::format("expected a fraction in (0, 1], got {}", describe_json(get(key))));
  }
  return d;
}

std::optional<int64_t> as_int64(const nlohmann::json& v) {
  if (v.is_number_unsigned()) {
    const auto u = v.get<uint64_t>();
    if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      return std::nullopt;
    }
    return static_cast<int64_t>(u);
  }
  if (v.is_number_integer()) {
    return v.get<int64_t>();
  }
  return std::nullopt;
}

int64_t JsonObject::integer(const std::string& key) {
  const auto& v = get(key);
  if (const std::optional<int64_t> i = as_int64(v)) {
    return *i;
  }
  if (v.is_number_float()) {
    const double d = v.get<double>();
    if (std::isfinite(d) && d == std::floor(d) && std::fabs(d) < 9e15) {
      return static_cast<int64_t>(d);
    }
  }
  if (v.is_number_unsigned()) {
    fail(key, fmt::format("expected an integer below 2^63, got {}", describe_json(v)));
  }
  fail(key, fmt::format("expected an integer, got {}", describe_json(v)));
}

int64_t JsonObject::positive_integer(const std::string& key) {
  const int64_t i = integer(key);
  if (i <= 0) {
    fail(key, fmt::format("expected a positive integer, got {}", i));
  }
  return i;
}

int64_t JsonObject::non_negative_integer(const std::string& key) {
  const int64_t i = integer(key);
  if (i < 0) {
    fail(key, fmt::format("expected an integer >= 0, got {}", i));
  }
  return i;
}

namespace {
// A unit-bearing field: a string parsed by `parse`, or a plain non-negative number in base units.
template <typename T, typename Parse, typename FromNumber>
T unit_field(JsonObject& obj, const std::string& key, const nlohmann::json& v, Parse parse,
             FromNumber from_number, const char* what) {
  if (v.is_string()) {
    try {
      return parse(v.get<std::string>());
    } catch (const UnitParseError& e) {
      obj.fail(key, e.what());
    }
  }
  if (v.is_number()) {
    const double d = v.get<double>();
    if (std::isfinite(d) && d >= 0.0) {
      return from_number(d);
    }
  }
  obj.fail(key, fmt::format("expected {}, got {}", what, describe_json(v)));
}
}  // namespace

Bytes JsonObject::bytes(const std::string& key) {
  const auto& v = get(key);
  return unit_field<Bytes>(
      *this, key, v, parse_bytes,
      [&](double d) {
        if (d != std::floor(d) || d >= 9.2e18) {
          fail(key, fmt::format("expected a whole number of bytes below 2^63, got {}", d));
        }
        return Bytes::of(static_cast<int64_t>(d));
      },
      "a size such as \"80GiB\" or a number of bytes");
}

BytesPerSec JsonObject::bandwidth(const std::string& key) {
  const auto& v = get(key);
  return unit_field<BytesPerSec>(
      *this, key, v, parse_bandwidth,
      [&](double d) {
        if (const auto why = bandwidth_out_of_range(d)) {
          fail(key, *why);
        }
        return BytesPerSec::of(d);
      },
      "a bandwidth such as \"400Gbps\" or \"900GB/s\"");
}

Duration JsonObject::duration(const std::string& key) {
  const auto& v = get(key);
  return unit_field<Duration>(
      *this, key, v, parse_duration,
      [&](double d) {
        if (d * 1e12 >= 9.2e18) {
          fail(key, fmt::format("{} s is longer than int64 picoseconds can hold (about 106 days)",
                                d));
        }
        return Seconds(d);
      },
      "a duration such as \"1.5us\" or a number of seconds");
}

FlopsPerSec JsonObject::flops_rate(const std::string& key) {
  const auto& v = get(key);
  return unit_field<FlopsPerSec>(
      *this, key, v, parse_flops_rate,
      [&](double d) {
        if (const auto why = flops_rate_out_of_range(d)) {
          fail(key, *why);
        }
        return FlopsPerSec::of(d);
      },
      "a rate such as \"989TFLOP/s\" or a number of FLOP/s");
}

JsonObject JsonObject::object(const std::string& key) {
  return JsonObject(get(key), source_, pointer_of(key));
}

size_t JsonObject::object_array_length(const std::string& key) {
  const auto& v = get(key);
  if (!v.is_array()) {
    fail(key, fmt::format("expected an array of objects, got {}", describe_json(v)));
  }
  return v.size();
}

std::vector<JsonObject> JsonObject::object_array(const std::string& key) {
  const size_t n = object_array_length(key);
  const auto& v = get(key);
  std::vector<JsonObject> out;
  out.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    out.emplace_back(v[i], source_, fmt::format("{}/{}", pointer_of(key), i));
  }
  return out;
}

namespace {

// An array of integers of at least `least` (0 or 1), each below 2^63; fails on the entry.
std::vector<int64_t> integer_array(JsonObject& o, const nlohmann::json& v, const std::string& key,
                                   int64_t least) {
  const char* what = least > 0 ? "positive integers" : "integers >= 0";
  if (!v.is_array()) {
    o.fail(key, fmt::format("expected an array of {}, got {}", what, describe_json(v)));
  }
  std::vector<int64_t> out;
  for (size_t i = 0; i < v.size(); ++i) {
    const std::optional<int64_t> n = as_int64(v[i]);
    if (!n || *n < least) {
      throw InputError(o.source(), fmt::format("{}/{}", o.pointer_of(key), i),
                       fmt::format("expected {} below 2^63, got {}",
                                   least > 0 ? "a positive integer" : "an integer >= 0",
                                   describe_json(v[i])));
    }
    out.push_back(*n);
  }
  return out;
}

}  // namespace

std::vector<int64_t> JsonObject::positive_integer_array(const std::string& key) {
  return integer_array(*this, raw(key), key, 1);
}

std::vector<int64_t> JsonObject::non_negative_integer_array(const std::string& key) {
  return integer_array(*this, raw(key), key, 0);
}

std::string JsonObject::one_of(const std::string& key, const std::vector<std::string>& choices) {
  const std::string s = string(key);
  for (const auto& c : choices) {
    if (c == s) {
      return s;
    }
  }
  fail(key, fmt::format("\"{}\" is not one of: {}", s, fmt::join(choices, ", ")));
}

void JsonObject::finish() const {
  if (allow_unknown_) {
    return;
  }
  for (auto it = value_->begin(); it != value_->end(); ++it) {
    if (known_.count(it.key()) == 0) {
      throw InputError(source_, pointer_of(it.key()),
                       fmt::format("unknown field (known fields here: {})", fmt::join(known_, ", ")));
    }
  }
}

}  // namespace meshsim
