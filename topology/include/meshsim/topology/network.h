// The cluster as a network graph: devices, switches and NICs joined by directed links, with
// routing over it. Built from a ClusterSpec with Boost.Graph (hidden behind a pimpl:
// docs/style.md A.2).
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
//
// Construction rules, routing details and the bisection / diameter formulas are documented at
// the top of topology/src/network_fat_tree.cc, network_torus.cc, network_custom.cc and
// network_summary.cc; `format_summary` prints the numbers each formula used.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "meshsim/sim/ids.h"
#include "meshsim/sim/units.h"
#include "meshsim/topology/cluster.h"

namespace meshsim::topology {

using VertexId = StrongId<struct VertexTag>;

enum class VertexKind : uint8_t { kDevice, kNvSwitch, kNic, kLeaf, kSpine, kCore, kDcn };
constexpr auto enum_names(VertexKind) {
  return std::to_array<EnumName<VertexKind>>({{VertexKind::kDevice, "device"},
                                              {VertexKind::kNvSwitch, "nvswitch"},
                                              {VertexKind::kNic, "nic"},
                                              {VertexKind::kLeaf, "leaf"},
                                              {VertexKind::kSpine, "spine"},
                                              {VertexKind::kCore, "core"},
                                              {VertexKind::kDcn, "dcn"}});
}

enum class LinkKind : uint8_t { kNvlink, kIci, kPcie, kNetwork, kDcn };
inline constexpr int kNumLinkKinds = 5;
constexpr auto enum_names(LinkKind) {
  return std::to_array<EnumName<LinkKind>>({{LinkKind::kNvlink, "nvlink"},
                                            {LinkKind::kIci, "ici"},
                                            {LinkKind::kPcie, "pcie"},
                                            {LinkKind::kNetwork, "network"},
                                            {LinkKind::kDcn, "dcn"}});
}

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
  // Physical cables this link stands for: parallel cables between the same two switches (a leaf
  // with 8 uplinks to each of 4 spines) are one link of 8 x the cable bandwidth, so that ECMP
  // counts paths across switches, not across parallel cables. 1 everywhere else.
  int64_t cables = 1;
};

using Path = std::vector<LinkId>;

// A degraded or failed part (issue 16): the links of `kind` that attach `device`
// (Network::device_links) keep `factor` of their bandwidth; factor 0 means down (no traffic
// crosses them, routes go around: Network::apply_faults). A failure may name one of them:
// `nic` (network, pcie: NIC k of the device, 0-based), `ici_axis` and `ici_direction` (ici: the
// link to the +1 or -1 neighbour along torus axis 0, 1 or 2), or `spine` (network: instead of
// the NIC's cable, the uplinks from the leaf of the device's NIC (`nic`, default 0) to spine
// `spine` of its pod, 0-based; fat trees of 2 or 3 tiers).
struct LinkFault {
  DeviceId device;
  LinkKind kind = LinkKind::kNetwork;
  double factor = 1.0;
  std::optional<int64_t> nic;
  std::optional<int64_t> ici_axis;
  std::optional<int64_t> spine;
  int ici_direction = 1;  // +1 or -1

  static LinkFault degraded(DeviceId d, LinkKind kind, double factor) {
    LinkFault f;
    f.device = d;
    f.kind = kind;
    f.factor = factor;
    return f;
  }
  static LinkFault failed(DeviceId d, LinkKind kind) { return degraded(d, kind, 0.0); }
  bool down() const { return factor == 0.0; }
};
// "device 3 network", "device 3 network (NIC 1)", "device 5 ici x+".
std::string describe(const LinkFault& f);
// An ICI link of a chip by its torus axis (0, 1, 2) and direction (+1, -1), named as "x+" ...
// "z-" in flags, scenario files and reports; parse_ici_link is nullopt for any other text.
std::string ici_link_name(int64_t axis, int direction);
std::optional<std::pair<int64_t, int>> parse_ici_link(std::string_view name);

// A fault the network cannot take: the device has no such link, or no route is left around a
// failed one. `index` is the fault's position in the list given to apply_faults (the edge names
// where it was given); message() says why.
class LinkFaultError : public std::runtime_error {
 public:
  LinkFaultError(size_t index, std::string message)
      : std::runtime_error(message), index_(index), message_(std::move(message)) {}
  size_t index() const { return index_; }
  const std::string& message() const { return message_; }

 private:
  size_t index_;
  std::string message_;
};

struct LinkKindSummary {
  int64_t count = 0;  // directed links
  BytesPerSec bandwidth;  // per link, per direction (the most common value)
};

// Directed links of one kind between two kinds of vertices with one bandwidth (both directions
// counted), e.g. 4096 network links leaf <-> spine at 50 GB/s.
struct LinkGroupSummary {
  LinkKind kind = LinkKind::kNetwork;
  VertexKind a = VertexKind::kDevice;  // a <= b
  VertexKind b = VertexKind::kDevice;
  BytesPerSec bandwidth;  // per link, per direction
  int64_t cables = 1;     // cables per link (Link::cables)
  int64_t count = 0;      // directed links
};

struct NetworkSummary {
  int64_t devices = 0;
  int64_t switches = 0;  // every vertex that is neither a device nor a NIC
  int64_t nics = 0;
  std::map<LinkKind, LinkKindSummary> links;
  // Per direction, across the worst cut that splits the devices into two equal halves.
  BytesPerSec bisection_bandwidth;
  int64_t diameter_hops = 0;  // longest shortest path between two devices, in links

