// `meshsim plan --rank-by goodput`: the flags of the study (meshsim/studies/plan_goodput.h), and
// its table and JSON.
#pragma once

#include <ostream>
#include <vector>

#include "budget.h"
#include "goodput_command.h"
#include "meshsim/studies/plan_goodput.h"
#include "meshsim/studies/plan_table.h"
#include "meshsim/scenario/scenario.h"

namespace meshsim::cli {

// The tokens to train that goodput ranking needs (--tokens); InputError on --rank-by without them.
double goodput_tokens(const BudgetArgs& budget);

// studies::rank_by_goodput with the checkpoint and failure flags; InputError naming the flag on a
// bad value, or on --rank-by without --tokens.
std::vector<studies::PlanGoodput> rank_by_goodput(const scenario::Scenario& base,
                                                  const GoodputArgs& a, const BudgetArgs& budget,
                                                  std::vector<studies::PlanRow>& rows);

// The goodput columns beside each ranked plan.
void print_goodput_table(const std::vector<studies::PlanRow>& rows,
                         const std::vector<studies::PlanGoodput>& goodput, std::ostream& out);

nlohmann::json goodput_json(const studies::PlanGoodput& g);

}  // namespace meshsim::cli
