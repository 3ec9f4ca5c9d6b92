// The seam between the format-independent trace model (TraceBuilder) and a file format
// (PerfettoSink, ChromeJsonSink). A sink renders what it is given, in the order given; all the
// policy (which ranks, which tracks, flow roles, ordering) lives in TraceBuilder.
//
// Call order contract (TraceBuilder guarantees it):
//   begin, then any mix of add_* / write_*, then end, each exactly once for begin and end;
//   a track is added before its first event and added once; a thread track's process is added
//   before the thread; per track, events come in non-decreasing time (slices never overlap).
#pragma once

#include <cstdint>
#include <memory>
#include <ostream>
#include <span>
#include <string>
#include <utility>

#include "meshsim/traces/trace_content.h"

namespace meshsim::traces {

using MetadataList = std::span<const std::pair<std::string, std::string>>;

struct ProcessTrack {
  uint64_t uuid = 0;
  int32_t pid = 0;
  int32_t sort_rank = 0;
  std::string name;
};

struct ThreadTrack {
  uint64_t uuid = 0;
  uint64_t process_uuid = 0;
  int32_t pid = 0;
  int32_t tid = 0;
  int32_t sort_rank = 0;
  std::string name;
};

enum class CounterUnit : uint8_t { kNone, kBytes };

struct CounterTrack {
  uint64_t uuid = 0;
  uint64_t process_uuid = 0;
  int32_t pid = 0;
  std::string name;
  CounterUnit unit = CounterUnit::kNone;
};

// A counter value: integral (exact bytes) or not.
struct CounterSample {
  SimTime time;
  bool integral = false;
  int64_t int_value = 0;
  double double_value = 0.0;
};

class TraceSink {
 public:
  virtual ~TraceSink() = default;
  virtual void begin() = 0;
  virtual void add_process(const ProcessTrack& track) = 0;
  virtual void add_thread(const ThreadTrack& track) = 0;
  virtual void add_counter(const CounterTrack& track) = 0;
  // The scenario: an instant named "scenario" at t = 0 on `track` with the pairs as string args.
  virtual void write_metadata(const ProcessTrack& track, MetadataList metadata) = 0;
  virtual void write_slice(const ThreadTrack& track, const SliceContent& slice) = 0;
  virtual void write_counter(const CounterTrack& track, const CounterSample& sample) = 0;
  // Flushes everything to the stream. `metadata` again, for formats with a trailer.
  virtual void end(MetadataList metadata) = 0;
  // Events (JSON) or packets (Perfetto) written so far.
  virtual uint64_t events() const = 0;
};

// The sinks of the two formats (trace_writer.h describes their encodings); `out` must outlive them.
std::unique_ptr<TraceSink> make_perfetto_sink(std::ostream& out);
std::unique_ptr<TraceSink> make_chrome_json_sink(std::ostream& out);

}  // namespace meshsim::traces
