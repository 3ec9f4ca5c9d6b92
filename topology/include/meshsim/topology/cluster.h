// Cluster descriptions: which chips, how many, and the two network levels that join them.
//
// Vocabulary (the JSON uses the same words):
//  * node: one host (a DGX box, a GB200 compute tray, a TPU VM host); `devices_per_node` chips.
//  * scale-up fabric: the fast domain every device of a group reaches without a NIC:
//      - "nvswitch":      one NVSwitch domain per node (DGX/HGX, 8 GPUs);
//      - "nvlink_domain": an NVLink domain spanning several nodes (GB200 NVL72: 18 trays x 4 = 72);
//      - "ici_torus":     a TPU slice, a 2D/3D torus of ICI links spanning its hosts.
//  * scale-out fabric: what joins scale-up domains:
//      - "fat_tree": InfiniBand or RoCE, a NIC per GPU, rail-optimized leaf/spine, with tiers,
//                    switch radix and leaf oversubscription;
//      - "dcn":      the data-center network share of each TPU chip (multi-slice).
//  * latency: the per-step alpha of an alpha-beta collective step on that fabric (what one ring
//    step of a collective pays besides bytes / bandwidth), each with its source in the file.
//
// All bandwidths are per direction. Accessors are O(1) except where noted. A ClusterSpec is a
// value: it holds a copy of its Chip, so it stays valid after the Catalogue is gone.
//
// topology/network.h builds the network graph (devices, switches, NICs, links, routes) from a
// ClusterSpec: generated from the fabrics above, or read as given from the file's explicit "graph"
// section (GraphSpec below).
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <vector>

#include "meshsim/sim/provenance.h"
#include "meshsim/sim/units.h"
#include "meshsim/topology/chip.h"

namespace meshsim::topology {

enum class ScaleUpFabric { kNvSwitch, kNvlinkDomain, kIciTorus };
enum class ScaleOutFabric { kFatTree, kDcn };
enum class Transport { kInfiniBand, kRoce };

constexpr auto enum_names(ScaleUpFabric) {
  return std::to_array<EnumName<ScaleUpFabric>>({{ScaleUpFabric::kNvSwitch, "nvswitch"},
                                                 {ScaleUpFabric::kNvlinkDomain, "nvlink_domain"},
                                                 {ScaleUpFabric::kIciTorus, "ici_torus"}});
}
constexpr auto enum_names(ScaleOutFabric) {
  return std::to_array<EnumName<ScaleOutFabric>>(
      {{ScaleOutFabric::kFatTree, "fat_tree"}, {ScaleOutFabric::kDcn, "dcn"}});
}
constexpr auto enum_names(Transport) {
  return std::to_array<EnumName<Transport>>(
      {{Transport::kInfiniBand, "infiniband"}, {Transport::kRoce, "roce"}});
}

struct FatTreeSpec {
  Transport transport = Transport::kInfiniBand;
  bool rail_optimized = true;  // NIC k of every node goes to leaf (rail) k
  int64_t nics_per_device = 1;
  BytesPerSec nic_bandwidth;      // one NIC, one direction
  int64_t tiers = 2;              // 1 = one switch, 2 = leaf/spine, 3 = leaf/spine/core
  int64_t switch_radix = 64;      // ports per switch
  double oversubscription = 1.0;  // leaf down:up port ratio, >= 1 (1 = non-blocking)
  // In-network reduction (NVIDIA SHARP on Quantum switches): what NCCL's CollNet algorithms and
  // multi-node NVLS need. Optional key "sharp", default false.
  bool sharp = false;

