// The plan search's lower bound on the step time (the argument is in step_bound.h).
#include "meshsim/studies/step_bound.h"

#include <algorithm>
#include <set>
#include <variant>

#include "meshsim/sim/error.h"
#include "meshsim/workloads/partition.h"
#include "meshsim/workloads/pipeline.h"
#include "meshsim/workloads/step.h"

namespace meshsim::studies {

using workloads::CommKind;
using workloads::ParallelPlan;

// Where an op of the probe's single stage sits: before the first layer (embedding), in a layer's
// forward or backward, between them (the head), or after the last backward (the embedding's
// backward, gradient reduction, optimizer: left out of the bound). Not file-local: ProbeOps holds
// them (a member of a file-local type trips GCC's -Wsubobject-linkage in a unity batch).
enum class ProbePart { kEmbedding, kLayerForward, kHead, kLayerBackward, kTail };

struct StepLowerBound::ProbeOps {
  const Program& program;
  std::vector<ProbePart> part;         // per op
  std::vector<int32_t> layer;          // per op, -1 outside layers
  std::vector<OpId> compute_order;     // compute-stream ops in program (stream) order
};

namespace {

using ProbeOps = StepLowerBound::ProbeOps;

ProbeOps classify(const Program& prog) {
  ProbeOps p{prog, {}, {}, {}};
  const size_t n = prog.size();
  p.part.resize(n, ProbePart::kEmbedding);
  p.layer.resize(n, -1);
  bool seen_layer = false;
  bool backward = false;
  bool backward_layers = false;
  for (size_t i = 0; i < n; ++i) {
    const Op& op = prog.op(OpId(static_cast<uint32_t>(i)));
    const bool compute = std::holds_alternative<ComputeWork>(op.work);
    if (compute && op.stream == 0) {
      p.compute_order.push_back(OpId(static_cast<uint32_t>(i)));
      if (std::get<ComputeWork>(op.work).op_class == OpClass::kLoss) {
        backward = true;  // the loss ends the forward
      }
    }
    if (op.labels.layer) {
      seen_layer = true;
      p.layer[i] = *op.labels.layer;
      p.part[i] = backward ? ProbePart::kLayerBackward : ProbePart::kLayerForward;
      backward_layers = backward_layers || backward;
    } else if (!seen_layer) {
      p.part[i] = ProbePart::kEmbedding;
    } else {
      // Outside the layers after the first one: the head until the first backward layer op, the
      // tail after the backward's layers.
      p.part[i] = backward_layers ? ProbePart::kTail : ProbePart::kHead;
    }
  }
  return p;
}

bool has_edge(const Program& prog, OpId from, OpId to) {
  const std::vector<OpId> succ = prog.successors(from);
  return std::find(succ.begin(), succ.end(), to) != succ.end();
}

}  // namespace

StepLowerBound::StepLowerBound(workloads::ModelConfig model, const topology::ClusterSpec& cluster,
                               collectives::NetworkCommModel* comm)
    : model_(std::move(model)),
      comm_(comm),
      probe_model_(model_),
      compute_(cluster.chip),
      domain_size_(cluster.scale_up_domain_size()),
      scale_up_bandwidth_(cluster.scale_up_bandwidth()),
      device_bandwidth_(cluster.scale_up_bandwidth() + cluster.inter_node_bandwidth()) {
  probe_model_.num_layers = std::min<int64_t>(model_.num_layers, 2);
  // The bound takes the least of the probe's layers for every layer, so the probe holds each kind
  // the model has: a dense first layer beside an MoE layer, a windowed layer beside a global one.
  if (probe_model_.moe && probe_model_.moe->first_dense_layers > 0) {
    probe_model_.moe->first_dense_layers = 1;
  }
  if (probe_model_.sliding_window) {
    const std::vector<bool>& pattern = probe_model_.sliding_window->pattern;
    const bool any_global = std::find(pattern.begin(), pattern.end(), false) != pattern.end();
    const bool any_local = std::find(pattern.begin(), pattern.end(), true) != pattern.end();
    if (any_local && any_global) {
      probe_model_.sliding_window->pattern = {true, false};
    }
  }
}

StepLowerBound::~StepLowerBound() = default;

namespace {

// The probe: the plan's layer on one stage, one microbatch; EP carved out of DP = EP.
ParallelPlan probe_plan(const ParallelPlan& plan) {
  ParallelPlan p = plan;
  p.pp = 1;
  p.vpp = 1;
  p.stage_layers.clear();
  p.schedule = workloads::PipelineSchedule::kOneFOneB;
  p.dp = plan.ep;
  p.zero = workloads::ZeroStage::kNone;
  p.fsdp = 0;                        // HSDP needs ZeRO; the probe has none
  p.fp8_param_gather = false;        // so do FP8 parameter gathers (the probe gathers nothing)
  if (p.recompute_num_layers > 0) {  // some layers keep their activations: the cheaper kind
    p.recompute = workloads::Recompute::kNone;
    p.recompute_num_layers = 0;
  }
  // Balanced routing: the busiest EP rank of a drawn routing receives at least its balanced share
  // (dropless), or exactly the padded capacity (dropping), so the balanced probe is no slower.
  p.moe_load_skew.reset();
  p.moe_drop_tokens = false;
  // Offloaded activations' host copies run on streams of their own and only add waits (a layer's
  // backward for its reload): the probe without them is no slower.
  p.offload_layers = 0;
  p.gbs = p.dp * p.mbs;
  return p;
}

}  // namespace

Duration StepLowerBound::alone(CollectiveKind kind, Bytes bytes, std::span<const RankId> group) {
  // The group by its size, first rank and stride when its ranks are evenly spaced (the groups
  // of a plan's layout are), else by a 64-bit FNV-1a hash of its ranks: a key of a few words,
  // not thousands of ranks (the cache lives as long as the search).
  uint64_t shape = 0;
  if (group.size() > 1) {
    const int64_t stride = static_cast<int64_t>(group[1].value()) - group[0].value();
    bool even = true;
    for (size_t i = 2; i < group.size() && even; ++i) {
      even = static_cast<int64_t>(group[i].value()) - group[i - 1].value() == stride;
    }
    if (even) {
      shape = static_cast<uint64_t>(stride);
    } else {
      shape = 1469598103934665603ULL;
      for (const RankId r : group) {
        shape = (shape ^ r.value()) * 1099511628211ULL;
      }
      shape |= uint64_t{1} << 63;  // never a stride
    }
  }
  const AloneKey key{static_cast<int>(kind), bytes.count(), group.size(),
                     group.empty() ? 0 : group.front().value(), shape};
  if (const auto it = alone_.find(key); it != alone_.end()) {
    return it->second;
  }
  const Duration t = comm_->collective_time(kind, bytes, group);
  alone_.emplace(key, t);
  return t;
}

Duration StepLowerBound::collective_bound(const workloads::StepPlan& plan, const Op& op) {
  const auto& work = std::get<CollectiveWork>(op.work);
  if (work.kind == CollectiveKind::kBroadcast || work.kind == CollectiveKind::kReduce) {
    return Duration::zero();
  }
  const workloads::PlannedGroup& g = plan.groups[plan.ranks[0].groups[work.group_slot].index()];
  const auto p = static_cast<int64_t>(g.global.size());
  if (p <= 1) {
    return Duration::zero();
  }
  int64_t lo = g.global.front().value();
  int64_t hi = lo;
  for (const RankId r : g.global) {
    lo = std::min<int64_t>(lo, r.value());
    hi = std::max<int64_t>(hi, r.value());
  }
  // Every copy of this group in the plan lies inside one scale-up domain when the group's span
  // divides the domain (groups start at multiples of their span): then only scale-up links carry
  // it.
  const int64_t span = hi - lo + 1;
  const bool in_domain = lo == 0 && span <= domain_size_ && domain_size_ % span == 0;
  const BytesPerSec bw = in_domain ? scale_up_bandwidth_ : device_bandwidth_;
  const Bytes moved = Bytes::of(work.bytes.count() / p * (p - 1));
  Duration least = moved / bw;
  // The communication model's time for it alone on the network (latency, protocol and algorithm
  // included): the engine gives it no less, other traffic only slows it. The probe's first group
  // of each kind has the global ranks of the plan's own first group (TP innermost, then CP, then
  // EP out of DP), so the placement is the plan's.
  if (comm_ != nullptr) {
    least = std::max(least, alone(work.kind, work.bytes, g.global));
  }
  return least;
}

// Per op of the probe: its time on the compute stream (compute ops) or, for a collective of TP,
// CP or EP between two adjacent compute ops that produce and consume it, its sandwich bound;
// zero for the rest.
struct StepLowerBound::OpCosts {
  std::vector<Duration> cost;
  std::vector<Duration> slowed;  // the same while a collective holds the device's SMs
  std::vector<bool> sandwiched;
  std::vector<Duration> context_sends;  // ring attention's sends, on their own stream
};

StepLowerBound::OpCosts StepLowerBound::op_costs(const workloads::StepPlan& probe,
                                                 const ProbeOps& ops) {
  const Program& prog = probe.programs.at(0);
  OpCosts c{std::vector<Duration>(prog.size()), std::vector<Duration>(prog.size()),
            std::vector<bool>(prog.size(), false), std::vector<Duration>(prog.size())};
  for (const OpId id : ops.compute_order) {
    const auto& work = std::get<ComputeWork>(prog.op(id).work);
    c.cost[id.index()] = compute_.compute_time(RankId(0), work);
    c.slowed[id.index()] = compute_.compute_time_in(RankId(0), work, ComputeContext{1});
  }
  for (size_t k = 0; k + 1 < ops.compute_order.size(); ++k) {
    const OpId a = ops.compute_order[k];
    const OpId b = ops.compute_order[k + 1];
    for (uint32_t x = a.value() + 1; x < b.value(); ++x) {
      const Op& op = prog.op(OpId(x));
      if (!std::holds_alternative<CollectiveWork>(op.work) || !op.labels.category) {
        continue;
      }
      const OpCategory cat = *op.labels.category;
      const bool kind_ok = cat == workloads::category_of(CommKind::kTensor) ||
                           cat == workloads::category_of(CommKind::kContext) ||
                           cat == workloads::category_of(CommKind::kExpert);
      if (kind_ok && has_edge(prog, a, OpId(x)) && has_edge(prog, OpId(x), b)) {
        c.cost[x] = collective_bound(probe, op);
        c.slowed[x] = c.cost[x];
        c.sandwiched[x] = true;
      }
    }
  }
  // Ring attention's sends run one at a time on the context-parallel send stream, each for at
  // least its time alone on the network.
  for (size_t i = 0; comm_ != nullptr && i < prog.size(); ++i) {
    const Op& op = prog.op(OpId(static_cast<uint32_t>(i)));
    if (const auto* w = std::get_if<PeerWork>(&op.work);
        w != nullptr && op.is_send &&
        op.labels.category == workloads::category_of(CommKind::kContext)) {
      const workloads::RankBinding& me = probe.ranks[0];
      const RankId peer = probe.ranks[me.peers[w->peer_slot].index()].global_rank;
      c.context_sends[i] = comm_->p2p_time(me.global_rank, peer, w->bytes);
    }
  }
  return c;
}

namespace {

// The ops' costs summed by part: the ends, and each layer's forward and backward (the least over
// the probe's layers).
StepLowerBound::LayerCosts sum_by_part(const ProbeOps& ops, const StepLowerBound::OpCosts& oc,
                                       size_t layers) {
  std::vector<Duration> fwd(layers);
  std::vector<Duration> bwd(layers);
  std::vector<Duration> fwd_slowed(layers);
  std::vector<Duration> bwd_slowed(layers);
  std::vector<Duration> bwd_compute(layers);
  std::vector<Duration> cp_stream(layers);
  StepLowerBound::LayerCosts c;
  for (size_t i = 0; i < ops.part.size(); ++i) {
    const auto l = static_cast<size_t>(std::max(ops.layer[i], 0));
    switch (ops.part[i]) {
      case ProbePart::kEmbedding:
        c.embedding_forward += oc.cost[i];
        break;
      case ProbePart::kLayerForward:
        fwd.at(l) += oc.cost[i];
        fwd_slowed.at(l) += oc.slowed[i];
        cp_stream.at(l) += oc.context_sends[i];
        break;
      case ProbePart::kHead:
        c.head += oc.cost[i];
        break;
      case ProbePart::kLayerBackward:
        bwd.at(l) += oc.cost[i];
        bwd_slowed.at(l) += oc.slowed[i];
        bwd_compute.at(l) += oc.sandwiched[i] ? Duration::zero() : oc.cost[i];
        cp_stream.at(l) += oc.context_sends[i];
        break;
      case ProbePart::kTail:
        break;
    }
  }
  c.forward = *std::min_element(fwd.begin(), fwd.end());
  c.backward = *std::min_element(bwd.begin(), bwd.end());
  c.forward_slowed = *std::min_element(fwd_slowed.begin(), fwd_slowed.end());
  c.backward_slowed = *std::min_element(bwd_slowed.begin(), bwd_slowed.end());
  c.backward_compute_only = *std::min_element(bwd_compute.begin(), bwd_compute.end());
  c.context_sends = *std::min_element(cp_stream.begin(), cp_stream.end());
  return c;
}

}  // namespace

const StepLowerBound::LayerCosts& StepLowerBound::costs(const ParallelPlan& plan) {
  const Key key{plan.tp,
                plan.sp,
                plan.cp,
                plan.ep,
                plan.mbs,
                static_cast<int>(plan.recompute),
                plan.overlap.tensor_parallel,
                static_cast<int>(plan.stack),
                static_cast<int>(plan.attention),
                static_cast<int>(plan.matmul_dtype)};
  if (const auto it = cache_.find(key); it != cache_.end()) {
    return it->second;
  }
  const workloads::StepPlan probe = workloads::plan_step(probe_model_, probe_plan(plan));
  const ProbeOps ops = classify(probe.programs.at(0));
  const LayerCosts c =
      sum_by_part(ops, op_costs(probe, ops), static_cast<size_t>(probe_model_.num_layers));
  return cache_.emplace(key, c).first->second;
}

// The data-parallel streams of a rank run their collectives one at a time, each for at least the
// time the communication model gives it alone on the network (it can only be slower beside
// others). The data stream: the gradients' reduction (one collective of all the stage's dense
// gradients: bucketing splits it into pieces that together take no less) and ZeRO-1/2's gather of
// the updated parameters, or with ZeRO-3 each layer's reduce-scatter after every microbatch's
// backward; under HSDP these run over the shard group, each reduction followed by the all-reduce
// of its shard across the replicas (on the inter-node fabric). The gather stream: ZeRO-3's gather
// of each layer before its forward and its backward, every microbatch. The bound is the busier
// of the two streams.
Duration StepLowerBound::data_parallel_bound(
    const ParallelPlan& plan, const std::vector<workloads::StagePartition>& parts) {
  if (plan.dense_grad_group() <= 1 || !comm_) {
    return Duration::zero();
  }
  const workloads::RankLayout layout(plan);
  const auto ranks = [](const std::vector<int64_t>& g) {
    std::vector<RankId> out;
    for (const int64_t r : g) {
      out.emplace_back(static_cast<uint32_t>(r));
    }
    return out;
  };
  const std::vector<RankId> shard = ranks(layout.shard_group(0));
  const std::vector<RankId> replicas =
      plan.zero_replicas() > 1 ? ranks(layout.replica_group(0)) : std::vector<RankId>{};
  const int64_t shard_size = plan.zero_shard_group();
  const bool zero = plan.zero != workloads::ZeroStage::kNone;
  const auto time = [&](CollectiveKind kind, int64_t bytes, const std::vector<RankId>& group) {
    return bytes > 0 && group.size() > 1 ? alone(kind, Bytes::of(bytes), group)
                                         : Duration::zero();
  };
  // The reduction of `params` gradients: over the shard group, then the shard across replicas.
  const auto reduce = [&](int64_t params) {
    return time(zero ? CollectiveKind::kReduceScatter : CollectiveKind::kAllReduce,
                params * plan.model_state().gradient, shard) +
           time(CollectiveKind::kAllReduce,
                (params + shard_size - 1) / shard_size * plan.model_state().gradient, replicas);
  };
  // Bytes a gathered parameter takes, at most: the layers' weights in FP8 with fp8_param_gather
  // (the embedding stays in 16 bits, so counting it at the layers' width keeps the bound below).
  const int64_t gathered = plan.layer_gather_bytes();
  Duration worst;
  for (const workloads::StagePartition& st : parts) {
    Duration data;
    Duration gather;
    if (plan.zero != workloads::ZeroStage::kParameters) {
      data = reduce(st.params.dense());
      if (zero) {
        data += time(CollectiveKind::kAllGather, st.params.dense() * gathered, shard);
      }
    } else {
      // Each layer's own collectives (layers differ: dense first layers, MoE layers' routers).
      std::map<int64_t, std::pair<Duration, Duration>> by_size;  // reduce, gather
      for (const workloads::LayerShare& layer : st.params.by_layer) {
        auto [it, fresh] = by_size.try_emplace(layer.dense);
        if (fresh) {
          it->second = {reduce(layer.dense),
                        time(CollectiveKind::kAllGather, layer.dense * gathered, shard)};
        }
        data += it->second.first * plan.microbatches();
        gather += it->second.second * (2 * plan.microbatches());
      }
    }
    worst = std::max({worst, data, gather});
  }
  return worst;
}

namespace {

// The pipeline's passes as a schedule: each stage runs its passes in the schedule's order
// (workloads::pipeline_order), a forward after the previous virtual stage's forward of the same
// microbatch and its activation's transfer, a backward after the next virtual stage's backward and
// its gradient's transfer (each transfer at least its time alone on the network; none between two
// virtual stages of one rank), each stage's first forward no earlier than `start` of the stage.
// The end of each stage's last pass, with each pass as long as its compute (and sandwiched
// collectives), bounds that stage's compute stream from below: every pass runs on it for at least
// that long, after the same dependencies. Returns nullopt beyond `max_passes` passes.
struct PassCosts {
  Duration forward;          // one chunk's forward
  Duration backward;         // one chunk's backward (B of zb: 0, its weight gradients are W)
  Duration weight;           // zb's W
  Duration first_forward;    // extra on virtual stage 0's forward (the embedding)
  Duration last_pass;        // extra on the last virtual stage's forward (the head, both ways)
  std::vector<Duration> to_next;  // by virtual stage v: the activation's transfer to v + 1
  std::vector<Duration> to_prev;  // by virtual stage v: the gradient's transfer to v - 1
  std::vector<Duration> start;    // by stage: before the first forward can end its layers
};

std::optional<std::vector<Duration>> pipeline_ends(const workloads::PipelineConfig& cfg,
                                                   const PassCosts& c, size_t max_passes) {
  const auto p = static_cast<size_t>(cfg.stages);
  const auto v = static_cast<size_t>(cfg.virtual_stages);
  const auto m = static_cast<size_t>(cfg.microbatches);
  if (p * v * m * 3 > max_passes) {
    return std::nullopt;
  }
  const std::vector<std::vector<workloads::PipelinePass>> order = workloads::pipeline_orders(cfg);
  // End times of forward and backward (B) passes by (virtual stage, microbatch); -1: not yet.
  const size_t vs = p * v;
  const auto hop = [](const std::vector<Duration>& t, size_t i) {
    return i < t.size() ? t[i].ps() : int64_t{0};
  };
  std::vector<int64_t> fwd_end(vs * m, -1);
  std::vector<int64_t> bwd_end(vs * m, -1);
  std::vector<size_t> next(p, 0);
  std::vector<int64_t> free_at(p, 0);
  for (size_t s = 0; s < p && s < c.start.size(); ++s) {
    free_at[s] = c.start[s].ps();
  }
  size_t remaining = 0;
  for (const auto& o : order) {
    remaining += o.size();
  }
  while (remaining > 0) {
    bool progressed = false;
    for (size_t s = 0; s < p; ++s) {
      while (next[s] < order[s].size()) {
        const workloads::PipelinePass& pass = order[s][next[s]];
        const auto virt = static_cast<size_t>(
            workloads::virtual_stage(cfg, static_cast<int64_t>(s), pass.chunk));
        const auto mb = static_cast<size_t>(pass.microbatch);
        int64_t ready = free_at[s];
        Duration cost;
        int64_t* end = nullptr;
        if (pass.kind == workloads::PassKind::kForward) {
          if (virt > 0) {
            if (fwd_end[(virt - 1) * m + mb] < 0) {
              break;
            }
            ready = std::max(ready, fwd_end[(virt - 1) * m + mb] + hop(c.to_next, virt - 1));
          }
          cost = c.forward + (virt == 0 ? c.first_forward : Duration::zero()) +
                 (virt + 1 == vs ? c.last_pass : Duration::zero());
          end = &fwd_end[virt * m + mb];
        } else if (pass.kind == workloads::PassKind::kBackwardWeight) {
          cost = c.weight;
        } else {
          const int64_t dep =
              virt + 1 < vs ? bwd_end[(virt + 1) * m + mb] : fwd_end[virt * m + mb];
          if (dep < 0) {
            break;
          }
          ready = std::max(ready, dep + (virt + 1 < vs ? hop(c.to_prev, virt + 1) : 0));
          cost = c.backward;
          end = &bwd_end[virt * m + mb];
        }
        free_at[s] = ready + cost.ps();
        if (end != nullptr) {
          *end = free_at[s];
        }
        ++next[s];
        --remaining;
        progressed = true;
      }
    }
    SIM_CHECK(progressed, "the pipeline schedule of {} stages deadlocks", p);
  }
  std::vector<Duration> out;
  out.reserve(p);
  for (const int64_t t : free_at) {
    out.push_back(Picoseconds(t));
  }
  return out;
}

}  // namespace

namespace {

// The layers of pipeline stage `s`, all its chunks (stage_layers is per virtual stage with vpp > 1,
// in pipeline.h's virtual_stage order: interleaved chunk x pp + s, zbv's V), and of its first
// chunk (virtual stage s under both).
int64_t stage_layers_of(const ParallelPlan& plan, int64_t num_layers, int64_t s) {
  if (plan.stage_layers.empty()) {
    return num_layers / plan.pp;
  }
  int64_t n = 0;
  for (int64_t chunk = 0; chunk < plan.vpp; ++chunk) {
    n += plan.stage_layers[static_cast<size_t>(
        workloads::virtual_stage(plan.pipeline(), s, chunk))];
  }
  return n;
}

int64_t first_chunk_layers(const ParallelPlan& plan, int64_t num_layers, int64_t s) {
  return plan.stage_layers.empty() ? num_layers / (plan.pp * plan.vpp)
                                   : plan.stage_layers[static_cast<size_t>(s)];
}

}  // namespace

namespace {

// Runs of equal units of a stage's compute stream, in program order: `count` units of `plain` time
// each, or `slowed` while a collective holds the SMs.
struct UnitRun {
  int64_t count;
  Duration plain;
  Duration slowed;
};

// A stage's compute stream runs units u_1..u_n in order, u_i taking at least s_i if it starts while
// a collective is in flight on the device, else at least p_i (s_i >= p_i); the data stream has a
// collective in flight from the step's start until at least G. Let u_j be the first unit to start
// after that window: it starts no earlier than G, nor than the end of the units before it, which
// all started in the window (sum s_{<j}); the units from u_j on take at least their plain time.
// So the stream ends no earlier than min_j max(G, S_{<j}) + P_{>=j}. That is non-increasing in j
// while S_{<j} <= G and non-decreasing after, so its least value is at the last unit that starts
// within S_{<j} <= G or at the next one. (The units are layers; a layer straddling the window's
// end is counted at its plain time, which keeps the bound valid.)
Duration windowed_stream(const std::vector<UnitRun>& runs, Duration window) {
  Duration plain_total;
  for (const UnitRun& r : runs) {
    plain_total += r.plain * r.count;
  }
  size_t last_nonempty = 0;
  for (size_t k = 0; k < runs.size(); ++k) {
    last_nonempty = runs[k].count > 0 ? k : last_nonempty;
  }
  Duration s_before;  // S_{<L}
  Duration p_before;  // P_{<L}
  for (size_t k = 0; k < runs.size(); ++k) {
    const UnitRun& r = runs[k];
    if (r.count == 0) {
      continue;
    }
    // The last unit L of this run with S_{<L} <= window, if the run holds the crossing.
    const Duration run_slowed = r.slowed * r.count;
    const bool last_run = k == last_nonempty;
    if (s_before + run_slowed <= window && !last_run) {
      s_before += run_slowed;
      p_before += r.plain * r.count;
      continue;
    }
    int64_t i = r.count - 1;
    if (r.slowed > Duration::zero() && s_before + run_slowed > window) {
      i = std::min<int64_t>(r.count - 1, (window - s_before).ps() / r.slowed.ps());
    }
    const Duration s_at = s_before + r.slowed * i;        // S_{<L}
    const Duration p_after = plain_total - p_before - r.plain * (i + 1);  // P_{>L}
    Duration best = p_after + std::max(window, s_at + r.plain);
    if (s_at + r.slowed > window && (i + 1 < r.count || !last_run)) {
      best = std::min(best, s_at + r.slowed + p_after);  // L + 1: S_{<L+1} + P_{>=L+1}
    }
    return best;
  }
  return std::max(window, plain_total);
}

// The stage's passes (workloads::pipeline_orders' order for it) as runs of layer units.
std::vector<UnitRun> stage_runs(const workloads::PipelineConfig& cfg, int64_t stage,
                                const std::vector<workloads::PipelinePass>& order,
                                const StepLowerBound::LayerCosts& c, int64_t chunk_layers,
                                bool zb) {
  std::vector<UnitRun> runs;
  const int64_t last_virtual = cfg.stages * cfg.virtual_stages - 1;
  for (const workloads::PipelinePass& pass : order) {
    const int64_t virt = workloads::virtual_stage(cfg, stage, pass.chunk);
    if (pass.kind == workloads::PassKind::kForward) {
      if (virt == 0) {
        runs.push_back({1, Duration::zero(), Duration::zero()});  // the embedding: not counted
      }
      runs.push_back({chunk_layers, c.forward, c.forward_slowed});
      if (virt == last_virtual) {
        runs.push_back({1, c.head, c.head});
      }
    } else if (pass.kind == workloads::PassKind::kBackwardWeight) {
      runs.push_back({chunk_layers, c.backward_compute_only, c.backward_compute_only});
    } else if (!zb) {
      runs.push_back({chunk_layers, c.backward, c.backward_slowed});
    }
  }
  return runs;
}

}  // namespace

// Per pipeline stage, what the compute stream waits for outside the passes:
//  * before the first forward's layers: the first parameter gather. ZeRO-1/2 issue the gathers of
//    the updated parameters at the step's start, a bucket at a time, and a layer's first forward
//    waits for its bucket (at least min(bucket, the stage's parameters) bytes); ZeRO-3 gathers the
//    first layer before its forward, blocking. The embedding's forward does not wait.
//  * after the last pass: the reduction of the gradients that pass made ready last (the embedding's
//    on the first stage, else the first layer of the stage's first chunk; a bucket holds at least
//    them), which the optimizer waits for, then the step's end kernels (the per-step work and the
//    optimizer over the rank's shard, workloads::stage_extras), which follow every pass in program
//    order.
// And the activation's and gradient's transfers between consecutive virtual stages on different
// ranks (workloads::stage_extras' pipeline message, at least its time alone on the network).
StepLowerBound::StageTerms StepLowerBound::stage_terms(
    const ParallelPlan& plan, const std::vector<workloads::StagePartition>& parts) {
  StageTerms t;
  t.start.assign(static_cast<size_t>(plan.pp), Duration::zero());
  t.window.assign(static_cast<size_t>(plan.pp), Duration::zero());
  t.tail.assign(static_cast<size_t>(plan.pp), Duration::zero());
  const workloads::RankLayout layout(plan);
  const auto stage_rank = [&](int64_t s) { return layout.rank(workloads::RankCoords{0, 0, 0, s}); };
  const auto ranks = [](const std::vector<int64_t>& g) {
    std::vector<RankId> out;
    for (const int64_t r : g) {
      out.emplace_back(static_cast<uint32_t>(r));
    }
    return out;
  };
  const bool zero = plan.zero != workloads::ZeroStage::kNone;
  const bool reduces = plan.dense_grad_group() > 1 && comm_ != nullptr;
  const int64_t gathered = plan.layer_gather_bytes();                  // as in data_parallel_bound
  std::map<std::tuple<int64_t, int64_t, int64_t>, Duration> step_end;  // by (params, first, last)
  for (const workloads::StagePartition& st : parts) {
    const auto s = static_cast<size_t>(st.stage);
    const int64_t rank = stage_rank(st.stage);
    const std::vector<RankId> shard = ranks(layout.shard_group(rank));
    const std::vector<RankId> replicas =
        plan.zero_replicas() > 1 ? ranks(layout.replica_group(rank)) : std::vector<RankId>{};
    const auto time = [&](CollectiveKind kind, int64_t bytes, const std::vector<RankId>& group) {
      return bytes > 0 && group.size() > 1
                 ? alone(kind, Bytes::of(bytes), group)
                 : Duration::zero();
    };
    const int64_t first_layer = st.chunks.empty() || st.chunks.front().first >=
                                                         st.chunks.front().end
                                    ? -1
                                    : st.chunks.front().first;
    if (reduces && first_layer >= 0) {
      Duration gather;
      if (plan.zero == workloads::ZeroStage::kParameters) {
        gather =
            time(CollectiveKind::kAllGather, st.params.of(first_layer).total() * gathered, shard);
      } else if (zero) {
        gather =
            time(CollectiveKind::kAllGather,
                 // The gradient bucket's parameters (stage_passes.cc).
                 std::min(workloads::grad_bucket_bytes(plan).count() / plan.model_state().gradient,
                          st.params.total()) *
                     gathered,
                 shard);
      }
      t.start[s] = std::max(Duration::zero(), gather - (st.first ? costs(plan).embedding_forward
                                                                 : Duration::zero()));
      if (zero && plan.zero != workloads::ZeroStage::kParameters) {
        // The gathers of all the stage's parameters, one after another on the data stream from
        // the step's start (bucketing splits them into pieces that together take no less).
        t.window[s] = time(CollectiveKind::kAllGather, st.params.total() * gathered, shard);
      }
    }
    if (reduces) {
      const int64_t last = st.first && st.params.embedding > 0 ? st.params.embedding
                           : first_layer >= 0 ? st.params.of(first_layer).dense
                                              : 0;
      const int64_t shard_size = plan.zero_shard_group();
      t.tail[s] =
          time(zero ? CollectiveKind::kReduceScatter : CollectiveKind::kAllReduce,
               last * plan.model_state().gradient, shard) +
          time(CollectiveKind::kAllReduce,
               (last + shard_size - 1) / shard_size * plan.model_state().gradient, replicas);
    }
    const auto key = std::tuple(st.params.total(), int64_t{st.first}, int64_t{st.last});
    auto [it, fresh] = step_end.try_emplace(key);
    if (fresh) {
      for (const ComputeWork& w : workloads::stage_extras(model_, plan, st).step_end) {
        it->second += compute_.compute_time(RankId(0), w);
      }
    }
    t.tail[s] += it->second;
  }
  // Transfers between virtual stages, by the ranks' pair.
  const workloads::PipelineConfig cfg = plan.pipeline();
  const int64_t virtuals = plan.pp * plan.vpp;
  t.to_next.assign(static_cast<size_t>(virtuals), Duration::zero());
  t.to_prev.assign(static_cast<size_t>(virtuals), Duration::zero());
  if (plan.pp > 1 && comm_ != nullptr) {
    // One rank's share of the tensor on the wire (its 1/TP slice under Megatron-LM's scatter/gather;
    // the TP all-gather that reassembles it is not counted, so the bound stays below the step).
    const Bytes msg =
        plan.pipeline_wire_bytes(workloads::stage_extras(model_, plan, parts.front()).pipeline_message);
    const auto transfer = [&](int64_t from, int64_t to) {
      const auto a = static_cast<uint32_t>(stage_rank(from));
      const auto b = static_cast<uint32_t>(stage_rank(to));
      auto [it, fresh] = p2p_.try_emplace(std::tuple(a, b, msg.count()));
      if (fresh) {
        it->second = comm_->p2p_time(RankId(a), RankId(b), msg);
      }
      return it->second;
    };
    for (int64_t v = 0; v + 1 < virtuals; ++v) {
      const int64_t a = workloads::virtual_stage_home(cfg, v).stage;
      const int64_t b = workloads::virtual_stage_home(cfg, v + 1).stage;
      if (a != b) {
        t.to_next[static_cast<size_t>(v)] = transfer(a, b);
        t.to_prev[static_cast<size_t>(v + 1)] = transfer(b, a);
      }
    }
  }
  return t;
}

Duration StepLowerBound::operator()(const ParallelPlan& plan) {
  return (*this)(plan, workloads::partition_stages(model_, plan));
}

Duration StepLowerBound::operator()(const ParallelPlan& plan,
                                    const std::vector<workloads::StagePartition>& parts) {
  const LayerCosts& c = costs(plan);
  const bool zb = workloads::splits_backward(plan.schedule);
  const StageTerms terms = stage_terms(plan, parts);
  // The communication streams: data parallel, and ring attention's sends on the stage with the
  // most layers.
  int64_t most_layers = 0;
  for (int64_t s = 0; s < plan.pp; ++s) {
    most_layers = std::max(most_layers, stage_layers_of(plan, model_.num_layers, s));
  }
  const Duration dp = std::max(data_parallel_bound(plan, parts),
                               c.context_sends * (most_layers * plan.microbatches()));
  if (plan.stage_layers.empty()) {
    const int64_t chunk_layers = model_.num_layers / (plan.pp * plan.vpp);
    PassCosts pc;
    pc.forward = c.forward * chunk_layers;
    pc.backward = zb ? Duration::zero() : c.backward * chunk_layers;
    pc.weight = zb ? c.backward_compute_only * chunk_layers : Duration::zero();
    pc.first_forward = c.embedding_forward;
    pc.last_pass = c.head;
    // Zero-bubble schedules: the bound charges a backward's whole compute to its W pass (its B,
    // on the critical path, counts as nothing), which moves work later on the stage: only the
    // makespan of the whole pipeline stays a bound, so the stage terms (transfers, the first
    // gather, the tail) are left out for them.
    if (!zb) {
      pc.to_next = terms.to_next;
      pc.to_prev = terms.to_prev;
      pc.start = terms.start;
    }
    constexpr size_t kMaxPasses = 200000;
    if (const auto ends = pipeline_ends(plan.pipeline(), pc, kMaxPasses)) {
      Duration best = dp;
      for (size_t s = 0; s < ends->size(); ++s) {
        best = std::max(best, (*ends)[s] + (zb ? Duration::zero() : terms.tail[s]));
      }
      // ZeRO-1/2: the parameter gathers hold SMs from the step's start (stage_terms' window).
      if (!zb && std::any_of(terms.window.begin(), terms.window.end(),
                      [](Duration w) { return w > Duration::zero(); })) {
        const workloads::PipelineConfig cfg = plan.pipeline();
        const auto orders = workloads::pipeline_orders(cfg);
        for (size_t s = 0; s < orders.size(); ++s) {
          const Duration stream = windowed_stream(
              stage_runs(cfg, static_cast<int64_t>(s), orders[s], c, chunk_layers, zb),
              terms.window[s]);
          best = std::max(best, stream + terms.tail[s]);
        }
      }
      return best;
    }
  }
  // An uneven split, or too many passes to schedule: each stage's own work after the first
  // microbatch's forward has reached it, then its tail.
  const Duration per_layer = c.forward + (zb ? c.backward_compute_only : c.backward);
  const int64_t m = plan.microbatches();
  const int64_t head_stage =
      workloads::virtual_stage_home(plan.pipeline(), plan.pp * plan.vpp - 1).stage;
  Duration best;
  Duration fill;
  for (int64_t s = 0; s < plan.pp; ++s) {
    Duration busy = per_layer * stage_layers_of(plan, model_.num_layers, s);
    if (s == 0) {
      busy += c.embedding_forward;
    }
    if (s == head_stage) {
      busy += c.head;
    }
    best = std::max(best, fill + busy * m + (zb ? Duration::zero() : terms.tail[static_cast<size_t>(s)]));
    fill += c.forward * first_chunk_layers(plan, model_.num_layers, s) +
            (s == 0 ? c.embedding_forward : Duration::zero());
  }
  return std::max(best, dp);
}

}  // namespace meshsim::studies
