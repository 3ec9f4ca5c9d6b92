// The engine's event queue and the template the fluid network's queue shares (issue 16): the
// (time, push order) of a heap over all events, whatever the interleaving.
#include "meshsim/sim/event_queue.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "meshsim/sim/rng.h"

namespace meshsim {
namespace {

TEST(EventQueue, OrdersByTimeThenInsertion) {
  EventQueue q;
  q.push(SimTime::from_ps(5), EventKind::kOpEnd, 1);
  q.push(SimTime::from_ps(3), EventKind::kOpEnd, 2);
  q.push(SimTime::from_ps(5), EventKind::kOpEnd, 3);
  q.push(SimTime::from_ps(3), EventKind::kOpEnd, 4);
  std::vector<uint32_t> order;
  while (!q.empty()) {
    order.push_back(q.pop().payload);
  }
  EXPECT_EQ(order, (std::vector<uint32_t>{2, 4, 1, 3}));
}

// Issue 16: the time-bucketed queue must pop in exactly the (time, seq) order of a heap over all
// events, also when pushes at the current time (zero-duration ops) and at earlier pending times
// interleave with pops, and when an emptied bucket's time comes back.
TEST(EventQueue, BucketsKeepTimeThenSeqOrderUnderInterleaving) {
  EventQueue q;
  std::vector<Event> reference;  // every pending event, popped by (time, seq) from this copy
  Rng rng(7, "event-queue-test");
  uint32_t payload = 0;
  SimTime now;
  for (int round = 0; round < 2000; ++round) {
    const int pushes = static_cast<int>(rng.below(4));
    for (int i = 0; i < pushes; ++i) {
      // Few distinct offsets, so that buckets fill, empty and reopen.
      const SimTime t = now + Duration::from_ps(static_cast<int64_t>(rng.below(3)) * 10);
      reference.push_back(Event{t, q.pushed(), EventKind::kOpEnd, payload});
      q.push(t, EventKind::kOpEnd, payload++);
    }
    const int pops = static_cast<int>(rng.below(4));
    for (int i = 0; i < pops && !q.empty(); ++i) {
      const auto it = std::min_element(reference.begin(), reference.end(),
                                       [](const Event& a, const Event& b) {
                                         return a.time != b.time ? a.time < b.time : a.seq < b.seq;
                                       });
      ASSERT_EQ(q.top().payload, it->payload);
      const Event e = q.pop();
      EXPECT_EQ(e.payload, it->payload);
      EXPECT_EQ(e.seq, it->seq);
      EXPECT_EQ(e.time, it->time);
      now = e.time;
      reference.erase(it);
    }
    ASSERT_EQ(q.size(), reference.size());
  }
}

// The fluid network (collectives/) queues its own events, with a transfer and a generation: the
// same template, in the same (time, push order).
TEST(EventQueue, AnyEventTypeKeepsTimeThenPushOrder) {
  struct NetEvent {
    SimTime time;
    uint64_t seq = 0;
    uint32_t transfer = 0;
    uint32_t generation = 0;
  };
  BucketQueue<NetEvent> q;
  for (uint32_t i = 0; i < 6; ++i) {
    q.push(NetEvent{SimTime::from_ps(10 - 3 * (i % 2)), 0, i, 2 * i});
  }
  std::vector<uint32_t> order;
  uint64_t last_seq = 0;
  while (!q.empty()) {
    const NetEvent e = q.pop();
    EXPECT_EQ(e.generation, 2 * e.transfer);
    if (!order.empty() && e.time.ps() == 10 && order.back() % 2 == 0) {
      EXPECT_GT(e.seq, last_seq);
    }
    last_seq = e.seq;
    order.push_back(e.transfer);
  }
  EXPECT_EQ(order, (std::vector<uint32_t>{1, 3, 5, 0, 2, 4}));
}

}  // namespace
}  // namespace meshsim
