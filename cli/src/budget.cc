#include "budget.h"

#include <cctype>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "meshsim/sim/error.h"

namespace meshsim::cli {

void add_budget_options(CLI::App* app, BudgetArgs& a) {
  app->add_option("--tokens", a.tokens,
                  "Train on this many tokens (e.g. 15T, 300B): days, GPU-hours, energy and cost");
  app->add_option("--days", a.days, "Or train for this many days: the tokens that trains")
      ->check(CLI::Range(1e-9, 1e6));
  app->add_option("--price-table", a.price_table,
                  "Price and power table JSON (schema of studies/data/prices.json)");
  app->add_option("--usd-per-device-hour", a.usd_per_device_hour,
                  "Price of one device-hour (overrides the table)")
      ->check(CLI::Range(1e-9, studies::kMaxUsdPerDeviceHour));
}

bool has_budget(const BudgetArgs& a) { return !a.tokens.empty() || a.days > 0; }

namespace {

// The token budget, or 0 with a time budget. InputError on a bad or double budget.
double budget_tokens(const BudgetArgs& a) {
  if (!a.tokens.empty() && a.days > 0) {
    throw InputError("--days", "", "give a token budget (--tokens) or a time budget, not both");
  }
  if (a.tokens.empty()) {
    return 0;
  }
  // A bare number is a trap: "--tokens 15" is fifteen tokens, not fifteen trillion. A budget
  // names its scale: a suffix (K, M, B, T) or an exponent.
  const char last = a.tokens.back();
  const bool has_scale = std::isalpha(static_cast<unsigned char>(last)) != 0 ||
                         a.tokens.find_first_of("eE") != std::string::npos;
  if (!has_scale) {
    throw InputError("--tokens", "",
                     fmt::format("\"{}\": a token budget needs its scale, a suffix K, M, B or T "
                                 "(powers of 1000) or an exponent: 15T or 1.5e13 for fifteen "
                                 "trillion, {}K for {} thousand",
                                 a.tokens, a.tokens, a.tokens));
  }
  const std::optional<double> t = studies::parse_token_count(a.tokens);
  if (!t) {
    throw InputError("--tokens", "",
                     fmt::format("\"{}\": expected a positive token count such as 15T, 300B, "
                                 "2.5e12 (at most {:g})",
                                 a.tokens, studies::kMaxTokens));
  }
  return *t;
}

}  // namespace

studies::PriceTable price_table(const BudgetArgs& a) {
  return a.price_table.empty() ? studies::PriceTable::builtin()
                               : studies::PriceTable::load(a.price_table);
}

void check_budget(const BudgetArgs& a) {
  if (has_budget(a)) {
    budget_tokens(a);
    price_table(a);
  }
}

std::optional<studies::TimeToTrain> time_to_train(const BudgetArgs& a,
                                                  const scenario::StepReport& r) {
  if (!has_budget(a) || !r.simulated || r.tokens_per_s <= 0) {
    return std::nullopt;
  }
  const double given = budget_tokens(a);
  const double tokens = given > 0 ? given : studies::tokens_in_days(a.days, r.tokens_per_s);
  const studies::PriceTable table = price_table(a);
  studies::DevicePrice price = table.device(r.chip);
  if (a.usd_per_device_hour > 0) {
    price.usd_per_device_hour = a.usd_per_device_hour;
    price.price_source = "--usd-per-device-hour";
  }
  return studies::time_to_train(tokens, r.model_flops_per_token, r.devices, r.peak_per_device,
                                r.mfu, r.tokens_per_s, price, table.pue);
}

namespace {

// The source up to its first ';' (the table's further notes are in the JSON).
std::string short_source(const std::string& s) { return s.substr(0, s.find(';')); }

std::string si(double v) {
  if (v >= 1e12) {
    return fmt::format("{:.2f} T", v * 1e-12);
  }
  if (v >= 1e9) {
    return fmt::format("{:.2f} B", v * 1e-9);
  }
  if (v >= 1e6) {
    return fmt::format("{:.2f} M", v * 1e-6);
  }
  return fmt::format("{:.0f}", v);
}

}  // namespace

void print_time_to_train(const studies::TimeToTrain& t, std::ostream& out) {
  out << fmt::format("  time to train         {} tokens at {:.0f} tokens/s: {:.1f} days, {} "
                     "device-hours\n",
                     si(t.tokens), t.tokens_per_s, t.days, si(t.device_hours));
  if (t.cost_usd) {
    out << fmt::format("  cost                  ${} at ${:.2f} per device-hour ({})\n",
                       si(*t.cost_usd), *t.usd_per_device_hour,
                       short_source(t.price_source));
  } else {
    out << fmt::format(
        "  cost                  no price for this chip in the table{} (give "
        "--usd-per-device-hour or --price-table)\n",
        t.price_source.empty() ? "" : ": " + short_source(t.price_source));
  }
  if (t.facility_energy_mwh) {
    out << fmt::format("  energy                {:.0f} MWh at the facility (IT {:.0f} MWh x PUE "
                       "{:.2f}; {})\n",
                       *t.facility_energy_mwh, *t.it_energy_mwh, t.pue,
                       short_source(t.power_source));
  } else {
    out << fmt::format("  energy                no power figure for this chip in the table{}\n",
                       t.power_source.empty() ? "" : ": " + short_source(t.power_source));
  }
}

}  // namespace meshsim::cli
