// Streaming writer of the Chrome JSON trace format (opens in ui.perfetto.dev and
// chrome://tracing): the JSON twin of PerfettoTraceWriter, rendering the same content model
// (trace_content.h) with the same ordering rules (src/trace_builder.h).
//
// Mapping:
//  * Each op is a complete event ("ph":"X") with "cat" (compute | collective | p2p), "args"
//    (the same keys and values as the .pftrace debug annotations), "pid" (the placement's
//    process) and "tid" (thread_tid(rank, stream)). ts and dur are microseconds with exactly six
//    decimals, i.e. the exact picoseconds (the .pftrace floors to ns).
//  * Flows (flow v1): right after each member's "X" event, a "s" (first), "t" (middle) or "f"
//    (last) event with "id" = OpRecord::match, "cat":"flow", "name":"collective" or "p2p",
//    "bp":"e" and ts = the slice's start, so it binds to the enclosing slice (Perfetto's JSON
//    importer sorts "X" before other events of the same timestamp).
//  * Counters ("ph":"C"): the track name is split at its last space into event name and arg key
//    ("rank 0007 memory" -> "name":"rank 0007","args":{"memory":bytes}); importers name counter
//    tracks "<name> <key>", so the track reads the same as in the .pftrace.
//  * Metadata events ("ph":"M") before a track's first event: process_name, process_sort_index,
//    thread_name, thread_sort_index (the same names and sort keys as the .pftrace).
//  * The scenario: an instant ("ph":"i","s":"p") named "scenario" at ts 0 on the cluster process
//    with the metadata as args, and the same pairs in the top-level "metadata" object.
// Numbers are written with fixed formats (integers; doubles with the decimals of their arg key),
// so the output is byte-for-byte deterministic.
#pragma once

#include <cstdint>
#include <memory>
#include <ostream>
#include <string>
#include <string_view>

#include "meshsim/sim/simulation.h"
#include "meshsim/traces/trace_content.h"

namespace meshsim::traces {

// The options of the first version of this writer are the shared trace options.
using ChromeTraceOptions = TraceOptions;

class ChromeTraceWriter {
 public:
  // Writes the header. With TraceFeed::kSubscribe the writer subscribes to `sim`'s signals; it
  // must then outlive Simulation::run(). `out` must outlive finish().
  ChromeTraceWriter(Simulation& sim, std::ostream& out, TraceOptions options,
                    TraceFeed feed = TraceFeed::kSubscribe);
  ~ChromeTraceWriter();
  ChromeTraceWriter(const ChromeTraceWriter&) = delete;
  ChromeTraceWriter& operator=(const ChromeTraceWriter&) = delete;

  // Same contracts as PerfettoTraceWriter's.
  void record_op(const OpRecord& record);
  void record_memory(const MemoryRecord& record);
  void add_counter_sample(std::string_view track, SimTime time, double value);

  // Writes what is held back and closes the JSON document. Call once, after Simulation::run().
  void finish();
  uint64_t events_written() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Microseconds with exactly six decimals, from integer picoseconds (no floating point).
std::string format_us(SimTime t);
std::string format_us(Duration d);

}  // namespace meshsim::traces
