// Reading the explicit "graph" section of a cluster file (GraphSpec in cluster.h).
#include "cluster_graph.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <map>
#include <set>
#include <utility>
#include <vector>

#include "meshsim/sim/error.h"

namespace meshsim::topology::detail {
namespace {

const std::vector<std::string>& switch_kinds() {
  static const std::vector<std::string> kinds = {"nvswitch", "nic", "leaf", "spine", "core", "dcn"};
  return kinds;
}

const std::vector<std::string>& link_kinds() {
  static const std::vector<std::string> kinds = {"nvlink", "ici", "pcie", "network", "dcn"};
  return kinds;
}

bool looks_like_device(const ClusterSpec& spec, std::string_view name) {
  const std::string_view prefix = graph_device_prefix(spec.chip);
  const std::string_view rest = name.substr(std::min(prefix.size(), name.size()));
  return name.starts_with(prefix) && !rest.empty() &&
         std::all_of(rest.begin(), rest.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// Names already taken: switch name -> pointer of its entry.
using NameTable = std::map<std::string, std::string>;

// The explicit graph's array of objects at `key` ("switches" or "links"), refused on its count
// before an entry is read, so that a document past the limit is not walked.
std::vector<JsonObject> bounded_entries(JsonObject& graph, const std::string& key, int64_t limit,
                                        const char* limit_name) {
  const size_t count = graph.object_array_length(key);
  if (static_cast<int64_t>(count) > limit) {
    graph.fail(key, fmt::format("{} {}, above the limit of {} ({}) for an explicit graph", count,
                                key, limit, limit_name));
  }
  return graph.object_array(key);
}

NameTable read_switches(JsonObject& graph, const ClusterSpec& spec, GraphSpec& out) {
  NameTable names;
  if (!graph.has("switches")) {
    graph.ignore("switches");
    return names;
  }
  std::vector<JsonObject> entries = bounded_entries(graph, "switches", kMaxDevices, "2^17");
  for (JsonObject& entry : entries) {
    GraphSwitchSpec sw;
    sw.name = entry.string("name");
    if (sw.name.empty()) {
      entry.fail("name", "expected a non-empty switch name");
    }
    if (looks_like_device(spec, sw.name)) {
      entry.fail("name", fmt::format("\"{}\" is a device name (devices are {}0 .. {}{}); "
                                     "expected a switch name that is not {}<number>",
                                     sw.name, graph_device_prefix(spec.chip),
                                     graph_device_prefix(spec.chip), spec.device_count() - 1,
                                     graph_device_prefix(spec.chip)));
    }
    if (const auto it = names.find(sw.name); it != names.end()) {
      entry.fail("name", fmt::format("duplicate switch \"{}\" (first defined at {}); expected "
                                     "unique names",
                                     sw.name, it->second));
    }
    sw.kind = entry.one_of("kind", switch_kinds());
    entry.finish();
    names.emplace(sw.name, entry.pointer());
    out.switches.push_back(std::move(sw));
  }
  return names;
}

// The vertex a link end names: "d<index>" for devices, "s<name>" for switches (a canonical key).
std::string endpoint_key(JsonObject& link, const std::string& key, const ClusterSpec& spec,
                         const NameTable& switches, std::string& name) {
  name = link.string(key);
  if (const auto device = parse_graph_device(spec, name)) {
    return fmt::format("d{}", *device);
  }
  if (switches.contains(name)) {
    return "s" + name;
  }
  link.fail(key, fmt::format("unknown vertex \"{}\" (expected a device {}0 .. {}{} or a switch "
                             "listed in /graph/switches)",
                             name, graph_device_prefix(spec.chip), graph_device_prefix(spec.chip),
                             spec.device_count() - 1));
}

void read_links(JsonObject& graph, const ClusterSpec& spec, const NameTable& switches,
                GraphSpec& out) {
  std::map<std::pair<std::string, std::string>, std::string> cables;  // sorted ends -> pointer
  const std::vector<JsonObject> entries = bounded_entries(graph, "links", kMaxGraphLinks, "2^20");
  if (entries.empty()) {
    graph.fail("links", "expected at least one link");
  }
  for (JsonObject entry : entries) {
    GraphLinkSpec link;
    const std::string ka = endpoint_key(entry, "a", spec, switches, link.a);
    const std::string kb = endpoint_key(entry, "b", spec, switches, link.b);
    if (ka == kb) {
      entry.fail("b", fmt::format("a link from \"{}\" to itself; expected two different vertices",
                                  link.a));
    }
    const auto ends = std::minmax(ka, kb);
    if (const auto it = cables.find(ends); it != cables.end()) {
      entry.fail("b", fmt::format("duplicate link between \"{}\" and \"{}\" (first at {}); "
                                  "expected one link per pair of vertices (give it the combined "
                                  "bandwidth)",
                                  link.a, link.b, it->second));
    }
    cables.emplace(ends, entry.pointer());
    link.bandwidth = entry.bandwidth("bandwidth");
    if (!(link.bandwidth.value() > 0.0)) {
      entry.fail("bandwidth", fmt::format("expected a positive bandwidth such as \"400Gbps\", got "
                                          "{} B/s",
                                          link.bandwidth.value()));
    }
    link.latency = entry.duration("latency");
    if (entry.has("kind")) {
      link.kind = entry.one_of("kind", link_kinds());
    }
    entry.finish();
    out.links.push_back(std::move(link));
  }
}

}  // namespace

std::string_view graph_device_prefix(const Chip& chip) {
  return chip.kind == ChipKind::kTpu ? "tpu" : "gpu";
}

std::string graph_device_name(const ClusterSpec& spec, int64_t device) {
  return fmt::format("{}{}", graph_device_prefix(spec.chip), device);
}

std::optional<int64_t> parse_graph_device(const ClusterSpec& spec, std::string_view name) {
  const std::string_view prefix = graph_device_prefix(spec.chip);
  if (!name.starts_with(prefix)) {
    return std::nullopt;
  }
  const std::string_view digits = name.substr(prefix.size());
  // Decimal digits only: from_chars would take "gpu-1" as device -1.
  if (digits.empty() || (digits.size() > 1 && digits.front() == '0') ||
      !std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    return std::nullopt;
  }
  int64_t index = 0;
  const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), index);
  if (ec != std::errc() || end != digits.data() + digits.size() || index >= spec.device_count()) {
    return std::nullopt;
  }
  return index;
}

void read_graph(JsonObject& root, ClusterSpec& spec) {
  JsonObject graph = root.object("graph");
  GraphSpec out;
  const NameTable switches = read_switches(graph, spec, out);
  read_links(graph, spec, switches, out);
  graph.finish();
  spec.graph = std::move(out);
}

}  // namespace meshsim::topology::detail
