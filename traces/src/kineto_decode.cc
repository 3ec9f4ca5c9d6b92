// The pieces of a Kineto trace -> RankTrace, with simdjson: On-Demand for the events (each parsed
// once, front to back, keeping only the fields kineto.h lists), DOM for the small header values
// (fully validated).
#include "kineto_decode.h"

#include <fmt/format.h>
#include <simdjson.h>

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <limits>
#include <string>
#include <unordered_map>
#include <vector>

#include "meshsim/sim/checked.h"
#include "meshsim/sim/error.h"
#include "meshsim/sim/json_input.h"
#include "meshsim/traces/import.h"

namespace meshsim::traces::detail {

namespace od = simdjson::ondemand;

std::optional<int64_t> parse_microseconds(std::string_view t) {
  while (!t.empty() && (t.back() == ' ' || t.back() == '\n' || t.back() == '\r' || t.back() == '\t')) {
    t.remove_suffix(1);
  }
  if (t.empty()) {
    return std::nullopt;
  }
  const bool negative = t.front() == '-';
  std::string_view digits = negative ? t.substr(1) : t;
  const size_t dot = digits.find('.');
  const size_t exp = digits.find_first_of("eE");
  if (exp != std::string_view::npos) {  // rare: through a double
    double v = 0;
    const auto [ptr, ec] = std::from_chars(t.data(), t.data() + t.size(), v);
    if (ec != std::errc() || ptr != t.data() + t.size() || !std::isfinite(v) ||
        std::fabs(v) >= 9.2e15) {
      return std::nullopt;
    }
    return std::llround(v * 1e3);
  }
  const std::string_view whole = digits.substr(0, dot);
  const std::string_view frac = dot == std::string_view::npos ? "" : digits.substr(dot + 1);
  if (whole.empty() || whole.size() > 16 || (dot != std::string_view::npos && frac.empty())) {
    return std::nullopt;
  }
  int64_t us = 0;
  for (const char c : whole) {
    if (c < '0' || c > '9') {
      return std::nullopt;
    }
    us = us * 10 + (c - '0');
  }
  int64_t ns = 0;
  for (size_t i = 0; i < frac.size(); ++i) {
    const char c = frac[i];
    if (c < '0' || c > '9') {
      return std::nullopt;
    }
    if (i < 3) {
      ns = ns * 10 + (c - '0');
    } else if (i == 3 && c >= '5') {
      ns += 1;  // half away from zero, on the fourth decimal
    }
  }
  for (size_t i = frac.size(); i < 3; ++i) {
    ns *= 10;
  }
  const int64_t total = us * 1000 + ns;  // < 1e16 * 1000: fits
  return negative ? -total : total;
}

std::optional<int64_t> element_bytes(std::string_view type) {
  static const std::unordered_map<std::string_view, int64_t> kSizes = {
      {"float", 4},        {"double", 8},          {"c10::Half", 2},
      {"c10::BFloat16", 2}, {"long int", 8},       {"long", 8},
      {"int", 4},          {"short int", 2},       {"short", 2},
      {"signed char", 1},  {"unsigned char", 1},   {"bool", 1},
      {"c10::Float8_e4m3fn", 1}, {"c10::Float8_e5m2", 1}, {"c10::Float8_e4m3fnuz", 1},
      {"c10::Float8_e5m2fnuz", 1}, {"c10::complex<float>", 8}, {"c10::complex<double>", 16},
      {"c10::complex<c10::Half>", 4}};
  const auto it = kSizes.find(type);
  return it == kSizes.end() ? std::nullopt : std::optional<int64_t>(it->second);
}

namespace {

// The ranks of a list as Kineto writes it in a string ("[0, 1, 2]": digits between brackets,
// commas and spaces); nullopt for any other character or a number past int64.
std::optional<std::vector<int64_t>> rank_list(std::string_view s) {
  std::vector<int64_t> ranks;
  size_t i = 0;
  while (i < s.size()) {
    if (s[i] >= '0' && s[i] <= '9') {
      int64_t n = 0;
      const auto [ptr, ec] = std::from_chars(s.data() + i, s.data() + s.size(), n);
      if (ec != std::errc()) {
        return std::nullopt;
      }
      ranks.push_back(n);
      i = static_cast<size_t>(ptr - s.data());
    } else if (s[i] == '[' || s[i] == ']' || s[i] == ',' || s[i] == ' ') {
      ++i;
    } else {
      return std::nullopt;
    }
  }
  return ranks;
}

std::optional<Dtype> dtype_of(std::string_view type) {
  if (type == "float") {
    return Dtype::kFp32;
  }
  if (type == "c10::BFloat16") {
    return Dtype::kBf16;
  }
  if (type == "c10::Half") {
    return Dtype::kFp16;
  }
  if (type.starts_with("c10::Float8")) {
    return Dtype::kFp8;
  }
  return std::nullopt;
}

// Operators meshsim costs from their shapes: their inputs' dims are kept (kineto.h).
bool shape_costed(std::string_view name) {
  if (gemm_operator(name) != nullptr) {
    return true;
  }
  return (name.starts_with("aten::_") && name.find("attention") != std::string_view::npos) ||
         name.starts_with("flash_attn::");
}

std::optional<KinetoKind> kind_of(std::string_view cat, std::string_view name) {
  if (name.starts_with("ProfilerStep#") &&
      (cat == "user_annotation" || cat == "cpu_op" || cat == "operator")) {
    return KinetoKind::kStep;
  }
  if (cat == "kernel" || cat == "Kernel") {
    return KinetoKind::kKernel;
  }
  if (cat == "gpu_memcpy" || cat == "Memcpy") {
    return KinetoKind::kMemcpy;
  }
  if (cat == "gpu_memset" || cat == "Memset") {
    return KinetoKind::kMemset;
  }
  if (cat == "cuda_runtime" || cat == "cuda_driver" || cat == "Runtime") {
    return KinetoKind::kRuntime;
  }
  if (cat == "cpu_op" || cat == "operator" || cat == "Operator") {
    return KinetoKind::kCpuOp;
  }
  if (cat == "user_annotation") {
    return KinetoKind::kAnnotation;
  }
  return std::nullopt;
}

}  // namespace

// Not file-local: KinetoDecoder::Impl holds one (a member of a file-local type trips GCC's
// -Wsubobject-linkage when the file is compiled in a unity batch).
constexpr size_t kKeptDims = kShapeInputs;  // inputs whose dims a shape-costed op keeps

// What an event's args say, reused from event to event.
struct Args {
  std::optional<int64_t> external_id, correlation, device, stream, bytes;
  bool has_dims = false;
  std::vector<std::optional<int64_t>> elements;  // per input: elements of a tensor, or none
  std::vector<std::vector<int64_t>> dims;        // the first kKeptDims inputs
  std::vector<std::string> types;
  bool has_collective = false;
  KinetoCollective collective;

