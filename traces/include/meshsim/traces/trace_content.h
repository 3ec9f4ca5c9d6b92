// What a meshsim trace shows, independent of the file format. TraceWriter (trace_writer.h) renders
// this one model in either format (.pftrace, .json), so the two files hold the same tracks,
// slices, args, flows, counters and metadata.
//
// Tracks (names sort in rank order because rank numbers are zero-padded):
//   process  "<placement.process_name>"      one per pid: a node, a TPU host, or a rank
//   thread   "<prefix> compute"              stream 0 of a rank
//   thread   "<prefix> comm <k>"             communication stream k of a rank
//   thread   "<prefix> host"                 the rank's host thread (the host model), when its
//                                            program has host times: a slice per op it issued,
//                                            [issued - Op::host, issued], and its waits after
//                                            synchronisations
//   counter  "<prefix> memory"               bytes in use on the rank's device (memory ledger)
//   process  "cluster" (pid kClusterPid)     the scenario (an instant at t = 0 carrying the
//                                            metadata as args) and the counters fed through
//                                            add_counter_sample (e.g. link utilization)
// Slices: one per op, from OpRecord.start to OpRecord.end, named after Op::name, with the
// category "compute", "collective" or "p2p" and the args of `describe_op` below.
// Flows: the slices of one collective (equal OpRecord::match) form one flow, chained in rank
// order; a send and its receive form one flow from the send to the receive.
// Identity: track uuids, pids and tids derive from (rank, stream) and placement only: never from
// pointers, hashes or randomness, so a trace is byte-identical across runs.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "meshsim/sim/ids.h"
#include "meshsim/sim/program.h"
#include "meshsim/sim/timeline.h"
#include "meshsim/sim/units.h"

