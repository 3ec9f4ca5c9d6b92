#include "program_info.h"

#include <algorithm>

#include "meshsim/sim/error.h"

namespace meshsim::detail {

ProgramInfo::ProgramInfo(Program p) : program(std::move(p)) {
  const size_t n = program.size();
  succ_offsets.assign(n + 1, 0);
  indegree.assign(n, 0);
  ordinal.assign(n, 0);
  ops.resize(n);
  meta.resize(n);
  flops.resize(n);
  memory_offsets.assign(n + 1, 0);
  host_prefix.assign(n + 1, 0);
  num_streams = program.num_streams();
  std::vector<std::vector<uint32_t>> stream_ops(num_streams);
  for (uint32_t i = 0; i < n; ++i) {
    const OpId id(i);
    const Op& op = program.op(id);
    ops[i] = &op;
    host_prefix[i + 1] = host_prefix[i] + op.host.ps();
    if (op.host_sync != HostSync::kNone) {
      syncs.push_back(i);
      sync_kinds.push_back(op.host_sync);
    }
    OpMeta& m = meta[i];
    m.kind = op.kind();
    m.stream = op.stream;
    for (const MemoryEffect& e : op.memory) {
      (e.at_end ? m.memory_at_end : m.memory_at_start) = true;
      memory.push_back(e);
    }
    memory_offsets[i + 1] = static_cast<uint32_t>(memory.size());
    stream_ops[op.stream].push_back(i);
    for (const OpId s : program.successors(id)) {
      succ.push_back(s.value());
      ++indegree[s.index()];
    }
    succ_offsets[i + 1] = static_cast<uint32_t>(succ.size());
    if (const auto* cw = std::get_if<ComputeWork>(&op.work)) {
      m.op_class = static_cast<uint8_t>(cw->op_class);
      flops[i] = cw->flops;
      continue;
    }
    m.op_class = static_cast<uint8_t>(OpClass::kCommunication);
    if (op.labels.category) {
      SIM_CHECK(op.labels.category->value() < kNoCategory, "op '{}': category {} out of range",
                op.name, op.labels.category->value());
      m.category = static_cast<uint16_t>(op.labels.category->value());
    }
    if (const auto* c = std::get_if<CollectiveWork>(&op.work)) {
      max_group_slot = std::max(max_group_slot, c->group_slot);
      uses_groups = true;
      m.holds_sms = c->holds_sms;
    } else if (const auto* pw = std::get_if<PeerWork>(&op.work)) {
      max_peer_slot = std::max(max_peer_slot, pw->peer_slot);
      uses_peers = true;
    }
  }
  has_host = host_prefix[n] > 0 || !syncs.empty();
  for (const std::vector<uint32_t>& ops_of_stream : stream_ops) {
    stream_first.push_back(static_cast<uint32_t>(stream_seq.size()));
    stream_seq.insert(stream_seq.end(), ops_of_stream.begin(), ops_of_stream.end());
    stream_seq.push_back(kStreamEnd);
  }
  for (uint32_t i = 0; i < n; ++i) {
    SIM_CHECK(indegree[i] <= UINT16_MAX, "op '{}' has {} dependencies; at most {}",
              ops[i]->name, indegree[i], UINT16_MAX);
  }
}

void ProgramInfo::reset_pending() {
  const size_t n = indegree.size();
  pending.resize(n * ranks);
  for (size_t op = 0; op < n; ++op) {
    std::fill_n(pending.begin() + static_cast<std::ptrdiff_t>(at(op, 0)), ranks,
                static_cast<uint16_t>(indegree[op]));
  }
}

}  // namespace meshsim::detail