  void clear() {
    external_id = correlation = device = stream = bytes = std::nullopt;
    has_dims = false;
    elements.clear();
    dims.clear();
    types.clear();
    has_collective = false;
    collective = KinetoCollective{};
  }
};

struct KinetoDecoder::Impl {
  RankTrace& out;
  KinetoLimits limits;
  od::parser parser;
  simdjson::dom::parser dom;
  // Looked up by string_view (no copy of a kernel's long name per event), never iterated.
  struct NameHash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  std::unordered_map<std::string, uint32_t, NameHash, std::equal_to<>> name_index;
  std::unordered_map<std::string, bool, NameHash, std::equal_to<>> annotation_class;
  std::unordered_map<std::string, int64_t> string_tids;
  int64_t name_bytes = 0;
  Args args;
  std::string base;  // "/traceEvents" or ""
  int64_t index = 0;

  Impl(RankTrace& o, const KinetoLimits& l) : out(o), limits(l) {}

  std::string where(std::string_view field) const {
    return fmt::format("{}/{}{}{}", base, index, field.empty() ? "" : "/", field);
  }
  [[noreturn]] void fail(std::string_view field, const std::string& message) const {
    throw InputError(out.source, where(field), message);
  }
  [[noreturn]] void fail_json(simdjson::error_code e) const {
    fail("", fmt::format("not valid JSON: {}", simdjson::error_message(e)));
  }

