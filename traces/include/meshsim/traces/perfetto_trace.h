// Streaming writer of Perfetto's native protobuf trace (.pftrace; opens in ui.perfetto.dev and
// trace_processor).
//
// The file is one `Trace` message written as it goes: each TracePacket is serialized with the
// protobuf C++ API and appended as field 1 (tag 0x0A, varint length, bytes), so the trace is
// never held in memory (a 256 KiB buffer sits between the packets and the stream). Content and
// ordering rules: trace_content.h (what is shown) and src/trace_builder.h (in what order).
//
// Encoding:
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
// What shows up where in the Perfetto UI:
//  * One process group per pid (e.g. "node 0003"); inside it a thread track per rank and stream
//    ("rank 0007 compute", "rank 0007 comm 1") and a counter track per rank ("rank 0007 memory").
//  * Clicking a slice shows its category and the args under "Arguments", and its flows
//    (arrows to the other members of its collective, or from a send to its receive).
//  * The "cluster" process (top) holds an instant "scenario" at t = 0 whose arguments are the
//    metadata pairs (model, cluster, plan, meshsim version), and the cluster counter tracks fed
//    through add_counter_sample (e.g. "nvlink utilization %").
// Determinism: identical inputs give byte-identical files (no maps in the schema; serialization
// is deterministic; ids come from ranks and streams; interning ids in order of first use).
#pragma once

#include <cstdint>
#include <memory>
#include <ostream>
#include <string_view>

#include "meshsim/sim/simulation.h"
#include "meshsim/traces/trace_content.h"

namespace meshsim::traces {

class PerfettoTraceWriter {
 public:
  // Writes the header. With TraceFeed::kSubscribe the writer subscribes to `sim`'s signals; it
  // must then outlive Simulation::run(). `out` (opened in binary mode) must outlive the writer.
  PerfettoTraceWriter(Simulation& sim, std::ostream& out, TraceOptions options,
                      TraceFeed feed = TraceFeed::kSubscribe);
  ~PerfettoTraceWriter();
  PerfettoTraceWriter(const PerfettoTraceWriter&) = delete;
  PerfettoTraceWriter& operator=(const PerfettoTraceWriter&) = delete;

  // Manual feed (TraceFeed::kManual): records in the order the engine would emit them (see
  // src/trace_builder.h); the ops must belong to `sim`'s programs.
  void record_op(const OpRecord& record);
  void record_memory(const MemoryRecord& record);

  // A sample on the cluster counter track `track`, created on first use under the "cluster"
  // process: for what the engine has no signal for, such as link utilization per link kind
  // ("nvlink utilization %", "ib utilization %"), sampled by the caller at any times it likes.
  // Per track, times must not decrease (InternalError otherwise); values must be finite. May be
  // called before, during (from another signal) or after the run, until finish().
  void add_counter_sample(std::string_view track, SimTime time, double value);

  // Writes what is held back (the last flow group, the last memory sample) and flushes. Call
  // once, after Simulation::run().
  void finish();
  uint64_t packets_written() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace meshsim::traces
