#include "meshsim/sim/event_queue.h"

#include <algorithm>

#include "meshsim/sim/error.h"

namespace meshsim {
namespace {
// std::push_heap builds a max-heap: "less" here means "later".
struct Later {
  bool operator()(const Event& a, const Event& b) const {
    if (a.time != b.time) {
      return a.time > b.time;
    }
    return a.seq > b.seq;
  }
};
}  // namespace

void EventQueue::push(SimTime time, EventKind kind, uint32_t payload) {
  heap_.push_back(Event{time, next_seq_++, kind, payload});
  std::push_heap(heap_.begin(), heap_.end(), Later{});
}

Event EventQueue::pop() {
  SIM_CHECK(!heap_.empty(), "pop from an empty event queue");
  std::pop_heap(heap_.begin(), heap_.end(), Later{});
  const Event e = heap_.back();
  heap_.pop_back();
  return e;
}

}  // namespace meshsim
