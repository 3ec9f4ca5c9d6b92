#include "trace_builder.h"

#include <algorithm>
#include <cmath>
#include <variant>

#include "meshsim/sim/error.h"

namespace meshsim::traces {

TraceBuilder::TraceBuilder(const Simulation& sim, TraceSink& sink, TraceOptions options)
    : sim_(sim), sink_(sink), options_(std::move(options)) {
  sink_.begin();
  if (!options_.metadata.empty()) {
    sink_.write_metadata(process(kClusterPid, "cluster"), options_.metadata);
  }
}

void TraceBuilder::check_open() const { SIM_CHECK(!finished_, "trace written to after finish()"); }

TraceBuilder::RankTracks& TraceBuilder::rank_tracks(RankId rank) {
  if (rank.index() >= ranks_.size()) {
    ranks_.resize(std::max(rank.index() + 1, sim_.num_ranks()));
  }
  return ranks_[rank.index()];
}

bool TraceBuilder::included(RankId rank) {
  RankTracks& t = rank_tracks(rank);
  if (t.included < 0) {
    t.included = !options_.include_rank || options_.include_rank(rank) ? 1 : 0;
  }
  return t.included == 1;
}

RankPlacement TraceBuilder::default_placement(RankId rank) {
  if (label_width_ == 0) {
    int64_t max_global = 0;
    for (size_t i = 0; i < sim_.num_ranks(); ++i) {
      max_global =
          std::max<int64_t>(max_global, sim_.global_rank(RankId(static_cast<uint32_t>(i))).value());
    }
    label_width_ = rank_label_width(max_global);
  }
  const int64_t global =
      rank.index() < sim_.num_ranks() ? sim_.global_rank(rank).value() : rank.value();
  std::string label = rank_label(global, label_width_);
  SIM_CHECK(rank.value() < static_cast<uint32_t>(kMaxPid), "rank {} beyond the pid range",
            rank.value());
  const int32_t pid = static_cast<int32_t>(rank.value()) + 1;
  return RankPlacement{pid, label, label};
}

const ProcessTrack& TraceBuilder::process(int32_t pid, const std::string& name) {
  auto it = processes_.find(pid);
  if (it != processes_.end()) {
    SIM_CHECK(it->second.name == name, "pid {} is named both '{}' and '{}'", pid, it->second.name,
              name);
    return it->second;
  }
  ProcessTrack p{process_track_uuid(pid), pid, process_sort_rank(pid), name};
  it = processes_.emplace(pid, std::move(p)).first;
  sink_.add_process(it->second);
  return it->second;
}

const ThreadTrack& TraceBuilder::thread(RankId rank, uint8_t stream, bool host_copies) {
  RankTracks& t = rank_tracks(rank);
  if (!t.placed) {
    t.placement = options_.placement ? options_.placement(rank) : default_placement(rank);
    SIM_CHECK(t.placement.pid >= 1 && t.placement.pid <= kMaxPid,
              "rank {} placed in pid {} (expected 1..{})", rank.value(), t.placement.pid, kMaxPid);
    t.placed = true;
  }
  if (t.threads.size() <= stream) {
    t.threads.resize(size_t{stream} + 1);
  }
  ThreadTrack& th = t.threads[stream];
  if (th.uuid == 0) {
    const ProcessTrack& p = process(t.placement.pid, t.placement.process_name);
    th = ThreadTrack{thread_track_uuid(rank, stream),
                     p.uuid,
                     p.pid,
                     thread_tid(rank, stream),
                     thread_sort_rank(rank, stream),
                     t.placement.track_prefix + " " +
                         (options_.stream_name ? options_.stream_name(rank, stream)
                                               : stream_label(stream, host_copies))};
    sink_.add_thread(th);
  }
  return th;
}

const CounterTrack& TraceBuilder::memory_track(RankId rank) {
  RankTracks& t = rank_tracks(rank);
  if (!t.memory) {
    // The process comes with the rank's compute thread; make sure it exists first.
    const ThreadTrack& compute = thread(rank, 0);
    t.memory = CounterTrack{memory_track_uuid(rank), compute.process_uuid, compute.pid,
                            t.placement.track_prefix + " memory", CounterUnit::kBytes};
    sink_.add_counter(*t.memory);
  }
  return *t.memory;
}

void TraceBuilder::write_op(const OpRecord& record, FlowRole role) {
  const Op& op = sim_.program_of(record.rank).op(record.op);
  describe_op(op, record, slice_, scratch_);
  slice_.flow = role;
  slice_.flow_id = role == FlowRole::kNone ? 0 : record.match;
  const auto* compute = std::get_if<ComputeWork>(&op.work);
  const bool host_copy = compute != nullptr && compute->host != HostCopy::kNone;
  sink_.write_slice(thread(record.rank, record.stream, host_copy), slice_);
}

const ThreadTrack& TraceBuilder::host_track(RankId rank) {
  RankTracks& t = rank_tracks(rank);
  if (!t.host) {
    const ThreadTrack& compute = thread(rank, 0);  // places the rank and makes its process
    t.host = ThreadTrack{thread_track_uuid(rank, kHostStream),
                         compute.process_uuid,
                         compute.pid,
                         thread_tid(rank, kHostStream),
                         thread_sort_rank(rank, kHostStream),
                         t.placement.track_prefix + " " + stream_label(kHostStream)};
    sink_.add_thread(*t.host);
  }
  return *t.host;
}

void TraceBuilder::note_issued(const OpRecord& record) {
  RankTracks& t = rank_tracks(record.rank);
  const Program& program = sim_.program_of(record.rank);
  if (t.has_host < 0) {
    t.has_host = 0;
    for (size_t i = 0; i < program.size(); ++i) {
      const Op& op = program.op(OpId(static_cast<uint32_t>(i)));
      if (op.host > Duration::zero() || op.host_sync != HostSync::kNone) {
        t.has_host = 1;
        break;
      }
    }
  }
  if (t.has_host == 0) {
    return;
  }
  t.issued.emplace(record.op.value(), record.issued);
  while (!t.issued.empty() && t.issued.begin()->first == t.next_issued) {
    write_host(record.rank, t.next_issued, t.issued.begin()->second);
    t.issued.erase(t.issued.begin());
    ++t.next_issued;
  }
}

// The slice of op `op` issued at `issued`, and before it, if the op before it made the host wait,
// the wait.
void TraceBuilder::write_host(RankId rank, uint32_t op_index, SimTime issued) {
  const Program& program = sim_.program_of(rank);
  const Op& op = program.op(OpId(op_index));
  const SimTime begin = SimTime::from_ps(issued.ps() - op.host.ps());
  SliceContent& s = host_slice_;
  s = SliceContent{};
  s.category = SliceCategory::kHost;
  if (op_index > 0) {
    const Op& before = program.op(OpId(op_index - 1));
    RankTracks& t = rank_tracks(rank);
    if (before.host_sync != HostSync::kNone && t.host_last < begin) {
      host_name_ = before.host_sync == HostSync::kWaitOp
                       ? "wait for " + before.name
                       : "wait for the device after " + before.name;
      s.name = host_name_;
      s.start = t.host_last;
      s.end = begin;
      sink_.write_slice(host_track(rank), s);
    }
  }
  if (op.host > Duration::zero()) {
    s.name = op.name;
    s.start = begin;
    s.end = issued;
    sink_.write_slice(host_track(rank), s);
  }
  rank_tracks(rank).host_last = issued;
}

void TraceBuilder::subscribe_to(Simulation& sim) {
  sim.on_op_end([this](const OpRecord& r) { record_op(r); });
  sim.on_memory([this](const MemoryRecord& r) { record_memory(r); });
}

void TraceBuilder::record_op(const OpRecord& record) {
  check_open();
  if (!included(record.rank)) {
    return;
  }
  note_issued(record);
  if (!group_.empty() && group_.front().match != record.match) {
    flush_group();
  }
  if (record.match == 0) {
    write_op(record, FlowRole::kNone);
    return;
  }
  group_.push_back(record);
}

// Writes the held group: collective members by rank, a send before its receive.
void TraceBuilder::flush_group() {
  if (group_.size() == 1) {
    write_op(group_.front(), FlowRole::kNone);
  } else if (group_.size() > 1) {
    // Sort key computed once per record: sends before receives, then rank.
    keyed_.clear();
    for (const OpRecord& r : group_) {
      const Op& op = sim_.program_of(r.rank).op(r.op);
      const bool receive = std::holds_alternative<PeerWork>(op.work) && !op.is_send;
      keyed_.push_back({(uint64_t{receive ? 1u : 0u} << 32) | r.rank.value(), r});
    }
    std::sort(keyed_.begin(), keyed_.end(),
              [](const auto& a, const auto& b) { return a.first < b.first; });
    for (size_t i = 0; i < keyed_.size(); ++i) {
      const FlowRole role = i == 0                   ? FlowRole::kBegin
                            : i + 1 == keyed_.size() ? FlowRole::kEnd
                                                     : FlowRole::kStep;
      write_op(keyed_[i].second, role);
    }
  }
  group_.clear();
}

void TraceBuilder::record_memory(const MemoryRecord& record) {
  check_open();
  if (!included(record.rank)) {
    return;
  }
  if (pending_memory_ &&
      (pending_memory_->rank != record.rank || pending_memory_->time != record.time)) {
    flush_memory();
  }
  pending_memory_ = record;
}

void TraceBuilder::flush_memory() {
  if (!pending_memory_) {
    return;
  }
  const MemoryRecord r = *pending_memory_;
  pending_memory_.reset();
  CounterSample s{r.time, true, r.total_after.count(), r.total_after.as_double()};
  sink_.write_counter(memory_track(r.rank), s);
}

void TraceBuilder::add_counter_sample(std::string_view track, SimTime time, double value) {
  check_open();
  SIM_CHECK(std::isfinite(value), "counter '{}' at {} ps: value {} is not finite", track, time.ps(),
            value);
  auto it = cluster_counters_.find(track);
  if (it == cluster_counters_.end()) {
    const ProcessTrack& p = process(kClusterPid, "cluster");
    const auto index = static_cast<uint32_t>(cluster_counters_.size());
    CounterTrack t{cluster_counter_uuid(index), p.uuid, p.pid, std::string(track),
                   CounterUnit::kNone};
    it = cluster_counters_.emplace(std::string(track), ClusterCounter{std::move(t), time}).first;
    sink_.add_counter(it->second.track);
  }
  SIM_CHECK(time >= it->second.last, "counter '{}': sample at {} ps after one at {} ps", track,
            time.ps(), it->second.last.ps());
  it->second.last = time;
  sink_.write_counter(it->second.track, CounterSample{time, false, 0, value});
}

void TraceBuilder::finish() {
  check_open();
  flush_group();
  flush_memory();
  finished_ = true;
  sink_.end(options_.metadata);
}

}  // namespace meshsim::traces