  uint32_t intern(std::string_view name);
  bool annotation_classed(std::string_view name);
  int64_t thread_id(od::value v, std::string_view field);
  std::optional<int64_t> integer(od::value v, std::string_view field, bool required_integral);
  std::optional<int64_t> loose_integer(od::value v, std::string_view field);
  std::string string(od::value v, std::string_view field);
  std::string_view view(od::value v, std::string_view field);
  void read_dims(od::value v);
  void read_types(od::value v);
  std::vector<int64_t> read_ranks(od::value v, std::string_view field);
  void read_args(od::value v);
  void decode(std::string_view text);
  void keep(const KinetoEvent& e, std::string_view name_text);
  uint32_t add_inputs(std::string_view name);
};

// Whether a class rule (import.h) matches the annotation's name: only those give their ops a
// class (rank_steps.h); cached per distinct name.
bool KinetoDecoder::Impl::annotation_classed(std::string_view name) {
  const auto it = annotation_class.find(name);
  if (it != annotation_class.end()) {
    return it->second;
  }
  const bool classed = match_kernel_class("pytorch", name).has_value();
  if (annotation_class.size() < 65536) {  // names like "ProfilerStep#N" are not cached forever
    annotation_class.emplace(std::string(name), classed);
  }
  return classed;
}

uint32_t KinetoDecoder::Impl::intern(std::string_view name) {
  const auto it = name_index.find(name);
  if (it != name_index.end()) {
    return it->second;
  }
  name_bytes += static_cast<int64_t>(name.size());
  if (name_bytes > limits.max_name_bytes) {
    throw InputSizeError(out.source, where("name"),
                         fmt::format("the distinct event names add up to more than the {} limit",
                                     describe_limit(limits.max_name_bytes)));
  }
  const auto id = static_cast<uint32_t>(out.names.size());
  out.names.emplace_back(name);
  name_index.emplace(std::string(name), id);
  return id;
}

std::optional<int64_t> KinetoDecoder::Impl::integer(od::value v, std::string_view field,
                                                    bool required_integral) {
  od::number n;
  if (v.get_number().get(n) != simdjson::SUCCESS) {
    fail(field, "expected a number");
  }
  if (n.is_int64()) {
    return n.get_int64();
  }
  if (n.is_double()) {
    const double d = n.get_double();
    if (std::floor(d) == d && std::fabs(d) < 9.2e18) {
      return static_cast<int64_t>(d);
    }
    if (!required_integral) {
      return std::nullopt;
    }
  }
  fail(field, "expected an integer within 64 bits");
}

// A number, or a string of one in decimal or hex (ROCm's runtime calls write "stream": "0x0").
std::optional<int64_t> KinetoDecoder::Impl::loose_integer(od::value v, std::string_view field) {
  od::json_type t;
  if (v.type().get(t) != simdjson::SUCCESS) {
    fail(field, "not valid JSON");
  }
  if (t != od::json_type::string) {
    return integer(v, field, false);
  }
  const std::string s = string(v, field);
  const bool hex = s.starts_with("0x") || s.starts_with("0X");
  const std::string_view digits = std::string_view(s).substr(hex ? 2 : 0);
  uint64_t n = 0;
  const auto [ptr, ec] =
      std::from_chars(digits.data(), digits.data() + digits.size(), n, hex ? 16 : 10);
  if (digits.empty() || ec != std::errc() || ptr != digits.data() + digits.size()) {
    fail(field, fmt::format("expected an integer, got \"{}\"", s.substr(0, 40)));
  }
  return static_cast<int64_t>(n & 0x7fffffffffffffffULL);
}

std::string_view KinetoDecoder::Impl::view(od::value v, std::string_view field) {
  std::string_view s;
  if (v.get_string().get(s) != simdjson::SUCCESS) {
    fail(field, "expected a string");
  }
  return s;
}

std::string KinetoDecoder::Impl::string(od::value v, std::string_view field) {
  std::string_view s;
  if (v.get_string().get(s) != simdjson::SUCCESS) {
    fail(field, "expected a string");
  }
  return std::string(s);
}

int64_t KinetoDecoder::Impl::thread_id(od::value v, std::string_view field) {
  od::json_type t;
  if (v.type().get(t) != simdjson::SUCCESS) {
    fail(field, "not valid JSON");
  }
  if (t == od::json_type::number) {
    const auto n = integer(v, field, false);
    if (n && *n >= 0 && *n <= INT32_MAX) {
      return *n;
    }
    // Outside 32 bits (a pthread id): a negative id of its own, like a named track.
    const std::string key = n ? std::to_string(*n) : std::string(v.raw_json_token());
    const auto [it, added] =
        string_tids.try_emplace(key, -static_cast<int64_t>(string_tids.size()) - 1);
    return it->second;
  }
  if (t == od::json_type::string) {
    // A named track ("stream 7", "PyTorch Profiler"): numbered below zero, in order of first use.
    const std::string s = string(v, field);
    const auto [it, added] =
        string_tids.try_emplace(s, -static_cast<int64_t>(string_tids.size()) - 1);
    return it->second;
  }
  fail(field, "expected a number or a string");
}

void KinetoDecoder::Impl::read_dims(od::value v) {
  od::array inputs;
  if (v.get_array().get(inputs) != simdjson::SUCCESS) {
    fail("args/Input Dims", "expected an array of dimension lists");
  }
  args.has_dims = true;
  for (auto input_result : inputs) {
    od::value input;
    od::array dims;
    if (std::move(input_result).get(input) != simdjson::SUCCESS || input.get_array().get(dims)) {
      fail("args/Input Dims", "expected an array of dimension lists");
    }
    std::vector<int64_t> shape;
    bool tensor = true;
    for (auto d_result : dims) {
      od::value d;
      od::json_type t;
      if (std::move(d_result).get(d) != simdjson::SUCCESS || d.type().get(t) != simdjson::SUCCESS) {
        fail("args/Input Dims", "not valid JSON");
      }
      if (t != od::json_type::number) {  // a tensor list ([[...], [...]]): no single shape
        tensor = false;
        continue;
      }
      const auto n = integer(d, "args/Input Dims", true);
      if (*n < 0) {
        fail("args/Input Dims", fmt::format("a negative dimension {}", *n));
      }
      shape.push_back(*n);
    }
    std::optional<int64_t> elements;
    if (tensor && !shape.empty()) {
      elements = 1;
      for (const int64_t d : shape) {
        elements = try_mul(*elements, d);
        if (!elements) {
          fail("args/Input Dims", "a tensor of more than 2^63 elements");
        }
      }
    }
    args.elements.push_back(elements);
    if (args.dims.size() < kKeptDims) {
      args.dims.push_back(tensor ? std::move(shape) : std::vector<int64_t>{});
    }
  }
}

void KinetoDecoder::Impl::read_types(od::value v) {
  od::array types;
  if (v.get_array().get(types) != simdjson::SUCCESS) {
    fail("args/Input type", "expected an array of strings");
  }
  for (auto t_result : types) {
    od::value t;
    std::string_view s;
    if (std::move(t_result).get(t) != simdjson::SUCCESS || t.get_string().get(s) != simdjson::SUCCESS) {
      fail("args/Input type", "expected an array of strings");
    }
    args.types.emplace_back(s);
  }
}

// "[0, 1, 2]" (a string, as Kineto writes it) or [0, 1, 2].
std::vector<int64_t> KinetoDecoder::Impl::read_ranks(od::value v, std::string_view field) {
  std::vector<int64_t> ranks;
  od::json_type t;
  if (v.type().get(t) != simdjson::SUCCESS) {
    fail(field, "not valid JSON");
  }
  if (t == od::json_type::array) {
    od::array a = v.get_array();
    for (auto r_result : a) {
      od::value r;
      if (std::move(r_result).get(r) != simdjson::SUCCESS) {
        fail(field, "not valid JSON");
      }
      ranks.push_back(*integer(r, field, true));
    }
    return ranks;
  }
  const std::string s = string(v, field);
  std::optional<std::vector<int64_t>> listed = rank_list(s);
  if (!listed) {
    fail(field, fmt::format("expected a list of ranks, got \"{}\"", s.substr(0, 80)));
  }
  return std::move(*listed);
}

void KinetoDecoder::Impl::read_args(od::value v) {
  od::object obj;
  if (v.get_object().get(obj) != simdjson::SUCCESS) {
    fail("args", "expected an object");
  }
  KinetoCollective& c = args.collective;
  for (auto field_result : obj) {
    od::field field;
    std::string_view key;
    if (std::move(field_result).get(field) != simdjson::SUCCESS ||
        field.unescaped_key().get(key) != simdjson::SUCCESS) {
      fail("args", "not valid JSON");
    }
    const std::string at = fmt::format("args/{}", key);
    od::value value = field.value();
    if (key == "External id") {
      args.external_id = integer(value, at, false);
    } else if (key == "correlation") {
      args.correlation = integer(value, at, false);
    } else if (key == "device") {
      args.device = loose_integer(value, at);
    } else if (key == "stream") {
      args.stream = loose_integer(value, at);
    } else if (key == "bytes") {
      args.bytes = integer(value, at, false);
    } else if (key == "Input Dims") {
      read_dims(value);
    } else if (key == "Input type") {
      read_types(value);
    } else if (key == "Collective name") {
      args.has_collective = true;
      c.name = string(value, at);
    } else if (key == "In msg nelems") {
      c.in_nelems = integer(value, at, true).value_or(-1);
    } else if (key == "Out msg nelems") {
      c.out_nelems = integer(value, at, true).value_or(-1);
    } else if (key == "Group size") {
      c.group_size = integer(value, at, true).value_or(-1);
    } else if (key == "dtype") {
      c.dtype = string(value, at);
    } else if (key == "Process Group Name") {
      c.group_name = string(value, at);
    } else if (key == "Process Group Ranks") {
      c.group_ranks = read_ranks(value, at);
    } else if (key == "Src Rank") {
      c.src_rank = integer(value, at, true);
    } else if (key == "Dst Rank") {
      c.dst_rank = integer(value, at, true);
    }
  }
}

uint32_t KinetoDecoder::Impl::add_inputs(std::string_view name) {
  KinetoInputs in;
  const bool keep_dims = shape_costed(name);
  for (size_t i = 0; i < args.elements.size(); ++i) {
    const std::string_view type = i < args.types.size() ? std::string_view(args.types[i]) : "";
    const auto size = element_bytes(type);
    if (i == 0 || !in.dtype) {
      if (args.elements[i] && size) {
        in.dtype = in.dtype ? in.dtype : dtype_of(type);
      }
    }
    if (!args.elements[i] || !size) {
      continue;
    }
    const auto bytes = try_mul(*args.elements[i], *size);
    const auto sum = bytes ? try_add(in.tensor_bytes, *bytes) : std::nullopt;
    if (!sum) {
      fail("args/Input Dims", "the inputs hold more than 2^63 bytes");
    }
    in.tensor_bytes = *sum;
    in.largest_tensor_bytes = std::max(in.largest_tensor_bytes, *bytes);
    ++in.tensors;
  }
  if (keep_dims) {
    KinetoShape shape;
    for (size_t i = 0; i < args.dims.size() && i < kShapeInputs; ++i) {
      if (args.dims[i].size() <= kShapeRank) {
        shape.rank[i] = static_cast<uint8_t>(args.dims[i].size());
        std::copy(args.dims[i].begin(), args.dims[i].end(), shape.dims[i].begin());
      }
    }
    out.shapes.push_back(shape);
    in.shape = static_cast<uint32_t>(out.shapes.size() - 1);
  }
  out.inputs.push_back(std::move(in));
  return static_cast<uint32_t>(out.inputs.size() - 1);
}

void KinetoDecoder::Impl::keep(const KinetoEvent& e, std::string_view name_text) {
  if (static_cast<int64_t>(out.events.size()) >= limits.max_kept_events) {
    throw InputSizeError(out.source, where(""),
                         fmt::format("more than the limit of {} kept events (kernels, copies, "
                                     "runtime calls, operators, annotations)",
                                     limits.max_kept_events));
  }
  KinetoEvent k = e;
  k.name = intern(name_text);
  out.events.push_back(k);
}

void KinetoDecoder::Impl::decode(std::string_view text) {
  od::document doc;
  if (auto err = parser.iterate(text.data(), text.size(), text.size() + 64).get(doc)) {
    fail_json(err);
  }
  od::object obj;
  if (auto err = doc.get_object().get(obj)) {
    fail_json(err);
  }
  // Views into the parser's string buffer, valid until the next event is parsed.
  std::optional<std::string_view> ph;
  std::optional<std::string_view> cat;
  std::optional<std::string_view> name;
  std::optional<int64_t> ts;
  std::optional<int64_t> dur;
  bool ts_seen = false;
  bool dur_seen = false;
  int64_t pid = -1;
  int64_t tid = 0;
  args.clear();
  for (auto field_result : obj) {
    od::field field;
    std::string_view key;
    if (auto err = std::move(field_result).get(field)) {
      fail_json(err);
    }
    if (auto err = field.unescaped_key().get(key)) {
      fail_json(err);
    }
    od::value value = field.value();
    if (key == "ph") {
      ph = view(value, "ph");
    } else if (key == "cat") {
      cat = view(value, "cat");
    } else if (key == "name") {
      name = view(value, "name");
    } else if (key == "ts" || key == "dur") {
      od::json_type t;
      if (value.type().get(t) != simdjson::SUCCESS) {
        fail_json(simdjson::TAPE_ERROR);
      }
      std::optional<int64_t> ns;
      if (t == od::json_type::number) {
        ns = parse_microseconds(value.raw_json_token());
        if (!ns) {
          fail(key, fmt::format("{} microseconds: out of range (more than 2^63 ns) or not a "
                                "number",
                                value.raw_json_token()));
        }
      }
      (key == "ts" ? ts : dur) = ns;
      (key == "ts" ? ts_seen : dur_seen) = true;
    } else if (key == "pid") {
      pid = thread_id(value, "pid");
    } else if (key == "tid") {
      tid = thread_id(value, "tid");
    } else if (key == "args") {
      if (!cat || kind_of(*cat, name.value_or("")).has_value() || !name) {
        read_args(value);
      }
    }
  }
  ++out.events_seen;
  if (!ph) {
    fail("ph", "missing: every trace event needs a phase string (\"X\", \"M\", ...)");
  }
  const std::optional<KinetoKind> kind =
      *ph == "X" && cat ? kind_of(*cat, name.value_or("")) : std::nullopt;
  if (!kind || (*kind == KinetoKind::kAnnotation && !annotation_classed(*name))) {
    ++out.events_skipped;  // an annotation no class rule matches tells the analysis nothing
    return;
  }
  if (!name) {
    fail("name", "a complete event (\"ph\":\"X\") needs a name string");
  }
  for (const auto& [field, value, seen] :
       {std::tuple{"ts", ts, ts_seen}, std::tuple{"dur", dur, dur_seen}}) {
    if (!value) {
      fail(field, seen ? "expected a number of microseconds"
                       : "missing: a complete event (\"ph\":\"X\") needs a numeric ts and dur "
                         "(microseconds)");
    }
  }
  if (*dur < 0) {
    fail("dur", fmt::format("negative duration {} ns", *dur));
  }
  if (!try_add(*ts, *dur)) {
    fail("dur", "the event ends past 2^63 ns");
  }
  KinetoEvent e;
  e.kind = *kind;
  e.ts_ns = *ts;
  e.dur_ns = *dur;
  e.tid = static_cast<int32_t>(tid);  // thread_id keeps it within 32 bits
  e.correlation = args.correlation.value_or(-1);
  e.external_id = args.external_id.value_or(-1);
  switch (*kind) {
    case KinetoKind::kKernel:
    case KinetoKind::kMemcpy:
    case KinetoKind::kMemset: {
      const int64_t device = args.device.value_or(pid);
      if (device > INT16_MAX) {
        fail("args/device", fmt::format("device {}: expected a GPU ordinal below 32768", device));
      }
      e.device = static_cast<int16_t>(std::max<int64_t>(device, -1));
      const int64_t stream = args.stream.value_or(tid);
      e.tid = static_cast<int32_t>(std::clamp<int64_t>(stream, INT32_MIN, INT32_MAX));
      if (*kind != KinetoKind::kKernel && args.bytes) {
        out.copy_bytes.push_back(std::max<int64_t>(*args.bytes, 0));
        e.extra = static_cast<uint32_t>(out.copy_bytes.size() - 1);
      }
      if (*kind == KinetoKind::kKernel && args.has_collective) {
        out.collectives.push_back(std::move(args.collective));
        e.extra = static_cast<uint32_t>(out.collectives.size() - 1);
      }
      break;
    }
    case KinetoKind::kCpuOp:
      if (args.has_dims) {
        e.extra = add_inputs(*name);
      }
      if (args.has_collective && args.external_id) {
        out.collectives.push_back(std::move(args.collective));
        out.op_collectives.emplace(*args.external_id,
                                   static_cast<uint32_t>(out.collectives.size() - 1));
      }
      break;
    default:
      break;
  }
  keep(e, *name);
}

namespace {

namespace dom = simdjson::dom;

// The header's readers: `at` is the JSON pointer of `v`.
struct HeaderReader {
  const std::string& source;

