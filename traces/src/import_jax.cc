// JAX profiler traces (xprof's Chrome JSON, as jax.profiler writes it) -> MeasuredTrace. The
// rules are in import.h; the trace layout this reads:
//   process_name "/host:CPU"           host threads: the Python thread with TraceAnnotations
//                                      (StepTraceAnnotation carries args.step_num), PjitFunction
//                                      dispatches, and on the CPU backend the XLA thunks (args
//                                      hlo_op / hlo_module)
//   process_name "/device:GPU:k"       threads "Stream #N(Compute)", "Stream #N(MemcpyH2D)"...:
//                                      kernels with args hlo_op, hlo_module, correlation_id
//   process_name "/device:TPU:k"       threads "Steps", "XLA Modules", "XLA Ops" (op events with
//                                      args long_name, hlo_category, tf_op)
#include <algorithm>
#include <cctype>
#include <map>
#include <set>
#include <string>

#include "import_events.h"

namespace meshsim::traces::detail {

namespace {

struct DeviceThread {
  enum Line { kOther, kStream, kXlaOps, kSteps, kModules };
  Line line = kOther;
  int64_t stream = 0;
};

std::optional<int64_t> trailing_number(std::string_view s) {
  size_t end = s.size();
  size_t begin = end;
  while (begin > 0 && std::isdigit(static_cast<unsigned char>(s[begin - 1])) != 0) {
    --begin;
  }
  if (begin == end || end - begin > 15) {
    return std::nullopt;
  }
  return std::stoll(std::string(s.substr(begin, end - begin)));
}

// "/device:GPU:3" -> 3 (also "/device:TPU:0 ..." forms: the number after the kind).
std::optional<int64_t> device_ordinal(const std::string& process) {
  if (!process.starts_with("/device:")) {
    return std::nullopt;
  }
  const size_t colon = process.find(':', 8);
  if (colon == std::string::npos) {
    return std::nullopt;
  }
  size_t end = colon + 1;
  while (end < process.size() && std::isdigit(static_cast<unsigned char>(process[end])) != 0) {
    ++end;
  }
  return trailing_number(std::string_view(process).substr(0, end));
}

DeviceThread thread_line(const std::string& name) {
  DeviceThread t;
  if (name.starts_with("Stream #")) {
    t.line = DeviceThread::kStream;
    size_t end = 8;
    while (end < name.size() && std::isdigit(static_cast<unsigned char>(name[end])) != 0) {
      ++end;
    }
    t.stream = trailing_number(std::string_view(name).substr(0, end)).value_or(0);
  } else if (name == "XLA Ops") {
    t.line = DeviceThread::kXlaOps;
  } else if (name == "Steps") {
    t.line = DeviceThread::kSteps;
  } else if (name == "XLA Modules") {
    t.line = DeviceThread::kModules;
  }
  return t;
}

// "%fusion.3 = bf16[8,128]{1,0} fusion(%p0), kind=kLoop, calls=%f" -> "fusion kind=kloop".
std::string opcode_and_kind(const std::string& long_name) {
  std::string out;
  size_t i = long_name.find(" = ");
  if (i != std::string::npos) {
    i += 3;
    if (i < long_name.size() && long_name[i] == '(') {  // a tuple shape
      int depth = 0;
      for (; i < long_name.size(); ++i) {
        depth += long_name[i] == '(' ? 1 : (long_name[i] == ')' ? -1 : 0);
        if (depth == 0) {
          break;
        }
      }
    }
    i = long_name.find(' ', i);
    if (i != std::string::npos) {
      const size_t open = long_name.find('(', i);
      if (open != std::string::npos) {
        out = long_name.substr(i + 1, open - i - 1);
      }
    }
  }
  const size_t kind = long_name.find("kind=k");
  if (kind != std::string::npos) {
    size_t end = kind + 5;
    while (end < long_name.size() && std::isalpha(static_cast<unsigned char>(long_name[end]))) {
      ++end;
    }
    out.push_back(' ');
    out.append(long_name, kind, end - kind);
  }
  return out;
}

// Rule 2 for JAX: the innermost jax.named_scope in the op's name stack that names a class.
std::optional<OpClass> scope_class(const Event& e) {
  static const std::map<std::string, OpClass> kScopes = {
      {"attention", OpClass::kAttention}, {"dot_product_attention", OpClass::kAttention},
      {"rmsnorm", OpClass::kNorm},        {"layernorm", OpClass::kNorm},
      {"embedding", OpClass::kEmbedding}, {"embed", OpClass::kEmbedding},
      {"loss", OpClass::kLoss},           {"cross_entropy", OpClass::kLoss},
      {"optimizer", OpClass::kOptimizer}, {"adamw", OpClass::kOptimizer},
  };
  std::optional<OpClass> found;
  for (const char* key : {"tf_op", "name_scope", "op_name"}) {
    const std::string path = e.arg_string(key);
    size_t i = 0;
    while (i < path.size()) {
      size_t j = i;
      while (j < path.size() &&
             (std::isalnum(static_cast<unsigned char>(path[j])) != 0 || path[j] == '_')) {
        ++j;
      }
      if (j > i) {
        const auto it = kScopes.find(path.substr(i, j - i));
        if (it != kScopes.end()) {
          found = it->second;  // keep the last (innermost) one
        }
        i = j;
      } else {
        ++i;
      }
    }
    if (found) {
      return found;
    }
  }
  return std::nullopt;
}

std::vector<std::string> class_names(const Event& e) {
  std::vector<std::string> names = {e.name};
  for (const char* key : {"hlo_op", "hlo_category"}) {
    const std::string v = e.arg_string(key);
    if (!v.empty()) {
      names.push_back(v);
    }
  }
  const std::string long_name = e.arg_string("long_name");
  if (!long_name.empty()) {
    names.push_back(opcode_and_kind(long_name));
  }
  return names;
}

bool is_thunk(const Event& e) {
  return e.has_arg("hlo_op") || e.has_arg("hlo_module") || e.has_arg("long_name");
}

bool is_control_thunk(const Event& e) {
  const std::string& n = e.name;
  for (const char* c : {"while", "conditional", "call"}) {
    const std::string_view w(c);
    if (n == w ||
        (n.starts_with(w) && n.size() > w.size() && (n[w.size()] == '.' || n[w.size()] == '_'))) {
      return true;
    }
  }
  return false;
}

struct Layout {
  std::vector<std::optional<int64_t>> device;  // per event: the device ordinal, or host
  std::vector<DeviceThread> line;              // per event: its device line
  std::set<int64_t> devices_with_streams;
};

Layout layout_of(const EventTable& table) {
  Layout l;
  l.device.resize(table.events.size());
  l.line.resize(table.events.size());
  for (size_t i = 0; i < table.events.size(); ++i) {
    const Event& e = table.events[i];
    const auto proc = table.process_names.find(e.track.pid);
    if (proc == table.process_names.end()) {
      continue;
    }
    l.device[i] = device_ordinal(proc->second);
    if (!l.device[i]) {
      continue;
    }
    const auto thread = table.thread_names.find(e.track);
    if (thread != table.thread_names.end()) {
      l.line[i] = thread_line(thread->second);
    }
    if (l.line[i].line == DeviceThread::kStream) {
      l.devices_with_streams.insert(*l.device[i]);
    }
  }
  return l;
}

std::vector<StepRange> ranges_on_first_device(const EventTable& table, const Layout& l,
                                              DeviceThread::Line line, bool train_step_only) {
  std::optional<int64_t> first;
  for (size_t i = 0; i < table.events.size(); ++i) {
    if (l.device[i] && l.line[i].line == line &&
        (!train_step_only || table.events[i].name.find("train_step") != std::string::npos)) {
      first = first ? std::min(*first, *l.device[i]) : *l.device[i];
    }
  }
  std::vector<StepRange> ranges;
  for (size_t i = 0; i < table.events.size(); ++i) {
    const Event& e = table.events[i];
    if (first && l.device[i] == first && l.line[i].line == line &&
        (!train_step_only || e.name.find("train_step") != std::string::npos)) {
      ranges.push_back({e.start, e.end()});
    }
  }
  return ranges;
}

std::vector<StepRange> step_ranges(const EventTable& table, const Layout& l) {
  // (1) StepTraceAnnotation ranges on the host, merged by step number.
  std::map<std::string, StepRange> annotated;
  for (size_t i = 0; i < table.events.size(); ++i) {
    const Event& e = table.events[i];
    if (!l.device[i] && e.has_arg("step_num")) {
      const std::string num = e.arg_string("step_num");
      auto [it, added] = annotated.emplace(num, StepRange{e.start, e.end()});
      if (!added) {
        it->second.start = std::min(it->second.start, e.start);
        it->second.end = std::max(it->second.end, e.end());
      }
    }
  }
  std::vector<StepRange> ranges;
  for (const auto& [num, r] : annotated) {
    ranges.push_back(r);
  }
  // (2) the "Steps" line, (3) train_step modules, (4) train_step dispatches on the host.
  if (ranges.empty()) {
    ranges = ranges_on_first_device(table, l, DeviceThread::kSteps, false);
  }
  if (ranges.empty()) {
    ranges = ranges_on_first_device(table, l, DeviceThread::kModules, true);
  }
  if (ranges.empty()) {
    std::vector<bool> member(table.events.size());
    for (size_t i = 0; i < table.events.size(); ++i) {
      member[i] = !l.device[i] && table.events[i].name.find("train_step") != std::string::npos;
    }
    const std::vector<std::ptrdiff_t> parent = nest(table, member);
    for (size_t i = 0; i < table.events.size(); ++i) {
      if (member[i] && parent[i] < 0) {
        ranges.push_back({table.events[i].start, table.events[i].end()});
      }
    }
  }
  std::sort(ranges.begin(), ranges.end(),
            [](const StepRange& a, const StepRange& b) { return a.start < b.start; });
  return ranges;
}

}  // namespace

MeasuredTrace import_jax(const EventTable& table) {
  const Layout l = layout_of(table);
  const std::vector<StepRange> ranges = step_ranges(table, l);
  if (ranges.empty()) {
    fail_at_events(table,
                   "no steps: expected host ranges with args.step_num "
                   "(jax.profiler.StepTraceAnnotation(\"train\", step_num=i)), a \"Steps\" line, "
                   "or executions of a jitted function named train_step");
  }

  Collected c;
  auto add = [&](const Event& e, int64_t device, int64_t stream) {
    MeasuredOp op = make_op(e, scope_class(e), class_names(e), "jax");
    op.device = device;
    op.stream = stream;
    c.add(std::move(op), e.start);
  };
  for (size_t i = 0; i < table.events.size(); ++i) {
    if (!l.device[i]) {
      continue;
    }
    const bool streams = l.devices_with_streams.contains(*l.device[i]);
    const DeviceThread& t = l.line[i];
    if ((streams && t.line == DeviceThread::kStream) ||
        (!streams && t.line == DeviceThread::kXlaOps)) {
      add(table.events[i], *l.device[i], streams ? t.stream : 0);
    }
  }
  const bool on_device = !c.ops.empty();
  if (!on_device) {  // the CPU backend: top-level XLA thunks on host threads
    std::vector<bool> member(table.events.size());
    for (size_t i = 0; i < table.events.size(); ++i) {
      member[i] = !l.device[i] && is_thunk(table.events[i]);
    }
    const std::vector<std::ptrdiff_t> parent = nest(table, member);
    for (size_t i = 0; i < table.events.size(); ++i) {
      if (!member[i] || is_control_thunk(table.events[i])) {
        continue;
      }
      bool nested = false;
      for (std::ptrdiff_t p = parent[i]; p >= 0 && !nested; p = parent[static_cast<size_t>(p)]) {
        nested = !is_control_thunk(table.events[static_cast<size_t>(p)]);
      }
      if (!nested) {
        add(table.events[i], 0, table.events[i].tid_number.value_or(0));
      }
    }
  }

  MeasuredTrace trace;
  trace.source = table.source;
  trace.framework = "jax";
  trace.op_source = on_device ? "device" : "host";
  trace.steps = build_steps(table, ranges, std::move(c),
                            on_device ? Assign::kUntilNextStep : Assign::kWithinRange);
  return trace;
}

}  // namespace meshsim::traces::detail
