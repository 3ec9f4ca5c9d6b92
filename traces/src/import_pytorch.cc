// PyTorch profiler traces (Kineto and legacy) -> MeasuredTrace. The rules are in import.h.
#include <map>
#include <string>

#include "import_events.h"

namespace meshsim::traces::detail {

namespace {

enum class Kind { kIgnored, kStep, kAnnotation, kTransparent, kOperator, kLaunch, kDevice };

Kind kind_of(const Event& e) {
  const std::string& c = e.cat;
  if (c == "kernel" || c == "gpu_memcpy" || c == "gpu_memset") {
    return Kind::kDevice;
  }
  if (c == "gpu_user_annotation") {
    return Kind::kIgnored;  // the device-side copy of a host range
  }
  if (e.name.starts_with("ProfilerStep#")) {
    return Kind::kStep;
  }
  if (c.empty()) {  // legacy profiler: operators live in a namespace ("aten::mm")
    return e.name.find("::") != std::string::npos ? Kind::kOperator : Kind::kAnnotation;
  }
  if (c == "cpu_op" || c == "operator" || c == "Operator") {
    return Kind::kOperator;
  }
  if (c == "user_annotation") {
    return Kind::kAnnotation;
  }
  if (c == "python_function") {
    return Kind::kTransparent;  // a Python frame (with_stack): neither an op nor a context
  }
  if (c == "cuda_runtime" || c == "cuda_driver") {
    return Kind::kLaunch;
  }
  return Kind::kIgnored;
}

bool is_backward_node(const Event& e) {
  return e.name.find("Backward") != std::string::npos ||
         e.name.starts_with("autograd::engine::evaluate_function");
}

// Rule 2 of import.h: the class each host event inherits from the annotations around it, or from
// the forward op whose backward it is (matched by the autograd "Sequence number").
std::vector<std::optional<OpClass>> contexts(const EventTable& table,
                                             const std::vector<Kind>& kinds,
                                             const std::vector<std::ptrdiff_t>& parent) {
  std::vector<std::optional<OpClass>> ctx(table.events.size());
  std::map<int64_t, OpClass> forward_context;  // sequence number -> class of the forward op
  for (size_t i = 0; i < table.events.size(); ++i) {
    const Event& e = table.events[i];
    const std::optional<OpClass> inherited =
        parent[i] >= 0 ? ctx[static_cast<size_t>(parent[i])] : std::nullopt;
    switch (kinds[i]) {
      case Kind::kAnnotation: {
        const auto own = match_kernel_class("pytorch", e.name);
        ctx[i] = own ? own : inherited;
        break;
      }
      case Kind::kOperator: {
        ctx[i] = inherited;
        const auto seq = e.arg_int("Sequence number");
        if (seq && is_backward_node(e)) {
          const auto fwd = forward_context.find(*seq);
          if (!ctx[i] && fwd != forward_context.end()) {
            ctx[i] = fwd->second;
          }
        } else if (seq && ctx[i]) {
          forward_context.emplace(*seq, *ctx[i]);
        }
        break;
      }
      case Kind::kTransparent:
      case Kind::kLaunch:
      case Kind::kStep:
        ctx[i] = inherited;
        break;
      case Kind::kIgnored:
      case Kind::kDevice:
        break;
    }
  }
  return ctx;
}

bool has_operator_ancestor(size_t i, const std::vector<Kind>& kinds,
                           const std::vector<std::ptrdiff_t>& parent) {
  for (std::ptrdiff_t p = parent[i]; p >= 0; p = parent[static_cast<size_t>(p)]) {
    if (kinds[static_cast<size_t>(p)] == Kind::kOperator) {
      return true;
    }
  }
  return false;
}

// The ops of the trace and the time that picks each one's step (see import.h).
struct Collected {
  std::vector<MeasuredOp> ops;
  std::vector<SimTime> assign_at;
};

// GPU kernels and copies, each with the context and the time of the host call that launched it.
Collected device_ops(const EventTable& table, const std::vector<Kind>& kinds,
                     const std::vector<std::optional<OpClass>>& ctx) {
  std::map<int64_t, size_t> launches;  // correlation id -> launch event
  for (size_t i = 0; i < table.events.size(); ++i) {
    if (kinds[i] == Kind::kLaunch) {
      if (const auto corr = table.events[i].arg_int("correlation")) {
        launches.emplace(*corr, i);
      }
    }
  }
  Collected out;
  for (size_t i = 0; i < table.events.size(); ++i) {
    if (kinds[i] != Kind::kDevice) {
      continue;
    }
    const Event& e = table.events[i];
    std::optional<OpClass> context;
    SimTime at = e.start;
    if (const auto corr = e.arg_int("correlation")) {
      if (const auto it = launches.find(*corr); it != launches.end()) {
        context = ctx[it->second];
        at = table.events[it->second].start;
      }
    }
    MeasuredOp op = make_op(e, context, {e.name}, "pytorch");
    op.device = e.arg_int("device").value_or(e.pid_number.value_or(0));
    op.stream = e.arg_int("stream").value_or(e.tid_number.value_or(0));
    out.ops.push_back(std::move(op));
    out.assign_at.push_back(at);
  }
  return out;
}

// Top-level host operators.
Collected host_ops(const EventTable& table, const std::vector<Kind>& kinds,
                   const std::vector<std::ptrdiff_t>& parent,
                   const std::vector<std::optional<OpClass>>& ctx) {
  Collected out;
  for (size_t i = 0; i < table.events.size(); ++i) {
    if (kinds[i] != Kind::kOperator || has_operator_ancestor(i, kinds, parent)) {
      continue;
    }
    const Event& e = table.events[i];
    MeasuredOp op = make_op(e, ctx[i], {e.name}, "pytorch");
    op.stream = e.tid_number.value_or(0);
    out.ops.push_back(std::move(op));
    out.assign_at.push_back(e.start);
  }
  return out;
}

}  // namespace

MeasuredTrace import_pytorch(const EventTable& table) {
  const size_t n = table.events.size();
  std::vector<Kind> kinds(n);
  std::vector<bool> host(n);
  bool any_device = false;
  for (size_t i = 0; i < n; ++i) {
    kinds[i] = kind_of(table.events[i]);
    host[i] = kinds[i] != Kind::kIgnored && kinds[i] != Kind::kDevice;
    any_device = any_device || kinds[i] == Kind::kDevice;
  }
  const std::vector<std::ptrdiff_t> parent = nest(table, host);
  const std::vector<std::optional<OpClass>> ctx = contexts(table, kinds, parent);

  std::vector<StepRange> ranges;
  for (size_t i = 0; i < n; ++i) {
    if (kinds[i] == Kind::kStep) {
      ranges.push_back({table.events[i].start, table.events[i].end()});
    }
  }
  if (ranges.empty()) {
    fail_at_events(table,
                   "no ProfilerStep#N ranges: profile with torch.profiler.profile(schedule=...) "
                   "and call prof.step() after each step, or wrap each step in "
                   "record_function(\"ProfilerStep#N\")");
  }

  Collected c = any_device ? device_ops(table, kinds, ctx) : host_ops(table, kinds, parent, ctx);
  MeasuredTrace trace;
  trace.source = table.source;
  trace.framework = "pytorch";
  trace.op_source = any_device ? "device" : "host";
  trace.steps = build_steps(ranges, std::move(c.ops), c.assign_at,
                            any_device ? Assign::kUntilNextStep : Assign::kWithinRange);
  return trace;
}

}  // namespace meshsim::traces::detail
