// Parsing and validating Chrome trace events, and the helpers both importers share.
#include "import_events.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "meshsim/sim/checked.h"
#include "meshsim/sim/error.h"
#include "meshsim/sim/json_input.h"

namespace meshsim::traces::detail {

namespace {

// A JSON value for an error message, without walking containers (a huge or deep array is "an
// array", not a dump of it).
std::string short_json(const nlohmann::json& v) { return describe_json(v); }

std::string id_text(const nlohmann::json& v) {
  if (v.is_string()) {
    return v.get<std::string>();
  }
  if (v.is_null()) {
    return "";
  }
  return v.dump();
}

std::optional<int64_t> id_number(const nlohmann::json& v) {
  if (v.is_number_integer()) {
    return as_int64(v);
  }
  if (v.is_number_float()) {
    const double d = v.get<double>();
    if (std::floor(d) == d && std::fabs(d) < 9e15) {
      return static_cast<int64_t>(d);
    }
    return std::nullopt;
  }
  if (v.is_string()) {
    const std::string s = v.get<std::string>();
    if (!s.empty() && s.size() < 18 &&
        std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; })) {
      return std::stoll(s);
    }
  }
  return std::nullopt;
}

struct RawEvent {
  size_t index;
  double ts_us;
  double dur_us;
};

// Checks one "X" event; returns its raw times.
RawEvent check_complete(const nlohmann::json& e, size_t i, const std::string& source,
                        const std::string& base) {
  const std::string where = fmt::format("{}/{}", base, i);
  if (!e.contains("name") || !e["name"].is_string()) {
    throw InputError(source, where + "/name",
                     "a complete event (\"ph\":\"X\") needs a name string");
  }
  for (const char* key : {"ts", "dur"}) {
    if (!e.contains(key)) {
      throw InputError(source, fmt::format("{}/{}", where, key),
                       "missing: a complete event (\"ph\":\"X\") needs a numeric ts and dur "
                       "(microseconds)");
    }
    if (!e[key].is_number()) {
      throw InputError(
          source, fmt::format("{}/{}", where, key),
          fmt::format("expected a number of microseconds, got {}", short_json(e[key])));
    }
  }
  const double dur = e["dur"].get<double>();
  if (dur < 0) {
    throw InputError(source, where + "/dur", fmt::format("negative duration {}", dur));
  }
  return {i, e["ts"].get<double>(), dur};
}

void read_metadata(const nlohmann::json& e, EventTable& table) {
  const auto name_it = e.find("name");
  if (name_it == e.end() || !name_it->is_string()) {
    return;  // a metadata event without a name string names nothing
  }
  const std::string& name = name_it->get_ref<const std::string&>();
  if (name != "process_name" && name != "thread_name") {
    return;
  }
  const auto args = e.find("args");
  if (args == e.end() || !args->is_object() || !args->contains("name") ||
      !(*args)["name"].is_string()) {
    return;  // a nameless name: nothing to learn
  }
  const std::string pid = e.contains("pid") ? id_text(e["pid"]) : "";
  const std::string value = (*args)["name"].get<std::string>();
  if (name == "process_name") {
    table.process_names[pid] = value;
  } else {
    table.thread_names[TrackKey{pid, e.contains("tid") ? id_text(e["tid"]) : ""}] = value;
  }
}

Event make_event(const nlohmann::json& e, const RawEvent& raw, double origin_us,
                 const std::string& source, const std::string& base) {
  Event ev;
  ev.index = raw.index;
  ev.name = e["name"].get<std::string>();
  if (e.contains("cat") && e["cat"].is_string()) {
    ev.cat = e["cat"].get<std::string>();
  }
  const double rel_ps = (raw.ts_us - origin_us) * 1e6;
  const double dur_ps = raw.dur_us * 1e6;
  // The end too (ts + dur), so that every end, and any difference of two times, fits in int64.
  if (!(rel_ps + dur_ps < 9.2e18)) {
    throw InputError(
        source, fmt::format("{}/{}/{}", base, raw.index, dur_ps > rel_ps ? "dur" : "ts"),
        "the event ends more than 106 days (2^63 ps) after the trace's first event");
  }
  ev.start = SimTime::from_ps(std::llround(rel_ps));
  ev.duration = Duration::from_ps(std::llround(dur_ps));
  if (e.contains("pid")) {
    ev.track.pid = id_text(e["pid"]);
    ev.pid_number = id_number(e["pid"]);
  }
  if (e.contains("tid")) {
    ev.track.tid = id_text(e["tid"]);
    ev.tid_number = id_number(e["tid"]);
  }
  const auto args = e.find("args");
  if (args != e.end() && args->is_object()) {
    ev.args = &*args;
  }
  return ev;
}

}  // namespace

