// Network: construction dispatch, the property tables, routing dispatch, and Placement.
#include "meshsim/topology/network.h"

#include <fmt/format.h>

#include <algorithm>
#include <utility>

#include "meshsim/sim/error.h"
#include "network_impl.h"

namespace meshsim::topology {
namespace {

uint64_t link_key(VertexId a, VertexId b) {
  return (static_cast<uint64_t>(a.value()) << 32U) | b.value();
}

// Checks what every fabric needs: a positive device count that matches the fabric, and positive
// bandwidths for the links the fabric will build.
void check_spec(const ClusterSpec& spec) {
  if (spec.device_count() <= 0) {
    throw InputError(spec.source, "/nodes",
                     fmt::format("expected a positive device count, got {} nodes x {} devices",
                                 spec.nodes, spec.devices_per_node));
  }
  if (spec.device_count() > int64_t{1} << 24) {
    throw InputError(spec.source, "/nodes",
                     fmt::format("{} devices: expected at most 2^24 devices in a network graph",
                                 spec.device_count()));
  }
  if (spec.graph) {
    return;  // the graph's own links were checked by the loader
  }
  if (spec.scale_up_links <= 0) {
    throw InputError(spec.source, "/scale_up/links",
                     fmt::format("expected a positive number of scale-up links per device, got {}",
                                 spec.scale_up_links));
  }
  detail::require_positive(spec, "/scale_up/link_bandwidth", spec.scale_up_link_bandwidth,
                           "scale-up link bandwidth");
}

void check_connected(const detail::NetworkData& impl) {
  const std::optional<VertexId> lost = detail::first_unreachable(impl);
  if (!lost) {
    return;
  }
  const std::string pointer = impl.spec.graph ? "/graph/links" : "";
  throw InputError(impl.spec.source, pointer,
                   fmt::format("the network is disconnected: \"{}\" cannot reach \"{}\" (expected "
                               "every device and switch joined by links)",
                               impl.vertices[lost->index()].name, impl.vertices[0].name));
}

}  // namespace

namespace detail {

VertexId NetworkData::add_vertex(Vertex v) {
  const auto id = VertexId(static_cast<uint32_t>(vertices.size()));
  boost::add_vertex(graph);
  vertices.push_back(std::move(v));
  return id;
}

LinkId NetworkData::add_cable(VertexId a, VertexId b, LinkKind kind, BytesPerSec bandwidth,
                              Duration latency, int64_t cables) {
  SIM_CHECK(a != b && a.index() < vertices.size() && b.index() < vertices.size(),
            "cable between vertices {} and {} of {}", a.value(), b.value(), vertices.size());
  SIM_CHECK(!find_link(a, b), "second cable between {} and {}", vertices[a.index()].name,
            vertices[b.index()].name);
  const auto first = LinkId(static_cast<uint32_t>(links.size()));
  for (const auto& [src, dst] : {std::pair{a, b}, std::pair{b, a}}) {
    const auto id = LinkId(static_cast<uint32_t>(links.size()));
    links.push_back(Link{src, dst, kind, bandwidth, latency, cables});
    boost::add_edge(src.index(), dst.index(), EdgeProps{id.value()}, graph);
    link_index.emplace(link_key(src, dst), id);
  }
  return first;
}

std::optional<LinkId> NetworkData::find_link(VertexId a, VertexId b) const {
  const auto it = link_index.find(link_key(a, b));
  if (it == link_index.end()) {
    return std::nullopt;
  }
  return it->second;
}

LinkId NetworkData::link_or_die(VertexId a, VertexId b) const {
  const std::optional<LinkId> l = find_link(a, b);
  SIM_CHECK(l.has_value(), "no link from {} to {}", vertices[a.index()].name,
            vertices[b.index()].name);
  return *l;
}

void require_positive(const ClusterSpec& spec, const std::string& pointer, BytesPerSec bandwidth,
                      const std::string& what) {
  if (!(bandwidth.value() > 0.0)) {
    throw InputError(
        spec.source, pointer,
        fmt::format("{} is {} B/s; expected a positive bandwidth", what, bandwidth.value()));
  }
}

}  // namespace detail

Network Network::build(const ClusterSpec& spec) {
  check_spec(spec);
  auto impl = std::make_unique<Impl>();
  impl->spec = spec;
  impl->nvswitch.assign(impl->num_devices(), std::nullopt);
  if (spec.graph) {
    detail::build_custom(*impl);
  } else if (spec.scale_up == ScaleUpFabric::kIciTorus) {
    detail::build_torus(*impl);
  } else {
    detail::build_gpu_cluster(*impl);
  }
  check_connected(*impl);
  return Network(std::move(impl));
}

Network::Network(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Network::~Network() = default;
Network::Network(Network&&) noexcept = default;
Network& Network::operator=(Network&&) noexcept = default;

const ClusterSpec& Network::spec() const { return impl_->spec; }
size_t Network::num_devices() const { return impl_->num_devices(); }
size_t Network::num_vertices() const { return impl_->vertices.size(); }
size_t Network::num_links() const { return impl_->links.size(); }

const Vertex& Network::vertex(VertexId v) const {
  SIM_CHECK(v.index() < impl_->vertices.size(), "vertex {} of {}", v.value(),
            impl_->vertices.size());
  return impl_->vertices[v.index()];
}

const Link& Network::link(LinkId l) const {
  SIM_CHECK(l.index() < impl_->links.size(), "link {} of {}", l.value(), impl_->links.size());
  return impl_->links[l.index()];
}

VertexId Network::device_vertex(DeviceId d) const {
  SIM_CHECK(d.index() < num_devices(), "device {} of {}", d.value(), num_devices());
  return VertexId(d.value());
}

std::optional<VertexId> Network::nvswitch_of(DeviceId d) const {
  SIM_CHECK(d.index() < num_devices(), "device {} of {}", d.value(), num_devices());
  return impl_->nvswitch[d.index()];
}

std::optional<LinkId> Network::link_between(VertexId a, VertexId b) const {
  return impl_->find_link(a, b);
}

// Routing dispatch. Device pairs of a built-in fabric use its structure; one-link hops (a device
// to its NVSwitch) are the link itself; everything else searches the graph.
std::vector<LinkId> Network::out_links(VertexId v) const {
  SIM_CHECK(v.index() < num_vertices(), "vertex {} of {}", v.value(), num_vertices());
  std::vector<LinkId> out;
  for (const auto e : boost::make_iterator_range(boost::out_edges(v.index(), impl_->graph))) {
    out.push_back(LinkId(impl_->graph[e].link));
  }
  std::sort(out.begin(), out.end());
  return out;
}

int64_t Network::path_count(VertexId a, VertexId b) const {
  if (a == b) {
    return 0;
  }
  if (const std::optional<LinkId> l = impl_->find_link(a, b); l && !impl_->link_down(*l)) {
    return 1;
  }
  if (impl_->is_device(a) && impl_->is_device(b)) {
    if (impl_->torus) {
      return 1;
    }
    if (impl_->gpu) {
      return detail::gpu_path_count(*impl_, DeviceId(a.value()), DeviceId(b.value()));
    }
  }
  return static_cast<int64_t>(paths(a, b).size());
}

std::vector<Path> Network::paths(VertexId a, VertexId b) const {
  SIM_CHECK(a.index() < num_vertices() && b.index() < num_vertices(), "paths({}, {}) of {}",
            a.value(), b.value(), num_vertices());
  if (a == b) {
    return {};
  }
  if (const std::optional<LinkId> l = impl_->find_link(a, b); l && !impl_->link_down(*l)) {
    return {Path{*l}};
  }
  if (impl_->is_device(a) && impl_->is_device(b) && (impl_->torus || impl_->gpu)) {
    const int64_t count = std::min<int64_t>(path_count(a, b), static_cast<int64_t>(kMaxPaths));
    std::vector<Path> out;
    out.reserve(static_cast<size_t>(count));
    for (int64_t i = 0; i < count; ++i) {
      out.push_back(route(a, b, static_cast<uint64_t>(i)));
    }
    return out;
  }
  return detail::search_paths(*impl_, a, b, kMaxPaths);
}

Path Network::route(VertexId a, VertexId b, uint64_t salt) const {
  SIM_CHECK(a.index() < num_vertices() && b.index() < num_vertices(), "route({}, {}) of {}",
            a.value(), b.value(), num_vertices());
  if (a == b) {
    return {};
  }
  if (const std::optional<LinkId> l = impl_->find_link(a, b); l && !impl_->link_down(*l)) {
    return {*l};
  }
  if (impl_->is_device(a) && impl_->is_device(b)) {
    const DeviceId da(a.value());
    const DeviceId db(b.value());
    if (impl_->torus) {
      return detail::torus_path(*impl_, da, db);
    }
    if (impl_->gpu) {
      const auto count = static_cast<uint64_t>(detail::gpu_path_count(*impl_, da, db));
      return detail::gpu_nth_path(*impl_, da, db, static_cast<int64_t>(salt % count));
    }
  }
  std::vector<Path> all = detail::search_paths(*impl_, a, b, kMaxPaths);
  SIM_CHECK(!all.empty(), "no path from {} to {}", vertex(a).name, vertex(b).name);
  return std::move(all[salt % all.size()]);
}

int64_t Network::hops(DeviceId a, DeviceId b) const {
  SIM_CHECK(a.index() < num_devices() && b.index() < num_devices(), "hops({}, {}) of {}", a.value(),
            b.value(), num_devices());
  if (a == b) {
    return 0;
  }
  if (!impl_->down.empty()) {  // around failed links: count the detour
    return static_cast<int64_t>(route(device_vertex(a), device_vertex(b)).size());
  }
  if (impl_->torus) {
    return detail::torus_hops(*impl_, a, b);
  }
  if (impl_->gpu) {
    return detail::gpu_hops(*impl_, a, b);
  }
  return static_cast<int64_t>(route(device_vertex(a), device_vertex(b)).size());
}

Duration Network::path_latency(const Path& p) const {
  Duration total = Duration::zero();
  for (const LinkId l : p) {
    total += link(l).latency;
  }
  return total;
}

BytesPerSec Network::path_bandwidth(const Path& p) const {
  SIM_CHECK(!p.empty(), "bandwidth of an empty path");
  BytesPerSec slowest = link(p.front()).bandwidth;
  for (const LinkId l : p) {
    slowest = std::min(slowest, link(l).bandwidth);
  }
  return slowest;
}

std::vector<int64_t> Network::torus_coords(DeviceId d) const {
  SIM_CHECK(d.index() < num_devices(), "device {} of {}", d.value(), num_devices());
  if (!impl_->torus) {
    return {};
  }
  return impl_->torus->coords(static_cast<int64_t>(d.value()) % impl_->torus->chips_per_slice);
}

DeviceId Network::device_at(const std::vector<int64_t>& coords, int64_t slice) const {
  SIM_CHECK(impl_->torus.has_value(), "device_at on {}, which is not a torus", spec().name);
  const TorusLayout& t = *impl_->torus;
  SIM_CHECK(coords.size() == t.dims() && slice >= 0 && slice < t.slices,
            "device_at([{}], slice {}) on a {}-axis torus of {} slices", fmt::join(coords, ", "),
            slice, t.dims(), t.slices);
  return DeviceId(static_cast<uint32_t>(slice * t.chips_per_slice + t.local_index(coords)));
}

std::vector<Path> Network::search_paths(VertexId a, VertexId b) const {
  SIM_CHECK(a.index() < num_vertices() && b.index() < num_vertices(), "search_paths({}, {}) of {}",
            a.value(), b.value(), num_vertices());
  return detail::search_paths(*impl_, a, b, kMaxPaths);
}

BytesPerSec Network::cut_bandwidth(const std::vector<DeviceId>& from,
                                   const std::vector<DeviceId>& to) const {
  return detail::max_flow(*impl_, from, to);
}

Placement Placement::in_order(int64_t ranks) {
  SIM_CHECK(ranks >= 0, "{} ranks", ranks);
  Placement p;
  p.device_of_rank.reserve(static_cast<size_t>(ranks));
  for (int64_t r = 0; r < ranks; ++r) {
    p.device_of_rank.emplace_back(static_cast<uint32_t>(r));
  }
  return p;
}

void Placement::validate(const ClusterSpec& spec, const std::string& source) const {
  if (device_of_rank.empty()) {
    throw InputError(source, "/placement", "no ranks are placed (expected one device per rank)");
  }
  const auto devices = static_cast<size_t>(spec.device_count());
  std::vector<std::optional<size_t>> rank_on(devices);
  for (size_t r = 0; r < device_of_rank.size(); ++r) {
    const size_t d = device_of_rank[r].index();
    const std::string where = fmt::format("/placement/{}", r);
    if (d >= devices) {
      throw InputError(source, where,
                       fmt::format("rank {} is on device {}, but cluster \"{}\" has {} devices "
                                   "(expected a device 0 .. {})",
                                   r, d, spec.name, devices, devices - 1));
    }
    if (rank_on[d]) {
      throw InputError(source, where,
                       fmt::format("rank {} is on device {}, which already holds rank {} "
                                   "(expected one rank per device)",
                                   r, d, *rank_on[d]));
    }
    rank_on[d] = r;
  }
}

void Placement::validate(const ClusterSpec& spec, const std::string& source, int64_t ranks) const {
  const auto placed = static_cast<int64_t>(device_of_rank.size());
  if (placed < ranks) {
    throw InputError(source, fmt::format("/placement/{}", placed),
                     fmt::format("rank {} is on no device: the placement covers ranks 0 .. {} of "
                                 "{} (expected one device per rank)",
                                 placed, placed - 1, ranks));
  }
  if (placed > ranks) {
    throw InputError(source, fmt::format("/placement/{}", ranks),
                     fmt::format("the placement has {} entries for {} ranks (expected {})", placed,
                                 ranks, ranks));
  }
  validate(spec, source);
}

}  // namespace meshsim::topology
