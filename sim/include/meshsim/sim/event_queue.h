// The event queues of the discrete-event loops (docs/style.md C.9, C.11): the engine's, and the
// fluid network's (collectives/), one template.
//
// Events are small trivially copyable structs ordered by (time, push order): events at the same
// time pop in the order they were pushed, so the loop is deterministic by construction. Nothing is
// ever compared by address.
//
// Time-bucketed FIFO: lockstep ranks make most events share their time (99.8 % of the pops of the
// full default step share the previous pop's time; the network's transfers of lockstep groups
// start, leave their latency and drain together likewise), so the queue keeps one FIFO bucket per
// distinct pending time and a binary heap of those buckets by time. Appending to a bucket keeps
// it in push order, so the (time, push order) order is exactly that of a heap over all events
// keyed by (time, a push counter). push: O(1) when the time is the last push's (the lockstep
// case), else a hash lookup and O(log b) for a new bucket (b = distinct pending times); pop: O(1)
// within a bucket, O(log b) when it empties. Emptied buckets are recycled with their capacity.
#pragma once

#include <algorithm>
#include <cstdint>
#include <type_traits>
#include <unordered_map>
#include <vector>

#include "meshsim/sim/error.h"
#include "meshsim/sim/units.h"

namespace meshsim {

// E: a trivially copyable event with a member `SimTime time`.
template <typename E>
class BucketQueue {
  static_assert(std::is_trivially_copyable_v<E>);

 public:
  void push(E e) {
    if (last_ == kNone || buckets_[last_].time != e.time) {
      const auto it = by_time_.find(e.time.ps());
      last_ = it != by_time_.end() ? it->second : open_bucket(e.time);
    }
    buckets_[last_].events.push_back(e);
    ++size_;
  }
  E pop() {
    SIM_CHECK(size_ > 0, "pop from an empty event queue");
    return take(buckets_[heap_.front()]);
  }
  // Pops the next event into `out` if it is due at `time`; false (nothing popped) otherwise.
  bool pop_at(SimTime time, E& out) {
    if (size_ == 0) {
      return false;
    }
    Bucket& b = buckets_[heap_.front()];
    if (b.time != time) {
      return false;
    }
    out = take(b);
    return true;
  }
  // The next event to pop. The queue must not be empty.
  const E& top() const {
    SIM_CHECK(size_ > 0, "top of an empty event queue");
    const Bucket& b = buckets_[heap_.front()];
    return b.events[b.head];
  }
  bool empty() const { return size_ == 0; }
  size_t size() const { return size_; }

 private:
  struct Bucket {
    SimTime time;
    std::vector<E> events;  // in seq order; [head, size) are pending
    size_t head = 0;
  };
  static constexpr uint32_t kNone = UINT32_MAX;

  // The next event of `b`, the earliest bucket.
  E take(Bucket& b) {
    const E e = b.events[b.head++];
    --size_;
    if (b.head == b.events.size()) {
      close_front();
    }
    return e;
  }

  // std::push_heap builds a max-heap: "less" means "later".
  bool later(uint32_t x, uint32_t y) const { return buckets_[x].time > buckets_[y].time; }

  // A new bucket for `time` (which has none), placed in the heap.
  uint32_t open_bucket(SimTime time) {
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
    std::push_heap(heap_.begin(), heap_.end(),
                   [this](uint32_t x, uint32_t y) { return later(x, y); });
    return b;
  }

  // The earliest bucket is empty: out of the heap and the index, back to the pool.
  void close_front() {
    const uint32_t b = heap_.front();
    std::pop_heap(heap_.begin(), heap_.end(),
                  [this](uint32_t x, uint32_t y) { return later(x, y); });
    heap_.pop_back();
    by_time_.erase(buckets_[b].time.ps());
    buckets_[b].events.clear();
    buckets_[b].head = 0;
    free_.push_back(b);
    if (last_ == b) {
      last_ = kNone;
    }
  }

  std::vector<Bucket> buckets_;  // the pool: open buckets and recycled ones
  std::vector<uint32_t> free_;   // recycled bucket indices
  std::vector<uint32_t> heap_;   // open buckets, a min-heap by time (their times are distinct)
  // Open bucket by time in ps: looked up only, never iterated (docs/style.md C.9).
  std::unordered_map<int64_t, uint32_t> by_time_;
  uint32_t last_ = kNone;  // the bucket of the last push, if still open
  size_t size_ = 0;
};

// kOpEnd: a compute op ends (payload: its running slot). kHostWake: a rank's host has issued an op
// whose stream was waiting for it (payload: the rank).
enum class EventKind : uint32_t { kOpEnd, kHostWake };

struct Event {
  SimTime time;
  EventKind kind = EventKind::kOpEnd;
  uint32_t payload = 0;  // index into the per-kind payload table
};
static_assert(std::is_trivially_copyable_v<Event>);
static_assert(sizeof(Event) == 16);

// The engine's queue.
class EventQueue {
 public:
  void push(SimTime time, EventKind kind, uint32_t payload) {
    queue_.push(Event{time, kind, payload});
  }
  Event pop() { return queue_.pop(); }
  bool pop_at(SimTime time, Event& out) { return queue_.pop_at(time, out); }
  const Event& top() const { return queue_.top(); }
  bool empty() const { return queue_.empty(); }
  size_t size() const { return queue_.size(); }

 private:
  BucketQueue<Event> queue_;
};

}  // namespace meshsim
