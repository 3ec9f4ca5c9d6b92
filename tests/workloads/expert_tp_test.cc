// Expert tensor parallelism (Megatron-Core's expert_tensor_parallel_size): with etp == tp the
// routed experts are split over TP and EP is carved out of DP; with etp 1 each rank routes its own
// s/TP tokens to whole experts and EP is carved out of TP x CP x DP (EP x ETP x EDP x PP = world).
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <string>
#include <vector>

#include "meshsim/sim/error.h"
#include "meshsim/workloads/parallel.h"
#include "meshsim/workloads/step.h"

namespace meshsim::workloads {
namespace {

ParallelPlan plan(int64_t etp) {
  ParallelPlan p;
  p.tp = 2;
  p.sp = true;
  p.dp = 8;
  p.ep = 8;
  p.etp = etp;
  p.gbs = 8;
  p.seq = 4096;
  return p;
}

const Op* find(const Program& prog, const std::string& name) {
  for (size_t i = 0; i < prog.size(); ++i) {
    const Op& op = prog.op(OpId(static_cast<uint32_t>(i)));
    if (op.name == name) {
      return &op;
    }
  }
  return nullptr;
}

std::vector<int64_t> range(int64_t from, int64_t to, int64_t step = 1) {
  std::vector<int64_t> out;
  for (int64_t r = from; r < to; r += step) {
    out.push_back(r);
  }
  return out;
}

// Megatron-Core's expert rank generator (parallel_state.py, order tp-ep-dp-pp with tp = etp):
// with etp 1 the EP group is EP consecutive ranks of the stage; with etp == tp, EP consecutive
// DP indices at the rank's TP position.
TEST(ExpertTp, GroupsFollowMegatronCoresExpertRankGenerator) {
  const RankLayout split(plan(0));
  EXPECT_EQ(split.expert_group(0), range(0, 16, 2));
  EXPECT_EQ(split.expert_group(1), range(1, 16, 2));
  EXPECT_EQ(split.expert_dp_group(0), std::vector<int64_t>{0});
  const RankLayout whole(plan(1));
  EXPECT_EQ(whole.expert_group(0), range(0, 8));
  EXPECT_EQ(whole.expert_group(9), range(8, 16));
  EXPECT_EQ(whole.expert_dp_group(1), (std::vector<int64_t>{1, 9}));
  EXPECT_EQ(plan(1).expert_grad_group(), 2);
  EXPECT_EQ(plan(0).expert_grad_group(), 1);
  ParallelPlan piped = plan(1);
  piped.pp = 2;
  EXPECT_EQ(RankLayout(piped).expert_group(17), range(16, 24));
}

// The groups come from rank arithmetic, not from listing the pool; against the definition (the
// pool: the ranks sharing every digit outside its axes, in rank order; the EP group: the block of
// EP consecutive pool members holding the rank; the expert-DP group: the members at the rank's
// place in every block), under every layout order, both expert splits, CP and PP.
TEST(ExpertTp, GroupsFromRankArithmeticMatchTheirDefinition) {
  std::array<Axis, kNumAxes> order = {Axis::kTensor, Axis::kContext, Axis::kData, Axis::kPipeline};
  std::sort(order.begin(), order.end());
  int layouts = 0;
  do {
    for (const int64_t etp : {1, 2}) {
      ParallelPlan p = plan(etp);
      p.cp = 2;
      p.pp = 3;
      p.ep = 4;
      p.order = order;
      const RankLayout layout(p);
      const auto digit = [&](int64_t r, Axis a) {
        const RankCoords c = layout.coords(r);
        return a == Axis::kTensor    ? c.tp
               : a == Axis::kContext ? c.cp
               : a == Axis::kData    ? c.dp
                                     : c.pp;
      };
      const std::vector<Axis> fixed =
          etp == 1 ? std::vector<Axis>{Axis::kPipeline}
                   : std::vector<Axis>{Axis::kPipeline, Axis::kTensor, Axis::kContext};
      for (int64_t r = 0; r < layout.world(); ++r) {
        std::vector<int64_t> pool;  // ascending: built in rank order
        for (int64_t q = 0; q < layout.world(); ++q) {
          if (std::all_of(fixed.begin(), fixed.end(),
                          [&](Axis a) { return digit(q, a) == digit(r, a); })) {
            pool.push_back(q);
          }
        }
        const auto at = std::find(pool.begin(), pool.end(), r) - pool.begin();
        const std::vector<int64_t> block(pool.begin() + at / p.ep * p.ep,
                                         pool.begin() + (at / p.ep + 1) * p.ep);
        std::vector<int64_t> same_place;
        for (size_t k = static_cast<size_t>(at % p.ep); k < pool.size();
             k += static_cast<size_t>(p.ep)) {
          same_place.push_back(pool[k]);
        }
        ASSERT_EQ(layout.expert_group(r), block) << "rank " << r << ", etp " << etp;
        ASSERT_EQ(layout.expert_dp_group(r), same_place) << "rank " << r << ", etp " << etp;
      }
      ++layouts;
    }
  } while (std::next_permutation(order.begin(), order.end()));
  EXPECT_EQ(layouts, 48);  // 24 orders x 2 expert splits
}

// Mixtral (top-2 of 8, h 4096, expert width 14336, no shared expert), 4096 tokens per rank
// chunk: etp == tp routes the TP group's 4096 gathered tokens on each rank through experts of
// width 14336 / 2; etp 1 routes the rank's own 2048 to whole experts, half the all-to-all bytes,
// and the MoE layer leaves TP without a reduction.
TEST(ExpertTp, AllToAllAndExpertGemmsFollowTheExpertSplit) {
  const ModelConfig m = load_model("mixtral-8x7b");
  const StepPlan split = plan_step(m, plan(0));
  const StepPlan whole = plan_step(m, plan(1));
  const auto bytes = [](const StepPlan& s) {
    const Op* op = find(s.programs[0], "fwd.L4.dispatch.ep_alltoall");
    EXPECT_NE(op, nullptr);
    return op ? std::get<CollectiveWork>(op->work).bytes.count() : 0;
  };
  EXPECT_EQ(bytes(split), int64_t{4096} * 2 * 4096 * 2);
  EXPECT_EQ(bytes(whole), int64_t{2048} * 2 * 4096 * 2);
  const auto up = [](const StepPlan& s) {
    const Op* op = find(s.programs[0], "fwd.L4.mlp_up");
    EXPECT_NE(op, nullptr);
    return *std::get<ComputeWork>(op->work).shape;
  };
  EXPECT_EQ(up(split).m, 4096 * 2 * 8 / 8);
  EXPECT_EQ(up(split).n, 2 * 14336 / 2);
  EXPECT_EQ(up(whole).m, 2048 * 2 * 8 / 8);
  EXPECT_EQ(up(whole).n, 2 * 14336);
  EXPECT_NE(find(split.programs[0], "fwd.L4.mlp.tp_reducescatter"), nullptr);
  EXPECT_EQ(find(whole.programs[0], "fwd.L4.mlp.tp_reducescatter"), nullptr);
}

TEST(ExpertTp, OnlyOneOrTpWithSequenceParallelOnMoeModels) {
  const ModelConfig m = load_model("mixtral-8x7b");
  ParallelPlan p = plan(1);
  EXPECT_NO_THROW(validate_plan(m, p));
  p.sp = false;  // etp 1 under TP routes the s/TP tokens of SP
  EXPECT_THROW(validate_plan(m, p), PlanError);
  p = plan(3);
  EXPECT_THROW(validate_plan(m, p), PlanError);
  p = plan(1);
  p.ep = 16;  // carved out of tp x dp = 16, but not 8 experts
  EXPECT_THROW(validate_plan(m, p), PlanError);
  ParallelPlan dense = plan(1);
  dense.ep = 1;
  EXPECT_THROW(validate_plan(load_model("llama3-8b"), dense), PlanError);
}

}  // namespace
}  // namespace meshsim::workloads
