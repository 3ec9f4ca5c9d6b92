// Graph search on the network: connectivity, shortest-path enumeration, maximum flow.
//
// Shortest paths: one breadth-first search backwards from the destination gives every vertex's
// hop distance to it; the paths are then the walks from the source that step to a neighbour one
// hop closer each time, enumerated depth-first in link order (a stable order) and capped. The
// search first forbids devices as intermediate vertices (traffic between GPUs does not forward
// through a third GPU); only where that leaves no path does it allow them (chips that forward,
// as on a torus or a mesh of devices). Links that are down (Network::apply_faults) are skipped.
#include <boost/graph/breadth_first_search.hpp>
#include <boost/graph/push_relabel_max_flow.hpp>
#include <cmath>
#include <deque>

#include "meshsim/sim/error.h"
#include "network_impl.h"

namespace meshsim::topology::detail {
namespace {

// Depth-first enumeration of the shortest paths from `at` to `b` along decreasing distances.
struct PathEnumerator {
  const NetworkData& impl;
  const std::vector<int32_t>& dist;
  VertexId b;
  bool through_devices;
  size_t cap;
  std::vector<Path> out;
  Path current;

  void walk(VertexId at) {
    if (at == b) {
      out.push_back(current);
      return;
    }
    for (const auto e : boost::make_iterator_range(boost::out_edges(at.index(), impl.graph))) {
      if (out.size() >= cap) {
        return;
      }
      const auto next = VertexId(static_cast<uint32_t>(boost::target(e, impl.graph)));
      const bool may_pass = next == b || through_devices || !impl.is_device(next);
      if (!may_pass || dist[next.index()] != dist[at.index()] - 1 ||
          impl.link_down(LinkId(impl.graph[e].link))) {
        continue;
      }
      current.push_back(LinkId(impl.graph[e].link));
      walk(next);
      current.pop_back();
    }
  }
};

}  // namespace

std::vector<int32_t> distances_to(const NetworkData& impl, VertexId b, bool through_devices) {
  std::vector<int32_t> dist(impl.vertices.size(), -1);
  std::deque<VertexId> queue{b};
  dist[b.index()] = 0;
  while (!queue.empty()) {
    const VertexId v = queue.front();
    queue.pop_front();
    if (v != b && !through_devices && impl.is_device(v)) {
      continue;  // a device may start a path but not forward one
    }
    for (const auto e : boost::make_iterator_range(boost::in_edges(v.index(), impl.graph))) {
      const auto u = VertexId(static_cast<uint32_t>(boost::source(e, impl.graph)));
      if (dist[u.index()] < 0 && !impl.link_down(LinkId(impl.graph[e].link))) {
        dist[u.index()] = dist[v.index()] + 1;
        queue.push_back(u);
      }
    }
  }
  return dist;
}

std::vector<Path> search_paths(const NetworkData& impl, VertexId a, VertexId b, size_t cap) {
  if (a == b) {
    return {};
  }
  bool through = false;
  std::vector<int32_t> dist = distances_to(impl, b, through);
  if (dist[a.index()] < 0) {
    through = true;
    dist = distances_to(impl, b, through);
  }
  if (dist[a.index()] < 0) {
    return {};
  }
  PathEnumerator walker{impl, dist, b, through, cap, {}, {}};
  walker.walk(a);
  return std::move(walker.out);
}

std::optional<VertexId> first_unreachable(const NetworkData& impl) {
  const size_t n = boost::num_vertices(impl.graph);
  if (n == 0) {
    return std::nullopt;
  }
  std::vector<boost::default_color_type> color(n, boost::white_color);
  boost::breadth_first_search(impl.graph, boost::vertex(0, impl.graph),
                              boost::color_map(boost::make_iterator_property_map(
                                  color.begin(), boost::get(boost::vertex_index, impl.graph))));
  for (size_t v = 0; v < n; ++v) {
    if (color[v] == boost::white_color) {
      return VertexId(static_cast<uint32_t>(v));
    }
  }
  return std::nullopt;
}

namespace {

using FlowTraits = boost::adjacency_list_traits<boost::vecS, boost::vecS, boost::directedS>;
using FlowGraph = boost::adjacency_list<
    boost::vecS, boost::vecS, boost::directedS, boost::no_property,
    boost::property<
        boost::edge_capacity_t, int64_t,
        boost::property<boost::edge_residual_capacity_t, int64_t,
                        boost::property<boost::edge_reverse_t, FlowTraits::edge_descriptor>>>>;

// Adds u -> v with `capacity` and its zero-capacity reverse (push-relabel needs the pair).
void add_arc(FlowGraph& g, size_t u, size_t v, int64_t capacity) {
  const auto forward = boost::add_edge(u, v, g).first;
  const auto backward = boost::add_edge(v, u, g).first;
  boost::put(boost::edge_capacity, g, forward, capacity);
  boost::put(boost::edge_capacity, g, backward, int64_t{0});
  boost::put(boost::edge_reverse, g, forward, backward);
  boost::put(boost::edge_reverse, g, backward, forward);
}

enum class Side : uint8_t { kNone, kFrom, kTo };

}  // namespace

// Max-flow from `from` to `to` through a super-source and super-sink. Capacities are whole
// bytes/s. Where devices do not forward (switched fabrics), `from` devices only send, `to` devices
// only receive, and other devices are left out, so no flow passes through a GPU.
BytesPerSec max_flow(const NetworkData& impl, const std::vector<DeviceId>& from,
                     const std::vector<DeviceId>& to) {
  const size_t n = impl.vertices.size();
  std::vector<Side> side(n, Side::kNone);
  for (const DeviceId d : from) {
    SIM_CHECK(d.index() < impl.num_devices(), "device {} of {}", d.value(), impl.num_devices());
    side[d.index()] = Side::kFrom;
  }
  for (const DeviceId d : to) {
    SIM_CHECK(d.index() < impl.num_devices() && side[d.index()] != Side::kFrom,
              "device {} is on both sides of a cut (or out of range)", d.value());
    side[d.index()] = Side::kTo;
  }
  FlowGraph g(n + 2);
  const size_t source = n;
  const size_t sink = n + 1;
  std::vector<int64_t> out_capacity(n, 0);
  std::vector<int64_t> in_capacity(n, 0);
  for (const Link& l : impl.links) {
    const size_t u = l.src.index();
    const size_t v = l.dst.index();
    if (!impl.devices_forward) {
      const bool u_ok = !impl.is_device(l.src) || side[u] == Side::kFrom;
      const bool v_ok = !impl.is_device(l.dst) || side[v] == Side::kTo;
      if (!u_ok || !v_ok) {
        continue;
      }
    }
    const auto capacity = static_cast<int64_t>(std::llround(l.bandwidth.value()));
    add_arc(g, u, v, capacity);
    out_capacity[u] += capacity;
    in_capacity[v] += capacity;
  }
  for (size_t v = 0; v < n; ++v) {
    if (side[v] == Side::kFrom) {
      add_arc(g, source, v, out_capacity[v]);
    } else if (side[v] == Side::kTo) {
      add_arc(g, v, sink, in_capacity[v]);
    }
  }
  const int64_t flow = boost::push_relabel_max_flow(g, source, sink);
  return BytesPerSec::of(static_cast<double>(flow));
}

}  // namespace meshsim::topology::detail
