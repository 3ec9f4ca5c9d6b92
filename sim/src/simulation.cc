#include "meshsim/sim/simulation.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <tuple>

#include "meshsim/sim/error.h"
#include "meshsim/sim/event_queue.h"
#include "program_info.h"

namespace meshsim {
namespace {

using detail::ProgramInfo;

struct RankState {
  ProgramIndex program;
  RankId global;
  std::vector<GroupId> group_slots;
  std::vector<RankId> peer_slots;
  std::vector<uint32_t> pending;       // unfinished dependencies per op
  std::vector<uint32_t> stream_head;   // position in ProgramInfo::stream_ops
  std::vector<bool> stream_busy;
  std::vector<SimTime> stream_free_at;
  std::array<Bytes, kNumMemoryCategories> memory{};
  Bytes memory_total;
  MemoryPeak peak;
  size_t remaining = 0;
  SimTime end;
};

struct Running {
  RankId rank;
  uint32_t op = 0;
  SimTime ready;
  SimTime start;
  uint64_t match = 0;
};

struct Arrival {
  RankId rank;
  uint32_t op = 0;
  SimTime ready;
};

struct PendingCollective {
  CollectiveKind kind = CollectiveKind::kAllReduce;
  Bytes bytes;
  std::vector<Arrival> arrivals;
};

struct PendingP2P {
  std::optional<Arrival> send;
  std::optional<Arrival> recv;
  Bytes bytes;
};

// (src, dst, tag) and the ordinal of the message on that channel.
using P2PChannel = std::tuple<uint32_t, uint32_t, uint16_t>;
using P2PKey = std::tuple<uint32_t, uint32_t, uint16_t, uint32_t>;

}  // namespace

struct Simulation::Impl {
  const ComputeCostModel& compute;
  CommModel& comm;
  std::vector<ProgramInfo> programs;
  std::vector<std::vector<RankId>> groups;       // simulated members (rendezvous)
  std::vector<std::vector<RankId>> cost_groups;  // global ranks (cost model)
  std::vector<RankState> ranks;
  size_t op_instances = 0;  // ops of every rank's program, summed (at most kMaxOps)
  std::vector<std::function<void(const OpRecord&)>> op_subscribers;
  std::vector<std::function<void(const MemoryRecord&)>> memory_subscribers;

  EventQueue queue;
  SimTime now;
  std::vector<Running> running;
  std::vector<uint32_t> free_running;
  std::map<std::pair<uint32_t, uint32_t>, PendingCollective> collectives;  // (group, ordinal)
  std::map<P2PChannel, uint32_t> sends_issued;
  std::map<P2PChannel, uint32_t> recvs_issued;
  std::map<P2PKey, PendingP2P> p2p;
  // The running ops (slots into `running`) each communication in flight will end, by its id.
  std::vector<std::vector<uint32_t>> in_flight;
  uint64_t next_match = 1;
  bool ran = false;

  Impl(const ComputeCostModel& c, CommModel& m) : compute(c), comm(m) {}

