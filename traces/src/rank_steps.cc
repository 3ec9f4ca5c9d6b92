// A rank's Kineto trace -> steps of linked, classified device ops (rank_steps.h).
#include "meshsim/traces/rank_steps.h"

#include <fmt/format.h>

#include <algorithm>
#include <deque>
#include <map>
#include <set>
#include <tuple>
#include <unordered_map>

#include "meshsim/sim/analysis.h"
#include "meshsim/sim/error.h"
#include "meshsim/sim/median.h"
#include "meshsim/traces/import.h"

namespace meshsim::traces {

namespace {

bool is_device(KinetoKind k) {
  return k == KinetoKind::kKernel || k == KinetoKind::kMemcpy || k == KinetoKind::kMemset;
}

bool is_host(KinetoKind k) { return !is_device(k); }

bool contains(std::string_view s, std::string_view part) {
  return s.find(part) != std::string_view::npos;
}

bool is_sync_call(std::string_view name) {
  return contains(name, "Synchronize") || name == "cudaMemcpy" || name == "hipMemcpy" ||
         name == "cuMemcpyDtoH_v2" || name == "cuCtxSynchronize";
}

// What find_steps shares: times relative to the origin, links and classes.
class Linker {
 public:
  explicit Linker(const RankTrace& t) : t_(t) {
    origin_ns_ = INT64_MAX;
    for (const KinetoEvent& e : t.events) {
      origin_ns_ = std::min(origin_ns_, e.ts_ns);
    }
    for (uint32_t i = 0; i < t.events.size(); ++i) {
      const KinetoEvent& e = t.events[i];
      if (e.kind == KinetoKind::kRuntime && e.correlation >= 0) {
        launches_.emplace_back(e.correlation, i);
      }
      // Every event's end must stay within int64 picoseconds of the origin (checked in doubles:
      // the difference of two arbitrary int64s may not fit).
      if (static_cast<double>(e.end_ns()) - static_cast<double>(origin_ns_) > 9e15) {
        throw InputError(t.source, "/traceEvents",
                         fmt::format("\"{}\" ends more than 104 days after the trace's first "
                                     "event: no profiler trace spans that long",
                                     t.name_of(e)));
      }
    }
    // Sorted (key, event) vectors: 16 bytes an entry, a third of a hash map's (a multi-GB trace
    // holds millions); the first event of a repeated key wins, as the file order has it.
    sort_keys(launches_);
  }

  static void sort_keys(std::vector<std::pair<int64_t, uint32_t>>& v) {
    std::stable_sort(v.begin(), v.end(),
                     [](const auto& a, const auto& b) { return a.first < b.first; });
  }

  // Operators by External id, built the first time a kernel needs one (newer Kineto's link; most
  // kernels find their operator around their launch).
  std::optional<uint32_t> op_by_external_id(int64_t id) {
    if (!ops_built_) {
      for (uint32_t i = 0; i < t_.events.size(); ++i) {
        if (t_.events[i].kind == KinetoKind::kCpuOp && t_.events[i].external_id >= 0) {
          ops_.emplace_back(t_.events[i].external_id, i);
        }
      }
      sort_keys(ops_);
      ops_built_ = true;
    }
    return lookup(ops_, id);
  }

  static std::optional<uint32_t> lookup(const std::vector<std::pair<int64_t, uint32_t>>& v,
                                        int64_t key) {
    const auto it = std::lower_bound(v.begin(), v.end(), key,
                                     [](const auto& a, int64_t k) { return a.first < k; });
    if (key < 0 || it == v.end() || it->first != key) {
      return std::nullopt;
    }
    return it->second;
  }

  SimTime at(int64_t ns) const { return SimTime::from_ps((ns - origin_ns_) * 1000); }
  SimTime start_of(uint32_t i) const { return at(t_.events[i].ts_ns); }
  Duration duration_of(uint32_t i) const {
    return Duration::from_ps(t_.events[i].dur_ns * 1000);
  }

