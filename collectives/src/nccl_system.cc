// nccl_system: the graphs NCCL's topology search (src/graph/search.cc, NCCL 2.30.7) would build
// for a group, derived by rules instead of a search.
//
// Inputs NCCL sees: the GPU architecture (from the NVLink generation: 2 Volta, 3 Ampere,
// 4 Hopper, 5 Blackwell), each GPU's NVLink bandwidth as NCCL rates it (links x SM*_NVLINK_BW of
// src/graph/topo.h: 20.0 GB/s on Volta and Ampere, 20.6 on Hopper, 40.1 on Blackwell, 40.0
// before 2.27), the NICs the group's GPUs own and what one of them can carry (the catalogue's
// achieved NIC rate: 48 GB/s for NDR, 24 for HDR, which is the cap NCCL's search hits on the PCIe
// path), the nodes (NVLink domains: an NVL72 rack is one node, as NCCL's MNNVL clique) and ranks
// per node. Rules, with the systems they reproduce:
//  * one node, ring: the speed s of the arch's intra-node array maximizing floor(B/s) * s (ties to
//    the faster), floor(B/s) channels (at most 16), B the GPU's NVLink bandwidth; then NCCL's
//    ncclTopoDupChannels: if s >= 25 and not (Hopper+ and s < 50 and channels > 4), twice the
//    channels at half the speed. 8xH100 6x60 -> 12x30, 8xA100 6x40 -> 12x20, 8xB200 8x90 ->
//    16x45, H800 (8 links) 4x40 -> 8x20. The tree graph is the ring graph.
//  * one node, NVLS (Hopper+, an NVSwitch with NVLS): min(32, ranks) channels, intra speed the
//    largest s with (channels + 1) s <= B, inter speed raised through the array while below 2 s:
//    8xH100 8 ch 40/60, 8xB200 8 ch 80/90, NVL72 32 ch 20/40.
//  * several nodes, ring: one channel per NIC of the node's group members at the largest network
//    speed s <= the NIC's rate with channels x s <= B (the rings cross every GPU's NVLink), then
//    the dup rule: DGX H100 8x45, DGX A100 8x24, one H100 per node 1x48 -> 2x24.
//  * several nodes, tree: one channel per NIC at the largest network speed <= the NIC's rate, dup
//    rule; the tree pattern (x0.85) when a node holds one rank. NVLS graph: the one-node channels
//    and intra speed, the tree's speed across.
//  * execution channels (src/graph/connect.cc ncclTopoPostset): 2 x ring channels (at most 64),
//    doubled again on Hopper+ across nodes when the ring speed exceeds 45 and they are fewer than
//    16. NVLS execution channels: 16 on Hopper; on Blackwell 32, from 2.27 on 24 in one NVLink
//    domain.
//  * LL128 on (NVLink inside, GPUDirect NICs across); PAT on; CollNet and multi-node NVLS only
//    where the fat tree has SHARP.
#include <algorithm>
#include <array>
#include <span>
#include <vector>

#include "meshsim/collectives/nccl.h"
#include "meshsim/sim/error.h"
#include "planner_util.h"

