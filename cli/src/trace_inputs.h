// Measured multi-GPU profiler traces as `meshsim validate` and `meshsim calibrate` take them: the
// inputs (files or directories of per-rank Kineto traces), the chip they ran on and the cluster
// their collectives are costed on.
//
// The chip: --hardware-profile (a one-chip catalogue, e.g. one `meshsim calibrate` wrote), else
// the catalogue chip of the first trace's deviceProperties (validation::catalogue_chip). The
// cluster: --cluster (a preset or a cluster file; its chip is replaced by the trace's), else the
// preset of the chip's reference system (a100-40gb and a100-80gb: dgx-a100; h100-sxm: dgx-h100;
// h200: h200; b200: dgx-b200; gb200: gb200-nvl72) with as many nodes as the world size needs.
// Global rank r runs on device r.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "meshsim/sim/comm_model.h"
#include "meshsim/topology/chip.h"
#include "meshsim/topology/cluster.h"
#include "meshsim/topology/network.h"
#include "meshsim/traces/kineto.h"
#include "meshsim/validation/profile.h"

namespace meshsim::cli {

struct TraceInputArgs {
  std::vector<std::string> inputs;  // trace files or directories of them
  std::string hardware_profile;      // optional
  std::string cluster;               // optional
  traces::KinetoLimits limits;       // --max-trace-size sets the file and text limits
};

// Whether the positional inputs are profiler traces (a directory, a gzipped file, or JSON that
// starts like a Chrome trace) rather than one validation manifest. Reads at most 4 KiB of each.
bool looks_like_traces(const std::vector<std::string>& inputs);

struct TracePlatform {
  topology::Chip chip;
  std::string chip_origin;  // where the chip came from, for the report
  std::optional<validation::Profile> profile;
  topology::ClusterSpec cluster;
  std::string cluster_origin;
  std::unique_ptr<topology::Network> network;
  int64_t world = 1;

  // A fresh communication model on the cluster (a replay uses one).
  std::unique_ptr<CommModel> comm() const;
};

// The platform for traces whose first rank is `first`, in a world of `world` ranks. InputError on
// --hardware-profile or --cluster (a chip the catalogue lacks, a cluster smaller than the world).
TracePlatform make_platform(const traces::RankTrace& first, int64_t world,
                            const TraceInputArgs& args);

// --max-trace-size for Kineto traces: both the stored and the inflated limits.
void set_trace_size(traces::KinetoLimits& limits, const std::string& size);

}  // namespace meshsim::cli
