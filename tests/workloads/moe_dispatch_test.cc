// The EP exchange under Megatron-Core's two dispatchers (parallel.h MoeDispatcher): the alltoall
// dispatcher's copy per (token, expert) over the EP group, and the flex dispatcher's copy per
// destination node over the network plus a copy per expert over NVLink, bounded by group-limited
// routing (DeepSeek's n_group / topk_group).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "meshsim/sim/error.h"
#include "meshsim/workloads/parallel.h"
#include "meshsim/workloads/step.h"

namespace meshsim::workloads {
namespace {

// Mixtral's shape (8 experts, top-2, h 4096), 4096 tokens per rank, EP 8 over two nodes of 4.
ParallelPlan flex_plan() {
  ParallelPlan p;
  p.dp = 8;
  p.ep = 8;
  p.gbs = 8;
  p.seq = 4096;
  p.moe_dispatcher = MoeDispatcher::kFlex;
  p.node_ranks = 4;
  return p;
}

ModelConfig grouped(int64_t groups, int64_t per_token) {
  ModelConfig m = load_model("mixtral-8x7b");
  m.moe->routing_groups = groups;
  m.moe->routing_group_topk = per_token;
  return m;
}

int64_t bytes_of(const StepPlan& s, const std::string& name) {
  const Program& prog = s.programs[0];
  for (size_t i = 0; i < prog.size(); ++i) {
    const Op& op = prog.op(OpId(static_cast<uint32_t>(i)));
    if (op.name == name) {
      return std::get<CollectiveWork>(op.work).bytes.count();
    }
  }
  return -1;
}

TEST(MoeDispatch, FlexHopsAreTheRailAcrossNodesAndTheNodeItself) {
  const RankLayout l(flex_plan());
  EXPECT_EQ(l.expert_rail_group(1), (std::vector<int64_t>{1, 5}));
  EXPECT_EQ(l.expert_node_group(5), (std::vector<int64_t>{4, 5, 6, 7}));
  // Experts split over TP (etp == tp 2): the EP group strides over TP, 4 of its ranks per node
  // of 8; the rail pairs the ranks of the same position among them.
  ParallelPlan tp = flex_plan();
  tp.tp = 2;
  tp.sp = true;
  tp.node_ranks = 8;
  const RankLayout t(tp);
  EXPECT_EQ(t.expert_rail_group(2), (std::vector<int64_t>{2, 10}));
  EXPECT_EQ(t.expert_node_group(2), (std::vector<int64_t>{0, 2, 4, 6}));
  ParallelPlan plain = flex_plan();
  plain.moe_dispatcher = MoeDispatcher::kAllToAll;  // the hops are the EP group itself
  EXPECT_EQ(RankLayout(plain).expert_rail_group(1), RankLayout(plain).expert_group(1));
}

// 4096 tokens x h 4096 x 2 bytes = 32 MiB per copy. 4 groups of 2 experts, 1 per token: both of a
// token's experts on one node, one network copy, two NVLink copies. Without groups, uniform top-2
// over 2 nodes of 4 experts reaches 2 x (1 - C(4,2)/C(8,2)) = 11/7 nodes: 4096 x 11/7 = 6436.6,
// 6437 token copies. The alltoall dispatcher: two copies over the EP group.
TEST(MoeDispatch, NetworkCopiesPerTokenAreBoundedByNodesAndRoutingGroups) {
  const int64_t copy = int64_t{4096} * 4096 * 2;
  const StepPlan limited = plan_step(grouped(4, 1), flex_plan());
  EXPECT_EQ(bytes_of(limited, "fwd.L4.dispatch.ep_internode"), copy);
  EXPECT_EQ(bytes_of(limited, "fwd.L4.dispatch.ep_intranode"), 2 * copy);
  EXPECT_EQ(bytes_of(limited, "fwd.L4.dispatch.ep_alltoall"), -1);
  const StepPlan free = plan_step(grouped(1, 1), flex_plan());
  EXPECT_EQ(bytes_of(free, "fwd.L4.combine.ep_internode"), int64_t{6437} * 4096 * 2);
  ParallelPlan plain = flex_plan();
  plain.moe_dispatcher = MoeDispatcher::kAllToAll;
  const StepPlan a2a = plan_step(grouped(4, 1), plain);
  EXPECT_EQ(bytes_of(a2a, "fwd.L4.dispatch.ep_alltoall"), 2 * copy);
  EXPECT_EQ(bytes_of(a2a, "fwd.L4.dispatch.ep_internode"), -1);
  // One node holds the whole EP group: only the NVLink hop.
  ParallelPlan one_node = flex_plan();
  one_node.node_ranks = 8;
  const StepPlan inside = plan_step(grouped(1, 1), one_node);
  EXPECT_EQ(bytes_of(inside, "bwd.L4.combine.bwd.ep_intranode"), 2 * copy);
  EXPECT_EQ(bytes_of(inside, "bwd.L4.combine.bwd.ep_internode"), -1);
}

TEST(MoeDispatch, FlexNeedsTheNodeSizeAndGroupsMustFit) {
  ParallelPlan p = flex_plan();
  p.node_ranks = 0;
  EXPECT_THROW(validate_plan(grouped(1, 1), p), PlanError);
  p.node_ranks = 3;  // 8 EP ranks over nodes of 3: uneven
  EXPECT_THROW(validate_plan(grouped(1, 1), p), PlanError);
  EXPECT_THROW(validate_model(grouped(3, 1), "test"), InputError);  // 3 groups of 8 experts
  EXPECT_THROW(validate_model(grouped(8, 1), "test"), InputError);  // 1 expert per token, top-2
}

TEST(MoeDispatch, DeepSeekConfigsStateTheirRoutingGroups) {
  const std::string dir = std::string(MESHSIM_SOURCE_DIR) + "/tests/workloads/hf_configs/";
  const ModelConfig v3 = load_model(dir + "DeepSeek-V3.json");
  EXPECT_EQ(v3.moe->routing_groups, 8);
  EXPECT_EQ(v3.moe->routing_group_topk, 4);
  const ModelConfig lite = load_model(dir + "DeepSeek-V2-Lite.json");  // topk_method greedy
  EXPECT_EQ(lite.moe->routing_groups, 1);
}

}  // namespace
}  // namespace meshsim::workloads
