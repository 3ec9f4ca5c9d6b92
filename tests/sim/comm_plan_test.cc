// Communication plans (CommModel::plan_collective, plan_p2p, start_planned): the default ones
// start what their arguments start, and the engine plans each group's collective of a kind and size
// and each channel's send of a size once.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <functional>
#include <optional>
#include <vector>

#include "meshsim/sim/error.h"
#include "meshsim/sim/simulation.h"
#include "test_models.h"

namespace meshsim {
namespace {

using testing::collective_op;
using testing::peer_op;
using testing::PsCommModel;
using testing::PsComputeModel;

// Ranks 0 and 1, one group, each the other's peer, each running `ops(rank)` one after the other
// (on the cost models in test_models.h).
RunResult run_pair(PsCommModel& nm, const std::function<std::vector<Op>(uint32_t)>& ops) {
  PsComputeModel cm;
  Simulation sim(cm, nm);
  const GroupId grp = sim.add_group({RankId(0), RankId(1)});
  for (uint32_t i = 0; i < 2; ++i) {
    Program p;
    std::optional<OpId> prev;
    for (Op& op : ops(i)) {
      const OpId next = p.add(std::move(op));
      if (prev) {
        p.add_dependency(*prev, next);
      }
      prev = next;
    }
    sim.add_rank(sim.add_program(std::move(p)), {grp}, {RankId(1 - i)});
  }
  return sim.run();
}

// A group runs the same few collectives over and over, and a channel sends the same size: the
// engine plans each once and starts the plan (CommModel::plan_collective, start_planned).
TEST(Simulation, PlansEachGroupsCollectiveAndEachChannelsSendOnce) {
  PsCommModel nm;
  const RunResult r = run_pair(nm, [](uint32_t rank) {
    std::vector<Op> ops;
    for (int k = 0; k < 4; ++k) {
      ops.push_back(collective_op(fmt::format("ar{}", k), k == 3 ? 5 : 2));
    }
    for (int k = 0; k < 3; ++k) {
      ops.push_back(peer_op(fmt::format("p2p{}", k), rank == 0, 7, 0, 2));
    }
    return ops;
  });
  // 2 B x 2 ranks three times, then 5 B x 2, then three sends of 7 B, back to back.
  EXPECT_EQ(r.end.ps(), 3 * 4 + 10 + 3 * 7);
  EXPECT_EQ(nm.collective_calls, 4);
  EXPECT_EQ(nm.plan_calls, 3);  // all-reduce of 2 B, of 5 B; the send of 7 B
}

// The default plans remember their arguments: starting one is starting them.
TEST(CommModel, DefaultPlansStartWhatTheirArgumentsStart) {
  IsolatedCommModel m([](CollectiveKind, Bytes b, std::span<const RankId> g) {
    return Duration::from_ps(b.count() * static_cast<int64_t>(g.size()));
  },
                      [](RankId src, RankId, Bytes b) {
                        return Duration::from_ps(b.count() + src.value());
                      });
  const std::vector<RankId> g = {RankId(0), RankId(1), RankId(2)};
  const CommPlan ar = m.plan_collective(CollectiveKind::kAllReduce, Bytes::of(4), g);
  const CommPlan send = m.plan_p2p(RankId(5), RankId(6), Bytes::of(10));
  m.start_planned(SimTime::zero(), ar);
  CommAdvance a = m.advance(SimTime::max());
  EXPECT_EQ(a.time.ps(), 12);
  m.start_planned(a.time, send);
  a = m.advance(SimTime::max());
  EXPECT_EQ(a.time.ps(), 12 + 15);
  EXPECT_THROW(m.start_planned(a.time, CommPlan{7}), InternalError);
}

// A channel that changes its size is planned again for the new size (and the old plan is not
// started for it); a group that runs two kinds of collective of one size has two plans.
TEST(Simulation, APlanIsTheKindAndSizeItWasMadeFor) {
  PsCommModel nm;
  const RunResult r = run_pair(nm, [](uint32_t rank) {
    std::vector<Op> ops;
    ops.push_back(collective_op("ar", 2));
    ops.push_back(collective_op("ag", 2));
    std::get<CollectiveWork>(ops.back().work).kind = CollectiveKind::kAllGather;
    int k = 0;
    for (const int64_t bytes : {7, 7, 3}) {
      ops.push_back(peer_op(fmt::format("p2p{}", k++), rank == 0, bytes, 0, 2));
    }
    return ops;
  });
  // 2 B x 2 ranks twice, then sends of 7, 7 and 3 B, back to back.
  EXPECT_EQ(r.end.ps(), 2 * 4 + 7 + 7 + 3);
  EXPECT_EQ(nm.plan_calls, 4);  // all-reduce and all-gather of 2 B; sends of 7 B and of 3 B
}

}  // namespace
}  // namespace meshsim