namespace meshsim::traces {

// Where a rank's tracks appear in the UI.
struct RankPlacement {
  int32_t pid = 1;           // 1..kMaxPid; ranks with the same pid share one process group
  std::string process_name;  // e.g. "node 0003"
  std::string track_prefix;  // e.g. "rank 0007"; prefixes every track name of the rank
};
inline constexpr int32_t kMaxPid = 9'999'998;
inline constexpr int32_t kClusterPid = 9'999'999;
using RankPlacementFn = std::function<RankPlacement(RankId)>;

struct TraceOptions {
  // Which (simulated) ranks to write; all when empty. See rank_selection.h for --trace-ranks.
  std::function<bool(RankId)> include_rank;
  // Process and names of a rank's tracks. Default: one process per rank, named after the global
  // rank it stands for ("rank 0007").
  RankPlacementFn placement;
  // The name of a rank's stream track after the prefix; default stream_label ("compute",
  // "comm 1", ...). Measured timelines name theirs after the trace ("stream 7", "host").
  std::function<std::string(RankId, uint8_t)> stream_name;
  // Scenario metadata (model, cluster, plan, meshsim version, ...): written as the args of the
  // "scenario" instant on the cluster process, and in JSON also as the top-level "metadata".
  std::vector<std::pair<std::string, std::string>> metadata;
};

// Whether a writer subscribes to the Simulation's signals (the normal case) or is fed by hand
// through record_op / record_memory (replaying a Timeline, benchmarks). Never both.
enum class TraceFeed : uint8_t { kSubscribe, kManual };

// "rank 0007": the rank zero-padded to `width` digits.
std::string rank_label(int64_t rank, int width);
// Digits needed so that every rank up to `max_rank` sorts in numeric order (at least 4).
int rank_label_width(int64_t max_rank);
// Placement with one process per node of `ranks_per_node` consecutive global ranks: pid node+1,
// process "node 0003", prefix "rank 0007". `global_rank` maps a simulated rank to the rank it
// stands for (identity when empty); `max_global_rank` sets the zero-padding.
RankPlacementFn node_placement(int64_t ranks_per_node, int64_t max_global_rank,
                               std::function<RankId(RankId)> global_rank = {});

// The pseudo-stream of a rank's host track (its uuid, tid and sort key): after every real stream
// (a program has at most 64).
inline constexpr uint8_t kHostStream = 255;

// "compute" for stream 0, "comm <k>" otherwise, "host copy <k>" for a stream of copies between
// the device and host memory (activation offloading), "host" for kHostStream.
std::string stream_label(uint8_t stream, bool host_copies = false);

// Stable identities. uuid = kind << 56 | payload; kinds: 1 process (pid), 2 thread
// (rank << 8 | stream), 3 memory counter (rank), 4 cluster counter (index in order of first use).
// tid = 10'000'000 + rank * 1000 + stream: disjoint from every pid, and readable in the UI.
uint64_t process_track_uuid(int32_t pid);
uint64_t thread_track_uuid(RankId rank, uint8_t stream);
uint64_t memory_track_uuid(RankId rank);
uint64_t cluster_counter_uuid(uint32_t index);
int32_t thread_tid(RankId rank, uint8_t stream);
// Sort keys (lower first): processes by pid, the cluster process first; threads by rank, then
// stream.
int32_t process_sort_rank(int32_t pid);
int32_t thread_sort_rank(RankId rank, uint8_t stream);

// Perfetto timestamps are integer ns: picoseconds are floored, which keeps every per-track
// order (floor is monotonic). JSON keeps the exact picoseconds (see trace_writer.h).
int64_t to_trace_ns(SimTime t);

// The args of a slice. Keys are a closed set so that writers can intern them.
enum class ArgKey : uint8_t {
  kOpClass,      // string: matmul, attention, ...
  kDtype,        // string: bf16, fp8, ...
  kFlops,        // double, FLOP (whole numbers)
  kBytes,        // int, bytes moved (compute: HBM read + write; comm: buffer size)
  kShape,        // string: "MxKxN" or "BxMxKxN" (batched GEMM)
  kLayer,        // int
  kMicrobatch,   // int
  kStage,        // int
  kTflopPerS,    // double: achieved TFLOP/s = flops / duration
  kHbmGbPerS,    // double: achieved HBM GB/s = bytes / duration (decimal GB)
  kCollective,   // string: all-reduce, all-gather, ...
  kDirection,    // string: send | recv
  kAlgbwGbPerS,  // double: bytes / duration in GB/s (nccl-tests "algbw")
  kWaitUs,       // double: start - ready, microseconds (waiting for peers at a rendezvous)
  kMatch,        // int: OpRecord::match, shared by a collective's members and a send/recv pair
};
inline constexpr int kNumArgKeys = 15;
std::string_view arg_name(ArgKey key);
// Decimals of a double arg; its value is rounded to them so that both formats carry one number.
int arg_decimals(ArgKey key);

struct Arg {
  enum class Kind : uint8_t { kInt, kDouble, kString };
  ArgKey key = ArgKey::kOpClass;
  Kind kind = Kind::kInt;
  int64_t int_value = 0;
  double double_value = 0.0;
  std::string_view string_value;
};

// kHost: the rank's host thread issuing an op (the engine's host model), or waiting for the
// device after a synchronisation.
enum class SliceCategory : uint8_t { kCompute, kCollective, kP2P, kHost };
inline constexpr int kNumSliceCategories = 4;
std::string_view to_string(SliceCategory c);

// Position of a slice in its flow: the first slice begins it, the last terminates it.
enum class FlowRole : uint8_t { kNone, kBegin, kStep, kEnd };

inline constexpr size_t kMaxSliceArgs = 12;

struct SliceContent {
  std::string_view name;
  SliceCategory category = SliceCategory::kCompute;
  SimTime start;
  SimTime end;
  std::array<Arg, kMaxSliceArgs> args{};
  uint8_t num_args = 0;
  uint64_t flow_id = 0;  // OpRecord::match when role != kNone
  FlowRole flow = FlowRole::kNone;

  std::span<const Arg> arg_list() const { return {args.data(), num_args}; }
};

// Fills `out` with the slice of `op` as recorded in `record` (flow fields untouched). String
// views in `out` point into `op` and into `scratch`, which must outlive `out`'s use.
// Args: compute: op_class, dtype, flops, bytes, shape?, layer?, microbatch?, stage?, tflop_per_s?,
// hbm_gb_per_s?; collective: collective, bytes, algbw_gb_per_s?, wait_us?, match, labels?;
// send/recv: direction, bytes, algbw_gb_per_s?, wait_us?, match, labels?. Rates appear only for a
// positive duration, wait_us only when the op waited.
void describe_op(const Op& op, const OpRecord& record, SliceContent& out, std::string& scratch);

}  // namespace meshsim::traces
