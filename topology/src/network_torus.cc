// TPU slices: ICI tori, and DCN between slices.
//
// Wiring rules:
//  * Chips of slice s sit at torus coordinates with x fastest: device = s * chips_per_slice +
//    x + X (y + Y z). (Hosts are consecutive device ranges; they carry no links of their own.)
//  * ICI: one cable from every chip to its +1 neighbour on each axis of extent > 1, and from the
//    last chip of a ring back to the first where the axis wraps (ClusterSpec::torus_wraparound).
//    An axis of extent 2 has one cable between its two chips, wraparound or not: the +1 and the
//    wrap neighbour are the same chip, and the graph holds one cable per pair of vertices (so the
//    axis counts as not wrapping for routing and bisection). Every ICI link carries
//    scale_up_link_bandwidth per direction and scale_up_latency (each hop pays the ICI latency).
//  * DCN, only with slices > 1: a DCN vertex per slice, joined to each of its chips at the chip's
//    dcn_bandwidth, and one DCN core joined to every slice's DCN vertex at the slice's whole DCN
//    bandwidth (chips x dcn_bandwidth: the data-center network is modelled as non-blocking).
//    Chip links cost scale_out_latency / 2 and core links 0, so chip -> DCN -> chip across slices
//    costs scale_out_latency. A single slice has no DCN vertex.
//
// Routing: inside a slice the single dimension-order path (x, then y, then z), the shorter way
// around each wrapping ring, ties in the positive direction; hops = sum over axes of the ring
// distance. Between slices chip -> slice DCN -> DCN core -> slice DCN -> chip (4 hops). Where
// an ICI link is down (Network::apply_faults), a ring segment that would cross it goes the other
// way round its ring instead (apply_faults allows at most one down link per ring, on wrapping
// axes only, so the other way is always open).
#include <fmt/format.h>

#include <cstdlib>

#include "cluster_checks.h"
#include "meshsim/sim/error.h"
#include "network_impl.h"