  // Most NIC ports this fat tree can attach: a single switch holds `radix`; with t >= 2 tiers,
  // leaves give d = floor(radix * s / (s + 1)) ports down, every middle tier halves its ports,
  // and the top tier uses all of them: d * (radix / 2)^(t - 2) * radix. (s = 1: radix^2 / 2 for
  // two tiers, radix^3 / 4 for three.)
  int64_t max_endpoints() const;
};

// An explicit network graph: the optional top-level "graph" section of a cluster file, for
// topologies the built-in fabrics do not describe (a fully connected GPU mesh, a dragonfly, a
// hand-wired lab). When present, Network::build wires exactly this graph instead of the
// scale_up / scale_out fabrics (which still give the figures analytic models use).
//
//   "graph": {
//     "switches": [{"name": "sw0", "kind": "leaf"}, ...],
//     "links": [{"a": "gpu0", "b": "sw0", "bandwidth": "400GB/s", "latency": "1us",
//                "kind": "network"}, ...]
//   }
//
// Devices are named "gpu<i>" (GPU chips) or "tpu<i>" (TPU chips), i in [0, devices), numbered
// node by node. Switch kinds: nvswitch, nic, leaf, spine, core, dcn. Each link is one cable, two
// directed links of `bandwidth` each; link kinds: nvlink, ici, pcie, network (the default), dcn.
// The loader rejects unknown keys, unknown or duplicate names, self-links, duplicate cables
// between the same two vertices, non-positive bandwidths and negative latencies; Network::build
// rejects a disconnected graph. Errors name the JSON pointer (e.g. /graph/links/3/b).
struct GraphSwitchSpec {
  std::string name;
  std::string kind;  // one of the switch kinds above
};

struct GraphLinkSpec {
  std::string a;
  std::string b;
  std::string kind = "network";  // one of the link kinds above
  BytesPerSec bandwidth;         // per direction, > 0
  Duration latency;              // >= 0
};

struct GraphSpec {
  std::vector<GraphSwitchSpec> switches;
  std::vector<GraphLinkSpec> links;
};

// How collectives behave on this platform beyond what the chip and the wires say: the optional
// "collectives" section of a cluster file. Each figure is measured on the platform (its source
// says where); absent figures take the neutral value given here.
//   host_cpu              "intel" | "amd" | "arm": the host CPU vendor, which NCCL's tuner reads
//                         (the multi-node low-latency bandwidth row and the network overhead of
//                         src/graph/tuning.cc, NCCL 2.30.7). Default "intel", NCCL's own default.
//   launch_floor          the least time any collective takes on the platform (launch and
//                         completion on the host, overlapping the GPU's work): a collective
//                         lasts max(floor, its modelled time). Default 0.
//   simple_step_overhead  time per ring step of the Simple protocol inside one NVLink domain
//                         (a tree's per hop of its chain in each domain) beyond NCCL's own
//                         per-step latency (measured ring Simple curves put it above the
//                         tuner's); a ring across domains pays NCCL's network step latency
//                         alone. Default 0.
//   ll128_efficiency      the fraction of NCCL's LL128 bandwidth the platform achieves, (0, 1].
//                         Default 1.
enum class HostCpu : uint8_t { kIntel, kAmd, kArm };
constexpr auto enum_names(HostCpu) {
  return std::to_array<EnumName<HostCpu>>(
      {{HostCpu::kIntel, "intel"}, {HostCpu::kAmd, "amd"}, {HostCpu::kArm, "arm"}});
}

struct CollectivePlatform {
  HostCpu host_cpu = HostCpu::kIntel;
  Duration launch_floor;
  Duration simple_step_overhead;
  double ll128_efficiency = 1.0;
};

// Bounds on a cluster's size, checked by the loader and the resize functions (each error states
// its bound). 131,072 devices (16,384 DGX nodes; Llama 3 405B trained on 16,384 H100s; issue
// 16's target is 100K GPUs) is the largest cluster meshsim simulates within about a minute of CPU:
// the 405B layout on 98,304 GPUs simulated in full takes 41 s of CPU and 1.65 GiB
// (docs/performance.md). An explicit graph holds at most kMaxGraphLinks cables and kMaxDevices switches.
inline constexpr int64_t kMaxDevices = int64_t{1} << 17;
inline constexpr int64_t kMaxGraphLinks = int64_t{1} << 20;
// NICs per device: DGX H100/B200 and GB200 NVL72 have one per GPU, some designs two. The network
// joins every NIC of a device to every NIC of another (nics^2 pairs), so the bound keeps that at
// 256 and the NICs of a cluster at 2^19.
inline constexpr int64_t kMaxNicsPerDevice = 16;
// Switch tiers the network model builds (network.h: leaf, spine, core); a 3-tier tree of radix-64
// switches attaches 65,536 NICs, twice kMaxDevices.
inline constexpr int64_t kMaxNetworkTiers = 3;

struct ClusterSpec {
  std::string name;    // preset name, or the file's stem
  std::string source;  // the file it came from ("builtin:topology/clusters/x.json" or a path)
  std::string description;
  Chip chip;
  int64_t nodes = 0;
  int64_t devices_per_node = 0;

