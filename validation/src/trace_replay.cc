// A measured step -> a program for one simulated rank -> the engine (trace_replay.h).
#include "meshsim/validation/trace_replay.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>

#include "meshsim/sim/error.h"
#include "meshsim/sim/simulation.h"
#include "meshsim/sim/timeline.h"
#include "meshsim/topology/compute_model.h"

namespace meshsim::validation {

namespace {

using traces::DeviceOp;
using traces::HostSync;
using traces::RankStep;
using traces::RankTrace;

// A host event of the chain: a launch call returning, or a synchronizing call.
struct HostItem {
  Duration at;  // relative to the step's start: a launch's end, a sync's start
  bool sync = false;
  uint32_t launch = 0;   // the launch call (not sync)
  size_t sync_index = 0;  // into RankStep::syncs (sync)
};

// Cross-stream waits the measured timeline shows (trace_replay.h): for each op, the op of another
// stream of its device it waited for, or none.
std::vector<std::optional<size_t>> inferred_waits(const RankStep& step) {
  const size_t n = step.ops.size();
  std::vector<std::optional<size_t>> waits(n);
  std::map<std::pair<int32_t, int64_t>, SimTime> stream_end;  // (device, stream) -> last end
  std::map<int32_t, std::multimap<SimTime, size_t>> ends;     // device -> (end, op) so far
  for (size_t i = 0; i < n; ++i) {
    const DeviceOp& op = step.ops[i];
    const auto key = std::make_pair(op.device, op.stream);
    std::optional<SimTime> ready;
    if (const auto it = stream_end.find(key); it != stream_end.end()) {
      ready = it->second;
    }
    if (op.launch_start) {
      const SimTime returned = *op.launch_start + op.launch_duration;
      ready = ready ? std::max(*ready, returned) : returned;
    }
    if (ready && op.start - *ready > kWaitSlack) {
      const std::multimap<SimTime, size_t>& e = ends[op.device];
      auto it = e.upper_bound(op.start);
      while (it != e.begin()) {
        --it;
        if (op.start - it->first > kWaitSlack) {
          break;
        }
        if (step.ops[it->second].stream != op.stream) {
          waits[i] = it->second;
          break;
        }
      }
    }
    stream_end[key] = std::max(stream_end[key], op.end());
    ends[op.device].emplace(op.end(), i);
  }
  return waits;
}

class Builder {
 public:
  // `names`: ops carry their kernel's name (for traces; a replay alone needs none).
  Builder(const RankTrace& t, const RankStep& s, std::vector<ReplayOp>& ops, bool names)
      : t_(t),
        s_(s),
        ops_(ops),
        names_(names),
        waits_(inferred_waits(s)),
        op_id_(s.ops.size()),
        launch_of_(s.ops.size()) {}

  Program build() {
    assign_streams();
    const std::vector<HostItem> items = host_items();
    // At most one op per device op and per host item, one more per sync (the host's time before
    // it), one anchor per device op and the work queued before the step.
    const size_t most = 2 * s_.ops.size() + items.size() + s_.syncs.size() + 1;
    program_.reserve(most);
    measured_.reserve(most);
    if (queued_ > Duration::zero()) {
      queued_op_ = add_anchor("work queued before the step (measured)", queued_stream(),
                              Duration::zero(), queued_);
    }
    for (const HostItem& h : items) {
      if (h.sync) {
        add_sync(s_.syncs[h.sync_index]);
      } else {
        add_launch(h);
      }
    }
    add_ready(true);
    return std::move(program_);
  }

  const std::vector<std::optional<OpId>>& op_ids() const { return op_id_; }
  // The host op that launched each device op, where it has one.
  const std::vector<std::optional<OpId>>& launch_ops() const { return launch_of_; }
  int64_t host_ops() const { return host_ops_; }
  int64_t inferred() const { return inferred_; }
  int64_t anchored() const { return anchored_; }
  const std::map<std::vector<RankId>, uint16_t>& groups() const { return groups_; }
  // Each op's measured span, relative to the step's start, by OpId.
  const std::vector<std::pair<Duration, Duration>>& measured() const { return measured_; }
  uint8_t host_stream() const { return host_stream_; }
  // Track names by stream index: "stream 7" (with the GPU when the rank drives several), "host".
  std::vector<std::string> stream_names() const {
    std::vector<std::string> names(size_t{host_stream_} + 3);
    bool several = false;
    for (const auto& [key, index] : streams_) {
      several = several || key.first != streams_.begin()->first.first;
    }
    for (const auto& [key, index] : streams_) {
      names[index] = several ? fmt::format("gpu {} stream {}", key.first, key.second)
                             : fmt::format("stream {}", key.second);
    }
    names[host_stream_] = "host";
    names[peer_stream()] = "peers (measured)";
    names[queued_stream()] = "queued before the step (measured)";
    return names;
  }
  // The measured end of the work queued before the step, from the step's start (RankStep::
  // queued_until): where both timelines start the step's clock.
  Duration queued() const { return queued_; }

