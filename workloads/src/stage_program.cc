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

OpId StageBuilder::add(Op op, const std::vector<OpId>& deps) {
  op.labels.stage = static_cast<int32_t>(stage_);
  const OpId id = prog_.add(std::move(op));
  for (const OpId d : deps) {
    prog_.add_dependency(d, id);
  }
  return id;
}

OpId StageBuilder::compute(const KernelSpec& k, std::vector<MemoryEffect> memory) {
  Op op;
  op.name = prefix_ + k.name;
  op.stream = index(Stream::kCompute);
  op.work = k.work;
  op.labels = labels_;
  op.memory = std::move(memory);
  const OpId id = add(std::move(op), waits_);
  waits_ = std::move(after_next_);
  after_next_.clear();
  last_compute_ = id;
  return id;
}

OpId StageBuilder::collective(const std::string& name, CommKind kind, CollectiveKind coll,
                              Bytes bytes, std::vector<OpId> deps, bool blocking,
                              std::optional<GroupSlot> slot, std::vector<MemoryEffect> memory) {
  Op op;
  op.name = prefix_ + name;
  op.memory = std::move(memory);
  op.stream = index(stream_of(kind));
  op.work = CollectiveWork{coll, bytes, index(slot.value_or(group_slot_for(kind)))};
  op.labels = labels_;
  op.labels.category = category_of(kind);
  if (last_compute_) {
    deps.push_back(*last_compute_);
  }
  const OpId id = add(std::move(op), deps);
  if (blocking) {
    waits_.push_back(id);
  }
  return id;
}

OpId StageBuilder::p2p(const std::string& name, bool send, PeerSlot peer, Tag tag, Bytes bytes,
                       Stream stream) {
  Op op;
  op.name = prefix_ + name;
  op.stream = index(stream);
  op.is_send = send;
  op.work = PeerWork{index(peer), bytes, index(tag)};
  op.labels = labels_;
  op.labels.category = category_of(info(peer).kind);
  std::vector<OpId> deps;
  if (send && last_compute_) {
    deps.push_back(*last_compute_);
  }
  return add(std::move(op), deps);
}

// Runs a GEMM and the TP collective next to it as kTpOverlapChunks interleaved pieces, the way
// Megatron's/Transformer Engine's TP communication overlap splits them: each GEMM chunk overlaps
// the transfer of the next chunk.
void StageBuilder::emit_split(const KernelSpec& gemm, const CommSpec& comm, bool comm_first) {
  KernelSpec piece = gemm;
  piece.work.flops = gemm.work.flops * (1.0 / kTpOverlapChunks);
  piece.work.bytes = gemm.work.bytes / kTpOverlapChunks;
  const Bytes comm_bytes = comm.bytes / kTpOverlapChunks;
  for (int i = 0; i < kTpOverlapChunks; ++i) {
    piece.name = fmt::format("{}[{}]", gemm.name, i);
    const std::string cname = fmt::format("{}[{}]", comm.name, i);
    if (comm_first) {
      const OpId c = collective(cname, comm.kind, comm.op, comm_bytes, {}, false);
      waits_.push_back(c);
      compute(piece);
    } else {
      compute(piece);
      const OpId c = collective(cname, comm.kind, comm.op, comm_bytes, {}, false);
      if (i + 1 == kTpOverlapChunks) {
        waits_.push_back(c);
      }
    }
  }
}

void StageBuilder::emit_ring(const RingSpec& r) {
  // Pass our block on and receive the next one while computing on the current block.
  std::optional<OpId> recv;
  for (int64_t i = 0; i < r.steps; ++i) {
    if (i + 1 < r.steps) {
      p2p(fmt::format("{}.kv_send[{}]", r.name, i), true, PeerSlot::kContextNext, Tag::kKv,
          r.bytes_per_step, Stream::kContextSend);
    }
    if (recv) {
      waits_.push_back(*recv);
    }
    KernelSpec chunk = r.chunk;
    chunk.name = fmt::format("{}[{}]", r.chunk.name, i);
    compute(chunk);
    recv.reset();
    if (i + 1 < r.steps) {
      recv = p2p(fmt::format("{}.kv_recv[{}]", r.name, i), false, PeerSlot::kContextPrevious,
                 Tag::kKv, r.bytes_per_step, Stream::kContextReceive);
    }
  }
}

void StageBuilder::emit(std::vector<LayerItem> items, std::optional<MemoryEffect> first_alloc,
                        std::optional<MemoryEffect> last_release) {
  bool first = true;
  size_t last_kernel = items.size();
  for (size_t i = 0; i < items.size(); ++i) {
    if (!std::holds_alternative<CommSpec>(items[i])) {
      last_kernel = i;
    }
  }
  for (size_t i = 0; i < items.size(); ++i) {
    std::vector<MemoryEffect> mem;
    if (first && first_alloc && !std::holds_alternative<CommSpec>(items[i])) {
      mem.push_back(*first_alloc);
      first = false;
    }
    if (i == last_kernel && last_release) {
      mem.push_back(*last_release);
    }
    if (const auto* k = std::get_if<KernelSpec>(&items[i])) {
      const auto* next = i + 1 < items.size() ? std::get_if<CommSpec>(&items[i + 1]) : nullptr;
      if (p_.overlap.tensor_parallel && mem.empty() && next && next->kind == CommKind::kTensor &&
          !next->async && next->op != CollectiveKind::kAllGather &&
          k->work.op_class == OpClass::kMatmul) {
        emit_split(*k, *next, false);
        ++i;
        continue;
      }
      compute(*k, std::move(mem));
    } else if (const auto* c = std::get_if<CommSpec>(&items[i])) {
      const auto* next = i + 1 < items.size() ? std::get_if<KernelSpec>(&items[i + 1]) : nullptr;
      if (p_.overlap.tensor_parallel && c->kind == CommKind::kTensor && !c->async &&
          c->op == CollectiveKind::kAllGather && next && next->work.op_class == OpClass::kMatmul &&
          i + 1 != last_kernel && !(first && first_alloc)) {
        emit_split(*next, *c, true);
        ++i;
        continue;
      }
      const OpId id = collective(c->name, c->kind, c->op, c->bytes, {}, !c->async);
      if (c->async) {
        after_next_.push_back(id);
      }
    } else {
      SIM_CHECK(mem.empty(), "a layer may not start or end with ring attention");
      emit_ring(std::get<RingSpec>(items[i]));
    }
  }
}

}  // namespace meshsim::workloads::detail
