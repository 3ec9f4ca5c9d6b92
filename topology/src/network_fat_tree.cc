// GPU clusters: NVSwitch nodes or NVLink domains, joined by a (rail-optimized) fat tree.
//
// Wiring rules (every number is printed by `meshsim topology`, see summarize_gpu):
//  * Scale-up: one NVSwitch vertex per domain (a DGX node, or an NVL72 rack), modelling the
//    domain's NVSwitch chips as one non-blocking switch. Each device <-> NVSwitch cable carries the
//    device's whole NVLink bandwidth (H100: 18 x 25 GB/s = 450 GB/s per direction).
//  * NICs: nics_per_device NIC vertices per device, joined to it by PCIe x16 (Gen5: 64 GB/s per
//    direction; Gen4 for NVLink-3 parts such as the A100: 32 GB/s), more than the NIC, so PCIe is
//    not the bottleneck unless a file gives a NIC faster than its slot.
//  * Leaves: radix R, oversubscription s. A leaf has D = floor(R s / (s + 1)) down ports (to NICs)
//    and U = R - D up ports (cables to spines, each at the NIC bandwidth): oversubscription means
//    fewer uplinks, not thinner ones (R = 64, s = 1: 32 down, 32 up; s = 3: 48 down, 16 up).
//    Rail-optimized: NIC k of device g is on rail r = g * nics_per_device + k; the NICs of rail r
//    of nodes [j D, (j + 1) D) share leaf (group j, rail r); leaves are numbered group-major, so
//    leaves_per_rail = ceil(nodes / D). Not rail-optimized: NICs in device order fill leaves.
//    A single-node cluster still gets its NICs and one leaf per rail.
//  * 2 tiers: S spines, S = the smallest divisor of U that is at least ceil(leaves x U / R), so
//    every leaf has the same number (U / S) of cables to every spine and no spine has more than
//    R ports in use. Parallel cables between a leaf and a spine are one link of U / S x the NIC
//    bandwidth (Link::cables), so ECMP spreads over spines: a 256-node DGX H100 gets 64 leaves
//    and 32 spines with one cable per pair; 1 to 32 nodes get 8 leaves and 4 spines with 8.
//    Traffic between rails goes leaf -> spine -> leaf even where one leaf per rail holds every
//    node (NCCL would often use NVLink + PXN instead; the collectives choose, not the graph).
//  * 3 tiers: pods of R/2 consecutive leaves with S spines each (spines have R/2 down and R/2
//    up ports; S chosen as for 2 tiers against R/2 ports), and S core groups: spine j of every
//    pod joins each of the C cores of group j, C = the smallest divisor of R/2 that is at least
//    ceil(pods / 2), with (R/2) / C cables per spine-core pair. A fabric that fits one pod has no
//    cores (they would carry no shortest path).
//  * 1 tier: one switch (a "leaf") holds every NIC.
//  * Latency (network.h convention): NVLink links scale_up_latency / 2, so device -> NVSwitch ->
//    device costs scale_up_latency; PCIe links 0; network links scale_out_latency / 4 (/ 2 for one
//    tier), so device -> NIC -> leaf -> spine -> leaf -> NIC -> device costs scale_out_latency.
//
// Routing: within a scale-up domain, device -> NVSwitch -> device (one path). Otherwise over the
// NIC pairs (ka, kb) with the fewest hops: same leaf 4 hops (1 path), same pod 6 hops (one path
// per spine of the pod), across pods 8 hops (spines x cores of a group). Path i of a NIC pair
// takes spine i mod S and core (i / S + r) mod C, r the destination NIC's rail, so consecutive
// salts spread flows over spines first, and flows to one node's NICs on different rails over
// different cores (InfiniBand's fat-tree routing assigns up-ports per destination port).
#include <fmt/format.h>

#include <algorithm>

#include "cluster_checks.h"
#include "meshsim/sim/error.h"
#include "network_impl.h"

