// Failure rates of a training cluster, per component, from an observed interruption table.
//
// A table (studies/data/failures-llama3.json, compiled in; a file of the same schema overrides it)
// records what was observed: interruptions by root cause over a window of `days` on a cluster of
// `gpus` devices, `nodes` hosts and `switches` network switches. Each category names the
// component population it scales with:
//   gpu     per device (a faulty GPU, HBM, SRAM, the GPU system processor, ...)
//   node    per host (host maintenance, NIC, SSD, power supply, CPU, system memory, ...)
//   switch  per network switch (switches and their cables)
//   job     per job, whatever its size (software bugs, dependencies)
// The rate of a category on a simulated cluster is count / days x (units in the cluster / units
// observed): failures are a Poisson process per component (constant hazard, independent), so the
// cluster's interruptions are one Poisson process whose rate is the sum. Planned interruptions
// (maintenance, upgrades) are flagged `planned`: the job checkpoints before it stops, so they
// cost the checkpoint write and a restart but lose no work.
//
// Schema (strict; unknown keys are errors):
//   { "notes": "...", "source": "citation",
//     "observed": {"days": 54, "gpus": 16384, "nodes": 2048, "switches": 3072, "source": "..."},
//     "categories": [{"name": "faulty-gpu", "component": "gpu", "count": 148,
//                     "planned": false (optional), "source": "..."}, ...] }
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "meshsim/sim/enum_names.h"
#include "meshsim/topology/cluster.h"

namespace meshsim::studies {

enum class FailureUnit : uint8_t { kGpu, kNode, kSwitch, kJob };
constexpr auto enum_names(FailureUnit) {
  using U = FailureUnit;
  return std::to_array<EnumName<U>>(
      {{U::kGpu, "gpu"}, {U::kNode, "node"}, {U::kSwitch, "switch"}, {U::kJob, "job"}});
}

struct FailureCategory {
  std::string name;
  FailureUnit unit = FailureUnit::kGpu;
  double count = 0;  // interruptions over the observed window
  bool planned = false;
  std::string source;
};

// Component populations: of the observed cluster, or of the simulated one.
struct ComponentCounts {
  int64_t gpus = 0;
  int64_t nodes = 0;
  int64_t switches = 0;
  int64_t of(FailureUnit u) const;
};

// The populations of a cluster: its devices, hosts, and network switches (leaf, spine, core and
// DCN switches of its network graph; a node's NVSwitch is part of the GPUs' categories). Builds
// the network (InputError from topology::Network::build).
ComponentCounts count_components(const topology::ClusterSpec& cluster);

struct FailureTable {
  std::string source;    // "builtin:studies/data/failures-llama3.json" or the file
  std::string citation;  // where the counts come from
  double observed_days = 0;
  ComponentCounts observed;
  std::string observed_source;
  std::vector<FailureCategory> categories;

  static FailureTable builtin();
  // A file of the builtin's schema (InputError naming the file and the JSON pointer).
  static FailureTable load(const std::string& path);
  static FailureTable parse(const nlohmann::json& doc, const std::string& source);
};

// Interruptions per day of each category of `table` on a cluster of `cluster` components (in the
// table's order).
struct FailureRates {
  std::vector<double> per_day;
  double unexpected_per_day = 0;
  double planned_per_day = 0;
  // Mean time between unexpected interruptions, in seconds (infinite without any).
  double mtbf_s() const;
};
FailureRates failure_rates(const FailureTable& table, const ComponentCounts& cluster);

}  // namespace meshsim::studies
