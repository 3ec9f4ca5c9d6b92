// The trace writer: streams a run's timeline to a file in one of two formats, both of which open in
// ui.perfetto.dev. Both render the one content model of trace_content.h (tracks, slices, args,
// flows, counters, metadata) with the same ordering rules (src/trace_builder.h); only the encoding
// differs, so a caller picks a TraceFormat (or takes the one a file name asks for) and never
// branches on it.
//
// kPerfetto: Perfetto's native protobuf trace (.pftrace; also trace_processor). One `Trace`
// message written as it goes: each TracePacket is serialized with the protobuf C++ API and
// appended as field 1 (tag 0x0A, varint length, bytes), so the trace is never held in memory (a
// 256 KiB buffer sits between the packets and the stream).
//  * One packet sequence (trusted_packet_sequence_id 1). Its first packet clears incremental
//    state and interns the arg names and the three categories; op names are interned on first
//    use (InternedData.event_names) in the packet that first needs them. Timestamps are
//    absolute ns on the default trace clock (picoseconds floored).
//  * Each op is a TYPE_SLICE_BEGIN packet (name, category, args as debug annotations, flow ids)
//    followed by a TYPE_SLICE_END packet on its thread track; both are written when the op ends.
//  * Memory: TYPE_COUNTER packets with integer `counter_value` in bytes on a counter track with
//    UNIT_SIZE_BYTES (the UI shows KiB/MiB/GiB). Cluster counters: `double_counter_value`.
//  * Track order: the root descriptor (uuid 0) asks for explicit process and thread ordering and
//    every process and thread track carries sibling_order_rank (pid, then rank and stream); the
//    names are zero-padded so that a UI that sorts by name gets the same order.
//
// kChromeJson: the Chrome JSON trace format (.json; also chrome://tracing).
//  * Each op is a complete event ("ph":"X") with "cat" (compute | collective | p2p), "args"
//    (the same keys and values as the .pftrace debug annotations), "pid" (the placement's
//    process) and "tid" (thread_tid(rank, stream)). ts and dur are microseconds with exactly six
//    decimals, i.e. the exact picoseconds (format_us; the .pftrace floors to ns).
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
//
// What shows up where in the Perfetto UI (either format):
//  * One process group per pid (e.g. "node 0003"); inside it a thread track per rank and stream
//    ("rank 0007 compute", "rank 0007 comm 1") and a counter track per rank ("rank 0007 memory").
//  * Clicking a slice shows its category and the args under "Arguments", and its flows
//    (arrows to the other members of its collective, or from a send to its receive).
//  * The "cluster" process (top) holds an instant "scenario" at t = 0 whose arguments are the
//    metadata pairs (model, cluster, plan, meshsim version), and the cluster counter tracks fed
//    through add_counter_sample (e.g. "nvlink utilization %").
// Determinism: identical inputs give byte-identical files in either format (fixed number formats,
// deterministic protobuf serialization, ids from ranks and streams, interning in order of first
// use).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include "meshsim/sim/simulation.h"
#include "meshsim/traces/trace_content.h"

namespace meshsim::traces {

enum class TraceFormat : uint8_t { kPerfetto, kChromeJson };

// The format a file name asks for: ".pftrace" kPerfetto, ".json" kChromeJson; nullopt for any
// other name (the caller reports it where the name came from).
std::optional<TraceFormat> trace_format_for_path(std::string_view path);

class TraceWriter {
 public:
  // Writes the header. With TraceFeed::kSubscribe the writer subscribes to `sim`'s signals; it
  // must then outlive Simulation::run(). `out` (opened in binary mode) must outlive the writer.
  TraceWriter(TraceFormat format, Simulation& sim, std::ostream& out, TraceOptions options,
              TraceFeed feed = TraceFeed::kSubscribe);
  ~TraceWriter();
  TraceWriter(const TraceWriter&) = delete;
  TraceWriter& operator=(const TraceWriter&) = delete;

  // Manual feed (TraceFeed::kManual): records in the order the engine would emit them (see
  // src/trace_builder.h); the ops must belong to `sim`'s programs.
  void record_op(const OpRecord& record);
  // Manual feed of a whole timeline in any order (ops of several runs merged, say): `records`
  // sorted into an order of completion, by end time, then rank, then op (a stable sort), and
  // recorded.
  void record_ops(std::vector<OpRecord> records);
  void record_memory(const MemoryRecord& record);

  // A sample on the cluster counter track `track`, created on first use under the "cluster"
  // process: for what the engine has no signal for, such as link utilization per link kind
  // ("nvlink utilization %", "ib utilization %"), sampled by the caller at any times it likes.
  // Per track, times must not decrease (InternalError otherwise); values must be finite. May be
  // called before, during (from another signal) or after the run, until finish().
  void add_counter_sample(std::string_view track, SimTime time, double value);

  // Writes what is held back (the last flow group, the last memory sample), closes the document
  // and flushes. Call once, after Simulation::run().
  void finish();
  // Events (Chrome JSON) or packets (Perfetto) written so far.
  uint64_t events_written() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Microseconds with exactly six decimals, from integer picoseconds (no floating point): the
// Chrome JSON timestamps.
std::string format_us(SimTime t);
std::string format_us(Duration d);

}  // namespace meshsim::traces
