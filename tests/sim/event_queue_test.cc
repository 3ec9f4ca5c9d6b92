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

// Issue 16: the time-bucketed queue must pop in exactly the (time, push order) order of a heap
// over all events, also when pushes at the current time (zero-duration ops) and at earlier pending
// times interleave with pops, and when an emptied bucket's time comes back; pop_at pops only what
// is due at the time it is given.
TEST(EventQueue, BucketsKeepTimeThenPushOrderUnderInterleaving) {
  EventQueue q;
  // Every pending event, popped by (time, payload) from this copy: payloads count the pushes.
  std::vector<Event> reference;
  Rng rng(7, "event-queue-test");
  uint32_t payload = 0;
  SimTime now;
  for (int round = 0; round < 2000; ++round) {
    const int pushes = static_cast<int>(rng.below(4));
    for (int i = 0; i < pushes; ++i) {
      // Few distinct offsets, so that buckets fill, empty and reopen.
      const SimTime t = now + Duration::from_ps(static_cast<int64_t>(rng.below(3)) * 10);
      reference.push_back(Event{t, EventKind::kOpEnd, payload});
      q.push(t, EventKind::kOpEnd, payload++);
    }
    const int pops = static_cast<int>(rng.below(4));
    for (int i = 0; i < pops && !q.empty(); ++i) {
      const auto it = std::min_element(
          reference.begin(), reference.end(), [](const Event& a, const Event& b) {
            return a.time != b.time ? a.time < b.time : a.payload < b.payload;
          });
      ASSERT_EQ(q.top().payload, it->payload);
      Event e;
      ASSERT_FALSE(q.pop_at(it->time + Duration::from_ps(1), e));  // not due then: not popped
      ASSERT_EQ(q.size(), reference.size());
      if (rng.below(2) == 0) {
        e = q.pop();
      } else {
        ASSERT_TRUE(q.pop_at(it->time, e));
      }
      EXPECT_EQ(e.payload, it->payload);
      EXPECT_EQ(e.time, it->time);
      now = e.time;
      reference.erase(it);
    }
    ASSERT_EQ(q.size(), reference.size());
  }
  Event e;
  while (!q.empty()) {
    q.pop();
  }
  EXPECT_FALSE(q.pop_at(now, e));  // empty
}

// The fluid network (collectives/) queues its own events, with a transfer and a generation: the
// same template, in the same (time, push order).
TEST(EventQueue, AnyEventTypeKeepsTimeThenPushOrder) {
  struct NetEvent {
    SimTime time;
    uint32_t transfer = 0;
    uint32_t generation = 0;
  };
  BucketQueue<NetEvent> q;
  for (uint32_t i = 0; i < 6; ++i) {
    q.push(NetEvent{SimTime::from_ps(10 - 3 * (i % 2)), i, 2 * i});
  }
  std::vector<uint32_t> order;
  while (!q.empty()) {
    const NetEvent e = q.pop();
    EXPECT_EQ(e.generation, 2 * e.transfer);
    order.push_back(e.transfer);
  }
  EXPECT_EQ(order, (std::vector<uint32_t>{1, 3, 5, 0, 2, 4}));
}

}  // namespace
}  // namespace meshsim