namespace meshsim::topology {

std::vector<int64_t> TorusLayout::coords(int64_t local) const {
  std::vector<int64_t> c(dims());
  for (size_t i = 0; i < dims(); ++i) {
    c[i] = local % shape[i];
    local /= shape[i];
  }
  return c;
}

int64_t TorusLayout::local_index(const std::vector<int64_t>& c) const {
  int64_t index = 0;
  for (size_t i = dims(); i-- > 0;) {
    SIM_CHECK(c[i] >= 0 && c[i] < shape[i], "coordinate {} = {} outside extent {}", i, c[i],
              shape[i]);
    index = index * shape[i] + c[i];
  }
  return index;
}

int64_t TorusLayout::ring_delta(size_t axis, int64_t a, int64_t b) const {
  const int64_t e = shape[axis];
  if (!wraps[axis]) {
    return b - a;
  }
  const int64_t forward = ((b - a) % e + e) % e;
  return forward <= e - forward ? forward : forward - e;
}

namespace detail {
namespace {

TorusLayout plan_torus(const ClusterSpec& spec) {
  TorusLayout t;
  t.shape = spec.torus_shape;
  if (t.shape.empty() || spec.torus_wraparound.size() != t.shape.size()) {
    fail_spec(
        spec, "/scale_up/shape",
        fmt::format("expected one extent and one wraparound flag per torus axis, got [{}] and "
                    "{} flags",
                    fmt::join(t.shape, ", "), spec.torus_wraparound.size()));
  }
  t.chips_per_slice = 1;
  for (size_t i = 0; i < t.shape.size(); ++i) {
    if (t.shape[i] <= 0) {
      fail_spec(spec, fmt::format("/scale_up/shape/{}", i),
                fmt::format("expected a positive extent, got {}", t.shape[i]));
    }
    t.chips_per_slice *= t.shape[i];
    t.wraps.push_back(spec.torus_wraparound[i] && t.shape[i] > 2);
  }
  t.slices = spec.slices;
  if (t.slices <= 0 || t.chips_per_slice * t.slices != spec.device_count()) {
    fail_spec(
        spec, "/scale_up/shape",
        fmt::format("{} slice(s) of a {} torus hold {} chips, but the cluster has {} nodes x {} "
                    "= {} devices (expected equal counts)",
                    t.slices, fmt::join(t.shape, "x"), t.chips_per_slice * t.slices, spec.nodes,
                    spec.devices_per_node, spec.device_count()));
  }
  return t;
}

void add_chips(NetworkData& impl, const TorusLayout& t) {
  const ClusterSpec& spec = impl.spec;
  for (int64_t d = 0; d < spec.device_count(); ++d) {
    const std::string at = fmt::format("chip({})", fmt::join(t.coords(d % t.chips_per_slice), ","));
    impl.add_vertex(Vertex{VertexKind::kDevice,
                           t.slices > 1 ? fmt::format("slice{}/{}", d / t.chips_per_slice, at) : at,
                           DeviceId(static_cast<uint32_t>(d)), d / spec.devices_per_node});
  }
}

void add_ici(NetworkData& impl, TorusLayout& t) {
  const ClusterSpec& spec = impl.spec;
  const size_t dims = t.dims();
  t.step.assign(impl.num_devices() * dims * 2, std::nullopt);
  for (int64_t d = 0; d < spec.device_count(); ++d) {
    const int64_t base = d - d % t.chips_per_slice;
    std::vector<int64_t> c = t.coords(d % t.chips_per_slice);
    for (size_t axis = 0; axis < dims; ++axis) {
      const int64_t e = t.shape[axis];
      if (e == 1 || (c[axis] + 1 == e && !t.wraps[axis])) {
        continue;
      }
      std::vector<int64_t> next = c;
      next[axis] = (c[axis] + 1) % e;
      const int64_t n = base + t.local_index(next);
      const LinkId forward =
          impl.add_cable(VertexId(static_cast<uint32_t>(d)), VertexId(static_cast<uint32_t>(n)),
                         LinkKind::kIci, spec.scale_up_link_bandwidth, spec.scale_up_latency);
      t.link_from(d, axis, 1) = forward;
      t.link_from(n, axis, -1) = LinkId(forward.value() + 1);
    }
  }
}

void add_dcn(NetworkData& impl, TorusLayout& t) {
  const ClusterSpec& spec = impl.spec;
  require_positive(spec, "/scale_out/bandwidth", spec.dcn_bandwidth, "DCN bandwidth per chip");
  const Duration half = Duration::from_ps(spec.scale_out_latency.ps() / 2);
  for (int64_t s = 0; s < t.slices; ++s) {
    t.slice_dcn.push_back(static_cast<uint32_t>(impl.vertices.size()));
    impl.add_vertex(Vertex{VertexKind::kDcn, fmt::format("slice{}/dcn", s), std::nullopt, -1});
  }
  t.dcn_core = static_cast<uint32_t>(impl.vertices.size());
  impl.add_vertex(Vertex{VertexKind::kDcn, "dcn core", std::nullopt, -1});
  for (int64_t d = 0; d < spec.device_count(); ++d) {
    impl.add_cable(VertexId(static_cast<uint32_t>(d)),
                   VertexId(t.slice_dcn[static_cast<size_t>(d / t.chips_per_slice)]),
                   LinkKind::kDcn, spec.dcn_bandwidth, half);
  }
  for (int64_t s = 0; s < t.slices; ++s) {
    impl.add_cable(VertexId(t.slice_dcn[static_cast<size_t>(s)]), VertexId(t.dcn_core),
                   LinkKind::kDcn, spec.dcn_bandwidth * static_cast<double>(t.chips_per_slice),
                   Duration::zero());
  }
}

}  // namespace

void build_torus(NetworkData& impl) {
  TorusLayout t = plan_torus(impl.spec);
  add_chips(impl, t);
  add_ici(impl, t);
  if (t.slices > 1) {
    add_dcn(impl, t);
  }
  impl.devices_forward = true;
  impl.torus = std::move(t);
}

int64_t torus_hops(const NetworkData& impl, DeviceId a, DeviceId b) {
  const TorusLayout& t = *impl.torus;
  const auto da = static_cast<int64_t>(a.value());
  const auto db = static_cast<int64_t>(b.value());
  if (da / t.chips_per_slice != db / t.chips_per_slice) {
    return 4;
  }
  const std::vector<int64_t> ca = t.coords(da % t.chips_per_slice);
  const std::vector<int64_t> cb = t.coords(db % t.chips_per_slice);
  int64_t hops = 0;
  for (size_t axis = 0; axis < t.dims(); ++axis) {
    hops += std::abs(t.ring_delta(axis, ca[axis], cb[axis]));
  }
  return hops;
}

namespace {

// Whether the `delta` steps along `axis` from vertex `at` cross a link that is down.
bool blocked(const NetworkData& impl, const TorusLayout& t, uint32_t at, size_t axis,
             int64_t delta) {
  for (int64_t k = 0; k < std::abs(delta); ++k) {
    const std::optional<LinkId> l = t.link_from(at, axis, delta);
    if (!l) {
      return false;
    }
    if (impl.link_down(*l)) {
      return true;
    }
    at = impl.links[l->index()].dst.value();
  }
  return false;
}

}  // namespace

Path torus_path(const NetworkData& impl, DeviceId a, DeviceId b) {
  const TorusLayout& t = *impl.torus;
  const auto da = static_cast<int64_t>(a.value());
  const auto db = static_cast<int64_t>(b.value());
  const int64_t slice_a = da / t.chips_per_slice;
  const int64_t slice_b = db / t.chips_per_slice;
  if (slice_a != slice_b) {
    const VertexId up(t.slice_dcn[static_cast<size_t>(slice_a)]);
    const VertexId down(t.slice_dcn[static_cast<size_t>(slice_b)]);
    const VertexId core(t.dcn_core);
    return {impl.link_or_die(VertexId(a.value()), up), impl.link_or_die(up, core),
            impl.link_or_die(core, down), impl.link_or_die(down, VertexId(b.value()))};
  }
  const std::vector<int64_t> ca = t.coords(da % t.chips_per_slice);
  const std::vector<int64_t> cb = t.coords(db % t.chips_per_slice);
  Path path;
  uint32_t at = a.value();
  for (size_t axis = 0; axis < t.dims(); ++axis) {
    int64_t delta = t.ring_delta(axis, ca[axis], cb[axis]);
    if (!impl.down.empty() && blocked(impl, t, at, axis, delta)) {
      delta += delta > 0 ? -t.shape[axis] : t.shape[axis];  // the long way round
    }
    for (int64_t k = 0; k < std::abs(delta); ++k) {
      const std::optional<LinkId> l = t.link_from(at, axis, delta);
      SIM_CHECK(l.has_value(), "no ICI link from {} along axis {}", impl.vertices[at].name, axis);
      path.push_back(*l);
      at = impl.links[l->index()].dst.value();
    }
  }
  SIM_CHECK(at == b.value(), "dimension-order route from {} ended at {}, not {}",
            impl.vertices[a.index()].name, impl.vertices[at].name, impl.vertices[b.index()].name);
  return path;
}

}  // namespace detail
}  // namespace meshsim::topology
