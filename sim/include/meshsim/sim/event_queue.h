// The event queue of the discrete-event loop (STYLE C.9, C.11).
//
// Events are small trivially copyable structs ordered by (time, seq), where seq is a counter
// incremented on every push: events at the same time pop in the order they were pushed, so the
// loop is deterministic by construction. Nothing is ever compared by address.
//
// Time-bucketed FIFO: lockstep ranks make most events share their time (99.8 % of the pops of the
// full default step share the previous pop's time), so the queue keeps one FIFO bucket per
// distinct pending time and a binary heap of those buckets by time. Because seq grows with every
// push, appending to a bucket keeps it sorted by seq, and the (time, seq) order is exactly that of
// a heap over all events. push: O(1) when the time is the last push's (the lockstep case), else
// a hash lookup and O(log b) for a new bucket (b = distinct pending times); pop: O(1) within a
// bucket, O(log b) when it empties. Emptied buckets are recycled with their capacity.
#pragma once

#include <cstdint>
#include <type_traits>
#include <unordered_map>
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
  // The next event to pop. The queue must not be empty.
  const Event& top() const;
  bool empty() const { return size_ == 0; }
  size_t size() const { return size_; }
  uint64_t pushed() const { return next_seq_; }

 private:
  struct Bucket {
    SimTime time;
    std::vector<Event> events;  // in seq order; [head, size) are pending
    size_t head = 0;
  };
  static constexpr uint32_t kNone = UINT32_MAX;

  uint32_t open_bucket(SimTime time);
  void close_front();

  std::vector<Bucket> buckets_;  // the pool: open buckets and recycled ones
  std::vector<uint32_t> free_;   // recycled bucket indices
  std::vector<uint32_t> heap_;   // open buckets, a min-heap by time (their times are distinct)
  // Open bucket by time in ps: looked up only, never iterated (STYLE C.9).
  std::unordered_map<int64_t, uint32_t> by_time_;
  uint32_t last_ = kNone;  // the bucket of the last push, if still open
  size_t size_ = 0;
  uint64_t next_seq_ = 0;
};

}  // namespace meshsim
