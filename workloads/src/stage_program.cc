#include "stage_builder.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>

#include "meshsim/sim/error.h"

namespace meshsim::workloads::detail {
namespace {

Stream stream_of(CommKind k) {
  switch (k) {
    case CommKind::kTensor:
      return Stream::kTensor;
    case CommKind::kData:
      return Stream::kData;
    case CommKind::kExpert:
      return Stream::kExpert;
    case CommKind::kContext:
      return Stream::kContextSend;
    case CommKind::kPipeline:
      return Stream::kPipeSendActivation;
  }
  return Stream::kTensor;
}

}  // namespace

OpId StageBuilder::add(Op op, const std::vector<OpId>& deps, Phase phase) {
  op.labels.stage = static_cast<int32_t>(stage_);
  const HostDispatch& h = p_.host;
  op.host = phase == Phase::kForward    ? h.forward_kernel
            : phase == Phase::kBackward ? h.backward_kernel
                                        : h.optimizer_kernel;
  if (const auto* w = std::get_if<ComputeWork>(&op.work);
      w != nullptr && w->op_class == OpClass::kMatmul && w->shape) {
    op.host += h.gemm_call;
  }
  graph_launch(op, phase);
  if (p_.host_time_scale != 1.0) {
    op.host = Microseconds(op.host.microseconds() * p_.host_time_scale);
  }
  const OpId id = prog_.add(std::move(op));
  for (const OpId d : deps) {
    prog_.add_dependency(d, id);
  }
  return id;
}

// CUDA graphs (CudaGraphs): an op inside a graph costs the host nothing but the graph's one
// launch, paid by the graph's first op. Per layer, a graph is one layer's forward (or backward)
// of one microbatch: its compute and the layer's own TP/SP/CP/EP communication (ops labelled with
// the layer and not data-parallel or pipeline traffic); per step, every op is in the one graph,
// which cannot synchronise with the host.
void StageBuilder::graph_launch(Op& op, Phase phase) {
  if (p_.cuda_graphs == CudaGraphs::kStep) {
    op.host = graph_open_ ? Duration::zero() : p_.host.graph_launch;
    op.host_sync = HostSync::kNone;
    graph_open_ = true;
    return;
  }
  const std::optional<OpCategory> cat = op.labels.category;
  const bool in_layer = op.labels.layer.has_value() && phase != Phase::kStep &&
                        cat != category_of(CommKind::kData) &&
                        cat != category_of(CommKind::kPipeline);
  if (p_.cuda_graphs != CudaGraphs::kLayers || !in_layer) {
    graph_ = std::nullopt;
    return;
  }
  const GraphKey key{*op.labels.layer, op.labels.microbatch.value_or(-1), phase};
  op.host = graph_ == key ? Duration::zero() : p_.host.graph_launch;
  graph_ = key;
}

OpId StageBuilder::compute(const Scope& scope, const KernelSpec& k,
                           std::vector<MemoryEffect> memory) {
  Op op;
  op.name = scope.prefix + k.name;
  op.stream = index(Stream::kCompute);
  op.work = k.work;
  op.labels = scope.labels;
  op.memory = std::move(memory);
  if (k.role == KernelRole::kHostRead && p_.host.sync_host_reads) {
    op.host_sync = HostSync::kWaitOp;
  }
  const OpId id = add(std::move(op), stream_.take_waits(), scope.phase);
  stream_.issued(id);
  return id;
}

// `.cpu()` copies on the current stream and waits for that stream: the host waits for the copy,
// which the compute stream runs after everything issued to it before (kWaitOp on a compute-stream
// op), not for other streams' work (a pending pipeline send).
void StageBuilder::get_batch(const Scope& scope) {
  // Three int64 sizes (the batch's key, its dimensions) copied to the host.
  ComputeWork w;
  w.op_class = OpClass::kCopy;
  w.bytes = Bytes::of(24);
  Op op;
  op.name = scope.prefix + "get_batch.sizes_to_host";
  op.stream = index(Stream::kCompute);
  op.work = w;
  op.labels = scope.labels;
  op.host_sync = HostSync::kWaitOp;
  const OpId id = add(std::move(op), stream_.take_waits(), scope.phase);
  stream_.issued(id);
}

OpId StageBuilder::host_copy(const Scope& scope, int64_t layer, bool to_host) {
  const Bytes saved = part_.activations.of(layer).saved;
  Op op;
  op.name = scope.prefix + (to_host ? "offload_activations" : "reload_activations");
  op.stream = index(to_host ? Stream::kHostOffload : Stream::kHostReload);
  ComputeWork w;
  w.op_class = OpClass::kCopy;
  w.bytes = saved;
  w.host = to_host ? HostCopy::kToHost : HostCopy::kToDevice;
  op.work = w;
  op.labels = scope.labels;
  op.memory = {to_host ? release(MemoryCategory::kActivations, saved)
                       : alloc(MemoryCategory::kActivations, saved)};
  std::vector<OpId> deps;
  if (const std::optional<OpId> last = stream_.last()) {
    deps.push_back(*last);
  }
  return add(std::move(op), deps, scope.phase);
}

OpId StageBuilder::collective(const Scope& scope, const std::string& name, CommKind kind,
                              CollectiveKind coll, Bytes bytes, bool blocking,
                              std::optional<GroupSlot> slot, std::vector<MemoryEffect> memory,
                              std::optional<Stream> stream, bool holds_sms) {
  Op op;
  op.name = scope.prefix + name;
  op.memory = std::move(memory);
  op.stream = index(stream.value_or(stream_of(kind)));
  op.work = CollectiveWork{coll, bytes, index(slot.value_or(group_slot_for(kind))), holds_sms};
  op.labels = scope.labels;
  op.labels.category = category_of(kind);
  std::vector<OpId> deps;
  if (const std::optional<OpId> last = stream_.last()) {
    deps.push_back(*last);
  }
  const OpId id = add(std::move(op), deps, scope.phase);
  if (blocking) {
    stream_.next_waits_for(id);
  }
  return id;
}

// A send starts after the kernel that produced what it sends; a receive waits for nothing (the
// caller makes the kernel that needs it wait).
OpId StageBuilder::p2p(const Scope& scope, const std::string& name, bool send, PeerSlot peer,
                       Tag tag, Bytes bytes, Stream stream) {
  Op op;
  op.name = scope.prefix + name;
  op.stream = index(stream);
  op.is_send = send;
  op.work = PeerWork{index(peer), bytes, index(tag)};
  op.labels = scope.labels;
  op.labels.category = category_of(info(peer).kind);
  std::vector<OpId> deps;
  if (const std::optional<OpId> last = stream_.last(); send && last) {
    deps.push_back(*last);
  }
  // Megatron batches the pipeline sends and receives between two passes (1F1B's
  // send_forward_recv_backward: this pass's send with the next pass's receive, adjacent in
  // program order) and synchronises the device after each batch: the last of adjacent ones
  // carries the sync. The interleaved schedule pairs them across chunks in its own order
  // (schedules.py), which this adjacency does not reproduce; there the syncs are left out.
  const bool pipeline = tag == Tag::kActivation || tag == Tag::kGradient;
  if (pipeline && p_.host.sync_after_p2p != P2pSync::kNone && p_.vpp == 1) {
    op.host_sync = HostSync::kWaitDevice;
  }
  const bool syncs = op.host_sync != HostSync::kNone;
  const OpId id = add(std::move(op), deps, scope.phase);
  if (syncs) {
    if (synced_p2p_ && synced_p2p_->value() + 1 == id.value()) {
      prog_.set_host_sync(*synced_p2p_, HostSync::kNone);
    }
    synced_p2p_ = id;
  }
  return id;
}

void StageBuilder::emit_comm(const Scope& scope, const CommSpec& c) {
  const OpId id = collective(scope, c.name, c.kind, c.op, c.bytes, !c.async, c.slot);
  if (c.async) {
    stream_.second_waits_for(id);
  }
}

// Without TP overlap: the GEMM and its collective in order, the collective blocking. With it: both
// as kTpOverlapChunks interleaved pieces, as Megatron's / Transformer Engine's TP communication
// overlap splits them, each GEMM piece overlapping the transfer of the next; the GEMM's memory
// effects go to its first piece (allocations) and its last (releases).
void StageBuilder::emit_tp_gemm(const Scope& scope, const TpOverlapGemm& g,
                                std::vector<MemoryEffect> memory) {
  if (!p_.overlap.tensor_parallel) {
    if (g.comm_first) {
      emit_comm(scope, g.comm);
    }
    compute(scope, g.gemm, std::move(memory));
    if (!g.comm_first) {
      emit_comm(scope, g.comm);
    }
    return;
  }
  KernelSpec piece = g.gemm;
  piece.work.flops = g.gemm.work.flops * (1.0 / kTpOverlapChunks);
  piece.work.bytes = g.gemm.work.bytes / kTpOverlapChunks;
  const Bytes comm_bytes = g.comm.bytes / kTpOverlapChunks;
  // Gathered pieces are all issued at once, after the kernel that made the input, and follow
  // each other on the communication stream; the GEMM piece i waits for piece i only, so piece
  // i + 1 arrives while it runs (Transformer Engine's ring-exchange all-gather overlap,
  // ub_overlap_ag: the GEMM of one chunk beside the exchange of the next, transformer_engine/
  // pytorch/module/base.py and common/comm_gemm_overlap). Only the first piece is exposed. The
  // exchange runs on the copy engines (initialize_ub's default for "ring_exchange": use_ce True,
  // num_sm 1, base.py @ v1.13), so the GEMM pieces keep their SMs; the reduce-scatters
  // ("pipeline", 16 SMs by default) hold theirs as NCCL's kernels do.
  const auto comm_name = [&](int i) { return fmt::format("{}[{}]", g.comm.name, i); };
  std::vector<OpId> gathered;
  if (g.comm_first) {
    for (int i = 0; i < kTpOverlapChunks; ++i) {
      gathered.push_back(collective(scope, comm_name(i), g.comm.kind, g.comm.op, comm_bytes, false,
                                    {}, {}, {}, false));
    }
  }
  for (int i = 0; i < kTpOverlapChunks; ++i) {
    piece.name = fmt::format("{}[{}]", g.gemm.name, i);
    std::vector<MemoryEffect> effects;
    for (const MemoryEffect& e : memory) {
      if (e.at_end ? i + 1 == kTpOverlapChunks : i == 0) {
        effects.push_back(e);
      }
    }
    // Reduced pieces leave the stream free until the last, which the next kernel needs.
    if (g.comm_first) {
      stream_.next_waits_for(gathered[static_cast<size_t>(i)]);
      compute(scope, piece, std::move(effects));
    } else {
      compute(scope, piece, std::move(effects));
      collective(scope, comm_name(i), g.comm.kind, g.comm.op, comm_bytes,
                 i + 1 == kTpOverlapChunks);
    }
  }
}

// Ring attention: pass our K/V block on and receive the next one while computing on the current
// block.
void StageBuilder::emit_ring(const Scope& scope, const RingSpec& r) {
  std::optional<OpId> recv;
  for (int64_t i = 0; i < r.steps; ++i) {
    if (i + 1 < r.steps) {
      p2p(scope, fmt::format("{}.kv_send[{}]", r.name, i), true, PeerSlot::kContextNext, Tag::kKv,
          r.bytes_per_step, Stream::kContextSend);
    }
    if (recv) {
      stream_.next_waits_for(*recv);
    }
    KernelSpec chunk = r.chunk;
    chunk.name = fmt::format("{}[{}]", r.chunk.name, i);
    compute(scope, chunk);
    recv.reset();
    if (i + 1 < r.steps) {
      recv = p2p(scope, fmt::format("{}.kv_recv[{}]", r.name, i), false,
                 PeerSlot::kContextPrevious, Tag::kKv, r.bytes_per_step, Stream::kContextReceive);
    }
  }
}

void StageBuilder::emit(const Scope& scope, const std::vector<LayerItem>& items,
                        std::optional<MemoryEffect> first_alloc,
                        std::optional<MemoryEffect> last_release) {
  std::optional<size_t> first_kernel;
  std::optional<size_t> last_kernel;
  for (size_t i = 0; i < items.size(); ++i) {
    if (!std::holds_alternative<CommSpec>(items[i])) {
      first_kernel = first_kernel.value_or(i);
      last_kernel = i;
    }
  }
  for (size_t i = 0; i < items.size(); ++i) {
    std::vector<MemoryEffect> memory;
    if (first_alloc && i == first_kernel) {
      memory.push_back(*first_alloc);
    }
    if (last_release && i == last_kernel) {
      memory.push_back(*last_release);
    }
    if (const auto* k = std::get_if<KernelSpec>(&items[i])) {
      compute(scope, *k, std::move(memory));
    } else if (const auto* c = std::get_if<CommSpec>(&items[i])) {
      emit_comm(scope, *c);
    } else if (const auto* g = std::get_if<TpOverlapGemm>(&items[i])) {
      emit_tp_gemm(scope, *g, std::move(memory));
    } else {
      SIM_CHECK(memory.empty(), "a layer may not start or end with ring attention");
      emit_ring(scope, std::get<RingSpec>(items[i]));
    }
  }
}

}  // namespace meshsim::workloads::detail
