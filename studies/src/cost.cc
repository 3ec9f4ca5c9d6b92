#include "meshsim/studies/cost.h"

#include <fmt/format.h>

#include <cmath>

#include "meshsim/sim/error.h"
#include "meshsim/sim/unit_parse.h"
#include "meshsim/sim/json_input.h"
#include "meshsim/workloads/analytic.h"

namespace meshsim::studies {

namespace detail {
const std::vector<std::pair<std::string_view, std::string_view>>& embedded_price_tables();
}  // namespace detail

namespace {

DevicePrice read_device(JsonObject o) {
  DevicePrice d;
  // A figure with its source, or the reason there is none (not both).
  const auto figure = [&o](const char* key, const char* source_key, const char* unknown_key,
                           double most, std::optional<double>& value, std::string& source) {
    if (auto v = opt(o, key, &JsonObject::positive_number)) {
      if (o.has(unknown_key)) {
        o.fail(unknown_key, fmt::format("give {} or {}, not both", key, unknown_key));
      }
      if (*v > most) {
        o.fail(key, fmt::format("{} is above the limit of {:g}", *v, most));
      }
      value = *v;
      source = o.string(source_key);
    } else if (o.has(unknown_key)) {
      source = o.string(unknown_key);
    }
  };
  figure("usd_per_device_hour", "price_source", "price_unknown", kMaxUsdPerDeviceHour,
         d.usd_per_device_hour, d.price_source);
  figure("watts_per_device", "power_source", "power_unknown", kMaxWattsPerDevice,
         d.watts_per_device, d.power_source);
  o.finish();
  return d;
}

}  // namespace

PriceTable PriceTable::parse(const nlohmann::json& doc, const std::string& source) {
  JsonObject o(doc, source);
  PriceTable t;
  t.source = source;
  o.ignore("notes");
  t.pue = o.positive_number("pue");
  if (t.pue < 1.0 || t.pue > kMaxPue) {
    o.fail("pue", fmt::format("a PUE is facility energy over IT energy, from 1 to {}; got {}",
                              kMaxPue, t.pue));
  }
  t.pue_source = o.string("pue_source");
  const nlohmann::json& devices = o.raw("devices");
  JsonObject d(devices, source, o.pointer_of("devices"));
  for (const auto& [name, value] : devices.items()) {
    t.devices.emplace(name, read_device(d.object(name)));
  }
  d.finish();
  o.finish();
  return t;
}

PriceTable PriceTable::builtin() {
  for (const auto& [stem, text] : detail::embedded_price_tables()) {
    if (stem == "prices") {
      return parse(nlohmann::json::parse(text), "builtin:studies/data/prices.json");
    }
  }
  throw InternalError("the builtin price table is not compiled in");
}

PriceTable PriceTable::load(const std::string& path) { return parse(load_json_file(path), path); }

DevicePrice PriceTable::device(const std::string& chip) const {
  const auto it = devices.find(chip);
  return it == devices.end() ? DevicePrice{} : it->second;
}

std::optional<double> parse_token_count(const std::string& text) {
  if (text.empty()) {
    return std::nullopt;
  }
  double scale = 1.0;
  std::string number = text;
  switch (text.back()) {
    case 'K':
    case 'k':
      scale = 1e3;
      break;
    case 'M':
      scale = 1e6;
      break;
    case 'B':
    case 'G':
      scale = 1e9;
      break;
    case 'T':
      scale = 1e12;
      break;
    default:
      break;
  }
  if (scale != 1.0) {
    number.pop_back();
  }
  const std::optional<double> v = parse_number(number);
  if (!v || !(*v > 0) || !(*v * scale <= kMaxTokens)) {
    return std::nullopt;
  }
  return *v * scale;
}

TimeToTrain time_to_train(double tokens, Flops flops_per_token, int64_t devices, FlopsPerSec peak,
                          double mfu, double tokens_per_s, const DevicePrice& price, double pue) {
  TimeToTrain t;
  t.tokens = tokens;
  t.tokens_per_s = tokens_per_s;
  t.devices = devices;
  t.days = workloads::training_days(flops_per_token * tokens, devices, peak, mfu);
  t.device_hours = static_cast<double>(devices) * t.days * 24.0;
  t.price_source = price.price_source;
  t.power_source = price.power_source;
  if (price.usd_per_device_hour) {
    t.usd_per_device_hour = price.usd_per_device_hour;
    t.cost_usd = workloads::training_cost_usd(devices, t.days, *price.usd_per_device_hour);
  }
  if (price.watts_per_device) {
    t.pue = pue;
    t.it_energy_mwh = t.device_hours * *price.watts_per_device * 1e-6;
    t.facility_energy_mwh = *t.it_energy_mwh * pue;
  }
  return t;
}

double tokens_in_days(double days, double tokens_per_s) {
  return days * kSecondsPerDay * tokens_per_s;
}

nlohmann::json to_json(const TimeToTrain& t) {
  nlohmann::json j = {{"tokens", t.tokens},
                      {"tokens_per_s", t.tokens_per_s},
                      {"devices", t.devices},
                      {"days", t.days},
                      {"device_hours", t.device_hours}};
  if (t.cost_usd) {
    j["cost_usd"] = *t.cost_usd;
    j["usd_per_device_hour"] = *t.usd_per_device_hour;
    j["price_source"] = t.price_source;
  } else if (!t.price_source.empty()) {
    j["price_unknown"] = t.price_source;
  }
  if (t.it_energy_mwh) {
    j["it_energy_mwh"] = *t.it_energy_mwh;
    j["facility_energy_mwh"] = *t.facility_energy_mwh;
    j["pue"] = t.pue;
    j["power_source"] = t.power_source;
  } else if (!t.power_source.empty()) {
    j["power_unknown"] = t.power_source;
  }
  return j;
}

}  // namespace meshsim::studies