namespace meshsim::collectives {
namespace {

// Per-channel speeds NCCL's search tries, GB/s (src/graph/search.cc, 2.30.7).
constexpr std::array<double, 13> kIntraPreHopper = {40, 30, 20, 18, 15, 12, 10, 9, 7, 6, 5, 4, 3};
constexpr std::array<double, 11> kIntraHopper = {60, 50, 40, 30, 24, 20, 15, 12, 11, 6, 3};
constexpr std::array<double, 12> kIntraBlackwell = {90, 80, 70, 60, 50, 45, 40, 30, 24, 20, 19, 18};
constexpr std::array<double, 19> kInterPreHopper = {48, 30, 28, 24, 20, 18,  15,   12,  10, 9,
                                                    7,  6,  5,  4,  3,  2.4, 1.2, 0.24, 0.12};
constexpr std::array<double, 17> kInterHopper = {48, 45, 42, 40, 30, 24,  22,   20,  17.5,
                                                 15, 12, 6,  3,  2.4, 1.2, 0.24, 0.12};
constexpr std::array<double, 17> kInterBlackwell = {96, 86, 80, 48, 45.1, 42,  40,  30,  24,
                                                    22, 20, 17.5, 15, 12, 6, 3, 2.4};
constexpr int kMaxRingChannels = 16;  // before duplication (MAXCHANNELS / 2)

// The speeds of `a`'s generation: Blackwell's, Hopper's, or those of the GPUs before Hopper.
std::vector<double> speeds_of(GpuArch a, std::span<const double> blackwell,
                              std::span<const double> hopper, std::span<const double> pre_hopper) {
  const std::span<const double> s = a == GpuArch::kBlackwell ? blackwell
                                    : a == GpuArch::kHopper  ? hopper
                                                             : pre_hopper;
  return {s.begin(), s.end()};
}

std::vector<double> intra_speeds(GpuArch a) {
  return speeds_of(a, kIntraBlackwell, kIntraHopper, kIntraPreHopper);
}

std::vector<double> inter_speeds(GpuArch a) {
  return speeds_of(a, kInterBlackwell, kInterHopper, kInterPreHopper);
}

GpuArch arch_of(const topology::Chip& chip) {
  SIM_CHECK(chip.nvlink.has_value(), "NCCL system for chip {} without NVLink", chip.name);
  switch (chip.nvlink->generation) {
    case 2:
      return GpuArch::kVolta;
    case 3:
      return GpuArch::kAmpere;
    case 4:
      return GpuArch::kHopper;
    default:
      return chip.nvlink->generation < 2 ? GpuArch::kVolta : GpuArch::kBlackwell;
  }
}

// NCCL's rating of one NVLink (src/graph/topo.h SM70/SM80/SM90/SM100_NVLINK_BW), GB/s.
// SM100_NVLINK_BW was 40.0 up to 2.26 and 40.1 from 2.27.5 (topo.h at v2.25.1-1, v2.26.6-1,
// v2.27.7-1).
double nccl_nvlink_bw(GpuArch a, NcclVersion v) {
  switch (a) {
    case GpuArch::kVolta:
    case GpuArch::kAmpere:
      return 20.0;
    case GpuArch::kHopper:
      return 20.6;
    case GpuArch::kBlackwell:
      return v < NcclVersion{2, 27} ? 40.0 : 40.1;
  }
  return 20.0;
}

// NVLS execution channels (src/transport/nvls.cc ncclNvlsInit): NVLS_NCHANNELS_SM90 16 on
// Hopper; NVLS_NCHANNELS_SM100 32 on Blackwell, which 2.27 lowered to NVLS_NCHANNELS_SM100_NVL 24
// within one NVLink domain (nvls.cc at v2.25.1-1 and v2.26.6-1 have no such case; v2.27.7-1 does).
int nvls_channels(GpuArch a, NcclVersion v, int nodes) {
  if (a != GpuArch::kBlackwell) {
    return 16;
  }
  return nodes == 1 && v >= NcclVersion{2, 27} ? 24 : 32;
}

// ncclTopoDupChannels.
NcclGraph dup_channels(NcclGraph g, GpuArch a) {
  const bool keep = a >= GpuArch::kHopper && g.bw_intra < 50 && g.channels > 4;
  if (g.bw_intra >= 25 && !keep) {
    g.channels *= 2;
    g.bw_intra /= 2;
    g.bw_inter /= 2;
  }
  return g;
}

NcclGraph one_node_ring(GpuArch a, double nvl) {
  NcclGraph g;
  double best = 0;
  for (const double s : intra_speeds(a)) {
    const int ch = std::min(kMaxRingChannels, static_cast<int>(nvl / s));
    if (ch >= 1 && ch * s > best + 1e-9) {
      best = ch * s;
      g.channels = ch;
      g.bw_intra = g.bw_inter = s;
    }
  }
  return dup_channels(g, a);
}

NcclGraph one_node_nvls(GpuArch a, double nvl, int ranks) {
  NcclGraph g;
  g.channels = std::min(32, ranks);
  const std::vector<double> speeds = intra_speeds(a);  // descending
  for (size_t i = 0; i < speeds.size(); ++i) {
    if ((g.channels + 1) * speeds[i] <= nvl + 1e-9) {
      g.bw_intra = speeds[i];
      g.bw_inter = speeds[i];
      for (size_t j = i; j > 0 && g.bw_inter < 2 * g.bw_intra; --j) {
        g.bw_inter = speeds[j - 1];
      }
      return g;
    }
  }
  g.channels = 0;
  return g;
}

// The fastest network speed <= cap (and with channels x speed <= nvl when nvl > 0).
double network_speed(GpuArch a, double cap, int channels, double nvl) {
  for (const double s : inter_speeds(a)) {
    if (s <= cap + 1e-9 && (nvl <= 0 || channels * s <= nvl + 1e-9)) {
      return s;
    }
  }
  return inter_speeds(a).back();
}

}  // namespace

NcclSystem nccl_system(const topology::Network& net, std::span<const DeviceId> group,
                       NcclVersion version) {
  const topology::ClusterSpec& spec = net.spec();
  const topology::Chip& chip = spec.chip;
  NcclSystem s;
  s.version = version;
  s.arch = arch_of(chip);
  s.cpu = spec.collectives.host_cpu;
  s.ranks = static_cast<int>(group.size());
  const auto doms = detail::domains(group, net);
  s.nodes = static_cast<int>(doms.size());
  int ppn = 0;
  for (const auto& d : doms) {
    ppn = std::max(ppn, static_cast<int>(d.size()));
  }
  const bool switched = net.nvswitch_of(group.front()).has_value();
  const double nvl = static_cast<double>(chip.nvlink->links) * nccl_nvlink_bw(s.arch, version);
  const bool nvls_hw = switched && s.arch >= GpuArch::kHopper && chip.nvlink->nvls_efficiency;
  const bool sharp = spec.fat_tree && spec.fat_tree->sharp;
  s.has_nvls = nvls_hw;
  s.has_collnet = sharp;
  s.has_ll128 = switched;
  NcclGraph nvls_graph = nvls_hw ? one_node_nvls(s.arch, nvl, ppn) : NcclGraph{};
  if (s.nodes == 1) {
    s.ring = one_node_ring(s.arch, nvl);
    s.tree = s.ring;
  } else {
    SIM_CHECK(spec.fat_tree.has_value() && chip.nic_bandwidth.has_value(),
              "NCCL system across nodes of cluster {} without a fat tree", spec.name);
    const int nics = ppn * static_cast<int>(spec.fat_tree->nics_per_device);
    const double nic = spec.fat_tree->nic_bandwidth.gb_per_s() * chip.nic_efficiency;
    NcclGraph ring;
    ring.channels = nics;
    ring.bw_intra = ring.bw_inter = network_speed(s.arch, nic, nics, nvl);
    s.ring = dup_channels(ring, s.arch);
    NcclGraph tree;
    tree.channels = nics;
    tree.bw_intra = tree.bw_inter = network_speed(s.arch, nic, nics, 0);
    tree.tree_pattern = ppn == 1;
    s.tree = dup_channels(tree, s.arch);
    nvls_graph.bw_inter = tree.bw_inter;
  }
  s.has_nvls = s.has_nvls && nvls_graph.channels >= 2;
  if (s.has_nvls) {
    s.nvls = nvls_graph;
  }
  s.comm_channels = std::min(64, 2 * s.ring.channels);
  if (s.nodes > 1 && s.arch >= GpuArch::kHopper && s.ring.bw_intra > 45 && s.comm_channels < 16) {
    s.comm_channels *= 2;
  }
  s.nvls_channels = nvls_channels(s.arch, version, s.nodes);
  return s;
}

}  // namespace meshsim::collectives
