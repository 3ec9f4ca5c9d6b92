// NCCL's own cost model: the tuner that picks an algorithm and a protocol for every collective.
//
// Source: NVIDIA/nccl 2.30.7 (src/graph/tuning.cc ncclTopoTuneModel and ncclTopoGetAlgoTime,
// src/enqueue.cc topoGetAlgoInfo), restated here in our own code. For every (collective,
// algorithm, protocol) NCCL keeps a latency and an algorithm bandwidth, computed once per
// communicator from the result of its topology search (the "graphs": channels and per-channel
// bandwidths of the ring, tree and NVLS patterns), and prices one operation of n bytes at
//     time = latency + n / bandwidth
// (with a size-dependent correction for trees and a latency adjustment for multi-node ring
// Simple); it runs the (algorithm, protocol) with the smallest time, ties going to the lower index
// in NCCL's order (Tree, Ring, CollNetDirect, CollNetChain, NVLS, NVLSTree, PAT; LL, LL128,
// Simple). There is no size threshold anywhere: every switch point comes out of these formulas.
// Earlier releases used other constants (tuning.cc at their release tags); NcclVersion selects
// them.
//
// This is NCCL's *belief* about time, used to choose what runs, as `--algo auto` should. How long
// the chosen algorithm really takes is collectives/src/nccl_runtime.cc's business.
//
// Sizes follow NCCL: n is the full buffer for all-reduce, broadcast and reduce, and ranks x the
// per-rank count for all-gather and reduce-scatter (nccl-tests' "size" column in every case).
#pragma once

#include <array>
#include <compare>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "meshsim/sim/enum_names.h"
#include "meshsim/sim/program.h"
#include "meshsim/sim/units.h"
#include "meshsim/topology/cluster.h"
#include "meshsim/topology/network.h"

namespace meshsim::collectives {

using meshsim::to_string;

// In NCCL's index order (the tie-break order of the choice).
enum class NcclAlgorithm : uint8_t {
  kTree,
  kRing,
  kCollNetDirect,
  kCollNetChain,
  kNvls,
  kNvlsTree,
  kPat
};
inline constexpr int kNumNcclAlgorithms = 7;
enum class NcclProtocol : uint8_t { kLL, kLL128, kSimple };
inline constexpr int kNumNcclProtocols = 3;
constexpr auto enum_names(NcclAlgorithm) {
  return std::to_array<EnumName<NcclAlgorithm>>({{NcclAlgorithm::kTree, "tree"},
                                                 {NcclAlgorithm::kRing, "ring"},
                                                 {NcclAlgorithm::kCollNetDirect, "collnet-direct"},
                                                 {NcclAlgorithm::kCollNetChain, "collnet-chain"},
                                                 {NcclAlgorithm::kNvls, "nvls"},
                                                 {NcclAlgorithm::kNvlsTree, "nvls-tree"},
                                                 {NcclAlgorithm::kPat, "pat"}});
}
// NCCL_PROTO's spellings too.
constexpr auto enum_names(NcclProtocol) {
  return std::to_array<EnumName<NcclProtocol>>({{NcclProtocol::kLL, "ll"},
                                                {NcclProtocol::kLL128, "ll128"},
                                                {NcclProtocol::kSimple, "simple"},
                                                {NcclProtocol::kLL, "LL"},
                                                {NcclProtocol::kLL128, "LL128"},
                                                {NcclProtocol::kSimple, "Simple"}});
}

// An NCCL release, major.minor (the patch level does not change the tuner).
struct NcclVersion {
  int major = 2;
  int minor = 30;
  auto operator<=>(const NcclVersion&) const = default;
};
// "2.30", "2.18.5"; releases before 2.18 are not modelled.
std::optional<NcclVersion> parse_nccl_version(std::string_view s);
std::string to_string(NcclVersion v);
inline constexpr NcclVersion kDefaultNcclVersion{2, 30};

// NCCL's architecture index, from the lowest compute capability in the communicator.
enum class GpuArch : uint8_t { kVolta, kAmpere, kHopper, kBlackwell };

// One graph of NCCL's topology search: channels, and GB/s per channel inside and across nodes.
struct NcclGraph {
  int channels = 0;
  double bw_intra = 0;  // GB/s per channel
  double bw_inter = 0;  // GB/s per channel
  bool nvlink = true;   // the intra-node path is NVLink (else PCI)
  bool tree_pattern = false;  // all network traffic of a node through one GPU (one GPU per node)
  bool same_channels = true;  // every channel of the ring identical (broadcast/reduce latency)
};

// What NCCL knows about one communicator when it builds its tables.
struct NcclSystem {
  GpuArch arch = GpuArch::kHopper;
  int ranks = 1;
  int nodes = 1;  // NVLink domains (a multi-node NVLink clique counts as one node)
  topology::HostCpu cpu = topology::HostCpu::kIntel;
  NcclGraph ring;
  NcclGraph tree;  // also PAT's
  NcclGraph nvls;  // also NVLSTree's
  int comm_channels = 0;  // execution channels (CTAs) of ring and tree
  int nvls_channels = 0;
  bool has_nvls = false;     // NVLink SHARP (NVSwitch multicast) available
  bool has_collnet = false;  // IB SHARP (CollNet plugin) available
  bool has_ll128 = true;     // LL128 enabled (NVLink inside, GPUDirect-capable NIC across)
  NcclVersion version = kDefaultNcclVersion;

