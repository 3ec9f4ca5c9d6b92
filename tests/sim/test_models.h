// Cost models with round numbers, for engine tests: a compute op takes `flops` picoseconds
// (1 FLOP = 1 ps), a collective takes `bytes` ps times the group size, a send `bytes` ps; the
// engine over them, and a run of one program on two ranks.
#pragma once

#include <gtest/gtest.h>

#include <utility>
#include <vector>

#include "meshsim/sim/analysis.h"
#include "meshsim/sim/comm_model.h"
#include "meshsim/sim/cost_model.h"
#include "meshsim/sim/simulation.h"

namespace meshsim::testing {

class PsComputeModel : public ComputeCostModel {
 public:
  Duration compute_time(RankId /*rank*/, const ComputeWork& w) const override {
    return Duration::from_ps(static_cast<int64_t>(w.flops.count()));
  }
};

// Each communication on its own (IsolatedCommModel); counts the collectives started.
class PsCommModel : public CommModel {
 public:
  TransferId start_collective(SimTime now, CollectiveKind kind, Bytes bytes,
                              std::span<const RankId> group) override {
    ++collective_calls;
    return model_.start_collective(now, kind, bytes, group);
  }
  TransferId start_p2p(SimTime now, RankId src, RankId dst, Bytes bytes) override {
    return model_.start_p2p(now, src, dst, bytes);
  }
  CommAdvance advance(SimTime limit) override { return model_.advance(limit); }
  size_t in_flight() const override { return model_.in_flight(); }
  CommPlan plan_collective(CollectiveKind kind, Bytes bytes,
                           std::span<const RankId> group) override {
    ++plan_calls;
    return CommModel::plan_collective(kind, bytes, group);
  }
  CommPlan plan_p2p(RankId src, RankId dst, Bytes bytes) override {
    ++plan_calls;
    return CommModel::plan_p2p(src, dst, bytes);
  }
  int collective_calls = 0;
  int plan_calls = 0;

 private:
  IsolatedCommModel model_{
      [](CollectiveKind, Bytes bytes, std::span<const RankId> group) {
        return Duration::from_ps(bytes.count() * static_cast<int64_t>(group.size()));
      },
      [](RankId, RankId, Bytes bytes) { return Duration::from_ps(bytes.count()); }};
};

// The engine over the two models above, owning them: one declaration in a test instead of three.
// The models are a base so that they are built before the engine, which holds them by reference.
struct PsModels {
  PsComputeModel cm;
  PsCommModel nm;
};
class PsSimulation : public PsModels, public Simulation {
 public:
  PsSimulation() : Simulation(cm, nm) {}
};

// Runs `p` on two ranks bound to one group (slot 0) of `sim`, a fresh engine; rank 0's breakdown
// and the step's end.
inline std::pair<RankBreakdown, SimTime> run_on_two_ranks(Simulation& sim, Program p) {
  const auto prog = sim.add_program(std::move(p));
  const GroupId grp = sim.add_group({RankId(0), RankId(1)});
  sim.add_rank(prog, {grp}, {});
  sim.add_rank(prog, {grp}, {});
  Timeline tl;
  sim.record_into(tl);
  const RunResult r = sim.run();
  const std::vector<RankBreakdown> offline = analyze(tl, sim, r.end);
  // Issue 16: the engine's online breakdown equals the analysis of the recorded timeline.
  EXPECT_EQ(r.ranks[0].breakdown, offline[0]);
  EXPECT_EQ(r.ranks[1].breakdown, offline[1]);
  return {offline.front(), r.end};
}

inline Op compute_op(std::string name, double ps, uint8_t stream = 0) {
  Op op;
  op.name = std::move(name);
  op.stream = stream;
  op.work = ComputeWork{OpClass::kMatmul, Dtype::kBf16, Flops::of(ps), Bytes::zero(), {}, {}};
  return op;
}

inline Op collective_op(std::string name, int64_t bytes, uint16_t slot = 0, uint8_t stream = 1) {
  Op op;
  op.name = std::move(name);
  op.stream = stream;
  op.work = CollectiveWork{CollectiveKind::kAllReduce, Bytes::of(bytes), slot};
  return op;
}

inline Op peer_op(std::string name, bool send, int64_t bytes, uint16_t slot = 0,
                  uint8_t stream = 1) {
  Op op;
  op.name = std::move(name);
  op.stream = stream;
  op.is_send = send;
  op.work = PeerWork{slot, Bytes::of(bytes), 0};
  return op;
}

}  // namespace meshsim::testing