  ScaleUpFabric scale_up = ScaleUpFabric::kNvSwitch;
  int64_t nvlink_domain_devices = 0;    // kNvlinkDomain only: devices per NVLink domain
  std::vector<int64_t> torus_shape;     // kIciTorus only: chips per axis of one slice
  std::vector<bool> torus_wraparound;   // kIciTorus only: per axis (see cluster.cc for the rule)
  int64_t slices = 1;                   // kIciTorus only: identical slices joined by DCN
  int64_t scale_up_links = 0;           // per device (NVLink links or ICI ports)
  BytesPerSec scale_up_link_bandwidth;  // one link, one direction
  Duration scale_up_latency;

  ScaleOutFabric scale_out = ScaleOutFabric::kFatTree;
  std::optional<FatTreeSpec> fat_tree;  // kFatTree only
  BytesPerSec dcn_bandwidth;            // kDcn only: per chip
  Duration scale_out_latency;

  CollectivePlatform collectives;

  // JSON pointer inside the cluster file -> source, for every sourced figure the file gave.
  std::map<std::string, std::string> sources;

  // An explicit graph replacing the built-in fabrics in Network::build (see GraphSpec).
  std::optional<GraphSpec> graph;

  int64_t device_count() const { return nodes * devices_per_node; }
  // Devices in one scale-up domain: devices_per_node (NVSwitch), nvlink_domain_devices, or the
  // chips of one torus slice.
  int64_t scale_up_domain_size() const;
  int64_t scale_up_domains() const { return device_count() / scale_up_domain_size(); }

