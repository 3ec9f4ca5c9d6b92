// The event queue of the discrete-event loop (STYLE C.9, C.11).
//
// Events are small trivially copyable structs ordered by (time, seq), where seq is a counter
// incremented on every push: events at the same time pop in the order they were pushed, so the
// loop is deterministic by construction. A binary heap on std::vector: push and pop are
// O(log n); nothing is ever compared by address.
#pragma once

#include <cstdint>
#include <type_traits>
#include <vector>

#include "meshsim/sim/units.h"

namespace meshsim {

enum class EventKind : uint32_t { kOpEnd };

struct Event {
  SimTime time;
  uint64_t seq = 0;
  EventKind kind = EventKind::kOpEnd;
  uint32_t payload = 0;  // index into the per-kind payload table
};
static_assert(std::is_trivially_copyable_v<Event>);
static_assert(sizeof(Event) == 24);

class EventQueue {
 public:
  void push(SimTime time, EventKind kind, uint32_t payload);
  Event pop();
  const Event& top() const { return heap_.front(); }
  bool empty() const { return heap_.empty(); }
  size_t size() const { return heap_.size(); }
  uint64_t pushed() const { return next_seq_; }

 private:
  std::vector<Event> heap_;
  uint64_t next_seq_ = 0;
};

}  // namespace meshsim
