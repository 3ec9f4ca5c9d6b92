#include "scenario_flags.h"

#include <CLI/CLI.hpp>
#include <fmt/format.h>

namespace meshsim::cli {

namespace {

// A named enum's value given to `flag`; InputError listing the choices otherwise.
template <NamedEnum E>
E parse_flag(const std::string& flag, const std::string& name) {
  const std::optional<E> value = parse_enum<E>(name);
  if (!value) {
    throw InputError(flag, "",
                     fmt::format("\"{}\" is not one of {}", name, describe_choices<E>()));
  }
  return *value;
}

}  // namespace

// The fat tree's knobs (scenario.h FabricKnobs), bound to `k`; `on_set` runs for each one given.
void add_fabric_options(CLI::App* app, scenario::FabricKnobs& k,
                        const std::function<void(CLI::Option*, topology::FabricField)>& on_set) {
  using F = topology::FabricField;
  on_set(app->add_option(flag_of(F::kOversubscription), k.oversubscription,
                         "Leaf down:up port ratio of the fat tree (1 = non-blocking)"),
         F::kOversubscription);
  on_set(app->add_option(flag_of(F::kTiers), k.tiers, "Switch tiers of the fat tree (1 to 4)"),
         F::kTiers);
  on_set(app->add_option(flag_of(F::kRailOptimized), k.rail_optimized,
                         "NIC k of every node on leaf (rail) k: true or false"),
         F::kRailOptimized);
  on_set(app->add_option(flag_of(F::kNicsPerDevice), k.nics_per_device, "NICs per GPU (1 to 16)"),
         F::kNicsPerDevice);
  on_set(app->add_option(flag_of(F::kNicBandwidth), k.nic_bandwidth,
                         "Bandwidth of one NIC, one direction, e.g. 400Gbps"),
         F::kNicBandwidth);
  on_set(app->add_option(flag_of(F::kSharp), k.sharp,
                         "In-network reduction (SHARP): true or false"),
         F::kSharp);
}

void resize_to_devices(Scenario& s, int64_t devices) {
  if (s.origins[scenario::ScenarioField::kNodes].given()) {
    throw InputError("--gpus", "", "give --nodes or --gpus, not both");
  }
  // What the count may be (whole nodes or part of one, a GPU cluster) is
  // topology::resize_devices', checked where the cluster is loaded and reported on --gpus.
  s.nodes.reset();  // the default scenario's 256 nodes, or a scenario file's
  s.gpus = devices;
  s.origins.set(scenario::ScenarioField::kGpus, Origin::flag("--gpus"));
}

CLI::Validator positive_number() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        double value = 0;
        if (CLI::detail::lexical_cast(text, value) && value > 0) {
          return {};
        }
        return fmt::format("expected a positive number, got {}", text);
      },
      "POSITIVE");
}

CLI::Option* add_bool_flag(CLI::App* app, const std::string& name, bool& value,
                           const std::string& help) {
  return app->add_flag(name, value, help);
}

collectives::Algorithm parse_algo_flag(const std::string& name) {
  return parse_flag<collectives::Algorithm>("--algo", name);
}

collectives::NetworkBackend parse_backend_flag(const std::string& name) {
  return parse_flag<collectives::NetworkBackend>("--backend", name);
}

scenario::CommOptions comm_options(const CommFlags& flags) {
  scenario::CommOptions o;
  o.backend = parse_backend_flag(flags.backend);
  o.collective.algorithm = parse_algo_flag(flags.algorithm);
  if (flags.protocol != "auto") {
    o.collective.protocol = parse_flag<collectives::NcclProtocol>("--proto", flags.protocol);
  }
  const auto version = collectives::parse_nccl_version(flags.nccl);
  if (!version) {
    throw InputError("--nccl", "",
                     fmt::format("\"{}\" is not an NCCL release from 2.18 on (e.g. 2.30 or "
                                 "2.18.5)",
                                 flags.nccl));
  }
  o.collective.nccl_version = *version;
  return o;
}

}  // namespace meshsim::cli