  // Everything one device can push into the scale-up fabric: links x link bandwidth
  // (H100 NVSwitch: 18 x 25 GB/s = 450 GB/s; TPU v5p: 6 x 100 GB/s).
  BytesPerSec scale_up_bandwidth() const;
  // Per-direction bandwidth from one device to one other device of its scale-up domain over a
  // single path: through a (non-blocking) NVSwitch the device's whole NVLink bandwidth; on an ICI
  // torus one link, to a neighbour.
  BytesPerSec intra_node_bandwidth() const;
  Duration intra_node_latency() const { return scale_up_latency; }
  // Per-direction bandwidth of one device into the scale-out fabric: NICs per GPU x NIC
  // bandwidth (DGX H100: 1 x 400 Gb/s = 50 GB/s), or the chip's DCN share.
  BytesPerSec inter_node_bandwidth() const;
  Duration inter_node_latency() const { return scale_out_latency; }
};

// Loads a cluster. `name_or_path` without '/' and not ending in ".json" is a preset compiled in
// from topology/clusters/ (dgx-h100, dgx-a100, dgx-b200, h200, gb200-nvl72, tpu-v3, tpu-v4,
// tpu-v5e, tpu-v5p, tpu-v6e); anything else is a file path. The chip is looked up in `catalogue`.
// Every error is an InputError naming the file, the JSON pointer and what was expected.
//
// Platform figures a file may add to the chip catalogue's (each sourced):
//   scale_up.efficiency       the fraction of the NVLink (ICI) line rate collectives achieve,
//                             replacing the chip's nvlink.efficiency (ici.efficiency);
//   scale_up.nvls_efficiency  the same for NVLS traffic (chips with NVLS only);
//   scale_out.efficiency      the same for the NICs (DCN), replacing nic_efficiency
//                             (dcn_efficiency).
// A fragment is a file with a "base": the name of a preset or the path of a cluster file (relative
// to the fragment's directory) whose document the fragment's keys are written over: objects merge
// key by key, a sourced figure ({"value", "source"}) and anything else replace the base's whole,
// null is refused. The base must be a whole cluster (no "base" of its own). The merged document is
// then read as any cluster file, its errors naming the fragment; the cluster is named after the
// fragment's file. `meshsim calibrate-collectives` writes fragments.
ClusterSpec load_cluster(const std::string& name_or_path, const Catalogue& catalogue);

// The same from a parsed cluster document (a fragment's base relative to `source`'s directory);
// `source` names it in errors and its file stem names the cluster.
ClusterSpec parse_cluster(const nlohmann::json& document, const std::string& source,
                          const Catalogue& catalogue);

// The preset names, sorted.
std::vector<std::string> cluster_presets();

// Fabric knobs a user may set without editing the cluster file (flags, scenario keys).
struct FabricOverrides {
  std::optional<double> oversubscription;  // 1 to switch radix - 1 (a leaf keeps an uplink)
  std::optional<int64_t> tiers;            // 1 to kMaxNetworkTiers
  std::optional<bool> rail_optimized;
  std::optional<int64_t> nics_per_device;  // 1 to kMaxNicsPerDevice
  std::optional<BytesPerSec> nic_bandwidth;  // > 0
  std::optional<bool> sharp;
  bool empty() const {
    return !oversubscription && !tiers && !rail_optimized && !nics_per_device && !nic_bandwidth &&
           !sharp;
  }
};
enum class FabricField : uint8_t {
  kOversubscription,
  kTiers,
  kRailOptimized,
  kNicsPerDevice,
  kNicBandwidth,
  kSharp
};
constexpr auto enum_names(FabricField) {
  return std::to_array<EnumName<FabricField>>({{FabricField::kOversubscription, "oversubscription"},
                                               {FabricField::kTiers, "tiers"},
                                               {FabricField::kRailOptimized, "rail_optimized"},
                                               {FabricField::kNicsPerDevice, "nics_per_device"},
                                               {FabricField::kNicBandwidth, "nic_bandwidth"},
                                               {FabricField::kSharp, "sharp"}});
}
using FabricError = FieldError<FabricField>;

// The same cluster with `nodes` hosts. GPU clusters only (a TPU slice is resized by its torus).
// Checks: nodes > 0; an NVLink domain stays whole; no explicit graph (its devices are wired by
// name). A fat tree too small for the new NIC count gets switch tiers added (up to
// kMaxNetworkTiers) until it attaches them all, as a larger cluster of the same switches would be
// built; the description says so. Past that, an InputError on /nodes.
// `fabric`: the fat-tree knobs the caller will set with override_fabric (which then says what
// changed), set here first, so that the resized tree is grown and checked with them (an
// oversubscribed tree attaches more NICs); tiers given there are not grown, and too few of them is
// a FabricError on kTiers. FabricError as there.
ClusterSpec resize_nodes(ClusterSpec spec, int64_t nodes, const FabricOverrides& fabric = {});

// The same GPU cluster with `devices` GPUs: whole nodes (resize_nodes) when devices_per_node
// divides it, or part of one node when it divides devices_per_node (2 or 4 GPUs of an 8-GPU
// node): one node of `devices` GPUs, each keeping its own NVLink links and bandwidth through the
// node's switch, and its own NICs. The description says which. Refused (as resize_nodes, on
// /nodes) for a TPU cluster, a count that is neither, or a cluster with an explicit graph.
ClusterSpec resize_devices(ClusterSpec spec, int64_t devices, const FabricOverrides& fabric = {});

// The same cluster with its fat tree changed by `o`; the description says what changed. Throws
// FabricError on the offending field (a value out of range, a GPU cluster without a fat tree, or
// too few tiers for its NICs); the edge says where the value came from.
ClusterSpec override_fabric(ClusterSpec spec, const FabricOverrides& o);

// The same TPU cluster with a slice of torus `shape`. Checks: a TPU cluster; one positive extent
// per torus dimension of the chip, on a 2D torus at most the chip's pod edge (ici.pod_edge: 16
// on v5e/v6e, 32 on v3); the chips divide into hosts; no explicit graph. Recomputes nodes (a
// slice smaller than one host keeps one partial host) and the wraparound of each axis.
ClusterSpec resize_torus(ClusterSpec spec, std::vector<int64_t> shape);

// The same TPU cluster as `slices` identical slices of its torus joined by DCN (MaxText
// multi-slice; the DCN per chip is the cluster's dcn_bandwidth). Checks: a TPU cluster; slices > 0;
// no explicit graph. Recomputes nodes; the description says so.
ClusterSpec join_slices(ClusterSpec spec, int64_t slices);

}  // namespace meshsim::topology
