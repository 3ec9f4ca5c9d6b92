// Private: the representation behind Network. Boost.Graph stays in topology/src/
// (docs/style.md A.2).
//
// The graph is a Boost adjacency_list (directed, bidirectional so that in-edges are listed too);
// every edge carries its LinkId, and the property tables `vertices` / `links` are indexed by
// VertexId / LinkId. Every cable is two directed links, added as a pair (2k, 2k+1).
// Vertex numbering: devices first (VertexId d == DeviceId d), then the fabric vertices in the
// order each builder adds them.
//
// Routing is structure-aware for the built-in fabrics (answers in O(path length), no tables of
// paths): GpuLayout for NVSwitch / NVLink-domain nodes on a fat tree (network_fat_tree.cc),
// TorusLayout for ICI tori with optional DCN (network_torus.cc). Explicit graphs route by search
// (network_search.cc).
#pragma once

#include <boost/graph/adjacency_list.hpp>
#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "meshsim/topology/network.h"

namespace meshsim::topology {

// Fat-tree wiring (see network_fat_tree.cc for the rules and their reasons).
struct FatTreeLayout {
  int64_t tiers = 0;
  int64_t radix = 0;
  int64_t down_ports = 0;  // per leaf, to NICs
  int64_t up_ports = 0;    // per leaf, to spines (cables)
  int64_t nics_per_device = 1;
  int64_t rails = 1;            // rail-optimized: devices_per_node x nics_per_device; else 1
  int64_t leaves_per_rail = 1;  // leaf groups
  int64_t leaves = 1;
  int64_t leaves_per_pod = 1;  // 3 tiers: radix / 2 (or all leaves, for one pod); else all
  int64_t pods = 1;
  int64_t spines_per_pod = 0;  // 2 tiers: all spines; 1 tier: none
  int64_t leaf_spine_cables = 0;
  int64_t cores_per_group = 0;  // 3 tiers with >= 2 pods: cores joined to spine j of every pod
  int64_t spine_core_cables = 0;
  uint32_t first_nic = 0;
  uint32_t first_leaf = 0;
  uint32_t first_spine = 0;
  uint32_t first_core = 0;

  int64_t spines() const { return pods * spines_per_pod; }
  int64_t cores() const { return spines_per_pod * cores_per_group; }
  int64_t pod_of_leaf(int64_t leaf) const { return leaf / leaves_per_pod; }
  // Leaf-to-leaf hops: 0 (same leaf), 2 (through a spine of the pod), 4 (through a core).
  int64_t leaf_distance(int64_t la, int64_t lb) const {
    if (la == lb) {
      return 0;
    }
    return pod_of_leaf(la) == pod_of_leaf(lb) ? 2 : 4;
  }
};

// GPU clusters: scale-up domains (one NVSwitch vertex each) joined by a fat tree.
struct GpuLayout {
  int64_t devices_per_node = 8;
  int64_t domain_devices = 8;  // devices per NVSwitch vertex
  uint32_t first_nvswitch = 0;
  FatTreeLayout tree;
  // Per NIC (device * nics_per_device + k): 1 where the NIC is down (its PCIe link or its cable
  // failed, Network::apply_faults). Empty while every NIC works.
  std::vector<uint8_t> nic_down;

  int64_t domain_of(int64_t device) const { return device / domain_devices; }
  // Leaf index of NIC k of device d.
  int64_t leaf_of(int64_t device, int64_t k) const;
  bool nic_works(int64_t device, int64_t k) const {
    return nic_down.empty() ||
           nic_down[static_cast<size_t>(device * tree.nics_per_device + k)] == 0;
  }
  // The ports through which device d's traffic leaves or enters the fabric, each a NIC k of a
  // device `via`: its own working NICs, or, if all are down, the working NICs of the other
  // devices of its node, reached over NVLink (NCCL's PXN path: a GPU hands its data to a peer of
  // its node, which posts it on its NIC). Calls fn(via, k) in a stable order.
  template <typename Fn>
  void for_each_port(int64_t d, Fn&& fn) const {
    bool own = false;
    for (int64_t k = 0; k < tree.nics_per_device; ++k) {
      if (nic_works(d, k)) {
        own = true;
        fn(d, k);
      }
    }
    if (own) {
      return;
    }
    const int64_t first = d / devices_per_node * devices_per_node;
    for (int64_t p = first; p < first + devices_per_node; ++p) {
      for (int64_t k = 0; k < tree.nics_per_device && p != d; ++k) {
        if (nic_works(p, k)) {
          fn(p, k);
        }
      }
    }
  }
};

// TPU slices: tori with wraparound where the axis wraps; DCN between slices.
struct TorusLayout {
  std::vector<int64_t> shape;
  std::vector<bool> wraps;  // effective: the axis wraps and has extent > 2
  int64_t chips_per_slice = 0;
  int64_t slices = 1;
  // step[(device * dims + axis) * 2 + (0: +1, 1: -1)]: the link to that neighbour, if any.
  std::vector<std::optional<LinkId>> step;
  std::vector<uint32_t> slice_dcn;  // DCN vertex per slice (slices > 1 only)
  uint32_t dcn_core = 0;

