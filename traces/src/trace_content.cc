#include "meshsim/traces/trace_content.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <variant>

#include "meshsim/sim/error.h"

namespace meshsim::traces {
namespace {

constexpr uint64_t kKindShift = 56;
constexpr uint64_t kProcessKind = 1;
constexpr uint64_t kThreadKind = 2;
constexpr uint64_t kMemoryKind = 3;
constexpr uint64_t kClusterCounterKind = 4;
constexpr int32_t kTidBase = 10'000'000;
constexpr uint32_t kMaxTracedRank = (2'147'483'647 - kTidBase) / 1000;

struct ArgInfo {
  std::string_view name;
  int decimals;
};

constexpr std::array<ArgInfo, kNumArgKeys> kArgInfo{{
    {"op_class", 0},
    {"dtype", 0},
    {"flops", 0},
    {"bytes", 0},
    {"shape", 0},
    {"layer", 0},
    {"microbatch", 0},
    {"stage", 0},
    {"tflop_per_s", 3},
    {"hbm_gb_per_s", 3},
    {"collective", 0},
    {"direction", 0},
    {"algbw_gb_per_s", 3},
    {"wait_us", 6},
    {"match", 0},
}};

double round_to(double v, int decimals) {
  static constexpr std::array<double, 7> kScale{1.0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6};
  const double scale = kScale[static_cast<size_t>(decimals)];
  return std::round(v * scale) / scale;
}

class ArgList {
 public:
  explicit ArgList(SliceContent& s) : s_(s) { s_.num_args = 0; }
  void add_int(ArgKey k, int64_t v) { next(k, Arg::Kind::kInt).int_value = v; }
  void add_double(ArgKey k, double v) {
    next(k, Arg::Kind::kDouble).double_value = round_to(v, arg_decimals(k));
  }
  void add_string(ArgKey k, std::string_view v) { next(k, Arg::Kind::kString).string_value = v; }
  void add_labels(const OpLabels& l) {
    if (l.layer) {
      add_int(ArgKey::kLayer, *l.layer);
    }
    if (l.microbatch) {
      add_int(ArgKey::kMicrobatch, *l.microbatch);
    }
    if (l.stage) {
      add_int(ArgKey::kStage, *l.stage);
    }
  }

 private:
  Arg& next(ArgKey k, Arg::Kind kind) {
    SIM_CHECK(s_.num_args < kMaxSliceArgs, "slice '{}' has more than {} args", s_.name,
              kMaxSliceArgs);
    Arg& a = s_.args[s_.num_args++];
    a = Arg{};
    a.key = k;
    a.kind = kind;
    return a;
  }
  SliceContent& s_;
};

void describe_compute(const ComputeWork& w, const OpLabels& labels, Duration d, ArgList& args,
                      std::string& scratch) {
  args.add_string(ArgKey::kOpClass, to_string(w.op_class));
  args.add_string(ArgKey::kDtype, to_string(w.dtype));
  args.add_double(ArgKey::kFlops, w.flops.count());
  args.add_int(ArgKey::kBytes, w.bytes.count());
  if (w.shape) {
    // "BxMxKxN" (batched) or "MxKxN", formatted into a fixed buffer: no growth on the hot path.
    scratch.resize(96);
    const auto [end, size] =
        w.shape->batch != 1
            ? fmt::format_to_n(scratch.data(), scratch.size(), "{}x{}x{}x{}", w.shape->batch,
                               w.shape->m, w.shape->k, w.shape->n)
            : fmt::format_to_n(scratch.data(), scratch.size(), "{}x{}x{}", w.shape->m, w.shape->k,
                               w.shape->n);
    scratch.resize(std::min(size, scratch.size()));
    args.add_string(ArgKey::kShape, scratch);
  }
  args.add_labels(labels);
  if (d > Duration::zero()) {
    args.add_double(ArgKey::kTflopPerS, w.flops.count() / d.seconds() * 1e-12);
    if (w.bytes > Bytes::zero()) {
      args.add_double(ArgKey::kHbmGbPerS, w.bytes.as_double() / d.seconds() * 1e-9);
    }
  }
}

void describe_comm(Bytes bytes, const OpRecord& r, const OpLabels& labels, ArgList& args) {
  args.add_int(ArgKey::kBytes, bytes.count());
  const Duration d = r.end - r.start;
  if (d > Duration::zero()) {
    args.add_double(ArgKey::kAlgbwGbPerS, bytes.as_double() / d.seconds() * 1e-9);
  }
  if (r.start > r.ready) {
    args.add_double(ArgKey::kWaitUs, static_cast<double>((r.start - r.ready).ps()) * 1e-6);
  }
  args.add_int(ArgKey::kMatch, static_cast<int64_t>(r.match));
  args.add_labels(labels);
}

int digits(int64_t v) {
  int n = 1;
  while (v >= 10) {
    v /= 10;
    ++n;
  }
  return n;
}

}  // namespace

std::string_view arg_name(ArgKey key) { return kArgInfo[static_cast<size_t>(key)].name; }
int arg_decimals(ArgKey key) { return kArgInfo[static_cast<size_t>(key)].decimals; }

std::string_view to_string(SliceCategory c) {
  switch (c) {
    case SliceCategory::kCompute:
      return "compute";
    case SliceCategory::kCollective:
      return "collective";
    case SliceCategory::kP2P:
      return "p2p";
    case SliceCategory::kHost:
      return "host";
  }
  return "?";
}

std::string rank_label(int64_t rank, int width) { return fmt::format("rank {:0{}}", rank, width); }

int rank_label_width(int64_t max_rank) {
  return std::max(4, digits(std::max<int64_t>(max_rank, 0)));
}

RankPlacementFn node_placement(int64_t ranks_per_node, int64_t max_global_rank,
                               std::function<RankId(RankId)> global_rank) {
  SIM_CHECK(ranks_per_node > 0, "node_placement: {} ranks per node", ranks_per_node);
  const int width = rank_label_width(max_global_rank);
  const int node_width = rank_label_width(max_global_rank / ranks_per_node);
  return [=, global_rank = std::move(global_rank)](RankId r) {
    const int64_t g = global_rank ? global_rank(r).value() : r.value();
    const int64_t node = g / ranks_per_node;
    SIM_CHECK(node + 1 <= kMaxPid, "node {} is beyond the pid range", node);
    return RankPlacement{static_cast<int32_t>(node + 1),
                         fmt::format("node {:0{}}", node, node_width), rank_label(g, width)};
  };
}

std::string stream_label(uint8_t stream, bool host_copies) {
  if (stream == kHostStream) {
    return "host";
  }
  if (host_copies) {
    return fmt::format("host copy {}", stream);
  }
  return stream == 0 ? std::string("compute") : fmt::format("comm {}", stream);
}

uint64_t process_track_uuid(int32_t pid) {
  return (kProcessKind << kKindShift) | static_cast<uint32_t>(pid);
}
uint64_t thread_track_uuid(RankId rank, uint8_t stream) {
  return (kThreadKind << kKindShift) | (uint64_t{rank.value()} << 8) | stream;
}
uint64_t memory_track_uuid(RankId rank) { return (kMemoryKind << kKindShift) | rank.value(); }
uint64_t cluster_counter_uuid(uint32_t index) {
  return (kClusterCounterKind << kKindShift) | index;
}

int32_t thread_tid(RankId rank, uint8_t stream) {
  SIM_CHECK(rank.value() <= kMaxTracedRank, "rank {} is beyond the traceable range", rank.value());
  return kTidBase + static_cast<int32_t>(rank.value()) * 1000 + stream;
}

int32_t process_sort_rank(int32_t pid) { return pid == kClusterPid ? -1 : pid; }

int32_t thread_sort_rank(RankId rank, uint8_t stream) {
  return static_cast<int32_t>(rank.value()) * 256 + stream;
}

int64_t to_trace_ns(SimTime t) {
  SIM_CHECK(t >= SimTime::zero(), "negative time {} ps in a trace", t.ps());
  return t.ps() / 1000;
}

void describe_op(const Op& op, const OpRecord& record, SliceContent& out, std::string& scratch) {
  out.name = op.name;
  out.start = record.start;
  out.end = record.end;
  ArgList args(out);
  if (const auto* c = std::get_if<ComputeWork>(&op.work)) {
    out.category = SliceCategory::kCompute;
    describe_compute(*c, op.labels, record.end - record.start, args, scratch);
  } else if (const auto* w = std::get_if<CollectiveWork>(&op.work)) {
    out.category = SliceCategory::kCollective;
    args.add_string(ArgKey::kCollective, to_string(w->kind));
    describe_comm(w->bytes, record, op.labels, args);
  } else {
    out.category = SliceCategory::kP2P;
    args.add_string(ArgKey::kDirection, op.is_send ? "send" : "recv");
    describe_comm(std::get<PeerWork>(op.work).bytes, record, op.labels, args);
  }
}

}  // namespace meshsim::traces
