// What happened: every op's span per rank and stream, and every change to the memory ledger.
//
// The engine emits these records through signals (Simulation::on_op_end, on_memory); `Timeline`
// is one subscriber that keeps them all (trace writers are others, and may stream instead).
#pragma once

#include <algorithm>
#include <cstdint>
#include <tuple>
#include <vector>

#include "meshsim/sim/ids.h"
#include "meshsim/sim/program.h"
#include "meshsim/sim/units.h"

namespace meshsim {

struct OpRecord {
  RankId rank;
  OpId op;
  uint8_t stream = 0;
  SimTime ready;  // dependencies done and stream free (for collectives: this rank arrived)
  SimTime start;  // execution began (collectives: the last member arrived)
  SimTime end;
  // Ties together the records of one collective (all members) or of one send and its receive:
  // equal for those, unique otherwise; 0 for compute ops. Assigned in order of launch.
  uint64_t match = 0;
  // When the rank's host finished issuing it (the host model; without host times, `ready`). The
  // host spent the op's Op::host before this on it.
  SimTime issued;
};

struct MemoryRecord {
  SimTime time;
  RankId rank;
  MemoryCategory category = MemoryCategory::kActivations;
  Bytes delta;
  Bytes total_after;  // all categories on this rank after the change
};

struct Timeline {
  std::vector<OpRecord> ops;         // in order of completion
  std::vector<MemoryRecord> memory;  // in order of occurrence
};

// Puts records made outside the engine (a measured trace's ops, records of several runs merged)
// in an order of completion: by end time, then rank, then op; a stable sort. O(n log n).
inline void sort_by_completion(std::vector<OpRecord>& ops) {
  std::stable_sort(ops.begin(), ops.end(), [](const OpRecord& a, const OpRecord& b) {
    return std::tie(a.end, a.rank, a.op) < std::tie(b.end, b.rank, b.op);
  });
}

}  // namespace meshsim
