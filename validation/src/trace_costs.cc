// What the replay knows of each measured op: how meshsim costs it (trace_replay.h), or why not.
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cmath>
#include <map>
#include <set>

#include "meshsim/sim/checked.h"
#include "meshsim/sim/error.h"
#include "meshsim/sim/median.h"
#include "meshsim/traces/import.h"
#include "meshsim/validation/trace_replay.h"

namespace meshsim::validation {

namespace {

using traces::DeviceOp;
using traces::gemm_operator;
using traces::GemmOperator;
using traces::KinetoCollective;
using traces::KinetoEvent;
using traces::KinetoInputs;
using traces::KinetoKind;
using traces::RankStep;
using traces::RankTrace;

std::string lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

bool contains(std::string_view s, std::string_view part) {
  return s.find(part) != std::string_view::npos;
}

std::optional<MatmulShape> gemm_shape(const GemmOperator& g, const traces::KinetoShape& in) {
  const size_t rank = g.batched ? 3 : 2;
  if (g.lhs + 1 >= traces::kShapeInputs || in.rank[g.lhs] != rank || in.rank[g.lhs + 1] != rank) {
    return std::nullopt;
  }
  const auto& a = in.dims[g.lhs];
  const auto& b = in.dims[g.lhs + 1];
  const size_t o = g.batched ? 1 : 0;
  if (a[o + 1] != b[o] || (g.batched && a[0] != b[0])) {
    return std::nullopt;
  }
  MatmulShape s{a[o], a[o + 1], b[o + 1], g.batched ? a[0] : 1};
  for (const int64_t d : {s.m, s.k, s.n, s.batch}) {
    if (d <= 0 || d > traces::kMaxGemmExtent) {
      return std::nullopt;
    }
  }
  for (const auto& [rows, cols] : {std::pair{s.m, s.k}, std::pair{s.k, s.n}, std::pair{s.m, s.n}}) {
    const auto mn = try_mul(rows, cols);
    const auto n = mn ? try_mul(*mn, s.batch) : std::nullopt;
    if (!n || *n > traces::kMaxGemmElements) {
      return std::nullopt;
    }
  }
  return s;
}

std::optional<CollectiveKind> collective_kind(std::string_view name) {
  const std::string n = lower(name);
  if (contains(n, "allreduce") || contains(n, "all_reduce")) {
    return CollectiveKind::kAllReduce;
  }
  if (contains(n, "allgather") || contains(n, "all_gather")) {
    return CollectiveKind::kAllGather;
  }
  if (contains(n, "reduce_scatter") || contains(n, "reducescatter")) {
    return CollectiveKind::kReduceScatter;
  }
  if (contains(n, "alltoall") || contains(n, "all_to_all")) {
    return CollectiveKind::kAllToAll;
  }
  if (contains(n, "broadcast")) {
    return CollectiveKind::kBroadcast;
  }
  if (n == "reduce") {
    return CollectiveKind::kReduce;
  }
  return std::nullopt;
}

// Bytes per element of a collective's "dtype" (c10's ScalarType names).
std::optional<int64_t> collective_element_bytes(std::string_view dtype) {
  const std::string d = lower(dtype);
  if (d == "float" || d == "float32" || d == "int" || d == "int32") {
    return 4;
  }
  if (d == "bfloat16" || d == "half" || d == "float16" || d == "short" || d == "int16") {
    return 2;
  }
  if (d == "double" || d == "float64" || d == "long" || d == "int64" || d == "complexfloat") {
    return 8;
  }
  if (d == "byte" || d == "char" || d == "bool" || d == "int8" || d == "uint8" ||
      d.starts_with("float8")) {
    return 1;
  }
  return std::nullopt;
}

class Coster {
 public:
  Coster(const RankTrace& t, const RankStep& s, int64_t rank, int64_t world,
         const topology::Chip& chip)
      : t_(t), s_(s), rank_(rank), world_(world), chip_(chip) {
    for (const DeviceOp& op : s.ops) {
      if (op.op) {
        ++kernels_of_[*op.op];
      }
    }
  }

