// The discrete-event engine: executes one program per rank with dependencies, streams and
// rendezvous, and reports what happened through signals.
//
// Execution rules:
//  * Each rank has streams (0 = compute, 1.. = communication). A stream runs its ops one at a
//    time in program order. An op becomes *ready* when all its dependencies are done and it is at
//    the head of its free stream; ops on different streams of a rank overlap freely.
//  * A compute op runs from the moment it is ready for ComputeCostModel::compute_time (asked once
//    per op of each program, not per rank), times the rank's heterogeneity factors below.
//  * A collective starts on the CommModel when every rank of its group has reached it
//    (rendezvous) and ends when the model reports it finished. The k-th collective a rank issues
//    on a group matches the k-th collective of every other member on that group (NCCL
//    communicator semantics); their kinds and sizes must agree.
//  * A send and its receive (same pair of ranks, same tag, k-th with k-th) start together on the
//    CommModel when both are ready, and end when it reports them finished.
//  * The loop handles every event due at the current time, then advances the CommModel to the
//    next event (or its next completion, whichever comes first), so communications that start at
//    one instant start together (comm_model.h).
//  * Memory effects of an op apply when it starts (or ends, if marked so); the ledger keeps the
//    per-rank total and its peak with the breakdown at the peak.
//  * The host (DESIGN: the host is a resource). Each rank has one host thread that issues its
//    program's ops in program order (OpId order: the order the framework calls them), spending
//    Op::host on each: op i is issued at the sum of the host times of ops 0..i (from the step's
//    start), and an op starts no earlier than it is issued. When the host keeps ahead of the
//    device this changes nothing; when it falls behind, the device idles (RankResult::host_wait
//    counts it on the compute stream). After an op with a HostSync the host waits (for that op,
//    or for every op issued so far) before it issues the next, from the moment the wait is
//    satisfied. Programs without host times or syncs skip all of it (their results are
//    unchanged, to the picosecond).
// Symmetry: in SPMD training most ranks behave alike, so a Simulation may run one representative
// per class of identical ranks. A group then has two member lists: the simulated ranks that meet
// at its rendezvous, and the full group of global ranks that the CommModel is told about. Each
// simulated rank carries the global rank it represents (for costs of sends and receives, and for
// reports). In full mode both lists are the same and every rank is simulated.
// Heterogeneity (engine inputs, docs/architecture.md): a rank may compute slower than the cost
// model says (set_compute_slowdown: throttling, a slow host), and every kernel may vary
// (set_kernel_jitter). Both break the symmetry representative mode relies on; the caller simulates
// every rank then. Breakdown: each rank's where-the-time-went (breakdown.h) is computed online, as
// the ops start and end; op records exist only for subscribers (on_op_end), so nothing grows with
// the number of ops unless a trace asks for it.
// Determinism: events are ordered by (time, insertion sequence); ranks and streams are scanned in
// index order; nothing depends on addresses or the wall clock. No global state: several
// Simulations may run at once.
// A run that cannot finish (a collective some member never reaches) throws InternalError naming
// the stuck ranks and ops, instead of hanging.
#pragma once

#include <array>
#include <functional>
#include <memory>
#include <vector>

#include "meshsim/sim/breakdown.h"
#include "meshsim/sim/comm_model.h"
#include "meshsim/sim/cost_model.h"
#include "meshsim/sim/ids.h"
#include "meshsim/sim/program.h"
#include "meshsim/sim/timeline.h"

namespace meshsim {

struct MemoryPeak {
  Bytes peak;
  SimTime when;
  std::array<Bytes, kNumMemoryCategories> at_peak{};  // breakdown at the moment of the peak
};

struct RankResult {
  SimTime end;  // completion of the rank's last op
  MemoryPeak memory;
  RankBreakdown breakdown;  // for the whole step (idle counted to RunResult::end)
  // The host model: how long the compute stream's next op was ready (its dependencies done, the
  // stream free) but not yet issued by the host; zero without host times.
  Duration host_wait;
};

struct RunResult {
  SimTime end;  // the step time: the last op of any rank
  std::vector<RankResult> ranks;
  uint64_t events = 0;
};

class Simulation {
 public:
  Simulation(const ComputeCostModel& compute, CommModel& comm);
  ~Simulation();
  Simulation(const Simulation&) = delete;
  Simulation& operator=(const Simulation&) = delete;

  ProgramIndex add_program(Program program);
  // `members`: simulated ranks that rendezvous; `cost_group`: the global ranks the collective
  // really spans, passed to the cost model (empty: the same as `members`).
  GroupId add_group(std::vector<RankId> members, std::vector<RankId> cost_group = {});
  // Adds the next simulated rank (ids are dense, from 0), running `program`, with its group and
  // peer slots bound to groups and simulated ranks. `global_rank` is the rank it stands for
  // (default: its own id).
  RankId add_rank(ProgramIndex program, std::vector<GroupId> group_slots,
                  std::vector<RankId> peer_slots, std::optional<RankId> global_rank = {});

  // Every compute op of simulated rank `rank` takes `factor` (> 0) times the cost model's time
  // (rounded to the picosecond; 1 leaves it exact). Before run().
  void set_compute_slowdown(RankId rank, double factor);
  // Every compute op of every rank takes an independent lognormal factor with mean 1 and
  // coefficient of variation `cv` (>= 0; 0 turns jitter off), drawn from (seed, the rank's global
  // rank, the op's index in its program): the same draw whatever else runs or in which order.
  void set_kernel_jitter(double cv, uint64_t seed);

  void on_op_end(std::function<void(const OpRecord&)> callback);
  void on_memory(std::function<void(const MemoryRecord&)> callback);
  // Convenience subscriber that keeps every record.
  void record_into(Timeline& timeline);

  // Runs to completion. May be called once.
  RunResult run();

  size_t num_ranks() const;
  RankId global_rank(RankId simulated) const;
  const Program& program_of(RankId rank) const;
  const std::vector<RankId>& group(GroupId id) const;
  // The global ranks the group spans (what the cost model is asked about).
  const std::vector<RankId>& cost_group(GroupId id) const;
  // The group bound to `slot` of a simulated rank.
  GroupId group_of(RankId rank, uint16_t slot) const;
  // The simulated rank bound to peer `slot` of a simulated rank.
  RankId peer_of(RankId rank, uint16_t slot) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace meshsim
