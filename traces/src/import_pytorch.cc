// PyTorch profiler traces (Kineto and legacy) -> MeasuredTrace. The rules are in import.h.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <map>
#include <string>
#include <string_view>

#include "import_events.h"
#include "meshsim/sim/checked.h"
#include "meshsim/sim/error.h"
#include "meshsim/sim/json_input.h"

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
    if (e.name.find("::") != std::string::npos) {
      return Kind::kOperator;
    }
    // An autograd node's own span ("MmBackward0" inside "autograd::engine::evaluate_function:
    // MmBackward0") is no annotation: its operators keep the context of the forward op.
    return e.name.find("Backward") != std::string::npos ? Kind::kTransparent : Kind::kAnnotation;
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

[[noreturn]] void bad_dims(const EventTable& table, const Event& e, const std::string& what) {
  throw InputError(table.source,
                   fmt::format("{}/{}/args/Input Dims", table.legacy_array ? "" : "/traceEvents",
                               e.index),
                   fmt::format("{}: {}", e.name, what));
}

// The dims of input `i` of a GEMM operator: a list of non-negative integers of rank `rank`.
std::vector<int64_t> input_dims(const EventTable& table, const Event& e, size_t i, size_t rank) {
  const nlohmann::json& all = (*e.args)["Input Dims"];
  if (!all.is_array() || all.size() <= i || !all[i].is_array() || all[i].size() != rank) {
    bad_dims(table, e, fmt::format("expected input {} to be a list of {} dimensions", i, rank));
  }
  std::vector<int64_t> out;
  for (const nlohmann::json& d : all[i]) {
    const std::optional<int64_t> n = as_int64(d);
    if (!n || *n < 0 || *n > kMaxGemmExtent) {
      bad_dims(table, e,
               fmt::format("input {}: expected non-negative integer dimensions of at most "
                           "2^31 - 1, got {}",
                           i, describe_json(d)));
    }
    out.push_back(*n);
  }
  return out;
}

// The shape of a GEMM operator from its "Input Dims" (nullopt without them, or for an empty
// product, which launches no work).
std::optional<MatmulShape> gemm_shape(const EventTable& table, const Event& e) {
  const GemmOperator* g = gemm_operator(e.name);
  if (g == nullptr || g->fp8 || !e.has_arg("Input Dims")) {  // FP8: MeasuredGemm has no dtype
    return std::nullopt;
  }
  const size_t rank = g->batched ? 3 : 2;
  const std::vector<int64_t> a = input_dims(table, e, g->lhs, rank);
  const std::vector<int64_t> b = input_dims(table, e, g->lhs + 1, rank);
  const size_t o = g->batched ? 1 : 0;
  if (a[o + 1] != b[o] || (g->batched && a[0] != b[0])) {
    bad_dims(table, e, fmt::format("operands [{}] and [{}] do not multiply",
                                   fmt::join(a, ", "), fmt::join(b, ", ")));
  }
  MatmulShape s{a[o], a[o + 1], b[o + 1], g->batched ? a[0] : 1};
  if (s.m == 0 || s.k == 0 || s.n == 0 || s.batch == 0) {
    return std::nullopt;
  }
  for (const auto& [rows, cols] : {std::pair{s.m, s.k}, std::pair{s.k, s.n}, std::pair{s.m, s.n}}) {
    const std::optional<int64_t> mn = try_mul(rows, cols);
    const std::optional<int64_t> elements = mn ? try_mul(*mn, s.batch) : std::nullopt;
    if (!elements || *elements > kMaxGemmElements) {
      bad_dims(table, e,
               fmt::format("operands [{}] and [{}] hold more than 2^48 elements (512 TB in bf16): "
                           "not a GEMM of this world",
                           fmt::join(a, ", "), fmt::join(b, ", ")));
    }
  }
  return s;
}

// For each host event, its innermost GEMM operator ancestor (itself included) with a shape, or
// -1; GEMM operators with a GEMM operator inside them (none in PyTorch today) are not innermost.
std::vector<std::ptrdiff_t> gemm_of(const EventTable& table, const std::vector<Kind>& kinds,
                                    const std::vector<std::ptrdiff_t>& parent,
                                    std::vector<std::optional<MatmulShape>>& shapes) {
  const size_t n = table.events.size();
  shapes.assign(n, std::nullopt);
  std::vector<std::ptrdiff_t> out(n, -1);
  for (size_t i = 0; i < n; ++i) {
    if (kinds[i] == Kind::kOperator) {
      shapes[i] = gemm_shape(table, table.events[i]);
    }
    if (shapes[i]) {
      out[i] = static_cast<std::ptrdiff_t>(i);
    } else if (parent[i] >= 0) {
      out[i] = out[static_cast<size_t>(parent[i])];
    }
  }
  for (size_t i = 0; i < n; ++i) {  // an outer GEMM operator holding an inner one is not a leaf
    if (shapes[i] && parent[i] >= 0) {
      const std::ptrdiff_t outer = out[static_cast<size_t>(parent[i])];
      if (outer >= 0) {
        shapes[static_cast<size_t>(outer)].reset();
      }
    }
  }
  return out;
}

