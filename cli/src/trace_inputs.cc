#include "trace_inputs.h"

#include <fmt/format.h>

#include <filesystem>
#include <fstream>

#include "meshsim/collectives/comm_model.h"
#include "meshsim/sim/error.h"
#include "meshsim/validation/trace_replay.h"
#include "trace_limits.h"

namespace meshsim::cli {

namespace {

// The reference system of a catalogue chip (trace_inputs.h).
std::optional<std::string> preset_of(const std::string& chip) {
  if (chip == "a100-40gb" || chip == "a100-80gb") {
    return "dgx-a100";
  }
  if (chip == "h100-sxm") {
    return "dgx-h100";
  }
  if (chip == "h200") {
    return "h200";
  }
  if (chip == "b200") {
    return "dgx-b200";
  }
  if (chip == "gb200") {
    return "gb200-nvl72";
  }
  return std::nullopt;
}

}  // namespace

bool looks_like_traces(const std::vector<std::string>& inputs) {
  for (const std::string& p : inputs) {
    std::error_code ec;
    if (std::filesystem::is_directory(p, ec)) {
      return true;
    }
    std::ifstream in(p, std::ios::binary);
    std::string head(4096, '\0');
    in.read(head.data(), static_cast<std::streamsize>(head.size()));
    head.resize(static_cast<size_t>(in.gcount()));
    if (head.size() >= 2 && static_cast<unsigned char>(head[0]) == 0x1f &&
        static_cast<unsigned char>(head[1]) == 0x8b) {
      return true;
    }
    if (head.find("\"traceEvents\"") != std::string::npos ||
        head.find("\"schemaVersion\"") != std::string::npos ||
        head.find("\"deviceProperties\"") != std::string::npos ||
        head.find("\"distributedInfo\"") != std::string::npos) {
      return true;
    }
  }
  return false;
}

std::unique_ptr<CommModel> TracePlatform::comm() const {
  return std::make_unique<collectives::NetworkCommModel>(
      *network, topology::Placement::in_order(world), collectives::NetworkBackend::kAnalytical);
}

TracePlatform make_platform(const traces::RankTrace& first, int64_t world,
                            const TraceInputArgs& args) {
  TracePlatform p;
  p.world = world;
  const topology::Catalogue catalogue = topology::Catalogue::builtin();
  std::string chip_key;
  if (!args.hardware_profile.empty()) {
    p.profile = validation::load_profile(args.hardware_profile);
    p.chip = p.profile->chip;
    chip_key = p.profile->chip_name;
    p.chip_origin = fmt::format("{} ({})", chip_key, args.hardware_profile);
  } else {
    std::string why;
    const auto key = validation::catalogue_chip(first, why);
    if (!key) {
      throw InputError("--hardware-profile", "",
                       fmt::format("{}: {}; give the chip as a one-chip hardware profile", first.source,
                                   why));
    }
    chip_key = *key;
    p.chip = catalogue.chip(chip_key);
    p.chip_origin = fmt::format("{} (deviceProperties: \"{}\", {:.1f} GB)", chip_key,
                                first.devices.front().name,
                                static_cast<double>(first.devices.front().memory_bytes.value_or(0)) /
                                    1e9);
  }
  if (!args.cluster.empty()) {
    p.cluster = topology::load_cluster(args.cluster, catalogue);
    p.cluster_origin = args.cluster;
  } else {
    const auto preset = preset_of(chip_key);
    if (!preset) {
      throw InputError("--cluster", "",
                       fmt::format("no reference system for chip {}: give the cluster the trace "
                                   "ran on (a preset or a cluster file)",
                                   chip_key));
    }
    p.cluster = topology::load_cluster(*preset, catalogue);
    const int64_t nodes =
        (world + p.cluster.devices_per_node - 1) / p.cluster.devices_per_node;
    if (nodes != p.cluster.nodes) {
      p.cluster = topology::resize_nodes(p.cluster, nodes);
    }
    p.cluster_origin = fmt::format("{} (the reference system of {}, {} node(s))", *preset,
                                   chip_key, nodes);
  }
  p.cluster.chip = p.chip;
  if (p.cluster.device_count() < world) {
    throw InputError("--cluster", "",
                     fmt::format("{} has {} devices; the traces come from a world of {} ranks",
                                 p.cluster.name, p.cluster.device_count(), world));
  }
  p.network = std::make_unique<topology::Network>(topology::Network::build(p.cluster));
  return p;
}

void set_trace_size(traces::KinetoLimits& limits, const std::string& size) {
  const traces::ImportLimits l = trace_limits_from(size);
  limits.max_file_bytes = l.max_file_bytes;
  limits.max_text_bytes = l.max_text_bytes;
}

}  // namespace meshsim::cli
