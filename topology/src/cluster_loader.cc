// Reading and validating cluster files (schema: topology/clusters/*.json and cluster.h).
#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "cluster_checks.h"
#include "cluster_graph.h"
#include "embedded.h"
#include "meshsim/sim/error.h"
#include "meshsim/sim/json_input.h"
#include "meshsim/topology/cluster.h"
#include "sourced.h"

namespace meshsim::topology {
namespace {

using detail::SourceSink;

constexpr std::string_view kPresetPrefix = "builtin:topology/clusters/";

void forbid(JsonObject& obj, const std::string& key, const std::string& why) {
  if (obj.has(key)) {
    obj.fail(key, why);
  }
}

// The chip kind each fabric serves.
ChipKind chip_kind_of(ScaleUpFabric f) {
  return f == ScaleUpFabric::kIciTorus ? ChipKind::kTpu : ChipKind::kGpu;
}
ChipKind chip_kind_of(ScaleOutFabric f) {
  return f == ScaleOutFabric::kDcn ? ChipKind::kTpu : ChipKind::kGpu;
}

// The "fabric" of a scale-up or scale-out section, checked against the chip: a GPU fabric on a
// TPU (or the reverse) fails, naming the fabrics the chip can use.
template <typename Fabric>
Fabric read_fabric(JsonObject& obj, const Chip& chip) {
  const Fabric fabric = obj.choice<Fabric>("fabric");
  if (chip_kind_of(fabric) != chip.kind) {
    std::string instead;
    for (const Fabric f : enum_values<Fabric>()) {
      if (chip_kind_of(f) == chip.kind) {
        instead += (instead.empty() ? "" : " or ") + std::string(to_string(f));
      }
    }
    obj.fail("fabric", fmt::format("\"{}\" needs a {} chip, but \"{}\" is a {} (expected \"{}\")",
                                   to_string(fabric), to_string(chip_kind_of(fabric)), chip.name,
                                   to_string(chip.kind), instead));
  }
  return fabric;
}

// The platform's achieved fractions of the scale-up line rate, replacing the chip catalogue's
// (a cloud VM's NVLink may achieve less or more than the vendor's reference system).
void read_scale_up_efficiency(JsonObject& up, ClusterSpec& spec, SourceSink& sink) {
  Chip& chip = spec.chip;
  if (up.has("efficiency")) {
    const double e = detail::sourced_fraction(up, "efficiency", sink);
    if (chip.nvlink) {
      chip.nvlink->efficiency = e;
    } else {
      chip.ici->efficiency = e;
    }
  }
  if (up.has("nvls_efficiency")) {
    if (!chip.nvlink || !chip.nvlink->nvls_efficiency) {
      up.fail("nvls_efficiency", fmt::format("\"{}\" has no NVLink SHARP (NVLS) in the chip "
                                             "catalogue, so there is no NVLS efficiency to set",
                                             chip.name));
    }
    chip.nvlink->nvls_efficiency = detail::sourced_fraction(up, "nvls_efficiency", sink);
  }
}

void read_scale_up_links(JsonObject& up, ClusterSpec& spec, SourceSink& sink) {
  const Chip& chip = spec.chip;
  spec.scale_up_links = chip.nvlink ? chip.nvlink->links : chip.ici->links;
  spec.scale_up_link_bandwidth =
      chip.nvlink ? chip.nvlink->link_bandwidth : chip.ici->link_bandwidth;
  if (up.has("links")) {
    spec.scale_up_links = detail::sourced_count(up, "links", sink);
  }
  if (up.has("link_bandwidth")) {
    spec.scale_up_link_bandwidth = detail::sourced_bandwidth(up, "link_bandwidth", sink);
  }
  spec.scale_up_latency = detail::sourced_duration(up, "latency", sink, /*allow_zero=*/false);
  read_scale_up_efficiency(up, spec, sink);
}

void read_scale_up(JsonObject& root, ClusterSpec& spec, SourceSink& sink) {
  JsonObject up = root.object("scale_up");
  spec.scale_up = read_fabric<ScaleUpFabric>(up, spec.chip);
  if (spec.scale_up == ScaleUpFabric::kIciTorus) {
    spec.torus_shape = up.positive_integer_array("shape");
    forbid(up, "domain_devices", "only an \"nvlink_domain\" fabric has domain_devices");
  } else {
    forbid(up, "shape", "only an \"ici_torus\" fabric has a shape");
    if (spec.scale_up == ScaleUpFabric::kNvlinkDomain) {
      spec.nvlink_domain_devices = up.positive_integer("domain_devices");
    } else {
      forbid(up, "domain_devices",
             "an \"nvswitch\" domain is one node; use \"nvlink_domain\" for "
             "multi-node NVLink domains");
    }
  }
  read_scale_up_links(up, spec, sink);
  up.finish();
}

FatTreeSpec read_fat_tree(JsonObject& out, const Chip& chip, SourceSink& sink) {
  FatTreeSpec ft;
  ft.transport = out.choice<Transport>("transport");
  ft.rail_optimized = out.boolean("rail_optimized");
  ft.nics_per_device = detail::sourced_count(out, "nics_per_device", sink);
  if (ft.nics_per_device > kMaxNicsPerDevice) {
    out.fail("nics_per_device",
             fmt::format("{} is above the limit of {} NICs per device (real systems have one or "
                         "two)",
                         ft.nics_per_device, kMaxNicsPerDevice));
  }
  ft.nic_bandwidth = out.has("nic_bandwidth")
                         ? detail::sourced_bandwidth(out, "nic_bandwidth", sink)
                         : *chip.nic_bandwidth;
  ft.tiers = detail::sourced_count(out, "tiers", sink);
  if (ft.tiers > kMaxNetworkTiers) {
    out.fail("tiers", fmt::format("expected 1 to {} switch tiers (the network model builds leaf, "
                                  "spine and core), got {}",
                                  kMaxNetworkTiers, ft.tiers));
  }
  ft.switch_radix = detail::sourced_count(out, "switch_radix", sink);
  if (ft.switch_radix < 2 || ft.switch_radix % 2 != 0) {
    out.fail("switch_radix",
             fmt::format("expected an even port count >= 2, got {}", ft.switch_radix));
  }
  ft.oversubscription = detail::sourced_positive_number(out, "oversubscription", sink);
  if (out.has("sharp")) {
    ft.sharp = out.boolean("sharp");
  }
  if (ft.oversubscription < 1.0 || ft.oversubscription > static_cast<double>(ft.switch_radix - 1)) {
    out.fail("oversubscription",
             fmt::format("expected a down:up ratio from 1 (non-blocking) to {} (a radix-{} leaf "
                         "keeps at least one uplink), got {}",
                         ft.switch_radix - 1, ft.switch_radix, ft.oversubscription));
  }
  return ft;
}

void read_scale_out(JsonObject& root, ClusterSpec& spec, SourceSink& sink) {
  JsonObject out = root.object("scale_out");
  spec.scale_out = read_fabric<ScaleOutFabric>(out, spec.chip);
  if (spec.scale_out == ScaleOutFabric::kFatTree) {
    spec.fat_tree = read_fat_tree(out, spec.chip, sink);
  } else {
    spec.dcn_bandwidth = out.has("bandwidth") ? detail::sourced_bandwidth(out, "bandwidth", sink)
                                              : *spec.chip.dcn_bandwidth;
  }
  spec.scale_out_latency = detail::sourced_duration(out, "latency", sink, /*allow_zero=*/false);
  if (out.has("efficiency")) {  // replaces the chip catalogue's NIC (or DCN) efficiency
    const double e = detail::sourced_fraction(out, "efficiency", sink);
    (spec.scale_out == ScaleOutFabric::kFatTree ? spec.chip.nic_efficiency
                                                : spec.chip.dcn_efficiency) = e;
  }
  out.finish();
}

void read_collectives(JsonObject& root, ClusterSpec& spec, SourceSink& sink) {
  if (!root.has("collectives")) {
    return;
  }
  JsonObject c = root.object("collectives");
  CollectivePlatform& p = spec.collectives;
  if (c.has("host_cpu")) {
    const std::string cpu =
        detail::sourced_choice(c, "host_cpu", enum_choices<HostCpu>(), sink);
    p.host_cpu = *parse_enum<HostCpu>(cpu);
  }
  if (c.has("launch_floor")) {
    p.launch_floor = detail::sourced_duration(c, "launch_floor", sink, /*allow_zero=*/true);
  }
  if (c.has("simple_step_overhead")) {
    p.simple_step_overhead =
        detail::sourced_duration(c, "simple_step_overhead", sink, /*allow_zero=*/true);
  }
  if (c.has("ll128_efficiency")) {
    p.ll128_efficiency = detail::sourced_fraction(c, "ll128_efficiency", sink);
  }
  c.finish();
}

ClusterSpec parse_named(const nlohmann::json& document, const std::string& source,
                        const std::string& name, const Catalogue& catalogue) {
  JsonObject root(document, source);
  ClusterSpec spec;
  spec.name = name;
  spec.source = source;
  SourceSink sink{&spec.sources, ""};
  spec.description = root.string("description");
  const std::string chip = root.string("chip");
  if (!catalogue.contains(chip)) {
    root.fail("chip", fmt::format("unknown chip \"{}\" (known chips: {})", chip,
                                  fmt::join(catalogue.names(), ", ")));
  }
  spec.chip = catalogue.chip(chip);
  spec.nodes = root.positive_integer("nodes");
  spec.devices_per_node = root.positive_integer("devices_per_node");
  detail::check_device_count(spec);
  read_scale_up(root, spec, sink);
  if (root.has("slices")) {
    if (spec.scale_up != ScaleUpFabric::kIciTorus) {
      root.fail("slices", "only TPU (ici_torus) clusters have slices");
    }
    spec.slices = root.positive_integer("slices");
  }
  read_scale_out(root, spec, sink);
  read_collectives(root, spec, sink);
  if (root.has("graph")) {
    detail::read_graph(root, spec);
  }
  root.finish();
  detail::finalize_cluster(spec);
  return spec;
}

bool is_path(const std::string& name_or_path) {
  const std::string suffix = ".json";
  const bool json_suffix =
      name_or_path.size() >= suffix.size() &&
      name_or_path.compare(name_or_path.size() - suffix.size(), suffix.size(), suffix) == 0;
  return json_suffix || name_or_path.find('/') != std::string::npos;
}

std::string unknown_preset(const std::string& name) {
  return fmt::format("unknown cluster preset \"{}\" (known presets: {}; a file path must contain "
                     "'/' or end in \".json\")",
                     name, fmt::join(cluster_presets(), ", "));
}

// The preset's document, or nullopt when there is no such preset.
std::optional<nlohmann::json> preset_document(const std::string& name) {
  for (const auto& [stem, contents] : detail::embedded_cluster_presets()) {
    if (stem != name) {
      continue;
    }
    try {
      return nlohmann::json::parse(contents);
    } catch (const nlohmann::json::parse_error& e) {
      throw InputError(fmt::format("{}{}.json", kPresetPrefix, stem), fmt::format("byte {}", e.byte),
                       "not valid JSON");
    }
  }
  return std::nullopt;
}

// Writes `patch` over `target` (a fragment over its base): objects merge key by key, except a
// sourced figure ({"value": ..., "source": ...}), which replaces the base's whole so that a value
// never keeps the base's source; anything else replaces. `pointer` locates `patch` in the fragment.
void overlay(nlohmann::json& target, const nlohmann::json& patch, const std::string& source,
             const std::string& pointer) {
  for (const auto& [key, value] : patch.items()) {
    const std::string here = pointer + "/" + key;
    if (value.is_null()) {
      throw InputError(source, here,
                       "null: a fragment sets values over its base and cannot remove them");
    }
    nlohmann::json& slot = target[key];
    if (value.is_object() && slot.is_object() && !value.contains("value")) {
      overlay(slot, value, source, here);
    } else {
      slot = value;
    }
  }
}

// A cluster fragment: {"base": PRESET or PATH, ...keys of a cluster file...}, the keys written
// over the base's (overlay). A relative PATH is relative to the fragment's directory. The base must
// be a whole cluster, not a fragment itself. Other documents are returned as they are.
nlohmann::json resolve_fragment(const nlohmann::json& document, const std::string& source) {
  if (!document.is_object() || !document.contains("base")) {
    return document;
  }
  const nlohmann::json& base_value = document.at("base");
  if (!base_value.is_string() || base_value.get<std::string>().empty()) {
    throw InputError(source, "/base",
                     fmt::format("{}: expected the name of a cluster preset or the path of a "
                                 "cluster file that this fragment overlays",
                                 describe_json(base_value)));
  }
  const std::string base = base_value.get<std::string>();
  nlohmann::json merged;
  if (is_path(base)) {
    std::filesystem::path p(base);
    if (p.is_relative() && !source.starts_with("--")) {
      p = std::filesystem::path(source).parent_path() / p;
    }
    try {
      merged = load_json_file(p.string());
    } catch (const InputError& e) {
      throw InputError(source, "/base", fmt::format("\"{}\": {}", base, e.what()));
    }
  } else {
    std::optional<nlohmann::json> preset = preset_document(base);
    if (!preset) {
      throw InputError(source, "/base", unknown_preset(base));
    }
    merged = std::move(*preset);
  }
  if (!merged.is_object() || merged.contains("base")) {
    throw InputError(source, "/base",
                     fmt::format("\"{}\" is not a whole cluster file (expected a preset or a "
                                 "cluster file without a \"base\" of its own)",
                                 base));
  }
  nlohmann::json patch = document;
  patch.erase("base");
  overlay(merged, patch, source, "");
  return merged;
}

}  // namespace

ClusterSpec parse_cluster(const nlohmann::json& document, const std::string& source,
                          const Catalogue& catalogue) {
  return parse_named(resolve_fragment(document, source), source,
                     std::filesystem::path(source).stem().string(), catalogue);
}

std::vector<std::string> cluster_presets() {
  std::vector<std::string> out;
  for (const auto& [stem, contents] : detail::embedded_cluster_presets()) {
    out.emplace_back(stem);
  }
  std::sort(out.begin(), out.end());
  return out;
}

ClusterSpec load_cluster(const std::string& name_or_path, const Catalogue& catalogue) {
  if (is_path(name_or_path)) {
    const std::string stem = std::filesystem::path(name_or_path).stem().string();
    return parse_named(resolve_fragment(load_json_file(name_or_path), name_or_path), name_or_path,
                       stem, catalogue);
  }
  if (std::optional<nlohmann::json> document = preset_document(name_or_path)) {
    return parse_named(*document, fmt::format("{}{}.json", kPresetPrefix, name_or_path),
                       name_or_path, catalogue);
  }
  throw InputError(name_or_path, "", unknown_preset(name_or_path));
}

}  // namespace meshsim::topology