 private:
  Duration rel(SimTime t) const { return std::max(Duration::zero(), t - s_.start); }
  uint8_t peer_stream() const { return static_cast<uint8_t>(host_stream_ + 1); }
  uint8_t queued_stream() const { return static_cast<uint8_t>(host_stream_ + 2); }

  // An op of the measurement the replay does not simulate, on its own stream, ending at `until`
  // (from the step's start): the chain of such ops on a stream keeps each at its measured time.
  OpId add_anchor(std::string name, uint8_t stream, Duration from, Duration until) {
    return add_measured(std::move(name), stream, OpClass::kCommunication, from,
                        std::max(Duration::zero(), until - from));
  }

  // An op of `stream` lasting its measured `d`, from `from` (relative to the step's start).
  OpId add_measured(std::string name, uint8_t stream, OpClass op_class, Duration from, Duration d) {
    Op o;
    if (names_) {
      o.name = std::move(name);
    }
    o.stream = stream;
    ComputeWork w;
    w.op_class = op_class;
    w.measured = d;
    o.work = w;
    const OpId id = program_.add(std::move(o));
    measured_.emplace_back(from, from + d);
    return id;
  }

  void assign_streams() {
    for (const DeviceOp& op : s_.ops) {
      const auto key = std::make_pair(op.device, op.stream);
      if (!streams_.contains(key)) {
        if (streams_.size() >= 253) {
          throw InputError(t_.source, "/traceEvents",
                           "more than 253 device streams in one step: meshsim's programs hold at "
                           "most 256 streams per rank, three of them the replay's own (the host, "
                           "the peers, the work queued before the step)");
        }
        streams_.emplace(key, static_cast<uint8_t>(streams_.size()));
      }
    }
    host_stream_ = static_cast<uint8_t>(streams_.size());
  }

  // The chain (trace_replay.h): every distinct launch call at its end, every sync at its start.
  std::vector<HostItem> host_items() const {
    std::vector<HostItem> items;
    std::vector<uint32_t> seen;
    for (const DeviceOp& op : s_.ops) {
      if (op.launch) {
        seen.push_back(*op.launch);
      }
    }
    std::sort(seen.begin(), seen.end());
    seen.erase(std::unique(seen.begin(), seen.end()), seen.end());
    for (const DeviceOp& op : s_.ops) {
      if (op.launch && std::binary_search(seen.begin(), seen.end(), *op.launch)) {
        items.push_back({rel(*op.launch_start + op.launch_duration), false, *op.launch, 0});
        seen.erase(std::lower_bound(seen.begin(), seen.end(), *op.launch));
      }
    }
    for (size_t i = 0; i < s_.syncs.size(); ++i) {
      items.push_back({rel(s_.syncs[i].start), true, 0, i});
    }
    std::stable_sort(items.begin(), items.end(), [](const HostItem& a, const HostItem& b) {
      return std::tie(a.at, a.sync) < std::tie(b.at, b.sync);
    });
    return items;
  }

  // A host op lasting `d`, measured from `from` (relative to the step's start).
  OpId add_host(std::string name, Duration from, Duration d) {
    ++host_ops_;
    return add_measured(std::move(name), host_stream_, OpClass::kElementwise, from, d);
  }

  void add_launch(const HostItem& h) {
    const Duration delay = std::max(Duration::zero(), h.at - chain_);
    launch_op_[h.launch] =
        add_host(fmt::format("host: {}", t_.name_of(t_.events[h.launch])), chain_, delay);
    chain_ = std::max(chain_, h.at);
    add_ready(false);
  }

