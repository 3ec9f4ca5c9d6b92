// Private: invariants of a ClusterSpec, shared by the loader and the resize functions.
#pragma once

#include <string>

#include "meshsim/topology/cluster.h"

namespace meshsim::topology::detail {

// Checks the counts, the scale-up domain and the fat-tree capacity, and derives the torus
// wraparound. Throws InputError(spec.source, <JSON pointer of the offending field>, message).
void finalize_cluster(ClusterSpec& spec);

// nodes, devices_per_node and their product within (0, kMaxDevices]; the first check of
// finalize_cluster, also run as soon as the loader has read the two (before anything uses their
// product).
void check_device_count(const ClusterSpec& spec);

// Throws InputError(spec.source, pointer, msg): a field of the cluster description is wrong.
[[noreturn]] void fail_spec(const ClusterSpec& spec, const std::string& pointer,
                            const std::string& msg);

}  // namespace meshsim::topology::detail