  ReplayOp cost(uint32_t index) {
    const DeviceOp& op = s_.ops[index];
    ReplayOp r;
    r.index = index;
    r.event = op.event;
    r.measured = op.duration;
    r.compute.op_class = op.op_class;
    r.compute.dtype = Dtype::kFp32;
    const KinetoEvent& e = t_.events[op.event];
    if (op.communication) {
      r.why = collective(op, r);
    } else if (e.kind != KinetoKind::kKernel) {
      r.why = copy(op, r);
    } else {
      r.why = kernel(op, r);
    }
    if (r.why != Unmodelled::kNone) {
      r.cost = ReplayCost::kMeasured;
      r.collective.reset();
      r.group.clear();
      r.compute = ComputeWork{};
      r.compute.op_class = op.op_class;
      r.compute.measured = op.duration;
    }
    return r;
  }

 private:
  Unmodelled collective(const DeviceOp& op, ReplayOp& r) {
    if (op.p2p) {
      return Unmodelled::kPointToPoint;
    }
    if (!op.collective) {
      return Unmodelled::kNoMetadata;
    }
    const KinetoCollective& c = t_.collectives[*op.collective];
    const auto kind = collective_kind(c.name);
    const auto size = collective_element_bytes(c.dtype);
    if (!kind || !size) {
      return Unmodelled::kUnknownCollective;
    }
    const int64_t elements = *kind == CollectiveKind::kAllGather ? c.out_nelems : c.in_nelems;
    const auto bytes = elements >= 0 ? try_mul(elements, *size) : std::nullopt;
    if (!bytes) {
      return Unmodelled::kNoMetadata;
    }
    std::vector<int64_t> ranks = c.group_ranks;
    if (ranks.empty()) {
      for (const traces::KinetoProcessGroup& g : t_.groups) {
        if (!c.group_name.empty() && g.name == c.group_name) {
          ranks = g.ranks;
        }
      }
    }
    if (ranks.empty() && c.group_size == world_) {
      for (int64_t i = 0; i < world_; ++i) {
        ranks.push_back(i);
      }
    }
    std::vector<int64_t> sorted = ranks;
    std::sort(sorted.begin(), sorted.end());
    if (ranks.size() < 2 || std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end() ||
        sorted.front() < 0 || sorted.back() >= world_ ||
        !std::binary_search(sorted.begin(), sorted.end(), rank_)) {
      return Unmodelled::kNoGroup;
    }
    for (const int64_t g : ranks) {
      r.group.push_back(RankId(static_cast<uint32_t>(g)));
    }
    r.cost = ReplayCost::kCollective;
    r.collective = CollectiveWork{*kind, Bytes::of(*bytes), 0};
    r.compute.op_class = OpClass::kCommunication;
    return Unmodelled::kNone;
  }

  Unmodelled copy(const DeviceOp& op, ReplayOp& r) {
    const KinetoEvent& e = t_.events[op.event];
    if (e.extra == traces::kNoIndex) {
      return Unmodelled::kNoShapes;
    }
    const int64_t bytes = t_.copy_bytes[e.extra];
    const std::string& name = t_.name_of(e);
    r.cost = ReplayCost::kCopy;
    r.compute.op_class = OpClass::kCopy;
    if (e.kind == KinetoKind::kMemset) {
      r.compute.bytes = Bytes::of(bytes);
      return Unmodelled::kNone;
    }
    if (contains(name, "PtoP")) {
      return Unmodelled::kPointToPoint;
    }
    if (contains(name, "DtoD")) {
      const auto twice = try_mul(bytes, 2);
      if (!twice) {
        return Unmodelled::kNoShapes;
      }
      r.compute.bytes = Bytes::of(*twice);
      return Unmodelled::kNone;
    }
    const bool to_device = contains(name, "HtoD");
    if (!to_device && !contains(name, "DtoH")) {
      return Unmodelled::kClass;
    }
    if (!chip_.host_link || contains(name, "Pageable")) {
      // host_link holds pinned-memory rates; a pageable copy stages through a bounce buffer.
      return chip_.host_link ? Unmodelled::kClass : Unmodelled::kNoHostLink;
    }
    r.compute.host = to_device ? HostCopy::kToDevice : HostCopy::kToHost;
    r.compute.bytes = Bytes::of(bytes);
    return Unmodelled::kNone;
  }

