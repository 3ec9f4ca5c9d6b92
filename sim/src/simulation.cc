#include "meshsim/sim/simulation.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "meshsim/sim/error.h"
#include "meshsim/sim/rng.h"
#include "simulation_impl.h"

namespace meshsim {

using detail::RankState;

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
  // Checked while the simulation is built, never in the event loop.
  impl_->op_instances += impl_->programs[program.index()].ops.size();
  if (impl_->op_instances > kMaxOpInstances) {
    throw LimitError(fmt::format("more than {} ops (2^30) over the {} simulated ranks: too large "
                                 "to simulate in a minute or two (Llama-3-405B on 98,304 GPUs "
                                 "simulated in full runs about 0.4 G)",
                                 kMaxOpInstances, impl_->ranks.size() + 1));
  }
  detail::RankHot h;
  h.program = program;
  h.local = impl_->programs[program.index()].ranks++;
  impl_->hot.push_back(h);
  RankState r;
  r.global = global_rank.value_or(RankId(static_cast<uint32_t>(impl_->ranks.size())));
  r.group_slots = std::move(group_slots);
  r.peer_slots = std::move(peer_slots);
  impl_->ranks.push_back(std::move(r));
  return RankId(static_cast<uint32_t>(impl_->ranks.size() - 1));
}

void Simulation::set_compute_slowdown(RankId rank, double factor) {
  SIM_CHECK(rank.index() < impl_->ranks.size(), "unknown rank {}", rank.value());
  SIM_CHECK(std::isfinite(factor) && factor > 0, "rank {}: compute slowdown {} is not > 0",
            rank.value(), factor);
  impl_->hot[rank.index()].slowdown = factor;
}

void Simulation::set_kernel_jitter(double cv, uint64_t seed) {
  SIM_CHECK(std::isfinite(cv) && cv >= 0, "kernel jitter cv {} is not >= 0", cv);
  const double sigma2 = std::log1p(cv * cv);
  impl_->jitter_sigma = std::sqrt(sigma2);
  impl_->jitter_shift = sigma2 / 2;
  impl_->jitter_seed = seed;
}

