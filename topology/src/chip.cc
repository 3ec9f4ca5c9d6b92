#include "meshsim/topology/chip.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <nlohmann/json.hpp>
#include <utility>

#include "embedded.h"
#include "meshsim/sim/error.h"
#include "meshsim/sim/json_input.h"

namespace meshsim::topology {
namespace {

constexpr std::string_view kBuiltinCatalogueSource = "builtin:topology/chips.json";

}  // namespace

const std::vector<Dtype>& all_dtypes() {
  static const std::vector<Dtype> kAll = {Dtype::kFp32, Dtype::kTf32, Dtype::kBf16, Dtype::kFp16,
                                          Dtype::kFp8};
  return kAll;
}


std::optional<FlopsPerSec> Chip::peak(Dtype dtype) const {
  const auto it = peaks.find(dtype);
  if (it == peaks.end()) {
    return std::nullopt;
  }
  return it->second;
}

std::vector<AttentionImpl> Chip::attention_impls() const {
  std::vector<AttentionImpl> out;
  for (const AttentionImpl impl : enum_values<AttentionImpl>()) {
    const auto& fits = efficiency.attention;
    if (std::any_of(fits.begin(), fits.end(),
                    [impl](const AttentionEfficiency& a) { return a.impl == impl; })) {
      out.push_back(impl);
    }
  }
  return out;
}

const std::string& Chip::source_of(const std::string& pointer) const {
  static const std::string kNone;
  const auto it = sources.find(pointer);
  return it == sources.end() ? kNone : it->second;
}

nlohmann::json Catalogue::builtin_document() {
  for (const auto& [stem, contents] : detail::embedded_chip_catalogue()) {
    if (stem == "chips") {
      try {
        return nlohmann::json::parse(contents);
      } catch (const nlohmann::json::parse_error& e) {
        throw InputError(std::string(kBuiltinCatalogueSource), fmt::format("byte {}", e.byte),
                         "not valid JSON");
      }
    }
  }
  SIM_CHECK(false, "the builtin chip catalogue (chips.json) was not embedded");
  return {};
}

Catalogue Catalogue::builtin() {
  return parse(builtin_document(), std::string(kBuiltinCatalogueSource));
}

Catalogue Catalogue::load(const std::string& path) { return parse(load_json_file(path), path); }

const Chip& Catalogue::chip(std::string_view name) const {
  const auto it = std::lower_bound(chips_.begin(), chips_.end(), name,
                                   [](const Chip& c, std::string_view n) { return c.name < n; });
  if (it == chips_.end() || it->name != name) {
    throw InputError(
        source_, "",
        fmt::format("unknown chip \"{}\" (known chips: {})", name, fmt::join(names(), ", ")));
  }
  return *it;
}

bool Catalogue::contains(std::string_view name) const {
  return std::any_of(chips_.begin(), chips_.end(), [&](const Chip& c) { return c.name == name; });
}

std::vector<std::string> Catalogue::names() const {
  std::vector<std::string> out;
  out.reserve(chips_.size());
  for (const Chip& c : chips_) {
    out.push_back(c.name);
  }
  return out;
}

}  // namespace meshsim::topology