  size_t dims() const { return shape.size(); }
  // The link from `device` to its neighbour along `axis` in `direction` (> 0: +1, else -1).
  std::optional<LinkId>& link_from(int64_t device, size_t axis, int64_t direction) {
    return step[(static_cast<size_t>(device) * dims() + axis) * 2 + (direction > 0 ? 0 : 1)];
  }
  const std::optional<LinkId>& link_from(int64_t device, size_t axis, int64_t direction) const {
    return step[(static_cast<size_t>(device) * dims() + axis) * 2 + (direction > 0 ? 0 : 1)];
  }
  std::vector<int64_t> coords(int64_t local) const;  // x fastest
  int64_t local_index(const std::vector<int64_t>& coords) const;
  // Signed number of steps along `axis` from coordinate a to b (shorter way; ties positive).
  int64_t ring_delta(size_t axis, int64_t a, int64_t b) const;
};

namespace detail {

// Everything Network::Impl holds (a plain struct in detail so that the builders and routers,
// which are free functions, can name it; Network::Impl derives from it).
struct NetworkData {
  struct EdgeProps {
    uint32_t link = 0;
  };
  using Graph = boost::adjacency_list<boost::vecS, boost::vecS, boost::bidirectionalS,
                                      boost::no_property, EdgeProps>;

  ClusterSpec spec;
  Graph graph;
  std::vector<Vertex> vertices;
  std::vector<Link> links;
  std::unordered_map<uint64_t, LinkId> link_index;  // (src << 32 | dst) -> link; lookups only
  std::vector<std::optional<VertexId>> nvswitch;    // per device
  std::optional<GpuLayout> gpu;
  std::optional<TorusLayout> torus;
  bool devices_forward = false;  // routes may pass through devices (tori, meshes of devices)
  // Per link: 1 where the link is down (Network::apply_faults); routes avoid it. Empty while
  // every link works.
  std::vector<uint8_t> down;

  bool link_down(LinkId l) const { return !down.empty() && down[l.index()] != 0; }

  VertexId add_vertex(Vertex v);
  // Adds the cable a <-> b as two directed links (a->b, then b->a); returns the a->b link.
  LinkId add_cable(VertexId a, VertexId b, LinkKind kind, BytesPerSec bandwidth, Duration latency,
                   int64_t cables = 1);
  std::optional<LinkId> find_link(VertexId a, VertexId b) const;
  LinkId link_or_die(VertexId a, VertexId b) const;
  bool is_device(VertexId v) const { return vertices[v.index()].kind == VertexKind::kDevice; }
  size_t num_devices() const { return static_cast<size_t>(spec.device_count()); }
};

// Builders (each fills impl's graph, tables and layout; throws InputError for impossible input).
void build_gpu_cluster(NetworkData& impl);  // network_fat_tree.cc
void build_torus(NetworkData& impl);        // network_torus.cc
void build_custom(NetworkData& impl);       // network_custom.cc

// Structure-aware routing between two devices of a built-in fabric. `count` is the ECMP width;
// `nth` builds path i (0 <= i < count) in the stable order.
int64_t gpu_path_count(const NetworkData& impl, DeviceId a, DeviceId b);
Path gpu_nth_path(const NetworkData& impl, DeviceId a, DeviceId b, int64_t i);
int64_t gpu_hops(const NetworkData& impl, DeviceId a, DeviceId b);
Path torus_path(const NetworkData& impl, DeviceId a, DeviceId b);
// ECMP paths between leaves la and lb (over the spines both still reach), and path i's links
// from leaf la to leaf lb (network_fat_tree.cc). Whether leaf's uplinks to spine j of its pod
// work.
int64_t leaf_width(const NetworkData& impl, const FatTreeLayout& t, int64_t la, int64_t lb);
bool uplink_works(const NetworkData& impl, const FatTreeLayout& t, int64_t leaf, int64_t j);
void append_leaf_segment(const NetworkData& impl, const FatTreeLayout& t, int64_t la, int64_t lb,
                         int64_t i, Path& path);
int64_t torus_hops(const NetworkData& impl, DeviceId a, DeviceId b);

// Search-based routing (network_search.cc).
// Hop distance to `b` from every vertex over links whose intermediate vertices are switches (or
// any vertex, with `through_devices`); -1 where unreachable.
std::vector<int32_t> distances_to(const NetworkData& impl, VertexId b, bool through_devices);
std::vector<Path> search_paths(const NetworkData& impl, VertexId a, VertexId b, size_t cap);
// The first vertex no path from vertex 0 reaches, if any (Boost breadth-first search).
std::optional<VertexId> first_unreachable(const NetworkData& impl);
BytesPerSec max_flow(const NetworkData& impl, const std::vector<DeviceId>& from,
                     const std::vector<DeviceId>& to);

// Summary pieces (network_summary.cc uses these per fabric).
void summarize_gpu(const Network& net, const GpuLayout& layout, NetworkSummary& s);
void summarize_torus(const Network& net, const TorusLayout& layout, NetworkSummary& s);

// Throws InputError(spec.source, pointer, ...) unless `bandwidth` is positive.
void require_positive(const ClusterSpec& spec, const std::string& pointer, BytesPerSec bandwidth,
                      const std::string& what);

}  // namespace detail

struct Network::Impl : detail::NetworkData {};

}  // namespace meshsim::topology
