// `meshsim plan --rank-by goodput`: the searched plans re-ranked by their expected days to train
// under failures (studies/goodput.h), where checkpoints differ by plan: with a per-node storage
// bandwidth, the replicated state is written by one DP replica's nodes and the sharded state by
// all (studies::CheckpointWriters), so a plan with sharded state can win over a slightly faster
// step whose checkpoint funnels through few nodes.
#pragma once

#include <ostream>
#include <vector>

#include "budget.h"
#include "goodput_command.h"
#include "meshsim/studies/plan_table.h"
#include "meshsim/scenario/scenario.h"

namespace meshsim::cli {

// The tokens to train that goodput ranking needs (--tokens); InputError on --rank-by without them.
double goodput_tokens(const BudgetArgs& budget);

// Re-ranks `rows` (stably) by expected days to train at each plan's optimal checkpoint interval;
// returns each row's goodput in the new order. InputError without --tokens.
std::vector<studies::PlanGoodput> rank_by_goodput(const scenario::Scenario& base,
                                                  const GoodputArgs& a, const BudgetArgs& budget,
                                                  std::vector<studies::PlanRow>& rows);

// The goodput columns beside each ranked plan.
void print_goodput_table(const std::vector<studies::PlanRow>& rows,
                         const std::vector<studies::PlanGoodput>& goodput, std::ostream& out);

nlohmann::json goodput_json(const studies::PlanGoodput& g);

}  // namespace meshsim::cli
