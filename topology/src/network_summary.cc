// Network::summary(): counts, bisection bandwidth and diameter, per fabric.
//
// Bisection bandwidth (per direction, across the worst cut into two equal halves of the devices):
//  * Fat tree (GPU clusters): the maximum flow from the first half of the devices (in order:
//    whole nodes, leaf groups and pods where the counts allow, the worst balanced split of these
//    trees) to the second, computed level by level on the tree (gpu_network_cut: local switching
//    in each leaf, then through the spines of a pod, then through the cores), plus the NVLink of
//    the scale-up domain the split cuts, if any (1 node of 8: 4 x 450 GB/s). It never exceeds
//    the NICs of half the devices, n/2 x nics_per_device x min(NIC, PCIe), nor the uplinks of
//    half the leaves, leaves/2 x U x NIC; the summary text prints both bounds. Tests check it
//    against Boost max-flow on the graph.
//  * Torus: the fewest links across a straight cut, over the axes: cutting axis i of extent e_i
//    crosses (n / e_i) rings, each twice if the axis wraps (once if not, or if e_i = 2); times
//    the ICI link bandwidth. Usually the longest axis: 2 x (n / longest) x link for a wrapping
//    one. For an odd extent the straight cut splits floor(e/2) : ceil(e/2) (the usual estimate).
//    With S > 1 slices: the DCN of half the slices, S x chips / 2 x DCN bandwidth per chip, plus
//    one slice's ICI bisection when S is odd (one slice must be split).
//  * Explicit graph: the max-flow from the first half of the devices (in file order) to the
//    rest: the cut the file's order suggests, not a proven worst case.
// Diameter: the longest route between two devices, in links (the routing's hops, so on tori the
// dimension-order length: sum over axes of floor(e/2) where the axis wraps, e - 1 where not).
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <set>
#include <tuple>
#include <utility>

#include "network_impl.h"

