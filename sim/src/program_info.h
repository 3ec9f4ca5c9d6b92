// Private to the engine: a Program flattened for the simulation's hot loop.
#pragma once

#include <cstdint>
#include <vector>

#include "meshsim/sim/program.h"

namespace meshsim::detail {

inline constexpr uint16_t kNoCategory = UINT16_MAX;

// What the hot loop needs of an op, without going through the Program (a Boost graph).
struct OpMeta {
  OpKind kind = OpKind::kCompute;
  uint8_t stream = 0;
  uint8_t op_class = 0;             // OpClass (communication ops: kCommunication)
  bool memory_at_start = false;     // has MemoryEffects applied when it starts
  bool memory_at_end = false;       // ... when it ends
  bool holds_sms = false;           // a collective that holds SMs in flight (CollectiveWork)
  uint16_t category = kNoCategory;  // OpLabels::category of a communication op
};

// Flattened, read-only view of a Program for the hot loop: successor lists in CSR form, the ops
// of each stream in order, each collective's ordinal on its group, and per-op metadata. The
// mutable per-rank state that depends only on the op (unfinished dependencies) lives here too,
// op-major across the simulated ranks that run the program: ranks in lockstep touch adjacent
// counters.
struct ProgramInfo {
  Program program;
  std::vector<const Op*> ops;          // program.op(i), looked up once
  std::vector<OpMeta> meta;
  std::vector<Flops> flops;            // compute ops' FLOPs (zero for the others)
  std::vector<uint32_t> memory_offsets;  // size ops + 1: each op's effects in `memory`
  std::vector<MemoryEffect> memory;
  std::vector<uint32_t> succ_offsets;  // size ops + 1
  std::vector<uint32_t> succ;
  std::vector<uint32_t> indegree;
  // The ops of each stream in order, streams one after the other, each followed by kStreamEnd;
  // stream s starts at stream_first[s] (a stream's state holds its position in stream_seq).
  static constexpr uint32_t kStreamEnd = UINT32_MAX;
  uint32_t num_streams = 0;
  std::vector<uint32_t> stream_seq;
  std::vector<uint32_t> stream_first;
  // collectives: index among the collectives on the same group (Impl::number_collectives)
  std::vector<uint32_t> ordinal;
  // The host model (simulation.h): host_prefix[i] is the host time to issue ops 0..i-1 (ps; size
  // ops + 1), so that the ops from a to b-1 take host_prefix[b] - host_prefix[a]; syncs are the
  // ops after which the host waits, in program order, with their kinds. has_host: some op has a
  // host time or a sync (else the engine skips the host entirely).
  std::vector<int64_t> host_prefix;
  std::vector<uint32_t> syncs;
  std::vector<HostSync> sync_kinds;
  bool has_host = false;
  uint16_t max_group_slot = 0;
  uint16_t max_peer_slot = 0;
  bool uses_groups = false;
  bool uses_peers = false;

  // Filled by the engine when it runs.
  std::vector<Duration> compute_time;  // compute ops: the cost model's time (per program, once)
  // Compute ops started with k = 1..kInterferenceCached collectives in flight: the cost model's
  // time, asked the first time it is needed (negative: not yet asked).
  static constexpr int32_t kInterferenceCached = 4;
  mutable std::vector<Duration> interfered;
  uint32_t ranks = 0;                  // simulated ranks running the program
  // Tables by (row, local rank), laid out row by row over the program's ranks so that ranks in
  // lockstep touch adjacent entries; at(row, local) indexes them: the unfinished dependencies
  // (rows: ops), each rank's group and peer slots, and the program's block of Impl::streams
  // (rows: streams; the block starts at stream_base).
  size_t at(size_t row, uint32_t local) const { return row * ranks + local; }
  std::vector<uint16_t> pending;
  std::vector<GroupId> groups;
  std::vector<RankId> peers;
  uint32_t stream_base = 0;

  explicit ProgramInfo(Program p);
  // Sizes `pending` for `ranks` ranks, every op at its in-degree.
  void reset_pending();
};

}  // namespace meshsim::detail
