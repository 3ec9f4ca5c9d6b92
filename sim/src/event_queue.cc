#include "meshsim/sim/event_queue.h"

#include <algorithm>

#include "meshsim/sim/error.h"

namespace meshsim {

void EventQueue::push(SimTime time, EventKind kind, uint32_t payload) {
  if (last_ == kNone || buckets_[last_].time != time) {
    const auto it = by_time_.find(time.ps());
    last_ = it != by_time_.end() ? it->second : open_bucket(time);
  }
  buckets_[last_].events.push_back(Event{time, next_seq_++, kind, payload});
  ++size_;
}

// A new bucket for `time` (which has none), placed in the heap.
uint32_t EventQueue::open_bucket(SimTime time) {
  uint32_t b = 0;
  if (free_.empty()) {
    b = static_cast<uint32_t>(buckets_.size());
    buckets_.emplace_back();
  } else {
    b = free_.back();
    free_.pop_back();
  }
  buckets_[b].time = time;
  by_time_.emplace(time.ps(), b);
  heap_.push_back(b);
  // std::push_heap builds a max-heap: "less" means "later".
  std::push_heap(heap_.begin(), heap_.end(),
                 [this](uint32_t x, uint32_t y) { return buckets_[x].time > buckets_[y].time; });
  return b;
}

const Event& EventQueue::top() const {
  SIM_CHECK(size_ > 0, "top of an empty event queue");
  const Bucket& b = buckets_[heap_.front()];
  return b.events[b.head];
}

Event EventQueue::pop() {
  SIM_CHECK(size_ > 0, "pop from an empty event queue");
  Bucket& b = buckets_[heap_.front()];
  const Event e = b.events[b.head++];
  --size_;
  if (b.head == b.events.size()) {
    close_front();
  }
  return e;
}

// The earliest bucket is empty: out of the heap and the index, back to the pool.
void EventQueue::close_front() {
  const uint32_t b = heap_.front();
  std::pop_heap(heap_.begin(), heap_.end(),
                [this](uint32_t x, uint32_t y) { return buckets_[x].time > buckets_[y].time; });
  heap_.pop_back();
  by_time_.erase(buckets_[b].time.ps());
  buckets_[b].events.clear();
  buckets_[b].head = 0;
  free_.push_back(b);
  if (last_ == b) {
    last_ = kNone;
  }
}

}  // namespace meshsim
