// Private to the engine: a Program flattened for the simulation's hot loop.
#pragma once

#include <cstdint>
#include <vector>

#include "meshsim/sim/program.h"

namespace meshsim::detail {

// Flattened, read-only view of a Program for the hot loop: successor lists in CSR form, the ops
// of each stream in order, and each collective's ordinal on its group slot.
struct ProgramInfo {
  Program program;
  std::vector<uint32_t> succ_offsets;  // size ops + 1
  std::vector<uint32_t> succ;
  std::vector<uint32_t> indegree;
  std::vector<std::vector<uint32_t>> stream_ops;
  std::vector<uint32_t> ordinal;  // collectives: index among the collectives on the same slot
  uint16_t max_group_slot = 0;
  uint16_t max_peer_slot = 0;
  bool uses_groups = false;
  bool uses_peers = false;

  explicit ProgramInfo(Program p);
};

}  // namespace meshsim::detail
