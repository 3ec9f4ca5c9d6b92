// Time to train and cost against hand computation and the scaling workbook's worked examples
// (validation/workbook/workbook_cases.json, cases 5.1 and 5.2).
#include "meshsim/studies/cost.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>

#include "meshsim/sim/error.h"
#include "meshsim/topology/chip.h"
#include "meshsim/workloads/accounting.h"

namespace meshsim::studies {
namespace {

nlohmann::json workbook_case(const std::string& id) {
  std::ifstream f(std::string(MESHSIM_SOURCE_DIR) + "/validation/workbook/workbook_cases.json");
  const nlohmann::json doc = nlohmann::json::parse(f);
  for (const nlohmann::json& c : doc.at("cases")) {
    if (c.at("id") == id) {
      return c;
    }
  }
  ADD_FAILURE() << "no workbook case " << id;
  return {};
}

TEST(TimeToTrain, MatchesTheWorkbooksDaysAndCost) {
  // 5.1: 70.6e9 parameters, 15e12 tokens (6ND), 2048 devices at 990 TFLOP/s and 40 % MFU.
  const nlohmann::json days_case = workbook_case("5.1");
  const nlohmann::json& in = days_case.at("inputs");
  const double params = in.at("params");
  const double tokens = in.at("tokens");
  const int64_t devices = in.at("devices");
  const FlopsPerSec peak = FlopsPerSec::of(in.at("peak_flops"));
  const double mfu = in.at("mfu");
  // The throughput that MFU means: mfu * devices * peak / 6N tokens per second.
  const double tokens_per_s = mfu * static_cast<double>(devices) * peak.value() / (6.0 * params);
  DevicePrice price;
  price.usd_per_device_hour = workbook_case("5.2").at("inputs").at("usd_per_device_hour");
  price.price_source = "workbook";
  const TimeToTrain t = time_to_train(tokens, workloads::training_flops_per_token_6n(
                                                  static_cast<int64_t>(params)),
                                      devices, peak, mfu, tokens_per_s, price, 1.0);
  EXPECT_NEAR(t.days, days_case.at("expected").get<double>(),
              days_case.at("expected").get<double>() * days_case.at("rel_tol").get<double>());
  const nlohmann::json cost_case = workbook_case("5.2");
  ASSERT_TRUE(t.cost_usd);
  EXPECT_NEAR(*t.cost_usd, cost_case.at("expected").get<double>(),
              cost_case.at("expected").get<double>() * cost_case.at("rel_tol").get<double>());
  // By hand: days = tokens / tokens per second / 86400; device-hours = devices x days x 24.
  EXPECT_NEAR(t.days, tokens / tokens_per_s / 86400.0, 1e-9 * t.days);
  EXPECT_NEAR(t.device_hours, 2048.0 * t.days * 24.0, 1e-9 * t.device_hours);
  EXPECT_FALSE(t.it_energy_mwh);  // no power figure given
}

TEST(TimeToTrain, EnergyIsDeviceHoursTimesPowerTimesPue) {
  DevicePrice p;
  p.watts_per_device = 1000.0;
  p.power_source = "hand";
  // 1e9 tokens at 1e6 tokens/s = 1000 s on 10 devices; the MFU that implies for 6 FLOPs/token on
  // devices of 1e6 FLOP/s is 6e6 / 1e7 = 0.6.
  const TimeToTrain t = time_to_train(1e9, Flops::of(6.0), 10, FlopsPerSec::of(1e6), 0.6, 1e6, p,
                                      1.5);
  EXPECT_NEAR(t.days * 86400.0, 1000.0, 1e-6);
  EXPECT_NEAR(t.device_hours, 10.0 * 1000.0 / 3600.0, 1e-9);
  // 10 kW for 1000 s = 10,000 kJ = 2.7778 kWh = 2.7778e-3 MWh; x 1.5 at the facility.
  ASSERT_TRUE(t.it_energy_mwh);
  EXPECT_NEAR(*t.it_energy_mwh, 10.0 * 1000.0 * 1000.0 / 3.6e9, 1e-12);
  EXPECT_NEAR(*t.facility_energy_mwh, *t.it_energy_mwh * 1.5, 1e-12);
  EXPECT_FALSE(t.cost_usd);
  EXPECT_NEAR(tokens_in_days(2.0, 1e6), 2.0 * 86400.0 * 1e6, 1e-3);
}

TEST(TimeToTrain, TokenCountsParse) {
  EXPECT_EQ(parse_token_count("15T"), 15e12);
  EXPECT_EQ(parse_token_count("300B"), 300e9);
  EXPECT_EQ(parse_token_count("4M"), 4e6);
  EXPECT_EQ(parse_token_count("2.5e12"), 2.5e12);
  EXPECT_EQ(parse_token_count("8k"), 8e3);
  for (const char* bad : {"", "T", "-3T", "15X", "abc", "0", "1e999"}) {
    EXPECT_FALSE(parse_token_count(bad)) << bad;
  }
}

// Every catalogued chip has a price and a power figure with their sources, or the reason the table
// has none; every GPU has a price or a reason and a power figure, and the table lists no chip the
// catalogue lacks.
TEST(PriceTable, EveryCataloguedChipHasSourcedFiguresOrTheReasonItHasNone) {
  const PriceTable t = PriceTable::builtin();
  EXPECT_GE(t.pue, 1.0);
  EXPECT_FALSE(t.pue_source.empty());
  ASSERT_TRUE(t.device("h100-sxm").usd_per_device_hour);
  const topology::Catalogue catalogue = topology::Catalogue::builtin();
  const std::vector<std::string> chips = catalogue.names();
  for (const std::string& chip : chips) {
    ASSERT_TRUE(t.devices.contains(chip)) << chip << " is not in studies/data/prices.json";
    const DevicePrice& d = t.device(chip);
    EXPECT_FALSE(d.price_source.empty()) << chip << ": a price needs its source, no price a reason";
    EXPECT_FALSE(d.power_source.empty())
        << chip << ": a power figure needs its source, none a reason";
    if (chip.starts_with("tpu")) {
      EXPECT_TRUE(d.usd_per_device_hour) << chip << ": Google Cloud lists every TPU";
    } else {
      EXPECT_TRUE(d.watts_per_device) << chip;
    }
  }
  for (const auto& [chip, d] : t.devices) {
    EXPECT_NE(std::find(chips.begin(), chips.end(), chip), chips.end()) << chip;
  }
  EXPECT_FALSE(t.device("no-such-chip").usd_per_device_hour);
}

TEST(PriceTable, BadFilesNameTheFieldAndWhatWasExpected) {
  const auto error_of = [](const nlohmann::json& doc) {
    try {
      PriceTable::parse(doc, "prices.json");
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  const nlohmann::json ok = {{"pue", 1.2},
                             {"pue_source", "s"},
                             {"devices",
                              {{"x", {{"usd_per_device_hour", 2}, {"price_source", "s"}}}}}};
  EXPECT_EQ(error_of(ok), "no error");
  nlohmann::json bad = ok;
  bad["devices"]["x"]["usd_per_device_hour"] = -1;
  EXPECT_NE(error_of(bad).find("/devices/x/usd_per_device_hour"), std::string::npos)
      << error_of(bad);
  bad = ok;
  bad["devices"]["x"].erase("price_source");
  EXPECT_NE(error_of(bad).find("price_source"), std::string::npos) << error_of(bad);
  bad = ok;
  bad["pue"] = 0.5;
  EXPECT_NE(error_of(bad).find("/pue"), std::string::npos) << error_of(bad);
  bad = ok;
  bad["devices"]["x"]["price_unknown"] = "not rented";
  EXPECT_NE(error_of(bad).find("/devices/x/price_unknown"), std::string::npos) << error_of(bad);
  EXPECT_NE(error_of(bad).find("not both"), std::string::npos) << error_of(bad);
  bad = ok;
  bad["devices"]["x"]["watts"] = 3;
  EXPECT_NE(error_of(bad).find("watts"), std::string::npos) << error_of(bad);
}

}  // namespace
}  // namespace meshsim::studies