  [[noreturn]] void fail(const std::string& at, const std::string& message) const {
    throw InputError(source, at, message);
  }
  int64_t integer(dom::element v, const std::string& at) const {
    int64_t n = 0;
    if (v.get_int64().get(n) == simdjson::SUCCESS) {
      return n;
    }
    double d = 0;
    if (v.get_double().get(d) == simdjson::SUCCESS && std::floor(d) == d && std::fabs(d) < 9e18) {
      return static_cast<int64_t>(d);
    }
    fail(at, "expected an integer within 64 bits");
  }
  std::string string(dom::element v, const std::string& at) const {
    std::string_view s;
    if (v.get_string().get(s) != simdjson::SUCCESS) {
      fail(at, "expected a string");
    }
    return std::string(s);
  }
  // A list of ranks: an array of integers, or a string "[0, 1]".
  std::vector<int64_t> ranks(dom::element v, const std::string& at) const {
    std::vector<int64_t> out;
    dom::array a;
    if (v.get_array().get(a) == simdjson::SUCCESS) {
      size_t i = 0;
      for (dom::element r : a) {
        out.push_back(integer(r, fmt::format("{}/{}", at, i++)));
      }
      return out;
    }
    const std::string s = string(v, at);
    std::optional<std::vector<int64_t>> listed = rank_list(s);
    if (!listed) {
      fail(at, fmt::format("expected a list of ranks, got \"{}\"", s.substr(0, 80)));
    }
    return std::move(*listed);
  }

