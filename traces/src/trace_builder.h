// TraceBuilder: turns the engine's records into the format-independent trace model and drives a
// TraceSink. TraceWriter drives it for both formats, so both get the same tracks, slices, flows
// and counters.
//
// Ordering rules (the engine delivers OpRecords in order of completion, i.e. non-decreasing
// `end`; MemoryRecords in non-decreasing `time`):
//  1. Per track, events are written in the order the engine delivers them. A stream runs one op
//     at a time, so an op's start is never before the previous op's end on its stream: BEGIN and
//     END timestamps are non-decreasing per track, and slices on a track never overlap.
//  2. Across tracks the file is not sorted by time (a long op is written when it ends, after
//     shorter ops that started later). Perfetto's trace processor sorts every TrackEvent of a
//     sequence by (timestamp, position in the file) before parsing — see TraceSorter in
//     src/trace_processor/sorter/trace_sorter.h, whose comparator is std::tie(ts, chunk_index,
//     chunk_offset) — so ties keep file order and rule 1 survives sorting: an END at t written
//     before the next BEGIN at t on the same track closes the earlier slice first.
//  3. Flows: records with the same non-zero `match` (one collective's members, or a send and its
//     receive) arrive back to back with equal start and end: the engine launches them together
//     and queues their completions consecutively. The builder holds the current group (at most
//     one group, at most one record per member rank: memory stays bounded by the largest group)
//     and writes it when a record with another match arrives: collective members in rank order,
//     a send before its receive; the first slice begins the flow, the last terminates it. As all
//     begin at the same time, the sorted order is the file order, so the flow runs as written.
//     If a future engine interleaved groups, a group would be split into two flows that reuse
//     the id after the first terminates (valid in both formats; arrows would still be correct).
//  4. Memory records of one rank at one instant (several categories changing together) are
//     coalesced into one counter sample carrying the total after the last change.
//  5. Track descriptors (process, then thread or counter) are written right before the first
//     event that uses them; the scenario instant is written at construction.
//  6. The host track (the engine's host model) shows the ops in the order the host issued them,
//     which is program order; records arrive in order of completion, so a rank keeps those that
//     ended before an op issued earlier (its reorder window) and writes each host slice once
//     every op before it is written. Its slices never overlap: the host is one thread.
// Memory use is O(ranks x streams + largest group + distinct cluster counters + the host tracks'
// reorder windows), independent of the length of the run.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "meshsim/sim/simulation.h"
#include "meshsim/traces/trace_content.h"
#include "trace_sink.h"

namespace meshsim::traces {

class TraceBuilder {
 public:
  // Feeds the builder from `sim`'s signals (TraceFeed::kSubscribe); the builder must outlive the
  // run.
  void subscribe_to(Simulation& sim);

  // `sim` provides the programs (op names and work) and must outlive the builder; `sink` too.
  TraceBuilder(const Simulation& sim, TraceSink& sink, TraceOptions options);

  void record_op(const OpRecord& record);
  void record_memory(const MemoryRecord& record);
  // A sample on the cluster counter track `track` (created on first use). Times must not
  // decrease per track; the value must be finite.
  void add_counter_sample(std::string_view track, SimTime time, double value);
  // Writes what is held back and closes the file. Once.
  void finish();

 private:
  struct RankTracks {
    int8_t included = -1;  // -1 not asked yet
    bool placed = false;
    RankPlacement placement;
    std::vector<ThreadTrack> threads;  // by stream; uuid 0 = not added yet
    std::optional<CounterTrack> memory;
    // The host track: -1 not asked yet, 0 the program has no host times, 1 it has.
    int8_t has_host = -1;
    uint32_t next_issued = 0;                // the next op to write on the host track
    std::map<uint32_t, SimTime> issued;      // ended ops not yet written: op -> issued
    SimTime host_last;                        // the end of the last host slice written
    std::optional<ThreadTrack> host;
  };
  struct ClusterCounter {
    CounterTrack track;
    SimTime last;
  };

  RankTracks& rank_tracks(RankId rank);
  bool included(RankId rank);
  RankPlacement default_placement(RankId rank);
  const ProcessTrack& process(int32_t pid, const std::string& name);
  // The rank's track of `stream`, made (and named) by its first op; `host_copies`: a stream of
  // copies to and from host memory.
  const ThreadTrack& thread(RankId rank, uint8_t stream, bool host_copies = false);
  const CounterTrack& memory_track(RankId rank);
  void write_op(const OpRecord& record, FlowRole role);
  // The host track: `record`'s op joins the reorder window; what is in order is written.
  void note_issued(const OpRecord& record);
  void write_host(RankId rank, uint32_t op, SimTime issued);
  const ThreadTrack& host_track(RankId rank);
  void flush_group();
  void flush_memory();
  void check_open() const;

  const Simulation& sim_;
  TraceSink& sink_;
  TraceOptions options_;
  std::vector<RankTracks> ranks_;
  std::map<int32_t, ProcessTrack> processes_;
  std::map<std::string, ClusterCounter, std::less<>> cluster_counters_;
  std::vector<OpRecord> group_;
  std::vector<std::pair<uint64_t, OpRecord>> keyed_;  // scratch of flush_group
  std::optional<MemoryRecord> pending_memory_;
  SliceContent slice_;
  SliceContent host_slice_;
  std::string host_name_;
  std::string scratch_;
  int label_width_ = 0;
  bool finished_ = false;
};

}  // namespace meshsim::traces