  const ProgramInfo& info(const RankState& r) const { return programs[r.program.index()]; }
  void validate_ranks() const;
  void init_rank(RankId id);
  void try_start(RankId id);
  void start_op(RankId id, uint32_t op, SimTime ready);
  void arrive_collective(RankId id, uint32_t op, const CollectiveWork& w, SimTime ready);
  void arrive_p2p(RankId id, uint32_t op, const PeerWork& w, bool is_send, SimTime ready);
  uint32_t begin(const Arrival& a, SimTime start, uint64_t match);
  void launch(const Arrival& a, SimTime start, Duration d, uint64_t match = 0);
  void await(TransferId t, std::span<const Arrival> arrivals, uint64_t match);
  void finish(uint32_t running_index);
  uint64_t step();
  void apply_memory(RankId id, const Op& op, bool at_end);
  void change_memory(RankId id, MemoryCategory c, Bytes delta);
  [[noreturn]] void report_deadlock() const;
};

Simulation::Simulation(const ComputeCostModel& compute, CommModel& comm)
    : impl_(std::make_unique<Impl>(compute, comm)) {}
Simulation::~Simulation() = default;

ProgramIndex Simulation::add_program(Program program) {
  impl_->programs.emplace_back(std::move(program));
  return ProgramIndex(static_cast<uint32_t>(impl_->programs.size() - 1));
}

GroupId Simulation::add_group(std::vector<RankId> members, std::vector<RankId> cost_group) {
  SIM_CHECK(!members.empty(), "empty group");
  impl_->cost_groups.push_back(cost_group.empty() ? members : std::move(cost_group));
  impl_->groups.push_back(std::move(members));
  return GroupId(static_cast<uint32_t>(impl_->groups.size() - 1));
}

RankId Simulation::add_rank(ProgramIndex program, std::vector<GroupId> group_slots,
                            std::vector<RankId> peer_slots, std::optional<RankId> global_rank) {
  SIM_CHECK(program.index() < impl_->programs.size(), "unknown program {}", program.value());
  impl_->op_instances += impl_->programs[program.index()].program.size();
  if (impl_->op_instances > kMaxOps) {
    throw LimitError(fmt::format("more than {} ops (2^24) over the {} simulated ranks: too large "
                                 "to simulate in a minute (the default step simulated in full, "
                                 "2,048 ranks, runs 11.9 M)",
                                 kMaxOps, impl_->ranks.size() + 1));
  }
  RankState r;
  r.program = program;
  r.global = global_rank.value_or(RankId(static_cast<uint32_t>(impl_->ranks.size())));
  r.group_slots = std::move(group_slots);
  r.peer_slots = std::move(peer_slots);
  impl_->ranks.push_back(std::move(r));
  return RankId(static_cast<uint32_t>(impl_->ranks.size() - 1));
}

void Simulation::on_op_end(std::function<void(const OpRecord&)> callback) {
  impl_->op_subscribers.push_back(std::move(callback));
}

void Simulation::on_memory(std::function<void(const MemoryRecord&)> callback) {
  impl_->memory_subscribers.push_back(std::move(callback));
}

void Simulation::record_into(Timeline& timeline) {
  on_op_end([&timeline](const OpRecord& r) { timeline.ops.push_back(r); });
  on_memory([&timeline](const MemoryRecord& r) { timeline.memory.push_back(r); });
}

size_t Simulation::num_ranks() const { return impl_->ranks.size(); }

RankId Simulation::global_rank(RankId simulated) const {
  SIM_CHECK(simulated.index() < impl_->ranks.size(), "unknown rank {}", simulated.value());
  return impl_->ranks[simulated.index()].global;
}

const Program& Simulation::program_of(RankId rank) const {
  SIM_CHECK(rank.index() < impl_->ranks.size(), "unknown rank {}", rank.value());
  return impl_->info(impl_->ranks[rank.index()]).program;
}

const std::vector<RankId>& Simulation::group(GroupId id) const {
  SIM_CHECK(id.index() < impl_->groups.size(), "unknown group {}", id.value());
  return impl_->groups[id.index()];
}

const std::vector<RankId>& Simulation::cost_group(GroupId id) const {
  SIM_CHECK(id.index() < impl_->cost_groups.size(), "unknown group {}", id.value());
  return impl_->cost_groups[id.index()];
}

GroupId Simulation::group_of(RankId rank, uint16_t slot) const {
  SIM_CHECK(rank.index() < impl_->ranks.size(), "unknown rank {}", rank.value());
  const auto& slots = impl_->ranks[rank.index()].group_slots;
  SIM_CHECK(slot < slots.size(), "rank {} has no group slot {}", rank.value(), slot);
  return slots[slot];
}

RankId Simulation::peer_of(RankId rank, uint16_t slot) const {
  SIM_CHECK(rank.index() < impl_->ranks.size(), "unknown rank {}", rank.value());
  const auto& slots = impl_->ranks[rank.index()].peer_slots;
  SIM_CHECK(slot < slots.size(), "rank {} has no peer slot {}", rank.value(), slot);
  return slots[slot];
}

void Simulation::Impl::validate_ranks() const {
  for (size_t g = 0; g < groups.size(); ++g) {
    for (const RankId r : groups[g]) {
      SIM_CHECK(r.index() < ranks.size(), "group {} names rank {} of {}", g, r.value(),
                ranks.size());
    }
  }
  for (size_t i = 0; i < ranks.size(); ++i) {
    const RankState& r = ranks[i];
    const ProgramInfo& p = info(r);
    SIM_CHECK(!p.uses_groups || p.max_group_slot < r.group_slots.size(),
              "rank {} binds {} group slots; its program uses slot {}", i, r.group_slots.size(),
              p.max_group_slot);
    SIM_CHECK(!p.uses_peers || p.max_peer_slot < r.peer_slots.size(),
              "rank {} binds {} peer slots; its program uses slot {}", i, r.peer_slots.size(),
              p.max_peer_slot);
    for (const GroupId g : r.group_slots) {
      SIM_CHECK(g.index() < groups.size(), "rank {} bound to unknown group {}", i, g.value());
      const auto& members = groups[g.index()];
      SIM_CHECK(std::find(members.begin(), members.end(), RankId(static_cast<uint32_t>(i))) !=
                    members.end(),
                "rank {} is bound to group {} but is not a member of it", i, g.value());
    }
    for (const RankId peer : r.peer_slots) {
      SIM_CHECK(peer.index() < ranks.size(), "rank {} peers with unknown rank {}", i,
                peer.value());
    }
  }
}

void Simulation::Impl::init_rank(RankId id) {
  RankState& r = ranks[id.index()];
  const ProgramInfo& p = info(r);
  r.pending = p.indegree;
  r.stream_head.assign(p.stream_ops.size(), 0);
  r.stream_busy.assign(p.stream_ops.size(), false);
  r.stream_free_at.assign(p.stream_ops.size(), SimTime::zero());
  r.remaining = p.program.size();
  for (const auto& [category, bytes] : p.program.initial_memory()) {
    change_memory(id, category, bytes);
  }
}

RunResult Simulation::run() {
  Impl& s = *impl_;
  SIM_CHECK(!s.ran, "Simulation::run called twice");
  s.ran = true;
  s.validate_ranks();
  for (uint32_t i = 0; i < s.ranks.size(); ++i) {
    s.init_rank(RankId(i));
  }
  for (uint32_t i = 0; i < s.ranks.size(); ++i) {
    s.try_start(RankId(i));
  }
  uint64_t events = 0;
  while (const uint64_t n = s.step()) {
    events += n;
  }
  RunResult result;
  result.events = events;
  for (const RankState& r : s.ranks) {
    if (r.remaining != 0) {
      s.report_deadlock();
    }
    result.end = std::max(result.end, r.end);
    result.ranks.push_back(RankResult{r.end, r.peak});
  }
  return result;
}

// One turn of the loop: every event due now first (so that communications starting at one instant
// start together and the model re-shares once), then the communication model advanced to the
// next event, then that event. Returns the events handled (communications completed count as
// one each), 0 when there is nothing left.
uint64_t Simulation::Impl::step() {
  if (!queue.empty() && queue.top().time == now) {
    const Event e = queue.pop();
    switch (e.kind) {
      case EventKind::kOpEnd:
        finish(e.payload);
        break;
    }
    return 1;
  }
  if (comm.in_flight() > 0) {
    const CommAdvance a = comm.advance(queue.empty() ? SimTime::max() : queue.top().time);
    SIM_CHECK(a.time >= now, "the communication model went back from {} to {} ps", now.ps(),
              a.time.ps());
    now = a.time;
    for (const TransferId t : a.finished) {
      SIM_CHECK(t.index() < in_flight.size() && !in_flight[t.index()].empty(),
                "the communication model finished transfer {}, which the engine did not start",
                t.value());
      const std::vector<uint32_t> slots = std::move(in_flight[t.index()]);
      in_flight[t.index()].clear();
      for (const uint32_t slot : slots) {
        finish(slot);
      }
    }
    if (!a.finished.empty()) {
      return a.finished.size();
    }
  }
  if (queue.empty()) {
    return 0;
  }
  const Event e = queue.pop();
  now = e.time;
  switch (e.kind) {
    case EventKind::kOpEnd:
      finish(e.payload);
      break;
  }
  return 1;
}

// Starts every op of rank `id` that is at the head of a free stream with its dependencies done.
void Simulation::Impl::try_start(RankId id) {
  RankState& r = ranks[id.index()];
  const ProgramInfo& p = info(r);
  for (size_t s = 0; s < p.stream_ops.size(); ++s) {
    if (r.stream_busy[s] || r.stream_head[s] >= p.stream_ops[s].size()) {
      continue;
    }
    const uint32_t op = p.stream_ops[s][r.stream_head[s]];
    if (r.pending[op] != 0) {
      continue;
    }
    r.stream_busy[s] = true;
    ++r.stream_head[s];
    start_op(id, op, now);
  }
}

void Simulation::Impl::start_op(RankId id, uint32_t op_index, SimTime ready) {
  const Op& op = info(ranks[id.index()]).program.op(OpId(op_index));
  if (const auto* c = std::get_if<ComputeWork>(&op.work)) {
    launch(Arrival{id, op_index, ready}, now, compute.compute_time(id, *c));
  } else if (const auto* w = std::get_if<CollectiveWork>(&op.work)) {
    arrive_collective(id, op_index, *w, ready);
  } else {
    arrive_p2p(id, op_index, std::get<PeerWork>(op.work), op.is_send, ready);
  }
}

void Simulation::Impl::arrive_collective(RankId id, uint32_t op, const CollectiveWork& w,
                                         SimTime ready) {
  const RankState& r = ranks[id.index()];
  const GroupId g = r.group_slots[w.group_slot];
  const auto key = std::make_pair(g.value(), info(r).ordinal[op]);
  PendingCollective& pc = collectives[key];
  if (pc.arrivals.empty()) {
    pc.kind = w.kind;
    pc.bytes = w.bytes;
  }
  SIM_CHECK(pc.kind == w.kind && pc.bytes == w.bytes,
            "collective #{} on group {}: rank {} issues {} of {} B, others {} of {} B", key.second,
            g.value(), id.value(), to_string(w.kind), w.bytes.count(), to_string(pc.kind),
            pc.bytes.count());
  pc.arrivals.push_back(Arrival{id, op, ready});
  const auto& members = groups[g.index()];
  if (pc.arrivals.size() < members.size()) {
    return;
  }
  const PendingCollective done = std::move(pc);
  collectives.erase(key);
  const TransferId t = comm.start_collective(now, w.kind, w.bytes, cost_groups[g.index()]);
  await(t, done.arrivals, next_match++);
}

void Simulation::Impl::arrive_p2p(RankId id, uint32_t op, const PeerWork& w, bool is_send,
                                  SimTime ready) {
  const RankId peer = ranks[id.index()].peer_slots[w.peer_slot];
  const RankId src = is_send ? id : peer;
  const RankId dst = is_send ? peer : id;
  const P2PChannel channel{src.value(), dst.value(), w.tag};
  const uint32_t ordinal = (is_send ? sends_issued : recvs_issued)[channel]++;
  const P2PKey key{src.value(), dst.value(), w.tag, ordinal};
  PendingP2P& pp = p2p[key];
  (is_send ? pp.send : pp.recv) = Arrival{id, op, ready};
  if (is_send) {
    pp.bytes = w.bytes;
  }
  if (!pp.send || !pp.recv) {
    return;
  }
  SIM_CHECK(pp.bytes == w.bytes, "send {}->{} tag {} #{}: sizes {} B and {} B differ",
            src.value(), dst.value(), w.tag, ordinal, pp.bytes.count(), w.bytes.count());
  const PendingP2P done = pp;
  p2p.erase(key);
  const TransferId t =
      comm.start_p2p(now, ranks[src.index()].global, ranks[dst.index()].global, done.bytes);
  const Arrival both[] = {*done.send, *done.recv};
  await(t, both, next_match++);
}

void Simulation::Impl::await(TransferId t, std::span<const Arrival> arrivals, uint64_t match) {
  if (in_flight.size() <= t.index()) {
    in_flight.resize(t.index() + 1);
  }
  SIM_CHECK(in_flight[t.index()].empty(), "the communication model reused transfer {} in flight",
            t.value());
  for (const Arrival& a : arrivals) {
    in_flight[t.index()].push_back(begin(a, now, match));
  }
}

void Simulation::Impl::launch(const Arrival& a, SimTime start, Duration d, uint64_t match) {
  SIM_CHECK(d >= Duration::zero(), "negative duration {} ps for op {} of rank {}", d.ps(), a.op,
            a.rank.value());
  queue.push(start + d, EventKind::kOpEnd, begin(a, start, match));
}

// Records `a` as running from `start` (its memory effects at start applied); its running slot.
uint32_t Simulation::Impl::begin(const Arrival& a, SimTime start, uint64_t match) {
  uint32_t slot = 0;
  if (free_running.empty()) {
    slot = static_cast<uint32_t>(running.size());
    running.push_back({});
  } else {
    slot = free_running.back();
    free_running.pop_back();
  }
  running[slot] = Running{a.rank, a.op, a.ready, start, match};
  apply_memory(a.rank, info(ranks[a.rank.index()]).program.op(OpId(a.op)), false);
  return slot;
}

void Simulation::Impl::finish(uint32_t running_index) {
  const Running run = running[running_index];
  free_running.push_back(running_index);
  RankState& r = ranks[run.rank.index()];
  const ProgramInfo& p = info(r);
  const Op& op = p.program.op(OpId(run.op));
  apply_memory(run.rank, op, true);
  r.stream_busy[op.stream] = false;
  --r.remaining;
  r.end = std::max(r.end, now);
  for (uint32_t i = p.succ_offsets[run.op]; i < p.succ_offsets[run.op + 1]; ++i) {
    --r.pending[p.succ[i]];
  }
  if (!op_subscribers.empty()) {
    const OpRecord rec{run.rank, OpId(run.op), op.stream, run.ready, run.start, now, run.match};
    for (const auto& cb : op_subscribers) {
      cb(rec);
    }
  }
  try_start(run.rank);
}

void Simulation::Impl::apply_memory(RankId id, const Op& op, bool at_end) {
  for (const MemoryEffect& m : op.memory) {
    if (m.at_end == at_end) {
      change_memory(id, m.category, m.delta);
    }
  }
}

void Simulation::Impl::change_memory(RankId id, MemoryCategory c, Bytes delta) {
  RankState& r = ranks[id.index()];
  Bytes& cat = r.memory[static_cast<size_t>(c)];
  cat += delta;
  r.memory_total += delta;
  SIM_CHECK(cat >= Bytes::zero(), "rank {}: {} memory went negative ({} B) at {} ps", id.value(),
            to_string(c), cat.count(), now.ps());
  if (r.memory_total > r.peak.peak) {
    r.peak = MemoryPeak{r.memory_total, now, r.memory};
  }
  if (!memory_subscribers.empty()) {
    const MemoryRecord rec{now, id, c, delta, r.memory_total};
    for (const auto& cb : memory_subscribers) {
      cb(rec);
    }
  }
}

void Simulation::Impl::report_deadlock() const {
  std::string detail;
  int shown = 0;
  for (size_t i = 0; i < ranks.size() && shown < 4; ++i) {
    const RankState& r = ranks[i];
    if (r.remaining == 0) {
      continue;
    }
    ++shown;
    const ProgramInfo& p = info(r);
    for (size_t s = 0; s < p.stream_ops.size(); ++s) {
      if (r.stream_head[s] == 0 || !r.stream_busy[s]) {
        continue;
      }
      const Op& op = p.program.op(OpId(p.stream_ops[s][r.stream_head[s] - 1]));
      detail += fmt::format("; rank {} stream {} waits in '{}' ({})", i, s, op.name,
                            to_string(op.kind()));
    }
  }
  throw InternalError(fmt::format(
      "simulation cannot finish: {} collectives and {} send/recv pairs never completed{}",
      collectives.size(), p2p.size(), detail));
}

}  // namespace meshsim