std::string Event::arg_string(const char* key) const {
  if (args == nullptr) {
    return "";
  }
  const auto it = args->find(key);
  if (it == args->end()) {
    return "";
  }
  return id_text(*it);
}

std::optional<int64_t> Event::arg_int(const char* key) const {
  if (args == nullptr) {
    return std::nullopt;
  }
  const auto it = args->find(key);
  return it == args->end() ? std::nullopt : id_number(*it);
}

bool Event::has_arg(const char* key) const { return args != nullptr && args->contains(key); }

bool EventTable::has_top_level_key(const char* key) const {
  return document.is_object() && document.contains(key);
}

void fail_at_events(const EventTable& table, const std::string& message) {
  throw InputError(table.source, table.legacy_array ? "/" : "/traceEvents", message);
}

namespace {

// The event array of the document (a bare array, or the object's "traceEvents") and the JSON
// pointer prefix of its elements.
const nlohmann::json& event_list(EventTable& table, std::string& base) {
  if (table.document.is_array()) {
    table.legacy_array = true;
    base.clear();
    return table.document;
  }
  if (!table.document.is_object()) {
    throw InputError(table.source, "/",
                     "expected an object with \"traceEvents\" or an array of trace events");
  }
  const auto it = table.document.find("traceEvents");
  if (it == table.document.end()) {
    throw InputError(table.source, "/traceEvents",
                     "missing: a Chrome trace is an object with a \"traceEvents\" array (or a "
                     "bare array of events)");
  }
  if (!it->is_array()) {
    throw InputError(table.source, "/traceEvents",
                     fmt::format("expected an array of events, got {}", short_json(*it)));
  }
  base = "/traceEvents";
  return *it;
}

}  // namespace

EventTable parse_events(std::string_view text, const std::string& source, int max_depth) {
  EventTable table;
  table.source = source;
  table.document = parse_json(text, source, max_depth);
  std::string base;
  const nlohmann::json* list = &event_list(table, base);

  std::vector<RawEvent> raw;
  double origin = std::numeric_limits<double>::infinity();
  for (size_t i = 0; i < list->size(); ++i) {
    const nlohmann::json& e = (*list)[i];
    if (!e.is_object()) {
      throw InputError(source, fmt::format("{}/{}", base, i),
                       fmt::format("expected an event object, got {}", short_json(e)));
    }
    const auto ph = e.find("ph");
    if (ph == e.end() || !ph->is_string()) {
      throw InputError(source, fmt::format("{}/{}/ph", base, i),
                       "missing: every trace event needs a phase string (\"X\", \"M\", ...)");
    }
    if (*ph == "X") {
      raw.push_back(check_complete(e, i, source, base));
      origin = std::min(origin, raw.back().ts_us);
    } else if (*ph == "M") {
      read_metadata(e, table);
    }
  }
  table.events.reserve(raw.size());
  for (const RawEvent& r : raw) {
    table.events.push_back(make_event((*list)[r.index], r, origin, source, base));
  }
  std::sort(table.events.begin(), table.events.end(), [](const Event& a, const Event& b) {
    if (a.start != b.start) {
      return a.start < b.start;
    }
    if (a.duration != b.duration) {
      return a.duration > b.duration;
    }
    return a.index < b.index;
  });
  return table;
}

std::vector<std::ptrdiff_t> nest(const EventTable& table, const std::vector<bool>& member) {
  std::vector<std::ptrdiff_t> parent(table.events.size(), -1);
  std::map<TrackKey, std::vector<size_t>> stacks;
  for (size_t i = 0; i < table.events.size(); ++i) {
    if (!member[i]) {
      continue;
    }
    const Event& e = table.events[i];
    std::vector<size_t>& stack = stacks[e.track];
    while (!stack.empty()) {
      const Event& p = table.events[stack.back()];
      const bool inside = e.start < p.end() || (e.start == p.start && e.end() <= p.end());
      if (inside) {
        break;
      }
      stack.pop_back();
    }
    if (!stack.empty()) {
      parent[i] = static_cast<std::ptrdiff_t>(stack.back());
    }
    stack.push_back(i);
  }
  return parent;
}

