// Private: the explicit "graph" section of a cluster file (see GraphSpec in cluster.h), shared by
// the cluster loader and Network::build.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "meshsim/sim/json_input.h"
#include "meshsim/topology/cluster.h"

namespace meshsim::topology::detail {

// "gpu" for GPU chips, "tpu" for TPU chips: devices are named prefix + index.
std::string_view graph_device_prefix(const Chip& chip);
std::string graph_device_name(const ClusterSpec& spec, int64_t device);
// The device index a name stands for, if it is prefix + a decimal index below the device count
// (no sign, no leading zeros).
std::optional<int64_t> parse_graph_device(const ClusterSpec& spec, std::string_view name);

// Reads and validates `root`'s "graph" object into spec.graph. Needs spec.chip, nodes and
// devices_per_node already set. Throws InputError naming the JSON pointer of the bad field.
void read_graph(JsonObject& root, ClusterSpec& spec);

}  // namespace meshsim::topology::detail