void Simulation::on_op_end(std::function<void(const OpRecord&)> callback) {
  SIM_CHECK(!impl_->ran, "on_op_end after Simulation::run");
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
  return impl_->info(impl_->hot[rank.index()]).program;
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
    const ProgramInfo& p = info(hot[i]);
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

// Per program, once: its compute ops' times (asked of the cost model for the first rank running
// it; the cost model's time does not depend on the rank, heterogeneity is the engine's) and its
// pending counters for all its ranks.
namespace {

// Which earlier slot each group slot repeats (itself if none), as `slots` bind them.
std::vector<uint16_t> repeated_slots(const std::vector<GroupId>& slots) {
  std::vector<uint16_t> canon(slots.size());
  for (size_t a = 0; a < slots.size(); ++a) {
    canon[a] = static_cast<uint16_t>(a);
    for (size_t b = 0; b < a; ++b) {
      if (slots[b] == slots[a]) {
        canon[a] = canon[b];
        break;
      }
    }
  }
  return canon;
}

}  // namespace

// A collective's ordinal counts the collectives before it, in program order, on the same group.
// Where two slots of a program name one group (an EP group that is also the DP group, say), their
// collectives share one count. Every rank of a program must bind its slots with the same pattern
// of repeats as the program's first rank (a SIM_CHECK otherwise).
void Simulation::Impl::number_collectives(const std::vector<std::optional<RankId>>& first) {
  std::vector<std::vector<uint16_t>> canon(programs.size());
  for (size_t p = 0; p < programs.size(); ++p) {
    if (first[p]) {
      canon[p] = repeated_slots(ranks[first[p]->index()].group_slots);
    }
  }
  for (uint32_t i = 0; i < ranks.size(); ++i) {
    const size_t p = hot[i].program.index();
    SIM_CHECK(repeated_slots(ranks[i].group_slots) == canon[p],
              "rank {} binds its group slots with other repeats than rank {} of the same program",
              i, first[p]->value());
  }
  for (size_t p = 0; p < programs.size(); ++p) {
    ProgramInfo& info = programs[p];
    std::vector<uint32_t> next(canon[p].size(), 0);
    for (size_t op = 0; op < info.ops.size(); ++op) {
      if (const auto* c = std::get_if<CollectiveWork>(&info.ops[op]->work)) {
        info.ordinal[op] = next[canon[p][c->group_slot]]++;
      }
    }
  }
}

void Simulation::Impl::prepare() {
  std::vector<std::optional<RankId>> first(programs.size());
  for (uint32_t i = 0; i < ranks.size(); ++i) {
    std::optional<RankId>& f = first[hot[i].program.index()];
    if (!f) {
      f = RankId(i);
    }
  }
  for (size_t p = 0; p < programs.size(); ++p) {
    ProgramInfo& info = programs[p];
    info.reset_pending();
    info.compute_time.assign(info.ops.size(), Duration::zero());
    info.interfered.assign(info.ops.size() * ProgramInfo::kInterferenceCached,
                           Duration::from_ps(-1));
    if (!first[p]) {
      continue;
    }
    for (size_t op = 0; op < info.ops.size(); ++op) {
      if (const auto* c = std::get_if<ComputeWork>(&info.ops[op]->work)) {
        info.compute_time[op] = c->measured ? *c->measured : compute.compute_time(*first[p], *c);
      }
    }
  }
  // The streams, group slots and peer slots of the ranks, laid out per program (ProgramInfo).
  size_t stream_slots = 0;
  for (ProgramInfo& info : programs) {
    info.stream_base = static_cast<uint32_t>(stream_slots);
    stream_slots += size_t{info.num_streams} * info.ranks;
    info.groups.assign(info.uses_groups ? (info.max_group_slot + size_t{1}) * info.ranks : 0,
                       GroupId());
    info.peers.assign(info.uses_peers ? (info.max_peer_slot + size_t{1}) * info.ranks : 0,
                      RankId());
  }
  streams.resize(stream_slots);
  for (uint32_t i = 0; i < ranks.size(); ++i) {
    ProgramInfo& info = this->info(hot[i]);
    for (size_t g = 0; g < info.groups.size() / info.ranks; ++g) {
      info.groups[info.at(g, hot[i].local)] = ranks[i].group_slots[g];
    }
    for (size_t k = 0; k < info.peers.size() / info.ranks; ++k) {
      info.peers[info.at(k, hot[i].local)] = ranks[i].peer_slots[k];
    }
  }
  number_collectives(first);
  rendezvous.resize(groups.size());
  for (size_t g = 0; g < groups.size(); ++g) {
    rendezvous[g].members = static_cast<uint32_t>(groups[g].size());
  }
  sweeps.resize(ranks.size());
  collectives_in_flight.assign(ranks.size(), 0);
}

void Simulation::Impl::init_rank(RankId id) {
  RankHot& r = hot[id.index()];
  const ProgramInfo& p = info(r);
  r.stream_base = p.stream_base + r.local;
  for (uint32_t s = 0; s < p.num_streams; ++s) {
    streams[stream_slot(r, p, s)].head = p.stream_first[s];
  }
  r.remaining = static_cast<uint32_t>(p.program.size());
  for (const auto& [category, bytes] : p.program.initial_memory()) {
    change_memory(id, category, bytes);
  }
}

// The program's time for compute op `op` started with `collectives` in flight: asked once per
// program and count (the first kInterferenceCached counts; more are asked every time).
Duration Simulation::Impl::interfered_time(const RankHot& r, RankId id, uint32_t op,
                                           int32_t collectives) const {
  const ProgramInfo& p = programs[r.program.index()];
  const auto ask = [&] {
    return compute.compute_time_in(id, std::get<ComputeWork>(p.ops[op]->work),
                                   ComputeContext{collectives});
  };
  if (collectives > ProgramInfo::kInterferenceCached) {
    return ask();
  }
  Duration& cached = p.interfered[static_cast<size_t>(op) * ProgramInfo::kInterferenceCached +
                                  static_cast<size_t>(collectives - 1)];
  if (cached < Duration::zero()) {
    cached = ask();
  }
  return cached;
}

// The rank's time for a compute op: the program's (or the cost model's, with the collectives in
// flight that slow it), times its slowdown and jitter draw.
Duration Simulation::Impl::compute_duration(const RankHot& r, RankId id, uint32_t op) const {
  const int32_t collectives = collectives_in_flight[id.index()];
  // Without collectives in flight the program's time; with them, the cost model's interference.
  // (A measured kernel's time already holds whatever ran beside it.)
  const Duration base =
      collectives == 0 || std::get<ComputeWork>(info(r).ops[op]->work).measured
          ? info(r).compute_time[op]
          : interfered_time(r, id, op, collectives);
  double factor = r.slowdown;
  if (jitter_sigma > 0) {
    const double z = standard_normal_at(jitter_seed, ranks[id.index()].global.value(), op);
    factor *= std::exp(jitter_sigma * z - jitter_shift);
  }
  if (factor == 1.0) {
    return base;
  }
  return Duration::from_ps(std::llround(static_cast<double>(base.ps()) * factor));
}

RunResult Simulation::run() {
  Impl& s = *impl_;
  SIM_CHECK(!s.ran, "Simulation::run called twice");
  s.ran = true;
  s.validate_ranks();
  s.prepare();
  for (uint32_t i = 0; i < s.ranks.size(); ++i) {
    s.init_rank(RankId(i));
  }
  s.running.resize(s.streams.size());
  if (!s.op_subscribers.empty()) {
    s.running_records.resize(s.streams.size());
  }
  for (uint32_t i = 0; i < s.ranks.size(); ++i) {
    s.try_start(RankId(i), s.hot[i], s.info(s.hot[i]));
  }
  uint64_t events = 0;
  while (const uint64_t n = s.step()) {
    events += n;
  }
  RunResult result;
  result.events = events;
  for (const detail::RankHot& r : s.hot) {
    if (r.remaining != 0) {
      s.report_deadlock();
    }
    result.end = std::max(result.end, r.end);
  }
  result.ranks.reserve(s.ranks.size());
  for (size_t i = 0; i < s.ranks.size(); ++i) {
    result.ranks.push_back(
        RankResult{s.hot[i].end, s.ranks[i].peak, s.sweeps[i].result(result.end)});
  }
  return result;
}

size_t Simulation::Impl::pending_collectives() const {
  size_t n = 0;
  for (const detail::GroupRendezvous& g : rendezvous) {
    for (const detail::PendingCollective& pc : g.window()) {
      n += !pc.done && !pc.arrivals.empty() ? 1u : 0u;
    }
  }
  return n;
}

size_t Simulation::Impl::pending_p2p() const {
  size_t n = 0;
  for (const RankState& r : ranks) {
    n += r.p2p.size();
  }
  return n;
}

void Simulation::Impl::report_deadlock() const {
  std::string detail;
  int shown = 0;
  for (size_t i = 0; i < ranks.size() && shown < 4; ++i) {
    const detail::RankHot& r = hot[i];
    if (r.remaining == 0) {
      continue;
    }
    ++shown;
    const ProgramInfo& p = info(r);
    for (uint32_t s = 0; s < p.num_streams; ++s) {
      const detail::StreamState& st = streams[stream_slot(r, p, s)];
      if (st.head == p.stream_first[s] || !st.busy) {
        continue;
      }
      const Op& op = *p.ops[p.stream_seq[st.head - 1]];
      detail += fmt::format("; rank {} stream {} waits in '{}' ({})", i, s, op.name,
                            to_string(op.kind()));
    }
  }
  throw InternalError(fmt::format(
      "simulation cannot finish: {} collectives and {} send/recv pairs never completed{}",
      pending_collectives(), pending_p2p(), detail));
}

}  // namespace meshsim