MeasuredGemm make_gemm(const Event& e, const MatmulShape& shape, std::optional<OpClass> context) {
  return MeasuredGemm{e.name, context.value_or(OpClass::kMatmul), shape, e.start, e.duration};
}

// GPU kernels and copies, each with the context and the time of the host call that launched it;
// the kernels launched inside a GEMM operator make up that GEMM's time.
Collected device_ops(const EventTable& table, const std::vector<Kind>& kinds,
                     const std::vector<std::ptrdiff_t>& parent,
                     const std::vector<std::optional<OpClass>>& ctx) {
  std::map<int64_t, size_t> launches;  // correlation id -> launch event
  for (size_t i = 0; i < table.events.size(); ++i) {
    if (kinds[i] == Kind::kLaunch) {
      if (const auto corr = table.events[i].arg_int("correlation")) {
        launches.emplace(*corr, i);
      }
    }
  }
  std::vector<std::optional<MatmulShape>> shapes;
  const std::vector<std::ptrdiff_t> gemm = gemm_of(table, kinds, parent, shapes);
  std::map<size_t, Duration> gemm_time;  // GEMM operator -> its kernels' time
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
        const std::ptrdiff_t g = gemm[it->second];
        if (g >= 0 && shapes[static_cast<size_t>(g)]) {
          gemm_time[static_cast<size_t>(g)] += e.duration;
        }
      }
    }
    MeasuredOp op = make_op(e, context, {e.name}, "pytorch");
    op.device = e.arg_int("device").value_or(e.pid_number.value_or(0));
    op.stream = e.arg_int("stream").value_or(e.tid_number.value_or(0));
    out.add(std::move(op), at);
  }
  for (const auto& [g, time] : gemm_time) {
    const Event& e = table.events[g];
    MeasuredGemm m = make_gemm(e, *shapes[g], ctx[g]);
    m.duration = time;
    out.add(std::move(m), e.start);
  }
  return out;
}

// Top-level host operators, each with the number of profiler events inside it, and the innermost
// GEMM operators with their shapes.
Collected host_ops(const EventTable& table, const std::vector<Kind>& kinds,
                   const std::vector<std::ptrdiff_t>& parent,
                   const std::vector<std::optional<OpClass>>& ctx) {
  const size_t n = table.events.size();
  // Events of each subtree (parents precede their children in the sorted table).
  std::vector<int64_t> events(n, 0);
  for (size_t i = n; i-- > 0;) {
    if (kinds[i] != Kind::kIgnored && kinds[i] != Kind::kDevice) {
      events[i] += 1;
      if (parent[i] >= 0) {
        events[static_cast<size_t>(parent[i])] += events[i];
      }
    }
  }
  std::vector<bool> under_operator(n, false);
  for (size_t i = 0; i < n; ++i) {
    if (parent[i] >= 0) {
      const auto p = static_cast<size_t>(parent[i]);
      under_operator[i] = under_operator[p] || kinds[p] == Kind::kOperator;
    }
  }
  Collected out;
  for (size_t i = 0; i < n; ++i) {
    if (kinds[i] != Kind::kOperator || under_operator[i]) {
      continue;
    }
    const Event& e = table.events[i];
    MeasuredOp op = make_op(e, ctx[i], {e.name}, "pytorch");
    op.stream = e.tid_number.value_or(0);
    op.events = events[i];
    out.add(std::move(op), e.start);
  }
  std::vector<std::optional<MatmulShape>> shapes;
  (void)gemm_of(table, kinds, parent, shapes);
  for (size_t i = 0; i < n; ++i) {
    if (shapes[i]) {
      MeasuredGemm g = make_gemm(table.events[i], *shapes[i], ctx[i]);
      g.events = events[i];
      out.add(std::move(g), table.events[i].start);
    }
  }
  return out;
}

// Profiler events recorded on the host within each step's range.
void count_host_events(const EventTable& table, const std::vector<Kind>& kinds,
                       const std::vector<StepRange>& ranges, std::vector<MeasuredStep>& steps) {
  for (size_t i = 0; i < table.events.size(); ++i) {
    if (kinds[i] == Kind::kIgnored || kinds[i] == Kind::kDevice || kinds[i] == Kind::kStep) {
      continue;
    }
    if (const auto s = step_at(ranges, table.events[i].start, Assign::kWithinRange)) {
      ++steps[*s].host_events;
    }
  }
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

  Collected c = any_device ? device_ops(table, kinds, parent, ctx)
                           : host_ops(table, kinds, parent, ctx);
  MeasuredTrace trace;
  trace.source = table.source;
  trace.framework = "pytorch";
  trace.op_source = any_device ? "device" : "host";
  trace.steps =
      build_steps(table, ranges, std::move(c),
                  any_device ? Assign::kUntilNextStep : Assign::kWithinRange);
  count_host_events(table, kinds, ranges, trace.steps);
  return trace;
}

}  // namespace meshsim::traces::detail
