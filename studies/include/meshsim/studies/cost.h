// Time to train and cost: a token budget (or a time budget) at a simulated throughput, in days,
// device-hours, energy and dollars, from a price and power table with sources
// (studies/data/prices.json, compiled in; a file of the same schema overrides it).
//
//   days          = workloads::training_days(FLOPs per token x tokens, devices, peak, MFU)
//                 = tokens / tokens per second / 86400 (the MFU is the simulated one)
//   device-hours  = devices x days x 24
//   cost          = workloads::training_cost_usd(devices, days, USD per device-hour)
//   energy        = device-hours x watts per device x PUE (facility energy; IT energy without PUE)
// A time budget gives tokens = tokens per second x seconds, then the same.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "meshsim/sim/units.h"

namespace meshsim::studies {

// Bounds on a price table and the flags that override it, far above any real figure (an H100
// rents for $2 to $10 an hour and draws ~1.3 kW with its share of the host; data centres run at a
// PUE of 1.1 to 2): past them a cost or energy came out as "inf" (null in JSON).
inline constexpr double kMaxUsdPerDeviceHour = 1e6;
inline constexpr double kMaxWattsPerDevice = 1e6;
inline constexpr double kMaxPue = 10.0;

// A chip's price and power, each with its source; where the table has no figure, the source says
// why (the table's "price_unknown" / "power_unknown": no list price, no published draw).
struct DevicePrice {
  std::optional<double> usd_per_device_hour;
  std::string price_source;
  std::optional<double> watts_per_device;  // the system's draw per device
  std::string power_source;
};

struct PriceTable {
  std::string source;  // "builtin:studies/data/prices.json" or the file
  double pue = 1.0;
  std::string pue_source;
  std::map<std::string, DevicePrice> devices;  // by chip name (topology/chips.json keys)

  static PriceTable builtin();
  // A file of the builtin's schema (strict; InputError naming the file and pointer).
  static PriceTable load(const std::string& path);
  static PriceTable parse(const nlohmann::json& doc, const std::string& source);
  // The entry of `chip` (empty when the table has none).
  DevicePrice device(const std::string& chip) const;
};

// The most tokens a budget may name: 10^18, 10^5 times Llama 3's 15T (more printed "inf" days).
inline constexpr double kMaxTokens = 1e18;
// "15T", "2.5e12", "300B", "1.5M" -> tokens; nullopt unless a positive number with an optional
// K, M, B (or G) or T suffix (powers of 1000), at most kMaxTokens.
std::optional<double> parse_token_count(const std::string& text);

struct TimeToTrain {
  double tokens = 0;
  double tokens_per_s = 0;
  int64_t devices = 0;
  double days = 0;
  double device_hours = 0;
  std::optional<double> cost_usd;          // with a price
  std::optional<double> usd_per_device_hour;
  std::string price_source;                // without a price: why the table has none
  std::optional<double> it_energy_mwh;     // with a power figure
  std::optional<double> facility_energy_mwh;
  double pue = 1.0;
  std::string power_source;  // without a power figure: why the table has none
};

// A run of `tokens` at the simulated step: `flops_per_token` (model FLOPs), `mfu` over `devices`
// of `peak` each (what the report says), priced by `price`.
TimeToTrain time_to_train(double tokens, Flops flops_per_token, int64_t devices, FlopsPerSec peak,
                          double mfu, double tokens_per_s, const DevicePrice& price, double pue);
// The tokens a run of `days` trains at `tokens_per_s`.
double tokens_in_days(double days, double tokens_per_s);

nlohmann::json to_json(const TimeToTrain& t);

}  // namespace meshsim::studies
