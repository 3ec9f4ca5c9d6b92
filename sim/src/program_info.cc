#include "program_info.h"

#include <algorithm>
#include <map>

namespace meshsim::detail {

ProgramInfo::ProgramInfo(Program p) : program(std::move(p)) {
  const size_t n = program.size();
  succ_offsets.assign(n + 1, 0);
  indegree.assign(n, 0);
  ordinal.assign(n, 0);
  stream_ops.resize(program.num_streams());
  std::map<uint16_t, uint32_t> next_ordinal;
  for (uint32_t i = 0; i < n; ++i) {
    const OpId id(i);
    const Op& op = program.op(id);
    stream_ops[op.stream].push_back(i);
    for (const OpId s : program.successors(id)) {
      succ.push_back(s.value());
      ++indegree[s.index()];
    }
    succ_offsets[i + 1] = static_cast<uint32_t>(succ.size());
    if (const auto* c = std::get_if<CollectiveWork>(&op.work)) {
      ordinal[i] = next_ordinal[c->group_slot]++;
      max_group_slot = std::max(max_group_slot, c->group_slot);
      uses_groups = true;
    } else if (const auto* pw = std::get_if<PeerWork>(&op.work)) {
      max_peer_slot = std::max(max_peer_slot, pw->peer_slot);
      uses_peers = true;
    }
  }
}

}  // namespace meshsim::detail