  void add_sync(const HostSync& sync) {
    const Duration s0 = rel(sync.start);
    const Duration s1 = rel(sync.start + sync.duration);
    if (s0 > chain_) {
      add_host("host: before sync", chain_, s0 - chain_);
      chain_ = s0;
    }
    add_ready(false);
    // What it waited for: the added op with the latest end within the call.
    std::optional<size_t> waited;
    for (size_t i = 0; i < next_; ++i) {
      const Duration end = rel(s_.ops[i].end());
      if (op_id_[i] && end > s0 && end <= s1 &&
          (!waited || end > rel(s_.ops[*waited].end()))) {
        waited = i;
      }
    }
    // Or, where no op of the step ended during it but the work queued before the step did, that
    // work (its measured end: the replay does not have it).
    const bool on_queued = !waited && queued_op_ && s1 >= queued_;
    const Duration released = waited      ? std::max(s0, rel(s_.ops[*waited].end()))
                              : on_queued ? std::max(s0, queued_)
                                          : s0;
    const OpId id = add_host(fmt::format("host: {}", t_.name_of(t_.events[sync.event])), released,
                             std::max(Duration::zero(), s1 - released));
    if (waited) {
      program_.add_dependency(*op_id_[*waited], id);
    } else if (on_queued) {
      program_.add_dependency(*queued_op_, id);
    }
    chain_ = std::max(chain_, s1);
  }

  // Adds device ops in start order while their launch is in the chain (or they have none);
  // `all`: every remaining one.
  void add_ready(bool all) {
    while (next_ < s_.ops.size()) {
      const DeviceOp& op = s_.ops[next_];
      if (!all && op.launch && !launch_op_.contains(*op.launch)) {
        return;
      }
      add_device(next_++);
    }
  }

  void add_device(size_t i) {
    const DeviceOp& d = s_.ops[i];
    ReplayOp& r = ops_[i];
    std::optional<OpId> peer;
    if (d.communication && r.cost == ReplayCost::kMeasured) {
      // A transfer kept as measured (point-to-point, a collective without its metadata) waits for
      // peers the replay does not simulate: it starts no earlier than it did, on their clock.
      const Duration at = rel(d.start);
      peer = add_anchor(names_ ? fmt::format("peers: {}", t_.name_of(t_.events[d.event])) : "",
                        peer_stream(), peer_chain_, at);
      peer_chain_ = std::max(peer_chain_, at);
      ++anchored_;
    }
    Op o;
    if (names_) {
      o.name = t_.name_of(t_.events[d.event]);
    }
    o.stream = streams_.at({d.device, d.stream});
    if (r.collective) {
      const auto [it, added] =
          groups_.try_emplace(r.group, static_cast<uint16_t>(groups_.size()));
      r.collective->group_slot = it->second;
      o.work = *r.collective;
    } else {
      o.work = r.compute;
    }
    const OpId id = program_.add(std::move(o));
    measured_.emplace_back(rel(d.start), rel(d.end()));
    op_id_[i] = id;
    if (d.launch) {
      if (const auto it = launch_op_.find(*d.launch); it != launch_op_.end()) {
        program_.add_dependency(it->second, id);
        launch_of_[i] = it->second;
      }
    }
    if (const auto w = waits_[i]; w && op_id_[*w]) {
      program_.add_dependency(*op_id_[*w], id);
      ++inferred_;
    }
    if (peer) {
      program_.add_dependency(*peer, id);
    }
  }