  KinetoProcessGroup group(dom::element v, const std::string& at) const {
    dom::object o;
    if (v.get_object().get(o) != simdjson::SUCCESS) {
      fail(at, "expected a process group object (pg_name, pg_desc, pg_size, ranks)");
    }
    KinetoProcessGroup g;
    for (auto [key, value] : o) {
      const std::string field = fmt::format("{}/{}", at, key);
      if (key == "pg_name") {
        g.name = string(value, field);
      } else if (key == "pg_desc") {
        g.description = string(value, field);
      } else if (key == "ranks") {
        g.ranks = ranks(value, field);
      }
    }
    return g;
  }

  void distributed(dom::element v, RankTrace& out) const {
    dom::object o;
    if (v.get_object().get(o) != simdjson::SUCCESS) {
      fail("/distributedInfo", "expected an object");
    }
    for (auto [key, value] : o) {
      const std::string at = fmt::format("/distributedInfo/{}", key);
      if (key == "rank") {
        out.rank = integer(value, at);
      } else if (key == "world_size") {
        out.world_size = integer(value, at);
      } else if (key == "backend") {
        out.backend = string(value, at);
      } else if (key == "nccl_version") {
        out.nccl_version = string(value, at);
      } else if (key == "pg_config") {
        dom::array a;
        dom::object m;
        if (value.get_array().get(a) == simdjson::SUCCESS) {
          size_t i = 0;
          for (dom::element g : a) {
            out.groups.push_back(group(g, fmt::format("{}/{}", at, i++)));
          }
        } else if (value.get_object().get(m) == simdjson::SUCCESS) {  // older: keyed by name
          for (auto [name, g] : m) {
            out.groups.push_back(group(g, fmt::format("{}/{}", at, name)));
            if (out.groups.back().name.empty()) {
              out.groups.back().name = std::string(name);
            }
          }
        } else {
          fail(at, "expected an array of process groups");
        }
      }
    }
    if (out.rank && out.world_size && (*out.rank < 0 || *out.rank >= *out.world_size)) {
      fail("/distributedInfo/rank", fmt::format("rank {} is outside the world of {} ranks",
                                               *out.rank, *out.world_size));
    }
  }

