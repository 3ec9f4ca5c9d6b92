// The host model of the engine (simulation.h): one host thread per rank issues the program's ops
// in order, each after its Op::host; ops start no earlier than they are issued; syncs stop the
// host until the device catches up.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "meshsim/sim/error.h"
#include "meshsim/sim/simulation.h"
#include "test_models.h"
#include "thrown.h"

namespace meshsim {
namespace {

using testing::collective_op;
using testing::compute_op;
using testing::PsSimulation;

Op with_host(Op op, int64_t host_ps, HostSync sync = HostSync::kNone) {
  op.host = Duration::from_ps(host_ps);
  op.host_sync = sync;
  return op;
}

struct HostRun {
  RunResult result;
  Timeline timeline;
};

HostRun run_one(Program p) {
  PsSimulation sim;
  sim.add_rank(sim.add_program(std::move(p)), {}, {});
  HostRun r;
  sim.record_into(r.timeline);
  r.result = sim.run();
  return r;
}

// Launch-bound: kernels of 1 ps each issued at 100 ps apiece. The step is the dispatch chain (the
// last kernel issued at n x 100, then 1 ps), and the compute stream waited for all of it but the
// kernels' own time.
TEST(HostModel, LaunchBoundStepIsTheDispatchChain) {
  constexpr int n = 50;
  Program p;
  for (int i = 0; i < n; ++i) {
    p.add(with_host(compute_op("k", 1), 100));
  }
  const HostRun r = run_one(std::move(p));
  EXPECT_EQ(r.result.end.ps(), n * 100 + 1);
  EXPECT_EQ(r.result.ranks[0].host_wait.ps(), n * 100 - (n - 1));
  for (const OpRecord& rec : r.timeline.ops) {
    EXPECT_EQ(rec.start, rec.issued);
    EXPECT_EQ(rec.issued.ps(), (static_cast<int64_t>(rec.op.value()) + 1) * 100);
  }
}

// GPU-bound: kernels longer than their dispatch run back to back once the first is issued; the
// step is the device's work plus the first op's dispatch.
TEST(HostModel, GpuBoundStepIsUnchangedButForTheFirstLaunch) {
  constexpr int n = 50;
  Program with;
  Program without;
  for (int i = 0; i < n; ++i) {
    with.add(with_host(compute_op("k", 1000), 100));
    without.add(compute_op("k", 1000));
  }
  const HostRun a = run_one(std::move(with));
  const HostRun b = run_one(std::move(without));
  EXPECT_EQ(b.result.end.ps(), n * 1000);
  EXPECT_EQ(a.result.end.ps(), b.result.end.ps() + 100);
  EXPECT_EQ(a.result.ranks[0].host_wait.ps(), 100);
  EXPECT_EQ(b.result.ranks[0].host_wait.ps(), 0);
}

// Without any host time or sync the engine skips the host: results identical to the picosecond.
TEST(HostModel, ZeroHostTimesChangeNothing) {
  Program a;
  Program b;
  for (int i = 0; i < 10; ++i) {
    a.add(compute_op("k", 10 + i));
    b.add(with_host(compute_op("k", 10 + i), 0));
  }
  const HostRun x = run_one(std::move(a));
  const HostRun y = run_one(std::move(b));
  EXPECT_EQ(x.result.end, y.result.end);
  ASSERT_EQ(x.timeline.ops.size(), y.timeline.ops.size());
  for (size_t i = 0; i < x.timeline.ops.size(); ++i) {
    EXPECT_EQ(x.timeline.ops[i].start, y.timeline.ops[i].start);
    EXPECT_EQ(x.timeline.ops[i].issued, x.timeline.ops[i].ready);
  }
}

// A host sync serialises what follows it: after issuing a 1000 ps kernel with kWaitOp, the host
// waits for it to end before it issues the next op (100 ps later), on any stream.
TEST(HostModel, SyncSerialisesWhatFollows) {
  Program p;
  p.add(with_host(compute_op("long", 1000), 100, HostSync::kWaitOp));
  p.add(with_host(compute_op("other_stream", 10, 1), 100));
  p.add(with_host(compute_op("next", 10), 100));
  const HostRun r = run_one(std::move(p));
  // long: issued 100, runs 100..1100; the host goes on at 1100.
  EXPECT_EQ(r.timeline.ops[0].end.ps(), 1100);
  const OpRecord* other = nullptr;
  const OpRecord* next = nullptr;
  for (const OpRecord& rec : r.timeline.ops) {
    if (rec.op == OpId(1)) {
      other = &rec;
    } else if (rec.op == OpId(2)) {
      next = &rec;
    }
  }
  ASSERT_NE(other, nullptr);
  ASSERT_NE(next, nullptr);
  EXPECT_EQ(other->start.ps(), 1200);  // without the sync it would start at 200
  EXPECT_EQ(next->start.ps(), 1300);
  EXPECT_EQ(r.result.end.ps(), 1310);
}

// kWaitDevice waits for every op issued so far, not only its own: a long kernel on stream 1
// issued before a short synced one holds the host until it ends.
TEST(HostModel, DeviceSyncWaitsForEverythingIssued) {
  Program p;
  p.add(with_host(compute_op("long_side", 5000, 1), 10));
  p.add(with_host(compute_op("short", 10), 10, HostSync::kWaitDevice));
  p.add(with_host(compute_op("after", 10), 10));
  const HostRun r = run_one(std::move(p));
  // long_side: 10..5010; short: 20..30; the host goes on at 5010 and issues `after` at 5020.
  EXPECT_EQ(r.result.end.ps(), 5030);
  Program q;
  q.add(with_host(compute_op("long_side", 5000, 1), 10));
  q.add(with_host(compute_op("short", 10), 10, HostSync::kWaitOp));
  q.add(with_host(compute_op("after", 10), 10));
  EXPECT_EQ(run_one(std::move(q)).result.end.ps(), 5010);  // kWaitOp: `after` runs at 40..50
}

// A collective is issued like any op: both ranks reach it when their hosts have issued it, so the
// slower host decides when it starts.
TEST(HostModel, CollectiveStartsWhenTheSlowestHostIssuedIt) {
  PsSimulation sim;
  Program fast;
  fast.add(with_host(collective_op("ar", 8), 100));
  Program slow;
  slow.add(with_host(collective_op("ar", 8), 700));
  const GroupId g = sim.add_group({RankId(0), RankId(1)});
  sim.add_rank(sim.add_program(std::move(fast)), {g}, {});
  sim.add_rank(sim.add_program(std::move(slow)), {g}, {});
  Timeline tl;
  sim.record_into(tl);
  sim.run();
  ASSERT_EQ(tl.ops.size(), 2u);
  EXPECT_EQ(tl.ops[0].start.ps(), 700);
  EXPECT_EQ(tl.ops[1].start.ps(), 700);
}

// Two hosts that each wait for a receive whose send the other has not issued yet (both blocking
// receives first): the engine reports the stuck hosts instead of hanging.
TEST(HostModel, StuckHostsAreReportedNotHungOn) {
  PsSimulation sim;
  auto program = [] {
    Program p;
    p.add(with_host(testing::peer_op("recv", false, 8, 0, 1), 10, HostSync::kWaitOp));
    p.add(with_host(testing::peer_op("send", true, 8, 0, 2), 10));
    return p;
  };
  const ProgramIndex prog = sim.add_program(program());
  sim.add_rank(prog, {}, {RankId(1)});
  sim.add_rank(prog, {}, {RankId(0)});
  EXPECT_THAT(testing::what_thrown<InternalError>(
                  [&] { sim.run(); }, "expected the stuck hosts to be reported, and the run ended"),
              ::testing::HasSubstr("host waits after 'recv'"));
}

TEST(HostModel, NegativeOrHugeHostTimeIsRefused) {
  Program p;
  EXPECT_THROW(p.add(with_host(compute_op("k", 1), -1)), InternalError);
  Op huge = compute_op("k", 1);
  huge.host = Milliseconds(101);
  EXPECT_THROW(p.add(huge), InternalError);
}

// Determinism: two runs of the same host-bound program give identical records.
TEST(HostModel, Deterministic) {
  auto build = [] {
    Program p;
    for (int i = 0; i < 20; ++i) {
      p.add(with_host(compute_op("k", 50 + 7 * (i % 3), static_cast<uint8_t>(i % 2)), 40,
                      i % 7 == 6 ? HostSync::kWaitOp : HostSync::kNone));
    }
    return p;
  };
  const HostRun a = run_one(build());
  const HostRun b = run_one(build());
  ASSERT_EQ(a.timeline.ops.size(), b.timeline.ops.size());
  for (size_t i = 0; i < a.timeline.ops.size(); ++i) {
    EXPECT_EQ(a.timeline.ops[i].start, b.timeline.ops[i].start);
    EXPECT_EQ(a.timeline.ops[i].issued, b.timeline.ops[i].issued);
  }
}

}  // namespace
}  // namespace meshsim