  const RankTrace& t_;
  const RankStep& s_;
  std::vector<ReplayOp>& ops_;
  bool names_ = false;
  std::vector<std::optional<size_t>> waits_;
  std::vector<std::optional<OpId>> op_id_;
  std::vector<std::optional<OpId>> launch_of_;
  std::map<std::pair<int32_t, int64_t>, uint8_t> streams_;
  std::map<uint32_t, OpId> launch_op_;
  std::map<std::vector<RankId>, uint16_t> groups_;
  Program program_;
  std::vector<std::pair<Duration, Duration>> measured_;
  uint8_t host_stream_ = 0;
  Duration chain_;
  Duration peer_chain_;
  Duration queued_ = rel(s_.queued_until);
  std::optional<OpId> queued_op_;
  size_t next_ = 0;
  int64_t host_ops_ = 0;
  int64_t inferred_ = 0;
  int64_t anchored_ = 0;
};

}  // namespace

Replay replay_step(const RankTrace& trace, const RankStep& step, int64_t global_rank,
                   int64_t world, const topology::Chip& chip, CommModel& comm,
                   bool keep_timelines) {
  SIM_CHECK(global_rank >= 0 && global_rank < world, "rank {} outside a world of {}", global_rank,
            world);
  Replay r;
  r.rank = global_rank;
  r.step = step.number;
  r.ops = cost_ops(trace, step, global_rank, world, chip);
  Builder sim_builder(trace, step, r.ops, keep_timelines);
  Program program = sim_builder.build();
  if (keep_timelines) {
    std::vector<ReplayOp> copy = r.ops;
    r.program = Builder(trace, step, copy, true).build();  // the same program, kept for traces
  }
  r.host_ops = sim_builder.host_ops();
  r.stream_names = sim_builder.stream_names();
  r.inferred_dependencies = sim_builder.inferred();
  r.anchored_transfers = sim_builder.anchored();

  const topology::RooflineComputeModel compute(chip);
  Simulation sim(compute, comm);
  const ProgramIndex index = sim.add_program(std::move(program));
  std::vector<GroupId> slots(sim_builder.groups().size());
  r.groups.resize(slots.size());
  for (const auto& [ranks, slot] : sim_builder.groups()) {
    slots[slot] = sim.add_group({RankId(0)}, ranks);
    r.groups[slot] = ranks;
  }
  (void)sim.add_rank(index, slots, {}, RankId(static_cast<uint32_t>(global_rank)));
  // Each op's simulated span, by OpId (and every record, for a trace).
  const size_t n_ops = sim_builder.measured().size();
  std::vector<std::pair<SimTime, SimTime>> span_of(n_ops);
  sim.on_op_end([&span_of, &r, keep_timelines](const OpRecord& rec) {
    span_of[rec.op.index()] = {rec.start, rec.end};
    if (keep_timelines) {
      r.timeline.ops.push_back(rec);
    }
  });
  (void)sim.run();

  std::vector<traces::Span> spans;
  spans.reserve(r.ops.size());
  for (size_t i = 0; i < r.ops.size(); ++i) {
    ReplayOp& op = r.ops[i];
    const auto [start, end] = span_of[sim_builder.op_ids()[i]->index()];
    op.simulated_start = start;
    op.simulated = end - start;
    r.measured_by_cost[static_cast<size_t>(op.cost)] += op.measured;
    const DeviceOp& d = step.ops[i];
    traces::Span s{start, end, d.op_class, d.communication, d.p2p, std::nullopt};
    if (const auto launch = sim_builder.launch_ops()[i]) {
      s.launched = span_of[launch->index()].second;
    }
    spans.push_back(s);
  }
  SimTime first = spans.empty() ? SimTime::zero() : spans.front().start;
  for (const traces::Span& s : spans) {
    first = std::min(first, s.start);
  }
  // The step's clock starts where the measured one does: at the end of the work queued before it
  // (which the replay keeps at its measured time), else at its first op.
  first = std::max(first, SimTime::zero() + sim_builder.queued());
  r.simulated = traces::breakdown(std::move(spans), first);
  r.simulated_step = r.simulated.step;
  r.measured = traces::breakdown(traces::measured_spans(step), SimTime::zero());
  r.measured_step = step.duration();
  if (!keep_timelines) {
    return r;
  }
  // The measured timeline of the same program: every op at its measured span.
  const auto& measured = sim_builder.measured();
  uint64_t match = uint64_t{1} << 40;  // apart from the simulated records' matches
  for (uint32_t id = 0; id < measured.size(); ++id) {
    const Op& op = r.program.op(OpId(id));
    OpRecord rec;
    rec.rank = RankId(0);
    rec.op = OpId(id);
    rec.stream = op.stream;
    rec.start = SimTime::zero() + measured[id].first;
    rec.ready = rec.start;
    rec.end = SimTime::zero() + measured[id].second;
    rec.match = op.kind() == OpKind::kCompute ? 0 : match++;
    r.measured_timeline.ops.push_back(rec);
  }
  sort_by_completion(r.measured_timeline.ops);  // one rank: by end, then op
  return r;
}

}  // namespace meshsim::validation
