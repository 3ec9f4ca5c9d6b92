// The steps of the discrete-event loop (simulation.h's execution rules; state in
// simulation_impl.h).
#include <fmt/format.h>

#include <algorithm>
#include <bit>

#include "meshsim/sim/error.h"
#include "simulation_impl.h"

namespace meshsim {

using detail::Arrival;
using detail::ChannelCount;
using detail::RankHot;
using detail::RankState;

// One turn of the loop: every event due now first (so that communications starting at one instant
// start together and the model re-shares once), then the communication model advanced to the
// next event, then that event. Returns the events handled (communications completed count as
// one each), 0 when there is nothing left.
uint64_t Simulation::Impl::step() {
  if (Event due; queue.pop_at(now, due)) {
    handle(due);
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
      // Swapped out (finish may start transfers and grow in_flight); both keep their capacity.
      finishing.clear();
      finishing.swap(in_flight[t.index()]);
      for (const uint32_t slot : finishing) {
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
  handle(e);
  return 1;
}

void Simulation::Impl::handle(const Event& e) {
  switch (e.kind) {
    case EventKind::kOpEnd:
      finish(e.payload);
      return;
    case EventKind::kHostWake:
      host_wake(RankId(e.payload));
      return;
  }
}

// A stream can become startable only when it frees up or its head op's last dependency ends, so
// finish() passes just those streams; scanning them in order starts ops in the same order as
// scanning every stream would. The communication streams go first and the compute stream (0)
// last, so that a kernel that becomes ready at the instant a collective does sees it in flight
// (ComputeContext).
void Simulation::Impl::try_start(RankId id, const RankHot& r, const ProgramInfo& p,
                                 uint64_t candidates) {
  const size_t n = p.num_streams;
  if (n < 64) {
    candidates &= (uint64_t{1} << n) - 1;
  }
  const auto start_ready = [&](uint64_t bits) {
    while (bits != 0) {
      const auto s = static_cast<size_t>(std::countr_zero(bits));
      bits &= bits - 1;
      detail::StreamState& st = streams[stream_slot(r, p, s)];
      if (st.busy) {
        continue;
      }
      const uint32_t op = p.stream_seq[st.head];
      if (op == ProgramInfo::kStreamEnd ||
          p.pending[p.at(op, r.local)] != 0) {
        continue;
      }
      // When the rank's host issued the op (the host model; without one, now).
      SimTime issued = now;
      if (p.has_host) {
        detail::HostState& h = host[id.index()];
        issued = issue_time(id, p, op);
        if (issued > now) {
          if (s == 0 && h.waiting_since == SimTime::max()) {
            h.waiting_since = now;
          }
          if (issued != SimTime::max()) {
            wake_at(id, issued);
          }
          continue;
        }
        if (s == 0 && h.waiting_since != SimTime::max()) {
          h.waited += now - h.waiting_since;
          h.waiting_since = SimTime::max();
        }
      }
      st.busy = true;
      ++st.head;
      start_op(id, r, p, op, issued);
    }
  };
  // The communication streams in index order, then the compute stream (0).
  start_ready(candidates & ~uint64_t{1});
  start_ready(candidates & uint64_t{1});
}

void Simulation::Impl::start_op(RankId id, const RankHot& r, const ProgramInfo& p,
                                uint32_t op_index, SimTime issued) {
  switch (p.meta[op_index].kind) {
    case OpKind::kCompute: {
      const Duration d = compute_duration(r, id, op_index);
      SIM_CHECK(d >= Duration::zero(), "negative duration {} ps for op {} of rank {}", d.ps(),
                op_index, id.value());
      queue.push(now + d, EventKind::kOpEnd,
                 begin(r, p, Arrival{id, op_index, now, issued}, 0));
      break;
    }
    case OpKind::kCollective:
      if (p.meta[op_index].holds_sms) {
        ++collectives_in_flight[id.index()];
      }
      arrive_collective(id, r, p, op_index, std::get<CollectiveWork>(p.ops[op_index]->work),
                        issued);
      break;
    case OpKind::kSend:
    case OpKind::kRecv: {
      const Op& op = *p.ops[op_index];
      arrive_p2p(id, r, p, op_index, std::get<PeerWork>(op.work), op.is_send, issued);
      break;
    }
  }
}

void Simulation::Impl::arrive_collective(RankId id, const RankHot& r, const ProgramInfo& p,
                                         uint32_t op, const CollectiveWork& w, SimTime issued) {
  const GroupId g = p.groups[p.at(w.group_slot, r.local)];
  const uint32_t ordinal = p.ordinal[op];
  detail::GroupRendezvous& rv = rendezvous[g.index()];
  SIM_CHECK(ordinal >= rv.base, "rank {} reaches collective #{} on group {} again", id.value(),
            ordinal, g.value());
  detail::PendingCollective& pc = rv.at(ordinal - rv.base);
  if (pc.arrivals.empty()) {
    pc.kind = w.kind;
    pc.bytes = w.bytes;
    if (pc.arrivals.capacity() == 0 && !spare_arrivals.empty()) {
      pc.arrivals = std::move(spare_arrivals.back());
      spare_arrivals.pop_back();
    }
  }
  SIM_CHECK(pc.kind == w.kind && pc.bytes == w.bytes,
            "collective #{} on group {}: rank {} issues {} of {} B, others {} of {} B", ordinal,
            g.value(), id.value(), to_string(w.kind), w.bytes.count(), to_string(pc.kind),
            pc.bytes.count());
  pc.arrivals.push_back(Arrival{id, op, now, issued});
  if (pc.arrivals.size() < rv.members) {
    return;
  }
  const TransferId t = comm.start_planned(now, collective_plan(g, w.kind, w.bytes));
  await(t, pc.arrivals, next_match++);  // touches no rendezvous: `pc` stays valid
  pc.arrivals.clear();
  spare_arrivals.push_back(std::move(pc.arrivals));
  pc.done = true;
  rv.drop_done();
}

CommPlan Simulation::Impl::collective_plan(GroupId g, CollectiveKind kind, Bytes bytes) {
  std::vector<detail::GroupRendezvous::Planned>& plans = rendezvous[g.index()].plans;
  for (const auto& p : plans) {
    if (p.kind == kind && p.bytes == bytes) {
      return p.plan;
    }
  }
  plans.push_back({kind, bytes, comm.plan_collective(kind, bytes, cost_groups[g.index()])});
  return plans.back().plan;
}

CommPlan Simulation::Impl::p2p_plan(RankId src, RankId dst, uint16_t tag, Bytes bytes) {
  std::vector<ChannelCount>& sent = ranks[src.index()].sends_issued;
  const auto c = std::find_if(sent.begin(), sent.end(), [&](const ChannelCount& x) {
    return x.peer == dst.value() && x.tag == tag;
  });
  SIM_CHECK(c != sent.end(), "send {}->{} tag {} matched before it was issued", src.value(),
            dst.value(), tag);
  if (!c->plan || c->plan->first != bytes) {
    c->plan.emplace(bytes,
                    comm.plan_p2p(ranks[src.index()].global, ranks[dst.index()].global, bytes));
  }
  return c->plan->second;
}

namespace {
// The count of messages issued so far on (peer, tag), incremented.
uint32_t next_on_channel(std::vector<ChannelCount>& channels, uint32_t peer, uint16_t tag) {
  for (ChannelCount& c : channels) {
    if (c.peer == peer && c.tag == tag) {
      return c.count++;
    }
  }
  channels.push_back(ChannelCount{peer, tag, 1, std::nullopt});
  return 0;
}
}  // namespace

void Simulation::Impl::arrive_p2p(RankId id, const RankHot& r, const ProgramInfo& p, uint32_t op,
                                  const PeerWork& w, bool is_send, SimTime issued) {
  const RankId peer = p.peers[p.at(w.peer_slot, r.local)];
  const RankId src = is_send ? id : peer;
  const RankId dst = is_send ? peer : id;
  RankState& me = ranks[id.index()];
  const uint32_t ordinal = next_on_channel(is_send ? me.sends_issued : me.recvs_issued,
                                           peer.value(), w.tag);
  std::vector<detail::PendingP2P>& pending = ranks[src.index()].p2p;
  auto it = std::find_if(pending.begin(), pending.end(), [&](const detail::PendingP2P& pp) {
    return pp.dst == dst.value() && pp.tag == w.tag && pp.ordinal == ordinal;
  });
  if (it == pending.end()) {
    pending.push_back(detail::PendingP2P{dst.value(), w.tag, ordinal, {}, {}, Bytes()});
    it = pending.end() - 1;
  }
  (is_send ? it->send : it->recv) = Arrival{id, op, now, issued};
  if (is_send) {
    it->bytes = w.bytes;
  }
  if (!it->send || !it->recv) {
    return;
  }
  SIM_CHECK(it->bytes == w.bytes, "send {}->{} tag {} #{}: sizes {} B and {} B differ",
            src.value(), dst.value(), w.tag, ordinal, it->bytes.count(), w.bytes.count());
  const Arrival both[] = {*it->send, *it->recv};
  const Bytes bytes = it->bytes;
  *it = pending.back();
  pending.pop_back();
  const TransferId t = comm.start_planned(now, p2p_plan(src, dst, w.tag, bytes));
  await(t, both, next_match++);
}

void Simulation::Impl::await(TransferId t, std::span<const Arrival> arrivals, uint64_t match) {
  if (in_flight.size() <= t.index()) {
    in_flight.resize(t.index() + 1);
  }
  SIM_CHECK(in_flight[t.index()].empty(), "the communication model reused transfer {} in flight",
            t.value());
  for (const Arrival& a : arrivals) {
    const RankHot& h = hot[a.rank.index()];
    in_flight[t.index()].push_back(begin(h, info(h), a, match));
  }
}

// Records `a` as running from now (its memory effects at start applied); its running slot, which is
// its stream's (a stream runs one op at a time), so that lockstep ranks touch adjacent slots.
uint32_t Simulation::Impl::begin(const RankHot& h, const ProgramInfo& p, const Arrival& a,
                                 uint64_t match) {
  const detail::OpMeta& m = p.meta[a.op];
  const auto slot = static_cast<uint32_t>(stream_slot(h, p, m.stream));
  running[slot] = detail::Running{a.rank, a.op, now};
  if (!op_subscribers.empty()) {
    running_records[slot] = detail::RunningRecord{a.ready, a.issued, match};
  }
  sweeps[a.rank.index()].on_start(now, m);
  if (m.memory_at_start) {
    apply_memory(a.rank, p, a.op, false);
  }
  return slot;
}

void Simulation::Impl::finish(uint32_t running_index) {
  const detail::Running run = running[running_index];
  RankHot& r = hot[run.rank.index()];
  ProgramInfo& p = info(r);
  const detail::OpMeta& m = p.meta[run.op];
  if (m.memory_at_end) {
    apply_memory(run.rank, p, run.op, true);
  }
  sweeps[run.rank.index()].on_end(now, m, now - run.start, p.flops[run.op]);
  streams[stream_slot(r, p, m.stream)].busy = false;
  if (m.holds_sms) {
    --collectives_in_flight[run.rank.index()];
  }
  --r.remaining;
  r.end = std::max(r.end, now);
  uint64_t candidates = uint64_t{1} << m.stream;
  if (p.has_host && host_after_end(run.rank, r, p, run.op)) {
    candidates = ~uint64_t{0};  // the host goes on: any stream may have its next op issued
  }
  for (uint32_t i = p.succ_offsets[run.op]; i < p.succ_offsets[run.op + 1]; ++i) {
    const uint32_t succ = p.succ[i];
    if (--p.pending[p.at(succ, r.local)] == 0) {
      candidates |= uint64_t{1} << p.meta[succ].stream;
    }
  }
  if (!op_subscribers.empty()) {
    const detail::RunningRecord& more = running_records[running_index];
    const OpRecord rec{run.rank,  OpId(run.op), m.stream,   more.ready,
                       run.start, now,          more.match, more.issued};
    for (const auto& cb : op_subscribers) {
      cb(rec);
    }
  }
  try_start(run.rank, r, p, candidates);
}

SimTime Simulation::Impl::issue_time(RankId id, const ProgramInfo& p, uint32_t op) const {
  const detail::HostState& h = host[id.index()];
  if (h.next_sync < p.syncs.size() && op > p.syncs[h.next_sync]) {
    return SimTime::max();
  }
  // The segment of `op`: the last one, unless `op` was issued before the last sync (an op of
  // another stream still waiting for its dependencies).
  auto seg = h.segments.end() - 1;
  if (op < seg->first) {
    seg = std::upper_bound(h.segments.begin(), h.segments.end(), op,
                           [](uint32_t o, const auto& s) { return o < s.first; }) -
          1;
  }
  return seg->second + Duration::from_ps(p.host_prefix[op + 1] - p.host_prefix[seg->first]);
}

void Simulation::Impl::wake_at(RankId id, SimTime when) {
  detail::HostState& h = host[id.index()];
  if (when < h.wake) {
    h.wake = when;
    queue.push(when, EventKind::kHostWake, id.value());
  }
}

void Simulation::Impl::host_wake(RankId id) {
  detail::HostState& h = host[id.index()];
  if (h.wake == now) {
    h.wake = SimTime::max();
  }
  const RankHot& r = hot[id.index()];
  try_start(id, r, info(r));
}

// kWaitOp is satisfied when its op ends; kWaitDevice when every op up to it has ended, which is
// when the rank has finished that many ops (none after it can have started: the host has not
// issued them).
bool Simulation::Impl::host_after_end(RankId id, const RankHot& r, const ProgramInfo& p,
                                      uint32_t op) {
  detail::HostState& h = host[id.index()];
  if (h.next_sync >= p.syncs.size()) {
    return false;
  }
  const uint32_t sync = p.syncs[h.next_sync];
  const bool satisfied = p.sync_kinds[h.next_sync] == HostSync::kWaitOp
                             ? op == sync
                             : p.program.size() - r.remaining == size_t{sync} + 1;
  if (!satisfied) {
    return false;
  }
  ++h.next_sync;
  h.segments.emplace_back(sync + 1, now);
  return true;
}

void Simulation::Impl::apply_memory(RankId id, const ProgramInfo& p, uint32_t op, bool at_end) {
  for (uint32_t i = p.memory_offsets[op]; i < p.memory_offsets[op + 1]; ++i) {
    const MemoryEffect& e = p.memory[i];
    if (e.at_end == at_end) {
      change_memory(id, e.category, e.delta);
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

}  // namespace meshsim