  std::map<VertexKind, int64_t> vertices_by_kind;
  std::vector<LinkGroupSummary> link_groups;  // sorted by (kind, a, b, bandwidth)
  std::string bisection_formula;  // how bisection_bandwidth was computed, with its numbers
  std::string layout;             // how the fabric was wired (switch counts, ports, cables)
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
  // The links leaving `v`, in the order they were built. O(degree).
  std::vector<LinkId> out_links(VertexId v) const;

  // Every equal-cost path from `a` to `b` (tori: exactly one, dimension order). Empty if a == b.
  // At most kMaxPaths, the first ones in a stable order (see path_count).
  std::vector<Path> paths(VertexId a, VertexId b) const;
  // One of `paths(a, b)`, chosen deterministically from `salt` (ECMP hashing of a flow): path
  // number salt mod path_count(a, b) in the stable order, so salts 0, 1, 2, ... spread flows
  // round-robin over spines. Built-in fabrics answer in O(path length), without enumerating.
  Path route(VertexId a, VertexId b, uint64_t salt = 0) const;
  int64_t hops(DeviceId a, DeviceId b) const;
  // Number of equal-cost paths (the ECMP width) from `a` to `b`; 0 if a == b. May exceed
  // kMaxPaths, in which case route() still chooses among all of them.
  int64_t path_count(VertexId a, VertexId b) const;
  static constexpr size_t kMaxPaths = 4096;

  // Reference routing by graph search, independent of the structure-aware routing above: every
  // shortest path from `a` to `b` (at most kMaxPaths) whose intermediate vertices are not
  // devices, or, if there is none, every shortest path through devices too (chips that forward,
  // as on a torus). O(V + E) per call. Used for explicit graphs and to check the fabrics in tests;
  // differs from paths() by design on tori (all shortest paths, not dimension order) and between
  // chips of one slice of a multi-slice system (which may shortcut through DCN).
  std::vector<Path> search_paths(VertexId a, VertexId b) const;
  // Maximum flow from the devices of `from` to the devices of `to`, per direction (Boost
  // push-relabel on the link graph). Devices forward traffic only where the fabric routes
  // through them (tori; explicit graphs with device-device links). O(V^2 sqrt(E)) worst case.
  BytesPerSec cut_bandwidth(const std::vector<DeviceId>& from,
                            const std::vector<DeviceId>& to) const;
  Duration path_latency(const Path& p) const;
  BytesPerSec path_bandwidth(const Path& p) const;  // slowest link

  // Torus coordinates of a device (one per axis); empty off tori.
  std::vector<int64_t> torus_coords(DeviceId d) const;
  // The device at torus coordinates `coords` in slice `slice`.
  DeviceId device_at(const std::vector<int64_t>& coords, int64_t slice = 0) const;

  NetworkSummary summary() const;

  // Degraded hardware (issue 16): `link` keeps `factor` (0 < factor <= 1) of its bandwidth, as
  // a NIC or cable trained down to a lower rate, or a flapping one averaged over the step. Call
  // before a model is built on the network: planners and the shared network read the bandwidth
  // then.
  void scale_bandwidth(LinkId link, double factor);
  // The links, both directions, that attach device `d` to the fabric of `kind`: kNetwork the
  // cables from its NICs to their leaves, kNvlink or kIci its scale-up links, kPcie its links
  // to its NICs. Empty if it has none of that kind.
  std::vector<LinkId> device_links(DeviceId d, LinkKind kind) const;
  // scale_bandwidth on the links of each fault (factors of one link multiply). Throws
  // LinkFaultError for a device without links of the fault's kind.
  void degrade(const std::vector<LinkFault>& faults);
  // Degrades the faults with factor > 0 and takes down those with factor 0: routes (route,
  // paths, path_count, hops, search_paths) then avoid the down links.
  //  * GPU fat trees: a NIC down (network or pcie; one NIC, or all of the device's) moves the
  //    device's traffic to its other NICs, or, with none left, over NVLink to the other devices
  //    of its node and out through their NICs (NCCL's PXN path), spread over them by ECMP. A
  //    leaf's uplinks to one spine down leave ECMP the spines both ends still reach.
  //  * TPU tori: an ICI link down (one link, named by axis and direction) sends the traffic of
  //    its ring the other way round; the axis must wrap and the ring have no other down link.
  //  * No alternative (a device's NVLink, all NICs of a node, a chip's every ICI link, a
  //    non-wrapping axis, DCN, explicit graphs): LinkFaultError saying why.
  // Returns, per failed fault in order, how its traffic is rerouted (for the report). Call once,
  // before a model is built on the network. Bandwidths of down links are kept (summary() and
  // cut_bandwidth() describe the healthy fabric).
  std::vector<std::string> apply_faults(const std::vector<LinkFault>& faults);
  bool is_down(LinkId link) const;
  // The links that carry a failed fault's rerouted traffic (the surviving NICs' cables, the
  // rest of the ring), both directions; for the trace's utilisation counters.
  std::vector<LinkId> detour_links(const LinkFault& fault) const;

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
  // InputError naming `source` otherwise, at location "/placement/<rank>" (or "/placement").
  void validate(const ClusterSpec& spec, const std::string& source) const;
  // The same, and also that the placement covers exactly ranks 0 .. ranks-1.
  void validate(const ClusterSpec& spec, const std::string& source, int64_t ranks) const;
};

// The text `meshsim topology` prints.
std::string format_summary(const ClusterSpec& spec, const NetworkSummary& s);

}  // namespace meshsim::topology
