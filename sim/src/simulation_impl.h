// Private to the engine: the state of a Simulation (simulation.h) and the steps of its loop.
//
// Layout for the hot loop (docs/style.md C.11): programs are flattened once (ProgramInfo: CSR
// successors, per-op metadata, compute times per program, pending counters op-major across their
// ranks); stream states, running ops and group and peer slots stream-major (slot-major) across the
// ranks of a program, so that lockstep ranks touch adjacent entries; rendezvous are per-group
// windows of pending collectives and per-rank lists of pending sends, not node-based maps; per-rank
// breakdowns are computed online (RankSweep) and op records are built only when someone
// subscribed.
#pragma once

#include <functional>
#include <optional>
#include <span>
#include <vector>

#include "meshsim/sim/event_queue.h"
#include "meshsim/sim/simulation.h"
#include "program_info.h"
#include "rank_sweep.h"

namespace meshsim::detail {

struct StreamState {
  uint32_t head = 0;  // position of its next op in ProgramInfo::stream_seq
  bool busy = false;
};

// Sends or receives issued on one channel (this rank and a peer, a tag): their count so far, and
// for sends the plan of the last size sent (a channel carries the same size again and again).
struct ChannelCount {
  uint32_t peer = 0;
  uint16_t tag = 0;
  uint32_t count = 0;
  std::optional<std::pair<Bytes, CommPlan>> plan;
};

struct Arrival {
  RankId rank;
  uint32_t op = 0;
  SimTime ready;
  SimTime issued;  // when the rank's host issued it (the host model; `ready` without one)
};

// A send/recv pair waiting for its other half, kept by its source rank.
struct PendingP2P {
  uint32_t dst = 0;
  uint16_t tag = 0;
  uint32_t ordinal = 0;
  std::optional<Arrival> send;
  std::optional<Arrival> recv;
  Bytes bytes;
};

// What every op start and end of a rank touches (32 bytes: ranks in lockstep are adjacent).
struct RankHot {
  ProgramIndex program;
  uint32_t local = 0;        // index among the simulated ranks running the same program
  uint32_t remaining = 0;    // ops not finished
  uint32_t stream_base = 0;  // its program's stream_base + local: its stream 0 in Impl::streams
  SimTime end;
  double slowdown = 1.0;  // compute-time factor (set_compute_slowdown)
};
static_assert(sizeof(RankHot) == 32);

// A rank's host thread (the host model, simulation.h): it issues the ops in program order, op i
// at base + host_prefix[i + 1] - host_prefix[first] within the segment that starts at op
// `first` at time `base` (the step's start, or the moment a sync let the host go on), and stops
// after the op of the next sync, syncs[next_sync], until that sync is satisfied. Touched only for
// programs with has_host.
struct HostState {
  // The segments so far as (first op, base), the current one last: an op is issued in the last
  // segment whose first op is not after it.
  std::vector<std::pair<uint32_t, SimTime>> segments{{0, SimTime::zero()}};
  uint32_t next_sync = 0;
  SimTime wake = SimTime::max();  // the earliest kHostWake event pending, or max
  // Since when the compute stream's next op has been ready but not yet issued (max: it is not
  // waiting), and the total of such waits so far.
  SimTime waiting_since = SimTime::max();
  Duration waited;
};

// The rest of a simulated rank.
struct RankState {
  RankId global;
  std::array<Bytes, kNumMemoryCategories> memory{};
  Bytes memory_total;
  MemoryPeak peak;
  std::vector<GroupId> group_slots;
  std::vector<RankId> peer_slots;
  std::vector<ChannelCount> sends_issued;  // by (dst, tag)
  std::vector<ChannelCount> recvs_issued;  // by (src, tag)
  std::vector<PendingP2P> p2p;             // pending pairs whose source is this rank
};

// An op running on a stream: what finishing it needs (16 bytes), and apart, what only its record
// needs (written only when someone subscribed to op records).
struct Running {
  RankId rank;
  uint32_t op = 0;
  SimTime start;
};
struct RunningRecord {
  SimTime ready;
  SimTime issued;
  uint64_t match = 0;
};

struct PendingCollective {
  CollectiveKind kind = CollectiveKind::kAllReduce;
  Bytes bytes;
  std::vector<Arrival> arrivals;
  bool done = false;
};

// The collectives of one group from ordinal `base` on that some member has reached, and the plans
// of those it has run (by kind and size: a group runs a few distinct ones many times). The window
// is a vector and the index of its first live entry rather than a deque (one lookup, no chunk
// map): emptied whenever every entry is done, compacted when its done head outgrows the rest.
struct GroupRendezvous {
  struct Planned {
    CollectiveKind kind = CollectiveKind::kAllReduce;
    Bytes bytes;
    CommPlan plan;
  };
  uint32_t base = 0;
  uint32_t first = 0;    // entries[first + k] is ordinal base + k
  uint32_t members = 0;  // the group's simulated ranks
  std::vector<PendingCollective> entries;
  std::vector<Planned> plans;

  // The entry of ordinal base + k, added if absent.
  PendingCollective& at(size_t k) {
    if (entries.size() <= first + k) {
      entries.resize(first + k + 1);
    }
    return entries[first + k];
  }
  // Moves base past the done entries at the front.
  void drop_done() {
    while (first < entries.size() && entries[first].done) {
      ++first;
      ++base;
    }
    if (first == entries.size()) {
      entries.clear();
      first = 0;
    } else if (2 * size_t{first} > entries.size()) {
      entries.erase(entries.begin(), entries.begin() + first);
      first = 0;
    }
  }
  std::span<const PendingCollective> window() const {
    return std::span(entries).subspan(first);
  }
};

}  // namespace meshsim::detail