namespace {

// Every sum a user of the trace takes of a step's times (time per class, the ops laid end to end
// on one stream) is at most its span plus its ops' durations: that must fit in int64 ps.
void check_step_sums(const EventTable& table, const std::vector<MeasuredStep>& steps) {
  for (size_t s = 0; s < steps.size(); ++s) {
    std::optional<int64_t> sum = steps[s].duration.ps();
    for (const MeasuredOp& op : steps[s].ops) {
      sum = sum ? try_add(*sum, op.duration.ps()) : std::nullopt;
    }
    for (const MeasuredGemm& g : steps[s].gemms) {
      sum = sum ? try_add(*sum, g.duration.ps()) : std::nullopt;
    }
    if (!sum) {
      fail_at_events(table, fmt::format("the ops of step {} add up to more than 2^63 ps (about "
                                        "106 days): no real step lasts that long",
                                        s));
    }
  }
}

}  // namespace

std::optional<size_t> step_at(const std::vector<StepRange>& ranges, SimTime t, Assign rule) {
  const auto after = std::upper_bound(ranges.begin(), ranges.end(), t,
                                      [](SimTime v, const StepRange& r) { return v < r.start; });
  if (after == ranges.begin()) {
    return std::nullopt;  // before the first step
  }
  const auto s = static_cast<size_t>(after - ranges.begin()) - 1;
  const bool last = s + 1 == ranges.size();
  if ((last || rule == Assign::kWithinRange) && t > ranges[s].end) {
    return std::nullopt;  // after the step's range
  }
  return s;
}

std::vector<MeasuredStep> build_steps(const EventTable& table, const std::vector<StepRange>& ranges,
                                      Collected c, Assign rule) {
  std::vector<MeasuredStep> steps(ranges.size());
  for (size_t s = 0; s < ranges.size(); ++s) {
    steps[s].start = ranges[s].start;
    steps[s].duration = ranges[s].end - ranges[s].start;
  }
  for (size_t i = 0; i < c.ops.size(); ++i) {
    if (const auto s = step_at(ranges, c.op_at[i], rule)) {
      steps[*s].ops.push_back(std::move(c.ops[i]));
    }
  }
  for (size_t i = 0; i < c.gemms.size(); ++i) {
    if (const auto s = step_at(ranges, c.gemm_at[i], rule)) {
      steps[*s].gemms.push_back(std::move(c.gemms[i]));
    }
  }
  for (MeasuredStep& step : steps) {
    std::sort(step.ops.begin(), step.ops.end(), [](const MeasuredOp& a, const MeasuredOp& b) {
      return std::tie(a.start, a.device, a.stream, a.name) <
             std::tie(b.start, b.device, b.stream, b.name);
    });
    std::stable_sort(step.gemms.begin(), step.gemms.end(),
                     [](const MeasuredGemm& a, const MeasuredGemm& b) { return a.start < b.start; });
    for (const MeasuredOp& op : step.ops) {
      step.duration = std::max(step.duration, (op.start + op.duration) - step.start);
    }
  }
  check_step_sums(table, steps);
  return steps;
}

MeasuredOp make_op(const Event& e, std::optional<OpClass> context,
                   const std::vector<std::string>& names, std::string_view framework) {
  MeasuredOp op;
  op.name = e.name;
  op.start = e.start;
  op.duration = e.duration;
  for (const std::string& n : names) {
    if (match_kernel_class(framework, n) == OpClass::kCommunication) {
      op.op_class = OpClass::kCommunication;
      return op;
    }
  }
  if (context) {
    op.op_class = *context;
    return op;
  }
  for (const std::string& n : names) {
    if (const auto c = match_kernel_class(framework, n)) {
      op.op_class = *c;
      return op;
    }
  }
  op.op_class = OpClass::kElementwise;
  op.classified = false;
  return op;
}

}  // namespace meshsim::traces::detail
