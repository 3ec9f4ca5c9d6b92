#include "plan_goodput.h"

#include <fmt/format.h>

#include "meshsim/sim/error.h"
#include "meshsim/studies/failures.h"

namespace meshsim::cli {

double goodput_tokens(const BudgetArgs& budget) {
  const std::optional<double> tokens =
      budget.tokens.empty() ? std::nullopt : studies::parse_token_count(budget.tokens);
  if (!tokens || *tokens <= 0) {
    throw InputError("--rank-by", "",
                     "goodput ranking needs the tokens to train, e.g. --tokens 15T");
  }
  return *tokens;
}

std::vector<studies::PlanGoodput> rank_by_goodput(const scenario::Scenario& base,
                                                  const GoodputArgs& a, const BudgetArgs& budget,
                                                  std::vector<studies::PlanRow>& rows) {
  const double tokens = goodput_tokens(budget);
  const studies::CheckpointPolicy policy = checkpoint_policy(a);
  const studies::FailureTable table = a.failure_table.empty()
                                          ? studies::FailureTable::builtin()
                                          : studies::FailureTable::load(a.failure_table);
  try {
    return studies::rank_by_goodput(base, policy, table, tokens, rows);
  } catch (const studies::GoodputError& e) {
    throw InputError(flag_of(e.field()), "", e.message());
  }
}

void print_goodput_table(const std::vector<studies::PlanRow>& rows,
                         const std::vector<studies::PlanGoodput>& goodput, std::ostream& out) {
  out << fmt::format("\n  {:>4}  {:<46} {:>9} {:>11} {:>11} {:>10} {:>8} {:>8}\n", "rank", "plan",
                     "step", "ckpt write", "restart", "interval", "goodput", "days");
  for (size_t i = 0; i < rows.size(); ++i) {
    const studies::PlanGoodput& g = goodput[i];
    out << fmt::format("  {:>4}  {:<46} {:>9} {:>11} {:>11} {:>10} {:>7.2f}% {:>8.2f}\n", i + 1,
                       studies::short_plan(rows[i].plan), format_duration(rows[i].report.step_time),
                       format_span(g.costs.write.seconds()), format_span(g.costs.restart.seconds()),
                       format_span(g.interval_s), 100.0 * g.goodput, g.days);
  }
  out << "  (ranked by expected days to train under failures, each plan at its optimal checkpoint "
         "interval; closed form, meshsim goodput for the Monte Carlo)\n";
}

nlohmann::json goodput_json(const studies::PlanGoodput& g) {
  return {{"checkpoint_write_s", g.costs.write.seconds()},
          {"restart_s", g.costs.restart.seconds()},
          {"interval_s", g.interval_s},
          {"goodput", g.goodput},
          {"days", g.days}};
}

}  // namespace meshsim::cli