namespace meshsim {

struct Simulation::Impl {
  using ProgramInfo = detail::ProgramInfo;
  using RankState = detail::RankState;
  using RankHot = detail::RankHot;
  using Arrival = detail::Arrival;

  const ComputeCostModel& compute;
  CommModel& comm;
  std::vector<ProgramInfo> programs;
  std::vector<std::vector<RankId>> groups;       // simulated members (rendezvous)
  std::vector<std::vector<RankId>> cost_groups;  // global ranks (cost model)
  std::vector<RankHot> hot;  // by rank
  std::vector<RankState> ranks;
  size_t op_instances = 0;  // ops of every rank's program, summed (at most kMaxOpInstances)
  std::vector<detail::RankSweep> sweeps;     // by rank: the online breakdown
  std::vector<detail::HostState> host;       // by rank (the host model)
  // By rank: collectives started (arrived or running) and not finished. An NCCL kernel holds its
  // SMs from launch to completion, so compute started meanwhile may run slower (ComputeContext).
  std::vector<int32_t> collectives_in_flight;
  // Every rank's streams: by program, then stream-major over its ranks (lockstep ranks adjacent).
  std::vector<detail::StreamState> streams;
  std::vector<std::function<void(const OpRecord&)>> op_subscribers;
  std::vector<std::function<void(const MemoryRecord&)>> memory_subscribers;
  // Kernel jitter: a lognormal factor exp(sigma z - sigma^2 / 2) of mean 1 whose coefficient of
  // variation is set_kernel_jitter's cv (sigma^2 = ln(1 + cv^2)); sigma 0 is none.
  double jitter_sigma = 0;
  double jitter_shift = 0;  // sigma^2 / 2
  uint64_t jitter_seed = 0;

  EventQueue queue;
  SimTime now;
  std::vector<detail::Running> running;  // by stream (Impl::streams): the op it runs
  std::vector<detail::RunningRecord> running_records;  // likewise, with op_subscribers only
  std::vector<detail::GroupRendezvous> rendezvous;  // by group
  // Arrival lists of completed collectives, emptied with their capacity kept: a collective's list
  // is taken from here, so that the steady state allocates none.
  std::vector<std::vector<Arrival>> spare_arrivals;
  // The running ops (slots into `running`) each communication in flight will end, by its id.
  std::vector<std::vector<uint32_t>> in_flight;
  std::vector<uint32_t> finishing;  // scratch: the slots of the transfer being finished
  uint64_t next_match = 1;
  bool ran = false;

  Impl(const ComputeCostModel& c, CommModel& m) : compute(c), comm(m) {}

  ProgramInfo& info(const RankHot& r) { return programs[r.program.index()]; }
  // The index in `streams` of stream s of rank r (running p): p.stream_base + p.at(s, r.local).
  static size_t stream_slot(const RankHot& r, const ProgramInfo& p, size_t s) {
    return r.stream_base + s * p.ranks;
  }
  const ProgramInfo& info(const RankHot& r) const { return programs[r.program.index()]; }
  void validate_ranks() const;
  void prepare();
  void init_rank(RankId id);
  Duration compute_duration(const RankHot& r, RankId id, uint32_t op) const;
  Duration interfered_time(const RankHot& r, RankId id, uint32_t op, int32_t collectives) const;
  void number_collectives(const std::vector<std::optional<RankId>>& first);
  // Starts the ops at the head of the rank's free streams in `candidates` (a bit per stream) whose
  // dependencies are done, in stream order.
  void try_start(RankId id, const RankHot& r, const ProgramInfo& p,
                 uint64_t candidates = ~uint64_t{0});
  // Starts `op` of rank `id` (r, p: its hot state and program) now; its host issued it at
  // `issued` (now without the host model), which the op's record carries.
  void start_op(RankId id, const RankHot& r, const ProgramInfo& p, uint32_t op, SimTime issued);
  void arrive_collective(RankId id, const RankHot& r, const ProgramInfo& p, uint32_t op,
                         const CollectiveWork& w, SimTime issued);
  void arrive_p2p(RankId id, const RankHot& r, const ProgramInfo& p, uint32_t op,
                  const PeerWork& w, bool is_send, SimTime issued);
  CommPlan collective_plan(GroupId g, CollectiveKind kind, Bytes bytes);
  CommPlan p2p_plan(RankId src, RankId dst, uint16_t tag, Bytes bytes);
  uint32_t begin(const RankHot& h, const ProgramInfo& p, const Arrival& a, uint64_t match);
  void await(TransferId t, std::span<const Arrival> arrivals, uint64_t match);
  void finish(uint32_t running_index);
  uint64_t step();
  // The host model: when rank `id` issues `op` (SimTime::max() while a sync before it holds the
  // host), a wake-up event for the rank at `when` unless an earlier one is pending, what a sync
  // satisfied at the end of `op` does, and a wake-up.
  SimTime issue_time(RankId id, const ProgramInfo& p, uint32_t op) const;
  void wake_at(RankId id, SimTime when);
  // After `op` of rank `id` ended: true if that satisfied the sync holding its host.
  bool host_after_end(RankId id, const RankHot& r, const ProgramInfo& p, uint32_t op);
  void host_wake(RankId id);
  void handle(const Event& e);
  void apply_memory(RankId id, const ProgramInfo& p, uint32_t op, bool at_end);
  void change_memory(RankId id, MemoryCategory c, Bytes delta);
  size_t pending_collectives() const;
  size_t pending_p2p() const;
  [[noreturn]] void report_deadlock() const;
};

}  // namespace meshsim
