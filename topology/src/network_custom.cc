// Explicit graphs (the "graph" section of a cluster file; GraphSpec in cluster.h).
//
// Devices are vertices 0 .. n-1 named gpu<i> / tpu<i>; switches follow in file order; each link
// entry is one cable. The loader has validated names and values; this re-checks what a spec built
// in code could still get wrong, with the same JSON pointers. A device's NVSwitch (for in-switch
// reduction) is its first nvswitch neighbour in link order. Routing is by search
// (network_search.cc): through switches where possible, through devices only where nothing else
// connects them (a mesh of devices).
#include <fmt/format.h>

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "cluster_graph.h"
#include "meshsim/sim/error.h"
#include "network_impl.h"

namespace meshsim::topology::detail {
namespace {

// The enum value named `kind` (its to_string); InputError at `pointer` for any other name.
template <typename Kind, size_t N>
Kind parse_kind(const ClusterSpec& spec, const std::string& kind, const Kind (&all)[N],
                const std::string& pointer) {
  std::vector<std::string_view> names;
  for (const Kind k : all) {
    if (to_string(k) == kind) {
      return k;
    }
    names.push_back(to_string(k));
  }
  throw InputError(
      spec.source, pointer,
      fmt::format("unknown kind \"{}\" (expected one of: {})", kind, fmt::join(names, ", ")));
}

constexpr VertexKind kSwitchKinds[] = {VertexKind::kNvSwitch, VertexKind::kNic,  VertexKind::kLeaf,
                                       VertexKind::kSpine,    VertexKind::kCore, VertexKind::kDcn};
constexpr LinkKind kLinkKinds[] = {LinkKind::kNvlink, LinkKind::kIci, LinkKind::kPcie,
                                   LinkKind::kNetwork, LinkKind::kDcn};

VertexId resolve(const NetworkData& impl, const std::map<std::string, VertexId>& switches,
                 const std::string& name, const std::string& pointer) {
  if (const auto device = parse_graph_device(impl.spec, name)) {
    return VertexId(static_cast<uint32_t>(*device));
  }
  const auto it = switches.find(name);
  if (it == switches.end()) {
    throw InputError(
        impl.spec.source, pointer,
        fmt::format("unknown vertex \"{}\" (expected a device {}0 .. {}{} or a "
                    "switch listed in /graph/switches)",
                    name, graph_device_prefix(impl.spec.chip), graph_device_prefix(impl.spec.chip),
                    impl.spec.device_count() - 1));
  }
  return it->second;
}

void add_link(NetworkData& impl, const std::map<std::string, VertexId>& switches,
              const GraphLinkSpec& l, size_t i) {
  const ClusterSpec& spec = impl.spec;
  const std::string at = fmt::format("/graph/links/{}", i);
  const VertexId a = resolve(impl, switches, l.a, at + "/a");
  const VertexId b = resolve(impl, switches, l.b, at + "/b");
  if (a == b || impl.find_link(a, b)) {
    throw InputError(spec.source, at + "/b",
                     fmt::format("a second link between \"{}\" and \"{}\" (or a link to itself); "
                                 "expected one link per pair of distinct vertices",
                                 l.a, l.b));
  }
  require_positive(spec, at + "/bandwidth", l.bandwidth,
                   fmt::format("the bandwidth of link \"{}\" - \"{}\"", l.a, l.b));
  if (l.latency < Duration::zero()) {
    throw InputError(spec.source, at + "/latency", "expected a latency >= 0");
  }
  impl.add_cable(a, b, parse_kind(spec, l.kind, kLinkKinds, at + "/kind"), l.bandwidth, l.latency);
  if (impl.is_device(a) && impl.is_device(b)) {
    impl.devices_forward = true;
  }
  for (const auto& [dev, other] : {std::pair{a, b}, std::pair{b, a}}) {
    if (impl.is_device(dev) && impl.vertices[other.index()].kind == VertexKind::kNvSwitch &&
        !impl.nvswitch[dev.index()]) {
      impl.nvswitch[dev.index()] = other;
    }
  }
}

}  // namespace

void build_custom(NetworkData& impl) {
  const ClusterSpec& spec = impl.spec;
  const GraphSpec& graph = *spec.graph;
  for (int64_t d = 0; d < spec.device_count(); ++d) {
    impl.add_vertex(Vertex{VertexKind::kDevice, graph_device_name(spec, d),
                           DeviceId(static_cast<uint32_t>(d)), d / spec.devices_per_node});
  }
  std::map<std::string, VertexId> switches;
  for (size_t i = 0; i < graph.switches.size(); ++i) {
    const GraphSwitchSpec& sw = graph.switches[i];
    if (sw.name.empty() || switches.contains(sw.name) || parse_graph_device(spec, sw.name)) {
      throw InputError(spec.source, fmt::format("/graph/switches/{}/name", i),
                       fmt::format("switch name \"{}\" is empty, repeated or a device name "
                                   "(expected a unique switch name)",
                                   sw.name));
    }
    const VertexKind kind =
        parse_kind(spec, sw.kind, kSwitchKinds, fmt::format("/graph/switches/{}/kind", i));
    switches.emplace(sw.name, impl.add_vertex(Vertex{kind, sw.name, std::nullopt, -1}));
  }
  if (graph.links.empty()) {
    throw InputError(spec.source, "/graph/links", "expected at least one link");
  }
  for (size_t i = 0; i < graph.links.size(); ++i) {
    add_link(impl, switches, graph.links[i], i);
  }
}

}  // namespace meshsim::topology::detail