  int ranks_per_node() const { return ranks / nodes; }
};

// NCCL's collective index; nullopt for all-to-all (send/recv, not in the tuner).
enum class NcclCollective : uint8_t { kBroadcast, kReduce, kAllGather, kReduceScatter, kAllReduce };
std::optional<NcclCollective> nccl_collective(CollectiveKind kind);

// A set of algorithms or protocols (bit i = enumerator i): what NCCL_ALGO / NCCL_PROTO allow.
struct NcclAllowed {
  uint8_t algorithms = 0x7f;
  uint8_t protocols = 0x7;
  bool allows(NcclAlgorithm a) const { return (algorithms >> static_cast<int>(a)) & 1; }
  bool allows(NcclProtocol p) const { return (protocols >> static_cast<int>(p)) & 1; }
};

class NcclTuner {
 public:
  explicit NcclTuner(const NcclSystem& system);

  const NcclSystem& system() const { return system_; }

  struct Entry {
    Duration latency;
    BytesPerSec bandwidth;  // algorithm bandwidth: bytes of the operation per second
  };
  // The table entry, or nullopt where NCCL has no such (collective, algorithm, protocol) on this
  // system (bandwidth 0 in NCCL's table).
  std::optional<Entry> entry(NcclCollective coll, NcclAlgorithm a, NcclProtocol p) const;
  // The entry as NCCL prices an operation of `bytes`: the tree's size correction of the
  // bandwidth (treeCorrectionFactor) and the multi-node ring Simple latency factor applied.
  std::optional<Entry> priced(NcclCollective coll, NcclAlgorithm a, NcclProtocol p,
                              Bytes bytes) const;
  // NCCL's estimate for one operation of `bytes`: priced latency + bytes / priced bandwidth;
  // nullopt when the entry does not exist.
  std::optional<Duration> estimate(NcclCollective coll, NcclAlgorithm a, NcclProtocol p,
                                   Bytes bytes) const;

  struct Choice {
    NcclAlgorithm algorithm = NcclAlgorithm::kRing;
    NcclProtocol protocol = NcclProtocol::kSimple;
    Duration estimate;
  };
  // The (algorithm, protocol) NCCL runs for `bytes`, among the allowed ones; nullopt if none of
  // them exists on this system.
  std::optional<Choice> choose(NcclCollective coll, Bytes bytes, NcclAllowed allowed = {}) const;

 private:
  // NCCL units: microseconds and GB/s (1e9 B/s); bandwidth 0 = no entry.
  struct Cell {
    double latency_us = 0;
    double bandwidth_gbps = 0;
  };
  using Table = std::array<std::array<std::array<Cell, kNumNcclProtocols>, kNumNcclAlgorithms>, 5>;
  NcclSystem system_;
  Table table_{};
  std::array<std::array<double, 24>, kNumNcclProtocols> tree_correction_{};
  bool nvls_tree_correction_ = false;

  const Cell& cell(NcclCollective c, NcclAlgorithm a, NcclProtocol p) const;
};

// What NCCL's topology search finds for a communicator over `group` (devices in rank order) on
// the cluster of `net`: NCCL 2.30.7 src/graph/search.cc ncclTopoCompute, condensed into rules
// (see nccl_system.cc for each rule and the systems it was checked on). GPU clusters only
// (SIM_CHECK). O(group size).
NcclSystem nccl_system(const topology::Network& net, std::span<const DeviceId> group,
                       NcclVersion version = kDefaultNcclVersion);

}  // namespace meshsim::collectives