namespace meshsim::topology {
namespace detail {
namespace {

// Decimal GB/s, shortest exact form (450, 6.25, 51200); divides rather than multiplying by 1e-9
// so that whole numbers stay whole.
std::string gbps(BytesPerSec b) { return fmt::format("{} GB/s", b.value() / 1e9); }

void count_vertices(const NetworkData& impl, NetworkSummary& s) {
  for (const Vertex& v : impl.vertices) {
    ++s.vertices_by_kind[v.kind];
    if (v.kind == VertexKind::kDevice) {
      ++s.devices;
    } else if (v.kind == VertexKind::kNic) {
      ++s.nics;
    } else {
      ++s.switches;
    }
  }
}

void count_links(const NetworkData& impl, NetworkSummary& s) {
  using GroupKey = std::tuple<LinkKind, VertexKind, VertexKind, double, int64_t>;
  std::map<GroupKey, int64_t> groups;
  std::map<LinkKind, std::map<double, int64_t>> bandwidths;
  for (const Link& l : impl.links) {
    const auto [a, b] =
        std::minmax(impl.vertices[l.src.index()].kind, impl.vertices[l.dst.index()].kind);
    ++groups[GroupKey{l.kind, a, b, l.bandwidth.value(), l.cables}];
    ++bandwidths[l.kind][l.bandwidth.value()];
  }
  for (const auto& [key, count] : groups) {
    const auto& [kind, a, b, bw, cables] = key;
    s.link_groups.push_back(LinkGroupSummary{kind, a, b, BytesPerSec::of(bw), cables, count});
  }
  for (const auto& [kind, by_bw] : bandwidths) {
    LinkKindSummary& k = s.links[kind];
    int64_t most = 0;
    for (const auto& [bw, count] : by_bw) {
      k.count += count;
      if (count > most) {  // ties: the smaller bandwidth (map order)
        most = count;
        k.bandwidth = BytesPerSec::of(bw);
      }
    }
  }
}

struct Cut {
  BytesPerSec bandwidth;
  std::string formula;
};

// Fat tree: the exact diameter over distinct NIC-leaf signatures (devices whose NICs sit on the
// same leaves are alike), O(signatures^2 x nics^2).
int64_t gpu_diameter(const Network& net, const GpuLayout& g) {
  const auto n = static_cast<int64_t>(net.num_devices());
  if (n / g.domain_devices <= 1) {
    return n > 1 ? 2 : 0;
  }
  // signature -> (a device with it, whether its devices span several domains)
  std::map<std::vector<int64_t>, std::pair<int64_t, bool>> kinds;
  for (int64_t d = 0; d < n; ++d) {
    std::vector<int64_t> leaves;
    for (int64_t k = 0; k < g.tree.nics_per_device; ++k) {
      leaves.push_back(g.leaf_of(d, k));
    }
    const auto [it, fresh] = kinds.try_emplace(leaves, d, false);
    it->second.second = it->second.second || g.domain_of(d) != g.domain_of(it->second.first);
  }
  int64_t diameter = 2;
  for (const auto& [la, a] : kinds) {
    for (const auto& [lb, b] : kinds) {
      if (!a.second && !b.second && g.domain_of(a.first) == g.domain_of(b.first)) {
        continue;  // every such pair shares a scale-up domain
      }
      int64_t nearest = 4;
      for (const int64_t leaf_a : la) {
        for (const int64_t leaf_b : lb) {
          nearest = std::min(nearest, g.tree.leaf_distance(leaf_a, leaf_b));
        }
      }
      diameter = std::max(diameter, 4 + nearest);
    }
  }
  return diameter;
}

// Per leaf: the NICs of devices in the first half (a) and in the second (b).
struct LeafSides {
  std::vector<int64_t> a;
  std::vector<int64_t> b;
};

LeafSides leaf_sides(const GpuLayout& g, int64_t devices) {
  LeafSides sides{std::vector<int64_t>(static_cast<size_t>(g.tree.leaves), 0),
                  std::vector<int64_t>(static_cast<size_t>(g.tree.leaves), 0)};
  for (int64_t d = 0; d < devices; ++d) {
    for (int64_t k = 0; k < g.tree.nics_per_device; ++k) {
      ++(d < devices / 2 ? sides.a : sides.b)[static_cast<size_t>(g.leaf_of(d, k))];
    }
  }
  return sides;
}

// The maximum flow from the first half of the devices to the second through the fat tree, level
// by level (matching traffic at the lowest common switch first is optimal on a tree whose upper
// layers connect every switch below them evenly): each leaf switches min(a, b) NICs locally and
// sends / receives the rest up to its U uplinks; a pod's spines carry min(sent, received) within
// the pod and pass the rest to the cores, up to the pod's R/2 uplinks per spine; the cores carry
// min(sent, received) over the pods.
Cut gpu_network_cut(const Network& net, const GpuLayout& g) {
  const FatTreeLayout& t = g.tree;
  const BytesPerSec nic = net.spec().fat_tree->nic_bandwidth;
  const BytesPerSec pcie =
      net.link(*net.link_between(VertexId(0), VertexId(t.first_nic))).bandwidth;
  const double per_nic = std::min(nic, pcie).value();
  const double uplink = t.tiers == 1 ? 0.0 : nic.value() * static_cast<double>(t.up_ports);
  const double pod_uplink = nic.value() * static_cast<double>(t.spines_per_pod * (t.radix / 2));
  const LeafSides sides = leaf_sides(g, static_cast<int64_t>(net.num_devices()));
  double local = 0.0, spines = 0.0, pods_up = 0.0, pods_down = 0.0;
  for (int64_t p = 0; p < t.pods; ++p) {
    double up = 0.0, down = 0.0;
    for (int64_t l = p * t.leaves_per_pod; l < std::min(t.leaves, (p + 1) * t.leaves_per_pod);
         ++l) {
      const int64_t a = sides.a[static_cast<size_t>(l)];
      const int64_t b = sides.b[static_cast<size_t>(l)];
      local += static_cast<double>(std::min(a, b)) * per_nic;
      up += std::min(static_cast<double>(a - std::min(a, b)) * per_nic, uplink);
      down += std::min(static_cast<double>(b - std::min(a, b)) * per_nic, uplink);
    }
    spines += std::min(up, down);
    pods_up += std::min(up - std::min(up, down), pod_uplink);
    pods_down += std::min(down - std::min(up, down), pod_uplink);
  }
  const double cores = t.cores() > 0 ? std::min(pods_up, pods_down) : 0.0;
  const int64_t half = static_cast<int64_t>(net.num_devices()) / 2;
  std::string formula = fmt::format(
      "max-flow from devices 0 .. {} to the rest, by level: {} switched inside leaves + {} "
      "through spines",
      half - 1, gbps(BytesPerSec::of(local)), gbps(BytesPerSec::of(spines)));
  if (t.cores() > 0) {
    formula += fmt::format(" + {} through cores", gbps(BytesPerSec::of(cores)));
  }
  formula += fmt::format(" (bounds: NICs of half the devices {} x {} x {}", half, t.nics_per_device,
                         gbps(BytesPerSec::of(per_nic)));
  if (t.tiers >= 2) {
    formula += fmt::format("; uplinks of half the leaves {} x {} x {}", t.leaves / 2, t.up_ports,
                           gbps(nic));
  }
  return {BytesPerSec::of(local + spines + cores), formula + ")"};
}

// NVLink across the split: in every scale-up domain the split cuts, the smaller side's links.
Cut gpu_nvlink_cut(const Network& net, const GpuLayout& g) {
  const auto n = static_cast<int64_t>(net.num_devices());
  int64_t crossing = 0;
  for (int64_t dom = 0; dom < n / g.domain_devices; ++dom) {
    const int64_t first = dom * g.domain_devices;
    const int64_t in_a = std::clamp<int64_t>(n / 2 - first, 0, g.domain_devices);
    crossing += std::min(in_a, g.domain_devices - in_a);
  }
  const BytesPerSec per_device = net.spec().scale_up_bandwidth();
  return {per_device * static_cast<double>(crossing),
          fmt::format("{} x {} over NVLink (devices of a scale-up domain the split cuts)", crossing,
                      gbps(per_device))};
}

std::string gpu_layout_text(const FatTreeLayout& t) {
  if (t.tiers == 1) {
    return fmt::format("1 tier: one radix-{} switch holds every NIC", t.radix);
  }
  std::string text = fmt::format(
      "{} tiers, radix {}: {} leaves ({} rail{} x {}), each {} ports down, {} up", t.tiers, t.radix,
      t.leaves, t.rails, t.rails == 1 ? "" : "s", t.leaves_per_rail, t.down_ports, t.up_ports);
  if (t.tiers == 2) {
    return text + fmt::format("; {} spines, {} cable{} per leaf-spine pair", t.spines(),
                              t.leaf_spine_cables, t.leaf_spine_cables == 1 ? "" : "s");
  }
  text += fmt::format(
      "; {} pod{} of up to {} leaves with {} spines each, {} cable{} per "
      "leaf-spine pair",
      t.pods, t.pods == 1 ? "" : "s", t.leaves_per_pod, t.spines_per_pod, t.leaf_spine_cables,
      t.leaf_spine_cables == 1 ? "" : "s");
  if (t.cores() == 0) {
    return text + "; no cores (one pod)";
  }
  return text + fmt::format("; {} cores ({} groups of {}), {} cable{} per spine-core pair",
                            t.cores(), t.spines_per_pod, t.cores_per_group, t.spine_core_cables,
                            t.spine_core_cables == 1 ? "" : "s");
}

// The torus cut of one slice: the axis whose straight cut crosses the fewest links.
Cut torus_slice_cut(const TorusLayout& t, BytesPerSec link) {
  static constexpr std::string_view kAxes = "xyz";
  Cut best{BytesPerSec::of(std::numeric_limits<double>::infinity()), "a single chip: no cut"};
  for (size_t i = 0; i < t.dims(); ++i) {
    const int64_t e = t.shape[i];
    if (e < 2) {
      continue;
    }
    const int64_t rings = t.chips_per_slice / e;
    const int64_t crossings = t.wraps[i] ? 2 : 1;
    const BytesPerSec bw = link * static_cast<double>(rings * crossings);
    if (bw < best.bandwidth) {
      const std::string axis = i < kAxes.size() ? std::string(1, kAxes[i]) : fmt::format("{}", i);
      best = {bw, fmt::format("{} x {} ICI links across axis {} (extent {}, {}) x {}", crossings,
                              rings, axis, e, t.wraps[i] ? "wraps" : "no wraparound", gbps(link))};
    }
  }
  if (!std::isfinite(best.bandwidth.value())) {
    best.bandwidth = BytesPerSec::of(0.0);
  }
  return best;
}

}  // namespace

void summarize_gpu(const Network& net, const GpuLayout& g, NetworkSummary& s) {
  const Cut network = gpu_network_cut(net, g);
  const Cut nvlink = gpu_nvlink_cut(net, g);
  s.bisection_bandwidth = network.bandwidth + nvlink.bandwidth;
  s.bisection_formula = network.formula;
  if (nvlink.bandwidth.value() > 0.0) {
    s.bisection_formula += "; plus " + nvlink.formula;
  }
  s.diameter_hops = gpu_diameter(net, g);
  s.layout = gpu_layout_text(g.tree);
}

void summarize_torus(const Network& net, const TorusLayout& t, NetworkSummary& s) {
  const ClusterSpec& spec = net.spec();
  const Cut slice = torus_slice_cut(t, spec.scale_up_link_bandwidth);
  int64_t diameter = 0;
  for (size_t i = 0; i < t.dims(); ++i) {
    diameter += t.wraps[i] ? t.shape[i] / 2 : t.shape[i] - 1;
  }
  s.layout = fmt::format("{} torus ({} chips per slice), {} slice{}", fmt::join(t.shape, "x"),
                         t.chips_per_slice, t.slices, t.slices == 1 ? "" : "s");
  if (t.slices == 1) {
    s.bisection_bandwidth = slice.bandwidth;
    s.bisection_formula = slice.formula;
    s.diameter_hops = diameter;
    return;
  }
  const BytesPerSec dcn =
      spec.dcn_bandwidth * static_cast<double>(t.slices * t.chips_per_slice / 2);
  s.bisection_bandwidth = dcn;
  s.bisection_formula = fmt::format("DCN of half the slices: {} x {} chips / 2 x {}", t.slices,
                                    t.chips_per_slice, gbps(spec.dcn_bandwidth));
  if (t.slices % 2 == 1) {
    s.bisection_bandwidth = s.bisection_bandwidth + slice.bandwidth;
    s.bisection_formula += fmt::format("; plus one split slice: {}", slice.formula);
  }
  s.diameter_hops = std::max<int64_t>(diameter, 4);
  s.layout += "; DCN: a switch per slice under one DCN core";
}

namespace {

void summarize_custom(const Network& net, const NetworkData& impl, NetworkSummary& s) {
  const size_t n = net.num_devices();
  s.layout = fmt::format("explicit graph: {} switches, {} cables", impl.spec.graph->switches.size(),
                         impl.spec.graph->links.size());
  if (n < 2) {
    s.bisection_formula = "a single device: no cut";
    return;
  }
  std::vector<DeviceId> first;
  std::vector<DeviceId> second;
  for (size_t d = 0; d < n; ++d) {
    (d < n / 2 ? first : second).emplace_back(static_cast<uint32_t>(d));
  }
  s.bisection_bandwidth = net.cut_bandwidth(first, second);
  s.bisection_formula = fmt::format("max-flow from devices 0 .. {} to {} .. {} (file order)",
                                    n / 2 - 1, n / 2, n - 1);
  for (size_t b = 0; b < n; ++b) {
    const VertexId vb(static_cast<uint32_t>(b));
    const std::vector<int32_t> direct = distances_to(impl, vb, false);
    const std::vector<int32_t> any = distances_to(impl, vb, true);
    for (size_t a = 0; a < n; ++a) {
      s.diameter_hops = std::max<int64_t>(s.diameter_hops, direct[a] >= 0 ? direct[a] : any[a]);
    }
  }
}

}  // namespace

}  // namespace detail

NetworkSummary Network::summary() const {
  NetworkSummary s;
  detail::count_vertices(*impl_, s);
  detail::count_links(*impl_, s);
  if (impl_->gpu) {
    detail::summarize_gpu(*this, *impl_->gpu, s);
  } else if (impl_->torus) {
    detail::summarize_torus(*this, *impl_->torus, s);
  } else {
    detail::summarize_custom(*this, *impl_, s);
  }
  return s;
}

}  // namespace meshsim::topology
