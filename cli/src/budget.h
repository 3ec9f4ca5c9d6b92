// --tokens 15T / --days 30 on `run` and `plan`: time to train, device-hours, energy and cost of a
// simulated step (studies/cost.h), with the price table's sources.
#pragma once

#include <optional>
#include <ostream>
#include <string>

#include "cli11_fwd.h"
#include "meshsim/studies/cost.h"
#include "meshsim/scenario/step_report.h"

namespace meshsim::cli {

struct BudgetArgs {
  std::string tokens;               // "15T"; empty: none
  double days = 0;                  // a time budget instead; 0: none
  std::string price_table;          // a file of studies/data/prices.json's schema
  double usd_per_device_hour = 0;   // overrides the table's price; 0: the table's
};

void add_budget_options(CLI::App* app, BudgetArgs& a);

// Whether a budget was asked for.
bool has_budget(const BudgetArgs& a);
// Checks the budget flags and the price table before any simulation (InputError). A token budget
// needs its scale (15T, 300B, 1.5e13): a bare number is refused.
void check_budget(const BudgetArgs& a);
// The price table: --price-table's file, else the builtin.
studies::PriceTable price_table(const BudgetArgs& a);

// The time to train of `r` under the budget (nullopt without one). InputError on a bad --tokens
// or price table.
std::optional<studies::TimeToTrain> time_to_train(const BudgetArgs& a,
                                                  const scenario::StepReport& r);

// "  time to train  15.0 T tokens: 73.8 days, 3.63 M GPU-hours, $7.26 M, 7.3 GWh" plus sources.
void print_time_to_train(const studies::TimeToTrain& t, std::ostream& out);

}  // namespace meshsim::cli