  Unmodelled kernel(const DeviceOp& op, ReplayOp& r) {
    if (!op.op) {
      return Unmodelled::kNoOperator;
    }
    const KinetoEvent& oe = t_.events[*op.op];
    const std::string& op_name = t_.name_of(oe);
    if (oe.extra == traces::kNoIndex) {
      return Unmodelled::kNoShapes;
    }
    const KinetoInputs& in = t_.inputs[oe.extra];
    if (const GemmOperator* g = gemm_operator(op_name)) {
      if (!kernel_facts(op).matmul || !gemm_done_.insert(*op.op).second) {
        return kernels_of_[*op.op] > 1 ? Unmodelled::kSharedOperator : Unmodelled::kClass;
      }
      return gemm(*g, in, op, r);
    }
    switch (op.op_class) {
      case OpClass::kElementwise:
      case OpClass::kNorm:
      case OpClass::kCopy:
      case OpClass::kLoss:
      case OpClass::kQuantize:
        break;
      default:
        return Unmodelled::kClass;
    }
    if (kernels_of_[*op.op] > 1) {
      return Unmodelled::kSharedOperator;
    }
    if (in.tensors == 0) {
      return Unmodelled::kNoShapes;
    }
    int64_t bytes = 0;
    if (op_name == "aten::copy_" || op_name == "aten::_to_copy" || op_name == "aten::to" ||
        op_name == "aten::clone" || op_name == "aten::contiguous") {
      bytes = in.largest_tensor_bytes * 2;
    } else if (op_name == "aten::fill_" || op_name == "aten::zero_") {
      bytes = in.largest_tensor_bytes;
    } else {
      const auto sum = try_add(in.tensor_bytes, in.largest_tensor_bytes);
      if (!sum) {
        return Unmodelled::kNoShapes;
      }
      bytes = *sum;
    }
    r.cost = ReplayCost::kMemory;
    r.compute.dtype = in.dtype.value_or(Dtype::kFp32);
    r.compute.bytes = Bytes::of(bytes);
    return Unmodelled::kNone;
  }

  Unmodelled gemm(const GemmOperator& g, const KinetoInputs& in, const DeviceOp& op,
                  ReplayOp& r) {
    const auto shape =
        in.shape == traces::kNoIndex ? std::nullopt : gemm_shape(g, t_.shapes[in.shape]);
    if (!shape || !in.dtype) {
      return Unmodelled::kNoShapes;
    }
    Dtype dtype = *in.dtype;
    if (dtype == Dtype::kFp32 && kernel_facts(op).tf32) {
      dtype = Dtype::kTf32;
    }
    if (!chip_.peak(dtype)) {
      return Unmodelled::kClass;
    }
    const double mkn = static_cast<double>(shape->m) * static_cast<double>(shape->k) *
                       static_cast<double>(shape->n) * static_cast<double>(shape->batch);
    const int64_t elements = (shape->m * shape->k + shape->k * shape->n + shape->m * shape->n) *
                             shape->batch;  // each term <= 2^48 (gemm_shape): fits
    r.cost = ReplayCost::kGemm;
    r.compute.dtype = dtype;
    r.compute.flops = Flops::of(2 * mkn);
    r.compute.bytes = Bytes::of(elements * bytes_per_element(dtype));
    r.compute.shape = *shape;
    return Unmodelled::kNone;
  }

  // What a kernel's name says, computed once per distinct name.
  struct KernelFacts {
    bool matmul = false;  // the matmul rule of traces/import.h matches it
    // An fp32 GEMM on tensor cores runs as TF32: cuBLAS names its kernels "...tf32..."; CUTLASS
    // "tensorop_s1688gemm" (an fp32 GEMM on the m16n8k8 TF32 MMA of SM80, the shape its name
    // gives).
    bool tf32 = false;
  };
  const KernelFacts& kernel_facts(const DeviceOp& op) {
    const uint32_t name = t_.events[op.event].name;
    const auto [it, added] = facts_.try_emplace(name);
    if (added) {
      const std::string& text = t_.names[name];
      const std::string l = lower(text);
      it->second.matmul = traces::match_kernel_class("pytorch", text) == OpClass::kMatmul;
      it->second.tf32 = contains(l, "tf32") || contains(l, "tensorop_s1688");
    }
    return it->second;
  }

