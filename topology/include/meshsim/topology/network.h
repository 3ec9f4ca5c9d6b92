// The cluster as a network graph: devices, switches and NICs joined by directed links, with
// routing over it. Built from a ClusterSpec with Boost.Graph (hidden behind a pimpl, STYLE A.2).
//
// Vertices: one per device (GPU or TPU chip, DeviceId d is device d of the cluster, numbered node
// by node), one NVSwitch vertex per NVSwitch domain (a node of a DGX, or a whole NVL72 domain),
// one NIC per device for fat trees (device -> NIC over PCIe), leaf / spine / core switches of the
// fat tree, and a DCN vertex per slice for multi-slice TPU systems.
// Links: every physical cable is two directed links, one per direction, each with its own
// bandwidth and latency. Kinds: NVLink (device <-> NVSwitch, carrying the device's whole NVLink
// bandwidth), ICI (torus neighbours; wraparound links where the axis wraps), PCIe (device <->
// NIC), network (InfiniBand/RoCE: NIC <-> leaf <-> spine <-> core; leaf uplinks thinned by the
// oversubscription ratio), DCN.
// Latency convention: link latencies are set so that the latency of a whole path equals the
// fabric's per-message latency from the ClusterSpec (scale_up_latency for device -> NVSwitch ->
// device; scale_out_latency for device -> NIC -> ... -> NIC -> device over the shortest inter-leaf
// path); on a torus every ICI hop costs scale_up_latency.
// Routing: on tori, dimension order (x, then y, then z), the shorter way around each ring (ties
// go in the positive direction); elsewhere shortest paths, with ECMP over equal-cost paths.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "meshsim/sim/ids.h"
#include "meshsim/sim/units.h"
#include "meshsim/topology/cluster.h"

namespace meshsim::topology {

using VertexId = StrongId<struct VertexTag>;

enum class VertexKind : uint8_t { kDevice, kNvSwitch, kNic, kLeaf, kSpine, kCore, kDcn };
std::string_view to_string(VertexKind k);

enum class LinkKind : uint8_t { kNvlink, kIci, kPcie, kNetwork, kDcn };
inline constexpr int kNumLinkKinds = 5;
std::string_view to_string(LinkKind k);

struct Vertex {
  VertexKind kind = VertexKind::kDevice;
  std::string name;               // e.g. "node3/gpu5", "node3/nvswitch", "leaf rail5 #1", "spine 7"
  std::optional<DeviceId> device; // devices only
  int64_t node = -1;              // host of devices, NICs and NVSwitches; -1 for fabric switches
};

struct Link {
  VertexId src;
  VertexId dst;
  LinkKind kind = LinkKind::kNvlink;
  BytesPerSec bandwidth;  // this direction
  Duration latency;
};

using Path = std::vector<LinkId>;

struct LinkKindSummary {
  int64_t count = 0;  // directed links
  BytesPerSec bandwidth;  // per link, per direction (the most common value)
};

struct NetworkSummary {
  int64_t devices = 0;
  int64_t switches = 0;
  int64_t nics = 0;
  std::map<LinkKind, LinkKindSummary> links;
  // Per direction, across the worst cut that splits the devices into two equal halves.
  BytesPerSec bisection_bandwidth;
  int64_t diameter_hops = 0;  // longest shortest path between two devices, in links
};

class Network {
 public:
  // Throws InputError (naming the cluster source) for an impossible network: zero bandwidth, a
  // disconnected graph, a torus whose shape does not match the chip count.
  static Network build(const ClusterSpec& spec);
  ~Network();
  Network(Network&&) noexcept;
  Network& operator=(Network&&) noexcept;

  const ClusterSpec& spec() const;
  size_t num_devices() const;
  size_t num_vertices() const;
  size_t num_links() const;
  const Vertex& vertex(VertexId v) const;
  const Link& link(LinkId l) const;
  VertexId device_vertex(DeviceId d) const;
  // The NVSwitch vertex of a device's scale-up domain (for in-switch reduction), if any.
  std::optional<VertexId> nvswitch_of(DeviceId d) const;
  // The directed link from `a` to `b`, if the two vertices are neighbours.
  std::optional<LinkId> link_between(VertexId a, VertexId b) const;

  // Every equal-cost path from `a` to `b` (tori: exactly one, dimension order). Empty if a == b.
  std::vector<Path> paths(VertexId a, VertexId b) const;
  // One of `paths(a, b)`, chosen deterministically from `salt` (ECMP hashing of a flow).
  Path route(VertexId a, VertexId b, uint64_t salt = 0) const;
  int64_t hops(DeviceId a, DeviceId b) const;
  Duration path_latency(const Path& p) const;
  BytesPerSec path_bandwidth(const Path& p) const;  // slowest link

  // Torus coordinates of a device (one per axis); empty off tori.
  std::vector<int64_t> torus_coords(DeviceId d) const;
  // The device at torus coordinates `coords` in slice `slice`.
  DeviceId device_at(const std::vector<int64_t>& coords, int64_t slice = 0) const;

  NetworkSummary summary() const;

 private:
  struct Impl;
  explicit Network(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// Rank -> device. Default: ranks fill nodes in order (rank r on device r).
struct Placement {
  std::vector<DeviceId> device_of_rank;

  static Placement in_order(int64_t ranks);
  // Checks every rank has a device of the cluster and no device holds two ranks; throws
  // InputError naming `source` otherwise.
  void validate(const ClusterSpec& spec, const std::string& source) const;
};

// The text `meshsim topology` prints.
std::string format_summary(const ClusterSpec& spec, const NetworkSummary& s);

}  // namespace meshsim::topology