  void devices(dom::element v, RankTrace& out) const {
    dom::array a;
    if (v.get_array().get(a) != simdjson::SUCCESS) {
      fail("/deviceProperties", "expected an array of devices");
    }
    size_t i = 0;
    for (dom::element d : a) {
      const std::string at = fmt::format("/deviceProperties/{}", i++);
      dom::object o;
      if (d.get_object().get(o) != simdjson::SUCCESS) {
        fail(at, "expected a device object");
      }
      KinetoDevice dev;
      for (auto [key, value] : o) {
        const std::string field = fmt::format("{}/{}", at, key);
        if (key == "id") {
          dev.id = integer(value, field);
        } else if (key == "name") {
          dev.name = string(value, field);
        } else if (key == "totalGlobalMem") {
          dev.memory_bytes = integer(value, field);
        } else if (key == "numSms") {
          dev.sms = integer(value, field);
        }
      }
      out.devices.push_back(std::move(dev));
    }
  }
};

}  // namespace

void KinetoDecoder::header(const std::string& key, std::string_view text, int64_t offset) {
  dom::element v;
  if (auto err = impl_->dom.parse(text.data(), text.size(), false).get(v)) {
    throw InputError(impl_->out.source, fmt::format("byte {}", offset),
                     fmt::format("the value of \"{}\" is not valid JSON: {}", key,
                                 simdjson::error_message(err)));
  }
  const HeaderReader r{impl_->out.source};
  if (key == "distributedInfo") {
    r.distributed(v, impl_->out);
  } else if (key == "deviceProperties") {
    r.devices(v, impl_->out);
  } else if (key == "record_shapes") {
    bool b = false;
    int64_t n = 0;
    impl_->out.record_shapes = (v.get_bool().get(b) == simdjson::SUCCESS && b) ||
                               (v.get_int64().get(n) == simdjson::SUCCESS && n != 0);
  }
}

KinetoDecoder::KinetoDecoder(RankTrace& out, const KinetoLimits& limits)
    : impl_(std::make_unique<Impl>(out, limits)) {}

KinetoDecoder::~KinetoDecoder() = default;

void KinetoDecoder::event(std::string_view text, int64_t index, int64_t /*offset*/, bool legacy) {
  impl_->base = legacy ? "" : "/traceEvents";
  impl_->index = index;
  impl_->decode(text);
}

}  // namespace meshsim::traces::detail