namespace meshsim::topology {

int64_t GpuLayout::leaf_of(int64_t device, int64_t k) const {
  if (tree.tiers == 1) {
    return 0;
  }
  if (tree.rails == 1) {
    return (device * tree.nics_per_device + k) / tree.down_ports;
  }
  const int64_t node = device / devices_per_node;
  const int64_t rail = (device % devices_per_node) * tree.nics_per_device + k;
  return (node / tree.down_ports) * tree.rails + rail;
}

namespace detail {
namespace {

constexpr int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

int64_t smallest_divisor_at_least(int64_t n, int64_t lo) {
  for (int64_t d = std::max<int64_t>(lo, 1); d < n; ++d) {
    if (n % d == 0) {
      return d;
    }
  }
  return n;
}

// PCIe x16 between a GPU and its NIC, per direction (PCI-SIG: 16 GT/s per lane for Gen4, 32 GT/s
// for Gen5, so x16 moves 32 / 64 GB/s before 128b/130b encoding). A100 (NVLink 3) sits on PCIe
// Gen4 (NVIDIA A100 datasheet); H100, H200 and Blackwell parts on Gen5 (their datasheets).
BytesPerSec pcie_bandwidth(const Chip& chip) {
  return chip.nvlink && chip.nvlink->generation <= 3 ? GBps(32) : GBps(64);
}

void plan_leaves(const ClusterSpec& spec, FatTreeLayout& t) {
  const FatTreeSpec& ft = *spec.fat_tree;
  const int64_t nics = spec.device_count() * t.nics_per_device;
  if (t.tiers == 1) {
    t.down_ports = t.radix;
    t.up_ports = 0;
    t.rails = 1;
    t.leaves = 1;
    t.leaves_per_pod = 1;
    if (nics > t.radix) {
      fail_spec(
          spec, "/scale_out/tiers",
          fmt::format("one radix-{} switch holds {} NICs, but the cluster has {} (expected more "
                      "tiers or fewer nodes)",
                      t.radix, t.radix, nics));
    }
    return;
  }
  const double s = ft.oversubscription;
  t.down_ports = static_cast<int64_t>(static_cast<double>(t.radix) * s / (s + 1.0));
  t.up_ports = t.radix - t.down_ports;
  if (t.down_ports < 1 || t.up_ports < 1) {
    fail_spec(spec, "/scale_out/oversubscription",
              fmt::format("a radix-{} leaf at oversubscription {} has {} down and {} up ports "
                          "(expected at least one of each)",
                          t.radix, s, t.down_ports, t.up_ports));
  }
  t.rails = ft.rail_optimized ? spec.devices_per_node * t.nics_per_device : 1;
  const int64_t per_rail = ft.rail_optimized ? spec.nodes : nics;
  t.leaves_per_rail = ceil_div(per_rail, t.down_ports);
  t.leaves = t.rails * t.leaves_per_rail;
}

void plan_spines(const ClusterSpec& spec, FatTreeLayout& t) {
  const int64_t half = t.radix / 2;
  if (t.tiers == 2) {
    if (t.leaves > t.radix) {
      fail_spec(
          spec, "/nodes",
          fmt::format("{} rails x {} leaves per rail = {} leaves, but radix-{} spines join at "
                      "most {} leaves in 2 tiers (expected 3 tiers or fewer nodes)",
                      t.rails, t.leaves_per_rail, t.leaves, t.radix, t.radix));
    }
    t.leaves_per_pod = t.leaves;
    t.spines_per_pod =
        smallest_divisor_at_least(t.up_ports, ceil_div(t.leaves * t.up_ports, t.radix));
  } else {
    t.pods = ceil_div(t.leaves, half);
    t.leaves_per_pod = t.pods == 1 ? t.leaves : half;
    if (t.pods > t.radix) {
      fail_spec(spec, "/nodes",
                fmt::format("{} leaves fill {} pods of {}, but radix-{} cores join at most {} pods "
                            "(expected fewer nodes)",
                            t.leaves, t.pods, half, t.radix, t.radix));
    }
    t.spines_per_pod =
        smallest_divisor_at_least(t.up_ports, ceil_div(t.leaves_per_pod * t.up_ports, half));
    if (t.pods > 1) {
      t.cores_per_group = smallest_divisor_at_least(half, ceil_div(t.pods, 2));
      t.spine_core_cables = half / t.cores_per_group;
    }
  }
  t.leaf_spine_cables = t.up_ports / t.spines_per_pod;
}

FatTreeLayout plan_fat_tree(const ClusterSpec& spec) {
  if (!spec.fat_tree) {
    fail_spec(spec, "/scale_out/fabric", "a GPU cluster needs a \"fat_tree\" scale-out fabric");
  }
  const FatTreeSpec& ft = *spec.fat_tree;
  require_positive(spec, "/scale_out/nic_bandwidth", ft.nic_bandwidth, "NIC bandwidth");
  if (ft.tiers < 1 || ft.tiers > 3) {
    fail_spec(spec, "/scale_out/tiers",
              fmt::format("expected 1 to 3 tiers for a network graph, got {}", ft.tiers));
  }
  if (ft.nics_per_device < 1) {
    fail_spec(spec, "/scale_out/nics_per_device",
              fmt::format("expected at least one NIC per device, got {}", ft.nics_per_device));
  }
  if (ft.switch_radix < 2 || ft.switch_radix % 2 != 0 || !(ft.oversubscription >= 1.0)) {
    fail_spec(spec, "/scale_out/switch_radix",
              fmt::format("expected an even radix >= 2 and oversubscription >= 1, got {} and {}",
                          ft.switch_radix, ft.oversubscription));
  }
  FatTreeLayout t;
  t.tiers = ft.tiers;
  t.radix = ft.switch_radix;
  t.nics_per_device = ft.nics_per_device;
  plan_leaves(spec, t);
  if (t.tiers >= 2) {
    plan_spines(spec, t);
  }
  return t;
}

Vertex device_vertex(const ClusterSpec& spec, int64_t d) {
  const int64_t node = d / spec.devices_per_node;
  return Vertex{VertexKind::kDevice, fmt::format("node{}/gpu{}", node, d % spec.devices_per_node),
                DeviceId(static_cast<uint32_t>(d)), node};
}

void build_scale_up(NetworkData& impl, GpuLayout& g) {
  const ClusterSpec& spec = impl.spec;
  const int64_t devices = spec.device_count();
  for (int64_t d = 0; d < devices; ++d) {
    impl.add_vertex(device_vertex(spec, d));
  }
  const bool per_node = spec.scale_up == ScaleUpFabric::kNvSwitch;
  g.devices_per_node = spec.devices_per_node;
  g.domain_devices = per_node ? spec.devices_per_node : spec.nvlink_domain_devices;
  if (g.domain_devices <= 0 || devices % g.domain_devices != 0) {
    fail_spec(spec, "/scale_up/domain_devices",
              fmt::format("{} devices do not divide into NVLink domains of {}", devices,
                          g.domain_devices));
  }
  g.first_nvswitch = static_cast<uint32_t>(impl.vertices.size());
  for (int64_t dom = 0; dom < devices / g.domain_devices; ++dom) {
    impl.add_vertex(Vertex{
        VertexKind::kNvSwitch,
        per_node ? fmt::format("node{}/nvswitch", dom) : fmt::format("domain{}/nvswitch", dom),
        std::nullopt, per_node ? dom : -1});
  }
  const Duration half = Duration::from_ps(spec.scale_up_latency.ps() / 2);
  for (int64_t d = 0; d < devices; ++d) {
    const VertexId sw(g.first_nvswitch + static_cast<uint32_t>(g.domain_of(d)));
    impl.add_cable(VertexId(static_cast<uint32_t>(d)), sw, LinkKind::kNvlink,
                   spec.scale_up_bandwidth(), half);
    impl.nvswitch[static_cast<size_t>(d)] = sw;
  }
}

std::string leaf_name(const FatTreeLayout& t, int64_t leaf) {
  if (t.tiers == 1) {
    return "switch";
  }
  if (t.rails == 1) {
    return fmt::format("leaf #{}", leaf);
  }
  return fmt::format("leaf rail{} #{}", leaf % t.rails, leaf / t.rails);
}

void build_nics_and_leaves(NetworkData& impl, GpuLayout& g) {
  const ClusterSpec& spec = impl.spec;
  FatTreeLayout& t = g.tree;
  const int64_t devices = spec.device_count();
  const BytesPerSec nic_bw = spec.fat_tree->nic_bandwidth;
  const Duration hop = Duration::from_ps(spec.scale_out_latency.ps() / (t.tiers == 1 ? 2 : 4));
  t.first_nic = static_cast<uint32_t>(impl.vertices.size());
  for (int64_t d = 0; d < devices; ++d) {
    for (int64_t k = 0; k < t.nics_per_device; ++k) {
      const int64_t node = d / spec.devices_per_node;
      const int64_t local = (d % spec.devices_per_node) * t.nics_per_device + k;
      impl.add_vertex(
          Vertex{VertexKind::kNic, fmt::format("node{}/nic{}", node, local), std::nullopt, node});
    }
  }
  t.first_leaf = static_cast<uint32_t>(impl.vertices.size());
  for (int64_t l = 0; l < t.leaves; ++l) {
    impl.add_vertex(Vertex{VertexKind::kLeaf, leaf_name(t, l), std::nullopt, -1});
  }
  for (int64_t d = 0; d < devices; ++d) {
    for (int64_t k = 0; k < t.nics_per_device; ++k) {
      const VertexId nic(t.first_nic + static_cast<uint32_t>(d * t.nics_per_device + k));
      impl.add_cable(VertexId(static_cast<uint32_t>(d)), nic, LinkKind::kPcie,
                     pcie_bandwidth(spec.chip), Duration::zero());
      impl.add_cable(nic, VertexId(t.first_leaf + static_cast<uint32_t>(g.leaf_of(d, k))),
                     LinkKind::kNetwork, nic_bw, hop);
    }
  }
}

void build_upper_tiers(NetworkData& impl, FatTreeLayout& t) {
  const ClusterSpec& spec = impl.spec;
  const BytesPerSec nic_bw = spec.fat_tree->nic_bandwidth;
  const Duration hop = Duration::from_ps(spec.scale_out_latency.ps() / 4);
  t.first_spine = static_cast<uint32_t>(impl.vertices.size());
  for (int64_t sp = 0; sp < t.spines(); ++sp) {
    const int64_t pod = sp / t.spines_per_pod;
    impl.add_vertex(Vertex{VertexKind::kSpine,
                           t.tiers == 3 ? fmt::format("pod{}/spine {}", pod, sp % t.spines_per_pod)
                                        : fmt::format("spine {}", sp),
                           std::nullopt, -1});
  }
  t.first_core = static_cast<uint32_t>(impl.vertices.size());
  for (int64_t c = 0; c < t.cores(); ++c) {
    impl.add_vertex(Vertex{VertexKind::kCore, fmt::format("core {}", c), std::nullopt, -1});
  }
  const auto v = [](uint32_t first, int64_t i) {
    return VertexId(first + static_cast<uint32_t>(i));
  };
  for (int64_t l = 0; l < t.leaves; ++l) {
    const int64_t pod = t.pod_of_leaf(l);
    for (int64_t j = 0; j < t.spines_per_pod; ++j) {
      impl.add_cable(v(t.first_leaf, l), v(t.first_spine, pod * t.spines_per_pod + j),
                     LinkKind::kNetwork, nic_bw * static_cast<double>(t.leaf_spine_cables), hop,
                     t.leaf_spine_cables);
    }
  }
  for (int64_t sp = 0; sp < t.spines() && t.cores() > 0; ++sp) {
    const int64_t group = sp % t.spines_per_pod;
    for (int64_t c = 0; c < t.cores_per_group; ++c) {
      impl.add_cable(v(t.first_spine, sp), v(t.first_core, group * t.cores_per_group + c),
                     LinkKind::kNetwork, nic_bw * static_cast<double>(t.spine_core_cables), hop,
                     t.spine_core_cables);
    }
  }
}

// The fewest leaf-to-leaf hops over the port pairs of two devices.
int64_t best_leaf_distance(const GpuLayout& g, int64_t a, int64_t b) {
  int64_t best = 4;
  g.for_each_port(a, [&](int64_t pa, int64_t ka) {
    g.for_each_port(b, [&](int64_t pb, int64_t kb) {
      best = std::min(best, g.tree.leaf_distance(g.leaf_of(pa, ka), g.leaf_of(pb, kb)));
    });
  });
  return best;
}

}  // namespace

bool uplink_works(const NetworkData& impl, const FatTreeLayout& t, int64_t leaf, int64_t j) {
  if (impl.down.empty()) {
    return true;
  }
  const VertexId l(t.first_leaf + static_cast<uint32_t>(leaf));
  const VertexId sp(t.first_spine +
                    static_cast<uint32_t>(t.pod_of_leaf(leaf) * t.spines_per_pod + j));
  return !impl.link_down(impl.link_or_die(l, sp));
}

namespace {

// Spine index (within a pod) of the k-th spine both leaves still reach; -1 past the last.
int64_t nth_common_spine(const NetworkData& impl, const FatTreeLayout& t, int64_t la, int64_t lb,
                         int64_t k) {
  if (impl.down.empty()) {
    return k < t.spines_per_pod ? k : -1;
  }
  for (int64_t j = 0; j < t.spines_per_pod; ++j) {
    if (uplink_works(impl, t, la, j) && uplink_works(impl, t, lb, j) && k-- == 0) {
      return j;
    }
  }
  return -1;
}

int64_t common_spines(const NetworkData& impl, const FatTreeLayout& t, int64_t la, int64_t lb) {
  if (impl.down.empty()) {
    return t.spines_per_pod;
  }
  int64_t n = 0;
  for (int64_t j = 0; j < t.spines_per_pod; ++j) {
    n += uplink_works(impl, t, la, j) && uplink_works(impl, t, lb, j) ? 1 : 0;
  }
  return n;
}

}  // namespace

int64_t leaf_width(const NetworkData& impl, const FatTreeLayout& t, int64_t la, int64_t lb) {
  switch (t.leaf_distance(la, lb)) {
    case 0:
      return 1;
    case 2:
      return common_spines(impl, t, la, lb);
    default:
      return common_spines(impl, t, la, lb) * t.cores_per_group;
  }
}

// Path i between leaves la and lb: the (i mod spines)-th spine both still reach, and core
// i / spines of that spine's group (ECMP over spines first, as without failures).
void append_leaf_segment(const NetworkData& impl, const FatTreeLayout& t, int64_t la, int64_t lb,
                         int64_t i, Path& path) {
  const auto v = [](uint32_t first, int64_t k) {
    return VertexId(first + static_cast<uint32_t>(k));
  };
  const int64_t distance = t.leaf_distance(la, lb);
  if (distance == 0) {
    return;
  }
  const int64_t spines = common_spines(impl, t, la, lb);
  const int64_t j = nth_common_spine(impl, t, la, lb, i % spines);
  SIM_CHECK(j >= 0, "no spine common to leaves {} and {}", la, lb);
  const VertexId up = v(t.first_spine, t.pod_of_leaf(la) * t.spines_per_pod + j);
  const VertexId down = v(t.first_spine, t.pod_of_leaf(lb) * t.spines_per_pod + j);
  path.push_back(impl.link_or_die(v(t.first_leaf, la), up));
  if (distance == 4) {
    // The spine's up-port per destination NIC, as InfiniBand's fat-tree routing assigns them
    // (OpenSM's ftree engine spreads the destinations below a switch over its up-ports): the NICs
    // of one node on different rails are different destinations, so flows to them leave the
    // spine on different cores (the destination leaf's rail turns the core round).
    const int64_t rail = t.rails > 1 ? lb % t.rails : 0;
    const int64_t c = (i / spines + rail) % t.cores_per_group;
    const VertexId core = v(t.first_core, j * t.cores_per_group + c);
    path.push_back(impl.link_or_die(up, core));
    path.push_back(impl.link_or_die(core, down));
  }
  path.push_back(impl.link_or_die(down, v(t.first_leaf, lb)));
}

void build_gpu_cluster(NetworkData& impl) {
  GpuLayout g;
  g.tree = plan_fat_tree(impl.spec);
  build_scale_up(impl, g);
  build_nics_and_leaves(impl, g);
  if (g.tree.tiers >= 2) {
    build_upper_tiers(impl, g.tree);
  }
  impl.gpu = g;
}

int64_t gpu_hops(const NetworkData& impl, DeviceId a, DeviceId b) {
  const GpuLayout& g = *impl.gpu;
  const auto da = static_cast<int64_t>(a.value());
  const auto db = static_cast<int64_t>(b.value());
  if (g.domain_of(da) == g.domain_of(db)) {
    return 2;
  }
  return 4 + best_leaf_distance(g, da, db);
}

int64_t gpu_path_count(const NetworkData& impl, DeviceId a, DeviceId b) {
  const GpuLayout& g = *impl.gpu;
  const auto da = static_cast<int64_t>(a.value());
  const auto db = static_cast<int64_t>(b.value());
  if (g.domain_of(da) == g.domain_of(db)) {
    return 1;
  }
  const int64_t best = best_leaf_distance(g, da, db);
  int64_t count = 0;
  g.for_each_port(da, [&](int64_t pa, int64_t ka) {
    g.for_each_port(db, [&](int64_t pb, int64_t kb) {
      const int64_t la = g.leaf_of(pa, ka);
      const int64_t lb = g.leaf_of(pb, kb);
      if (g.tree.leaf_distance(la, lb) == best) {
        count += leaf_width(impl, g.tree, la, lb);
      }
    });
  });
  return count;
}

Path gpu_nth_path(const NetworkData& impl, DeviceId a, DeviceId b, int64_t i) {
  const GpuLayout& g = *impl.gpu;
  const FatTreeLayout& t = g.tree;
  const auto da = static_cast<int64_t>(a.value());
  const auto db = static_cast<int64_t>(b.value());
  const VertexId va(a.value());
  const VertexId vb(b.value());
  if (g.domain_of(da) == g.domain_of(db)) {
    const VertexId sw = *impl.nvswitch[a.index()];
    return {impl.link_or_die(va, sw), impl.link_or_die(sw, vb)};
  }
  const int64_t best = best_leaf_distance(g, da, db);
  Path path;
  g.for_each_port(da, [&](int64_t pa, int64_t ka) {
    g.for_each_port(db, [&](int64_t pb, int64_t kb) {
      const int64_t la = g.leaf_of(pa, ka);
      const int64_t lb = g.leaf_of(pb, kb);
      if (!path.empty() || t.leaf_distance(la, lb) != best) {
        return;
      }
      if (i >= leaf_width(impl, t, la, lb)) {
        i -= leaf_width(impl, t, la, lb);
        return;
      }
      const VertexId via_a(static_cast<uint32_t>(pa));
      const VertexId via_b(static_cast<uint32_t>(pb));
      const VertexId nic_a(t.first_nic + static_cast<uint32_t>(pa * t.nics_per_device + ka));
      const VertexId nic_b(t.first_nic + static_cast<uint32_t>(pb * t.nics_per_device + kb));
      if (via_a != va) {  // over NVLink to the peer whose NIC carries it
        path.push_back(impl.link_or_die(va, *impl.nvswitch[a.index()]));
        path.push_back(impl.link_or_die(*impl.nvswitch[a.index()], via_a));
      }
      path.push_back(impl.link_or_die(via_a, nic_a));
      path.push_back(impl.link_or_die(nic_a, VertexId(t.first_leaf + static_cast<uint32_t>(la))));
      append_leaf_segment(impl, t, la, lb, i, path);
      path.push_back(impl.link_or_die(VertexId(t.first_leaf + static_cast<uint32_t>(lb)), nic_b));
      path.push_back(impl.link_or_die(nic_b, via_b));
      if (via_b != vb) {
        path.push_back(impl.link_or_die(via_b, *impl.nvswitch[b.index()]));
        path.push_back(impl.link_or_die(*impl.nvswitch[b.index()], vb));
      }
    });
  });
  SIM_CHECK(!path.empty(), "path {} from device {} to {} is beyond the ECMP width", i, da, db);
  return path;
}

}  // namespace detail
}  // namespace meshsim::topology
