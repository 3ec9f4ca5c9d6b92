// Private to the trace importers: the validated event list both framework importers work on, and
// the helpers they share (nesting of host events, assigning ops to steps).
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "meshsim/traces/import.h"

namespace meshsim::traces::detail {

// A track: the event's pid and tid as written (numbers or strings), rendered to text.
struct TrackKey {
  std::string pid;
  std::string tid;
  auto operator<=>(const TrackKey&) const = default;
};

// One complete ("X") event. Times are picoseconds relative to the trace origin.
struct Event {
  size_t index = 0;  // position in traceEvents (for error locations)
  std::string name;
  std::string cat;
  SimTime start;
  Duration duration;
  TrackKey track;
  std::optional<int64_t> pid_number;  // pid when it is an integer (or a string of digits)
  std::optional<int64_t> tid_number;
  const nlohmann::json* args = nullptr;  // the "args" object, or nullptr

  SimTime end() const { return start + duration; }
  // args[key] as a string (numbers rendered), or "" when absent.
  std::string arg_string(const char* key) const;
  std::optional<int64_t> arg_int(const char* key) const;
  bool has_arg(const char* key) const;
};

// The parsed trace: complete events sorted by (start, longer first, index), and the names that
// "M" events give processes and threads.
struct EventTable {
  std::string source;
  nlohmann::json document;    // owns what Event::args points into
  bool legacy_array = false;  // the document is a bare array (legacy PyTorch)
  std::vector<Event> events;
  std::map<std::string, std::string> process_names;  // pid -> name
  std::map<TrackKey, std::string> thread_names;      // (pid, tid) -> name
  bool has_top_level_key(const char* key) const;
};

// Parses JSON text into an EventTable, validating every event (see import.h for the errors);
// nesting deeper than `max_depth` is refused before the parser runs.
EventTable parse_events(std::string_view text, const std::string& source, int max_depth);

// For each event (by position in `table.events`), the position of its innermost enclosing event
// on the same track, among the events for which `member` is true (others are neither parents nor
// children: -1 for them). An event is inside another when it starts in [parent.start,
// parent.end), or starts at the same time and ends no later: an end that overhangs its parent's
// (rounding of whole-microsecond timestamps) does not make a child top-level.
std::vector<std::ptrdiff_t> nest(const EventTable& table, const std::vector<bool>& member);

// A step range before ops are attached.
struct StepRange {
  SimTime start;
  SimTime end;
};

// How an op's time picks its step.
enum class Assign {
  kUntilNextStep,  // device work: [start_i, start_{i+1}), the last step up to its range's end
  kWithinRange,    // host operators: [start_i, end_i] only (work between steps is no step's)
};

// What an importer found, each item with the time that picks its step (its start, or for
// PyTorch kernels the launch time).
struct Collected {
  std::vector<MeasuredOp> ops;
  std::vector<SimTime> op_at;
  std::vector<MeasuredGemm> gemms;
  std::vector<SimTime> gemm_at;
  void add(MeasuredOp op, SimTime at) {
    ops.push_back(std::move(op));
    op_at.push_back(at);
  }
  void add(MeasuredGemm gemm, SimTime at) {
    gemms.push_back(std::move(gemm));
    gemm_at.push_back(at);
  }
};

// Sorts and attaches the ops and GEMMs to `ranges` by their times, drops those outside every
// step, and sets each step's duration (from the ops). A step whose span plus its ops' summed
// durations passes int64 picoseconds is an InputError (at the events of `table`): every sum the
// importer's users take of a step's times then fits.
std::vector<MeasuredStep> build_steps(const EventTable& table, const std::vector<StepRange>& ranges,
                                      Collected c, Assign rule);

// The step whose range `t` picks under `rule`, or none.
std::optional<size_t> step_at(const std::vector<StepRange>& ranges, SimTime t, Assign rule);

// Rule 1 and 2 of import.h: communication by name beats the context class; then the context;
// then the name rules. `names` are tried in order for the name rules.
MeasuredOp make_op(const Event& e, std::optional<OpClass> context,
                   const std::vector<std::string>& names, std::string_view framework);

MeasuredTrace import_pytorch(const EventTable& table);
MeasuredTrace import_jax(const EventTable& table);

[[noreturn]] void fail_at_events(const EventTable& table, const std::string& message);

}  // namespace meshsim::traces::detail