  const RankTrace& t_;
  const RankStep& s_;
  std::map<uint32_t, KernelFacts> facts_;
  int64_t rank_;
  int64_t world_;
  const topology::Chip& chip_;
  std::map<uint32_t, int> kernels_of_;  // operator -> its device ops in the step
  std::set<uint32_t> gemm_done_;        // GEMM operators whose GEMM is placed
};

std::string gemm_label(const ComputeWork& w) {
  const MatmulShape& s = *w.shape;
  return fmt::format("{}{}x{}x{} {}", s.batch > 1 ? fmt::format("{}x ", s.batch) : "", s.m, s.k,
                     s.n, to_string(w.dtype));
}

std::string bytes_label(Bytes b) {
  return fmt::format("{:.3g} MB", static_cast<double>(b.count()) / 1e6);
}

}  // namespace

std::vector<ReplayOp> cost_ops(const RankTrace& trace, const RankStep& step, int64_t global_rank,
                               int64_t world, const topology::Chip& chip) {
  Coster c(trace, step, global_rank, world, chip);
  std::vector<ReplayOp> out;
  out.reserve(step.ops.size());
  for (uint32_t i = 0; i < step.ops.size(); ++i) {
    out.push_back(c.cost(i));
  }
  return out;
}

Duration Replay::modelled_measured() const {
  Duration d;
  for (size_t c = 0; c < measured_by_cost.size(); ++c) {
    if (c != static_cast<size_t>(ReplayCost::kMeasured)) {
      d += measured_by_cost[c];
    }
  }
  return d;
}

void KernelRows::add(const Replay& r) {
  for (const ReplayOp& op : r.ops) {
    if (op.cost == ReplayCost::kMeasured) {
      continue;
    }
    // The group: the kernel's name and what it was costed from.
    std::vector<int64_t> key = {static_cast<int64_t>(op.cost), trace_.events[op.event].name};
    if (op.collective) {
      key.insert(key.end(), {static_cast<int64_t>(op.collective->kind),
                             op.collective->bytes.count(), static_cast<int64_t>(op.group.size())});
    } else if (op.compute.shape) {
      const MatmulShape& m = *op.compute.shape;
      key.insert(key.end(), {m.m, m.k, m.n, m.batch, static_cast<int64_t>(op.compute.dtype)});
    } else {
      key.push_back(op.compute.bytes.count());
    }
    const auto [it, added] = groups_.try_emplace(std::move(key));
    KernelRow& row = it->second;
    if (added) {
      row.name = trace_.name_of(trace_.events[op.event]);
      row.cost = op.cost;
      row.op_class = op.compute.op_class;
      if (op.collective) {
        row.shape = fmt::format("{} {} over {}", to_string(op.collective->kind),
                                bytes_label(op.collective->bytes), op.group.size());
      } else if (op.compute.shape) {
        row.shape = gemm_label(op.compute);
      } else {
        row.shape = bytes_label(op.compute.bytes);
      }
    }
    row.count += 1;
    row.measured += op.measured;
    row.simulated += op.simulated;
  }
}

std::vector<KernelRow> KernelRows::rows() const {
  std::vector<KernelRow> out;
  for (const auto& [key, row] : groups_) {
    out.push_back(row);
  }
  const auto gap = [](const KernelRow& r) {
    return r.simulated > r.measured ? r.simulated - r.measured : r.measured - r.simulated;
  };
  std::stable_sort(out.begin(), out.end(),
                   [&gap](const KernelRow& a, const KernelRow& b) { return gap(a) > gap(b); });
  return out;
}

std::vector<KernelRow> kernel_rows(const RankTrace& trace,
                                   const std::vector<const Replay*>& replays) {
  KernelRows rows(trace);
  for (const Replay* r : replays) {
    rows.add(*r);
  }
  return rows.rows();
}

namespace {

// The breakdown's times other than by_class.
constexpr std::array<Duration traces::StepBreakdown::*, 9> kBreakdownTimes = {
    &traces::StepBreakdown::step,        &traces::StepBreakdown::compute,
    &traces::StepBreakdown::comm,        &traces::StepBreakdown::exposed_comm,
    &traces::StepBreakdown::overlap,     &traces::StepBreakdown::idle,
    &traces::StepBreakdown::exposed_p2p, &traces::StepBreakdown::bubble,
    &traces::StepBreakdown::host_gap};

// The mean of each time over `v` (rounded toward zero to the picosecond); by_class stays a sum.
traces::StepBreakdown mean(const std::vector<traces::StepBreakdown>& v) {
  traces::StepBreakdown m;
  for (const traces::StepBreakdown& b : v) {
    for (const auto time : kBreakdownTimes) {
      m.*time += b.*time;
    }
    for (size_t c = 0; c < b.by_class.size(); ++c) {
      m.by_class[c] += b.by_class[c];
    }
  }
  const auto n = static_cast<int64_t>(std::max<size_t>(v.size(), 1));
  for (const auto time : kBreakdownTimes) {
    m.*time = Duration::from_ps((m.*time).ps() / n);
  }
  return m;
}

}  // namespace

void RankSummarizer::add(const Replay& r) {
  s_.rank = r.rank;
  ++s_.steps;
  measured_.push_back(r.measured_step);
  simulated_.push_back(r.simulated_step);
  measured_breakdowns_.push_back(r.measured);
  simulated_breakdowns_.push_back(r.simulated);
  if (r.measured_step > Duration::zero()) {
    const double e = r.simulated_step / r.measured_step - 1;
    if (std::fabs(e) > std::fabs(s_.worst_step_error)) {
      s_.worst_step_error = e;
    }
  }
  for (const ReplayOp& op : r.ops) {
    s_.measured_by_cost[static_cast<size_t>(op.cost)] += op.measured;
    s_.measured_by_reason[static_cast<size_t>(op.why)] += op.measured;
    s_.device_time += op.measured;
  }
  s_.host_ops += r.host_ops;
  s_.inferred_dependencies += r.inferred_dependencies;
  s_.anchored_transfers += r.anchored_transfers;
}

RankSummary RankSummarizer::summary() const {
  SIM_CHECK(s_.steps > 0, "a rank summary of no steps");
  RankSummary s = s_;
  s.measured_step = median(measured_).value_or(Duration::zero());
  s.simulated_step = median(simulated_).value_or(Duration::zero());
  s.step_error =
      s.measured_step > Duration::zero() ? s.simulated_step / s.measured_step - 1 : 0.0;
  s.measured = mean(measured_breakdowns_);
  s.simulated = mean(simulated_breakdowns_);
  return s;
}

RankSummary summarize(const std::vector<Replay>& replays) {
  RankSummarizer s;
  for (const Replay& r : replays) {
    s.add(r);
  }
  return s.summary();
}

RankIdentity rank_identity(const RankTrace& trace, int64_t fallback_rank, int64_t fallback_world) {
  RankIdentity id;
  if (trace.rank && trace.world_size) {
    id.rank = *trace.rank;
    id.world = *trace.world_size;
    id.from_trace = true;
    return id;
  }
  id.rank = trace.rank.value_or(fallback_rank);
  id.world = std::max(fallback_world, id.rank + 1);
  return id;
}

std::optional<std::string> catalogue_chip(const RankTrace& trace, std::string& why) {
  if (trace.devices.empty()) {
    why = "the trace has no deviceProperties (which GPU it ran on)";
    return std::nullopt;
  }
  const traces::KinetoDevice& d = trace.devices.front();
  const std::string n = lower(d.name);
  if (contains(n, "a100")) {
    if (!d.memory_bytes) {
      why = fmt::format("\"{}\": no totalGlobalMem to tell the 40 GB from the 80 GB A100", d.name);
      return std::nullopt;
    }
    return *d.memory_bytes < int64_t{60'000'000'000} ? "a100-40gb" : "a100-80gb";
  }
  if (contains(n, "gb200")) {
    return "gb200";
  }
  if (contains(n, "b200")) {
    return "b200";
  }
  if (contains(n, "h200")) {
    return "h200";
  }
  if (contains(n, "h100") && !contains(n, "pcie") && !contains(n, "nvl")) {
    return "h100-sxm";
  }
  why = fmt::format("the catalogue has no chip for \"{}\"", d.name);
  return std::nullopt;
}

}  // namespace meshsim::validation
