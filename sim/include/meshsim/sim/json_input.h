// Strict reading of JSON input (models, clusters, scenarios, catalogues).
//
// Every loader reads through `JsonObject`, which remembers the source (file name or "--flag") and
// the JSON pointer of the value, so that every error names file, field and what was expected:
//   llama.json: /num_layers: expected a positive integer, got -3
// Unknown keys are errors (`finish()`), unless the reader was told to ignore them (`allow_unknown`,
// used for Hugging Face config.json files, which carry many keys that do not affect performance).
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "meshsim/sim/enum_names.h"
#include "meshsim/sim/units.h"

namespace meshsim {

// Bounds on one JSON input, checked before anything walks the document, so that no file, however
// large, endless (/dev/zero) or deep, makes meshsim read without end or recurse off its stack.
struct JsonLimits {
  // 64 MiB. meshsim's JSON inputs are kilobytes (the largest, topology/chips.json, ~25 KB); a
  // cluster's explicit graph of 10^5 links is ~10 MB. The parsed document takes up to 35 times
  // its text ([{},{},...]): at most ~2.3 GiB.
  int64_t max_bytes = int64_t{64} << 20;
  // Nesting levels. meshsim's schemas nest at most 6 levels, profiler traces about 10; code that
  // walks a document (copies, dumps, error messages) recurses once per level.
  int max_depth = 128;
};

// Reads a whole file of at most `max_bytes` bytes (a regular file, a pipe or a device, read in
// chunks; never more than the limit). InputError(path, "", ...) when it cannot be opened, is a
// directory or fails to read; InputSizeError when it is larger: "larger than the 64 MiB limit on
// <what>".
std::string read_input_file(const std::string& path, int64_t max_bytes, std::string_view what);

// Parses JSON text. InputError(source, "byte N", ...) on a syntax error, on nesting deeper than
// `max_depth` and on a number a double cannot hold (1e400); the text's length is the caller's to
// bound.
nlohmann::json parse_json(std::string_view text, const std::string& source,
                          int max_depth = JsonLimits{}.max_depth);

// Reads (read_input_file, limits.max_bytes) and parses (parse_json) a JSON file.
nlohmann::json load_json_file(const std::string& path, const JsonLimits& limits = {});

// "64 MiB", "1.5 GiB", "512 B": a limit in bytes, for the messages that state it.
std::string describe_limit(int64_t bytes);

class JsonObject {
 public:
  // Throws InputError unless `value` is an object.
  JsonObject(const nlohmann::json& value, std::string source, std::string pointer = "");

  const std::string& source() const { return source_; }
  const std::string& pointer() const { return pointer_; }
  std::string pointer_of(const std::string& key) const;
  bool has(const std::string& key) const;
  void allow_unknown() { allow_unknown_ = true; }

  // Required fields. Each marks the key as known.
  std::string string(const std::string& key);
  bool boolean(const std::string& key);
  double number(const std::string& key);
  double positive_number(const std::string& key);
  double fraction(const std::string& key);  // in (0, 1]
  int64_t integer(const std::string& key);
  int64_t positive_integer(const std::string& key);
  int64_t non_negative_integer(const std::string& key);
  // Sizes and rates: a unit string ("80GiB", "400Gbps") or a plain number in base units.
  Bytes bytes(const std::string& key);
  BytesPerSec bandwidth(const std::string& key);
  Duration duration(const std::string& key);
  FlopsPerSec flops_rate(const std::string& key);
  JsonObject object(const std::string& key);
  std::vector<JsonObject> object_array(const std::string& key);
  // The length of object_array(key), which fails as it does when the member is missing or not an
  // array, without reading an entry: a bound on the length is then checked before the entries are.
  size_t object_array_length(const std::string& key);
  std::vector<int64_t> positive_integer_array(const std::string& key);
  std::vector<int64_t> non_negative_integer_array(const std::string& key);
  // One of a closed set of strings.
  std::string one_of(const std::string& key, const std::vector<std::string>& choices);
  // A named enum (sim/enum_names.h): its canonical names or aliases; anything else fails, listing
  // the canonical names.
  template <NamedEnum E>
  E choice(const std::string& key) {
    const std::string s = string(key);
    if (const std::optional<E> v = parse_enum<E>(s)) {
      return *v;
    }
    fail(key, "\"" + s + "\" is not one of: " + describe_choices<E>());
  }

  // The raw value (marks the key as known).
  const nlohmann::json& raw(const std::string& key);
  // Marks keys as known without reading them.
  void ignore(const std::string& key) { known_.insert(key); }

  // Throws InputError naming the first key that no getter asked for.
  void finish() const;

  [[noreturn]] void fail(const std::string& key, const std::string& message) const;

 private:
  const nlohmann::json& get(const std::string& key);

  const nlohmann::json* value_;
  std::string source_;
  std::string pointer_;
  std::set<std::string> known_;
  bool allow_unknown_ = false;
};

// Optional reads: `opt(obj, key, &JsonObject::positive_integer)` gives std::nullopt when absent.
template <typename T>
std::optional<T> opt(JsonObject& obj, const std::string& key, T (JsonObject::*getter)(const std::string&)) {
  if (!obj.has(key)) {
    obj.ignore(key);
    return std::nullopt;
  }
  return (obj.*getter)(key);
}

// An integer JSON value as int64, or nullopt: not an integer, or one past int64 (nlohmann keeps
// those as uint64, and get<int64_t> would wrap them to negative numbers).
std::optional<int64_t> as_int64(const nlohmann::json& v);

// Describes a JSON value for error messages: `-3`, `"abc"`, `an object`.
std::string describe_json(const nlohmann::json& v);

}  // namespace meshsim