  DeviceOp device_op(uint32_t i) {
    const KinetoEvent& e = t_.events[i];
    DeviceOp op;
    op.event = i;
    op.start = at(e.ts_ns);
    op.duration = Duration::from_ps(e.dur_ns * 1000);
    op.stream = e.tid;
    op.device = e.device;
    if (const auto launch = lookup(launches_, e.correlation)) {
      op.launch = *launch;
      op.launch_start = start_of(*launch);
      op.launch_duration = duration_of(*launch);
    }
    // Its operator: the innermost operator around its launch call (every Kineto version nests
    // them so), else the operator its "External id" names (newer Kineto: the operator's id).
    op.op = op.launch ? enclosing_op(*op.launch) : std::nullopt;
    if (!op.op && e.external_id >= 0) {
      op.op = op_by_external_id(e.external_id);
    }
    if (e.extra != kNoIndex && e.kind == KinetoKind::kKernel) {
      op.collective = e.extra;
    } else if (e.kind == KinetoKind::kKernel) {
      op.collective = op_collective(op.op);
    }
    op.op_class = classify(op, &op.classified);
    op.communication = op.op_class == OpClass::kCommunication;
    const std::string& name = t_.name_of(e);
    if (op.communication) {
      std::string coll = op.collective ? t_.collectives[*op.collective].name : "";
      std::transform(coll.begin(), coll.end(), coll.begin(),
                     [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
      op.p2p = op.collective ? (contains(coll, "send") || contains(coll, "recv"))
                             : (contains(name, "SendRecv") || contains(name, "_Send") ||
                                contains(name, "_Recv"));
    }
    return op;
  }

  OpClass classify(const DeviceOp& op, bool* classified);
  void nest_host_events();

  // The innermost operator around host event `i`.
  std::optional<uint32_t> enclosing_op(uint32_t i) const {
    for (int32_t at = parent_[i]; at >= 0; at = parent_[static_cast<size_t>(at)]) {
      if (t_.events[static_cast<size_t>(at)].kind == KinetoKind::kCpuOp) {
        return static_cast<uint32_t>(at);
      }
    }
    return std::nullopt;
  }
  // The collective metadata carried by `op` or an operator around it (record_param_comms).
  std::optional<uint32_t> op_collective(std::optional<uint32_t> op) const {
    for (int32_t at = op ? static_cast<int32_t>(*op) : -1; at >= 0;
         at = parent_[static_cast<size_t>(at)]) {
      const KinetoEvent& e = t_.events[static_cast<size_t>(at)];
      if (const auto it = t_.op_collectives.find(e.external_id);
          e.external_id >= 0 && it != t_.op_collectives.end()) {
        return it->second;
      }
    }
    return std::nullopt;
  }

 private:
  const RankTrace& t_;
  int64_t origin_ns_ = 0;
  std::vector<std::pair<int64_t, uint32_t>> launches_;  // correlation -> runtime call, sorted
  std::vector<std::pair<int64_t, uint32_t>> ops_;       // External id -> operator, sorted
  bool ops_built_ = false;
  std::vector<int32_t> parent_;                     // host event -> enclosing host event
  std::unordered_map<uint32_t, std::optional<OpClass>> name_class_;  // by name id (looked up)
  std::vector<std::optional<std::optional<OpClass>>> annotation_class_;

  std::optional<OpClass> name_rule(uint32_t name) {
    const auto [it, added] = name_class_.try_emplace(name);
    if (added) {
      it->second = match_kernel_class("pytorch", t_.names[name]);
    }
    return it->second;
  }
  // The class of the innermost annotation around host event `i` whose name matches a rule.
  std::optional<OpClass> context(uint32_t i);

};

void Linker::nest_host_events() {
  parent_.assign(t_.events.size(), -1);
  std::vector<uint32_t> order;
  for (uint32_t i = 0; i < t_.events.size(); ++i) {
    if (is_host(t_.events[i].kind)) {
      order.push_back(i);
    }
  }
  std::sort(order.begin(), order.end(), [this](uint32_t a, uint32_t b) {
    const KinetoEvent& x = t_.events[a];
    const KinetoEvent& y = t_.events[b];
    return std::tie(x.tid, x.ts_ns, y.dur_ns, a) < std::tie(y.tid, y.ts_ns, x.dur_ns, b);
  });
  std::vector<uint32_t> stack;
  int64_t tid = INT64_MIN;
  for (const uint32_t i : order) {
    const KinetoEvent& e = t_.events[i];
    if (e.tid != tid) {
      stack.clear();
      tid = e.tid;
    }
    while (!stack.empty()) {  // inside: starts within the parent (an overhanging end is rounding)
      const KinetoEvent& p = t_.events[stack.back()];
      if (e.ts_ns < p.end_ns() || (e.ts_ns == p.ts_ns && e.end_ns() <= p.end_ns())) {
        break;
      }
      stack.pop_back();
    }
    if (!stack.empty()) {
      parent_[i] = static_cast<int32_t>(stack.back());
    }
    stack.push_back(i);
  }
  annotation_class_.assign(t_.events.size(), std::nullopt);
}

std::optional<OpClass> Linker::context(uint32_t i) {
  std::vector<uint32_t> path;
  std::optional<OpClass> found;
  int32_t at = static_cast<int32_t>(i);
  while (at >= 0) {
    const auto u = static_cast<uint32_t>(at);
    if (annotation_class_[u]) {
      found = *annotation_class_[u];
      break;
    }
    path.push_back(u);
    const KinetoEvent& e = t_.events[u];
    if (e.kind == KinetoKind::kAnnotation) {
      if (const auto c = name_rule(e.name)) {
        found = c;
        break;
      }
    }
    at = parent_[u];
  }
  for (const uint32_t u : path) {
    annotation_class_[u] = found;
  }
  return found;
}

OpClass Linker::classify(const DeviceOp& op, bool* classified) {
  *classified = true;
  const uint32_t name = t_.events[op.event].name;
  const std::optional<OpClass> by_name = name_rule(name);
  if (by_name == OpClass::kCommunication) {
    return OpClass::kCommunication;
  }
  if (op.launch) {
    if (const auto c = context(*op.launch); c && c != OpClass::kCommunication) {
      return *c;
    }
  }
  if (t_.events[op.event].kind != KinetoKind::kKernel) {
    return OpClass::kCopy;  // copies and sets
  }
  if (by_name) {
    return *by_name;
  }
  if (op.op) {
    if (const auto c = name_rule(t_.events[*op.op].name)) {
      return *c;
    }
  }
  *classified = false;
  return OpClass::kElementwise;
}

struct Range {
  int64_t number;
  SimTime start;
  SimTime end;
};

std::vector<Range> profiler_steps(const RankTrace& t, const Linker& l) {
  std::vector<Range> ranges;
  for (uint32_t i = 0; i < t.events.size(); ++i) {
    const KinetoEvent& e = t.events[i];
    if (e.kind != KinetoKind::kStep) {
      continue;
    }
    int64_t number = static_cast<int64_t>(ranges.size());
    const std::string& name = t.name_of(e);
    const std::string_view digits = std::string_view(name).substr(13);  // "ProfilerStep#"
    if (!digits.empty() && digits.size() < 18 &&
        std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; })) {
      number = std::stoll(std::string(digits));
    }
    ranges.push_back({number, l.start_of(i), l.start_of(i) + l.duration_of(i)});
  }
  std::sort(ranges.begin(), ranges.end(), [](const Range& a, const Range& b) {
    return std::tie(a.start, b.end, a.number) < std::tie(b.start, a.end, b.number);
  });
  std::vector<Range> out;  // a range starting inside the previous one (a nested copy) is dropped
  for (const Range& r : ranges) {
    if (out.empty() || r.start >= out.back().end) {
      out.push_back(r);
    }
  }
  return out;
}

// The ranges' index that `at` falls in: [start_i, start_{i+1}), the last up to its end.
std::optional<size_t> range_of(const std::vector<Range>& ranges, SimTime at) {
  const auto after = std::upper_bound(ranges.begin(), ranges.end(), at,
                                      [](SimTime v, const Range& r) { return v < r.start; });
  if (after == ranges.begin()) {
    return std::nullopt;
  }
  const auto s = static_cast<size_t>(after - ranges.begin()) - 1;
  if (s + 1 == ranges.size() && at > ranges[s].end) {
    return std::nullopt;
  }
  return s;
}

SimTime issue_time(const DeviceOp& op) { return op.launch_start.value_or(op.start); }

// Repeated structure (rank_steps.h): the anchor name and its occurrences, or none.
std::optional<std::vector<size_t>> anchors(const RankTrace& t, const std::vector<DeviceOp>& ops,
                                           uint32_t& anchor_name) {
  std::map<uint32_t, std::vector<size_t>> at;  // name -> positions
  for (size_t i = 0; i < ops.size(); ++i) {
    at[t.events[ops[i].event].name].push_back(i);
  }
  std::map<size_t, uint32_t, std::greater<>> by_count;  // count -> the first name with it
  for (const auto& [name, pos] : at) {
    if (pos.size() >= 2 && !by_count.contains(pos.size())) {
      by_count.emplace(pos.size(), name);
    }
  }
  for (const auto& [count, name] : by_count) {
    const std::vector<size_t>& pos = at[name];
    if (2 * (pos.back() - pos.front()) < ops.size()) {
      continue;  // the repeats must cover most of the trace's device work
    }
    std::vector<uint32_t> first;
    bool same = true;
    for (size_t k = 0; k + 1 < pos.size() && same; ++k) {
      std::vector<uint32_t> names;
      for (size_t i = pos[k]; i < pos[k + 1]; ++i) {
        names.push_back(t.events[ops[i].event].name);
      }
      std::sort(names.begin(), names.end());
      if (k == 0) {
        first = std::move(names);
      } else {
        same = names == first;
      }
    }
    if (same) {
      anchor_name = name;
      return pos;
    }
  }
  return std::nullopt;
}

void finish_step(RankStep& s) {
  std::sort(s.ops.begin(), s.ops.end(), [](const DeviceOp& a, const DeviceOp& b) {
    return std::tie(a.start, a.device, a.stream, a.event) <
           std::tie(b.start, b.device, b.stream, b.event);
  });
  s.start = s.ops.empty() ? s.host_start : s.ops.front().start;
}

// Moves a deque's elements into a vector of exactly their number, freeing the deque's blocks as
// it goes, so that the two never hold every op at once.
std::vector<DeviceOp> drain(std::deque<DeviceOp>& d) {
  std::vector<DeviceOp> v;
  v.reserve(d.size());
  while (!d.empty()) {
    v.push_back(std::move(d.front()));
    d.pop_front();
  }
  return v;
}

}  // namespace

SimTime RankStep::end() const {
  SimTime e = start;
  for (const DeviceOp& op : ops) {
    e = std::max(e, op.end());
  }
  return e;
}

OpClass classify_device_op(const RankTrace& trace, const DeviceOp& op, bool* classified) {
  Linker l(trace);
  l.nest_host_events();
  bool ignored = false;
  return l.classify(op, classified != nullptr ? classified : &ignored);
}

RankSteps find_steps(const RankTrace& t) {
  Linker l(t);
  l.nest_host_events();
  RankSteps out;
  // CUPTI numbers runtime calls in order; a device op without a launch in the trace whose
  // correlation precedes every call's was launched before the trace began (rank_steps.h).
  int64_t first_call = INT64_MAX;
  for (const KinetoEvent& e : t.events) {
    if (e.kind == KinetoKind::kRuntime && e.correlation >= 0) {
      first_call = std::min(first_call, e.correlation);
    }
  }
  std::vector<Range> ranges = profiler_steps(t, l);
  // The device ops in file order, with the ProfilerStep range each was issued in (kNoStep:
  // none). A deque, and each step's vector sized by a count, so that a trace of millions of ops
  // (~100 bytes each) is never held twice, nor in a vector's doubled storage.
  constexpr uint32_t kNoStep = UINT32_MAX;
  std::deque<DeviceOp> ops;
  std::deque<uint32_t> step_of;
  std::vector<size_t> count(ranges.size());
  std::optional<SimTime> before_trace_end;  // the end of the work launched before the trace
  for (uint32_t i = 0; i < t.events.size(); ++i) {
    if (is_device(t.events[i].kind)) {
      DeviceOp op = l.device_op(i);
      const int64_t corr = t.events[i].correlation;
      if (!op.launch && corr >= 0 && corr < first_call) {
        ++out.before_trace_ops;
        before_trace_end = std::max(before_trace_end.value_or(op.end()), op.end());
        continue;
      }
      out.unlinked_ops += op.launch ? 0 : 1;
      if (!ranges.empty()) {
        const auto s = range_of(ranges, issue_time(op));
        step_of.push_back(s ? static_cast<uint32_t>(*s) : kNoStep);
        if (s) {
          ++count[*s];
        }
      }
      ops.push_back(std::move(op));
    }
  }
  if (ops.empty() && out.before_trace_ops > 0) {
    throw InputError(t.source, "/traceEvents",
                     fmt::format("all {} device ops were launched before the trace began (their "
                                 "correlation ids precede every runtime call's): no step's work "
                                 "is in the trace",
                                 out.before_trace_ops));
  }
  if (ops.empty()) {
    throw InputError(t.source, "/traceEvents",
                     "no device work (kernels, copies, sets): meshsim compares GPU timelines; a "
                     "CPU-only trace goes through a validation manifest instead");
  }
  std::vector<std::vector<DeviceOp>> per(ranges.size());
  if (!ranges.empty()) {
    out.method = "ProfilerStep#N ranges";
    // Held once, by the steps: each step's vector is sized when its first op arrives (ops come
    // roughly step by step), while the deque frees what has been moved.
    while (!ops.empty()) {
      if (const uint32_t s = step_of.front(); s != kNoStep) {
        if (per[s].capacity() == 0) {
          per[s].reserve(count[s]);
        }
        per[s].push_back(std::move(ops.front()));
      }
      ops.pop_front();
      step_of.pop_front();
    }
  } else {
    std::vector<DeviceOp> all = drain(ops);
    std::stable_sort(all.begin(), all.end(), [](const DeviceOp& a, const DeviceOp& b) {
      return std::tie(a.start, a.device, a.stream) < std::tie(b.start, b.device, b.stream);
    });
    uint32_t anchor_name = 0;
    const auto pos = anchors(t, all, anchor_name);
    if (!pos) {
      throw InputError(t.source, "/traceEvents",
                       "no ProfilerStep#N ranges and no repeating kernel sequence to cut steps "
                       "at: profile with torch.profiler.profile(schedule=...) and call "
                       "prof.step() after each step");
    }
    out.method = fmt::format("repeated structure: {} repeats between occurrences of kernel {}",
                             pos->size() - 1, t.names[anchor_name].substr(0, 80));
    for (size_t k = 0; k + 1 < pos->size(); ++k) {
      const SimTime a = issue_time(all[(*pos)[k]]);
      const SimTime b = issue_time(all[(*pos)[k + 1]]);
      ranges.push_back({static_cast<int64_t>(k), a, b});
      const auto from = all.begin() + static_cast<std::ptrdiff_t>((*pos)[k]);
      const auto to = all.begin() + static_cast<std::ptrdiff_t>((*pos)[k + 1]);
      per.emplace_back(std::make_move_iterator(from), std::make_move_iterator(to));
    }
  }
  std::optional<SimTime> queued = before_trace_end;  // the end of the work launched so far
  for (size_t s = 0; s < ranges.size(); ++s) {
    if (per[s].empty()) {
      ++out.empty_steps;
      continue;
    }
    RankStep step;
    step.number = ranges[s].number;
    step.host_start = ranges[s].start;
    step.host_end = ranges[s].end;
    step.ops = std::move(per[s]);
    finish_step(step);
    step.queued_until = queued.value_or(step.start);
    queued = std::max(queued.value_or(step.end()), step.end());
    if (step.end() <= step.queued_until) {
      ++out.unfinished_steps;
      continue;
    }
    out.steps.push_back(std::move(step));
  }
  for (uint32_t i = 0; i < t.events.size(); ++i) {  // the host's waits, by the step they start in
    const KinetoEvent& e = t.events[i];
    if (e.kind != KinetoKind::kRuntime || !is_sync_call(t.name_of(e))) {
      continue;
    }
    const SimTime at = l.start_of(i);
    for (RankStep& s : out.steps) {
      if (at >= s.host_start && at < std::max(s.host_end, s.end())) {
        s.syncs.push_back({i, at, l.duration_of(i)});
        break;
      }
    }
  }
  if (out.steps.empty()) {
    throw InputError(t.source, "/traceEvents",
                     fmt::format("{} step(s) found ({}), none with device work", ranges.size(),
                                 out.method));
  }
  return out;
}

std::vector<Span> measured_spans(const RankStep& step) {
  std::vector<Span> spans;
  spans.reserve(step.ops.size());
  const SimTime t0 = step.measured_start();
  for (const DeviceOp& op : step.ops) {
    Span s;
    s.start = SimTime::zero() + (op.start - t0);
    s.end = SimTime::zero() + (op.end() - t0);
    s.op_class = op.op_class;
    s.communication = op.communication;
    s.p2p = op.p2p;
    if (op.launch_start) {
      s.launched = SimTime::zero() + (*op.launch_start + op.launch_duration - t0);
    }
    spans.push_back(s);
  }
  return spans;
}

StepBreakdown breakdown(std::vector<Span> spans, SimTime t0) {
  StepBreakdown b;
  std::vector<std::pair<SimTime, SimTime>> compute;
  std::vector<std::pair<SimTime, SimTime>> comm;
  std::vector<std::pair<SimTime, SimTime>> p2p;
  std::vector<std::pair<SimTime, SimTime>> all;
  SimTime end = t0;
  for (const Span& s : spans) {
    b.by_class[static_cast<size_t>(s.op_class)] += s.end - s.start;
    // The unions count the step's window only: a measured step's ops may start before its t0,
    // while the work queued ahead of them still runs (RankStep::measured_start).
    const std::pair<SimTime, SimTime> in{std::max(s.start, t0), std::max(s.end, t0)};
    (s.communication ? comm : compute).push_back(in);
    if (s.p2p) {
      p2p.push_back(in);
    }
    all.push_back(in);
    end = std::max(end, s.end);
  }
  b.step = end - t0;
  b.compute = union_length(compute);
  b.comm = union_length(comm);
  b.exposed_comm = difference_length(comm, compute);
  b.overlap = b.comm - b.exposed_comm;
  b.idle = b.step - union_length(all);
  b.exposed_p2p = difference_length(p2p, compute);
  b.bubble = b.idle + b.exposed_p2p;
  // Host gaps: sweep the spans by start, tracking the busy frontier.
  std::sort(spans.begin(), spans.end(),
            [](const Span& a, const Span& c) { return a.start < c.start; });
  SimTime frontier = t0;
  for (size_t i = 0; i < spans.size();) {
    const SimTime g1 = spans[i].start;
    size_t j = i;
    bool host_late = g1 > frontier;
    for (; j < spans.size() && spans[j].start == g1; ++j) {
      if (!spans[j].launched || *spans[j].launched < frontier) {
        host_late = false;
      }
    }
    if (host_late) {
      b.host_gap += g1 - frontier;
    }
    for (; i < j; ++i) {
      frontier = std::max(frontier, spans[i].end);
    }
  }
  return b;
}

HostDispatch host_dispatch(const RankTrace& t, const RankSteps& steps) {
  std::vector<Duration> op_to_launch, call, interval, latency;
  Linker l(t);
  std::vector<const DeviceOp*> all;
  for (const RankStep& s : steps.steps) {
    std::vector<std::tuple<int64_t, SimTime>> launches;  // thread, start
    std::set<uint32_t> seen;  // launch calls already counted (a graph launch runs many kernels)
    for (const DeviceOp& op : s.ops) {
      all.push_back(&op);
      if (!op.launch || !seen.insert(*op.launch).second) {
        continue;
      }
      call.push_back(op.launch_duration);
      launches.emplace_back(t.events[*op.launch].tid, *op.launch_start);
      if (op.op && l.start_of(*op.op) <= *op.launch_start) {
        op_to_launch.push_back(*op.launch_start - l.start_of(*op.op));
      }
    }
    std::sort(launches.begin(), launches.end());
    for (size_t i = 1; i < launches.size(); ++i) {
      // Named copies, not structured bindings: clang 14 cannot capture a binding in a lambda.
      const auto tid0 = std::get<0>(launches[i - 1]);
      const auto s0 = std::get<1>(launches[i - 1]);
      const auto tid1 = std::get<0>(launches[i]);
      const auto s1 = std::get<1>(launches[i]);
      const bool sync_between = std::any_of(s.syncs.begin(), s.syncs.end(), [&](const HostSync& h) {
        return h.start >= s0 && h.start < s1;
      });
      if (tid0 == tid1 && !sync_between && s1 > s0) {
        interval.push_back(s1 - s0);
      }
    }
  }
  // Launch latency: the first kernel of a launch that found its device idle (nothing of the rank
  // running on it) when the call returned.
  std::stable_sort(all.begin(), all.end(),
                   [](const DeviceOp* a, const DeviceOp* b) { return a->start < b->start; });
  std::map<int32_t, SimTime> busy_until;  // device -> end of its work so far
  std::set<uint32_t> seen;
  for (const DeviceOp* op : all) {
    const auto [it, added] = busy_until.try_emplace(op->device, op->start);
    if (op->launch && seen.insert(*op->launch).second) {
      const SimTime returned = *op->launch_start + op->launch_duration;
      if (returned >= it->second && op->start >= returned) {
        latency.push_back(op->start - returned);
      }
    }
    it->second = std::max(it->second, op->end());
  }
  HostDispatch h;
  h.op_to_launch = median(op_to_launch);
  h.op_to_launch_samples = static_cast<int64_t>(op_to_launch.size());
  h.launch_call = median(call);
  h.launch_call_samples = static_cast<int64_t>(call.size());
  h.launch_interval = median(interval);
  h.launch_interval_samples = static_cast<int64_t>(interval.size());
  h.launch_latency = median(latency);
  h.launch_latency_samples = static_cast<int64_t>(latency.size());
  return h;
}

}  // namespace meshsim::traces
