// format_summary: the text `meshsim topology --cluster C` prints. One block, one fact per line,
// every figure with its unit, so that hop counts and bisection can be checked by hand.
#include <fmt/format.h>

#include <string>
#include <vector>

#include "meshsim/topology/network.h"

namespace meshsim::topology {
namespace {

// Decimal GB/s, shortest exact form (450, 6.25, 51200); divides rather than multiplying by 1e-9
// so that whole numbers stay whole.
std::string gbps(BytesPerSec b) { return fmt::format("{} GB/s", b.value() / 1e9); }

std::string plural(int64_t n, std::string_view word) {
  return fmt::format("{} {}{}", n, word, n == 1 ? "" : "s");
}

std::string scale_up_line(const ClusterSpec& spec) {
  if (spec.scale_up == ScaleUpFabric::kIciTorus) {
    std::vector<std::string> wraps;
    for (size_t i = 0; i < spec.torus_wraparound.size(); ++i) {
      wraps.push_back(spec.torus_wraparound[i] ? "wraps" : "open");
    }
    return fmt::format("ici_torus {} ({}), {} ICI links x {} per chip, {:g} us per hop",
                       fmt::join(spec.torus_shape, "x"), fmt::join(wraps, " x "),
                       spec.scale_up_links, gbps(spec.scale_up_link_bandwidth),
                       spec.scale_up_latency.microseconds());
  }
  return fmt::format(
      "{}: {} of {} devices, {} NVLinks x {} = {} per device, {:g} us "
      "device -> nvswitch -> device",
      to_string(spec.scale_up), plural(spec.scale_up_domains(), "domain"),
      spec.scale_up_domain_size(), spec.scale_up_links, gbps(spec.scale_up_link_bandwidth),
      gbps(spec.scale_up_bandwidth()), spec.scale_up_latency.microseconds());
}

std::string scale_out_line(const ClusterSpec& spec) {
  if (spec.scale_out == ScaleOutFabric::kDcn) {
    return fmt::format("dcn: {} per chip, {:g} us chip -> chip across slices{}",
                       gbps(spec.dcn_bandwidth), spec.scale_out_latency.microseconds(),
                       spec.slices > 1 ? "" : " (one slice: no DCN links)");
  }
  const FatTreeSpec& ft = *spec.fat_tree;
  return fmt::format(
      "fat_tree ({}, {}rail-optimized, oversubscription {:g}:1): {} NIC{} x {} per "
      "device, {:g} us device -> {} -> device",
      to_string(ft.transport), ft.rail_optimized ? "" : "not ", ft.oversubscription,
      ft.nics_per_device, ft.nics_per_device == 1 ? "" : "s", gbps(ft.nic_bandwidth),
      spec.scale_out_latency.microseconds(),
      ft.tiers == 1 ? "NIC -> switch -> NIC" : "NIC -> leaf -> spine -> leaf -> NIC");
}

std::string vertices_line(const NetworkSummary& s) {
  std::vector<std::string> switches;
  for (const auto& [kind, count] : s.vertices_by_kind) {
    if (kind != VertexKind::kDevice && kind != VertexKind::kNic) {
      switches.push_back(fmt::format("{} {}", count, to_string(kind)));
    }
  }
  return fmt::format("{}: {} devices, {} NICs, {} switches{}", s.devices + s.nics + s.switches,
                     s.devices, s.nics, s.switches,
                     switches.empty() ? "" : fmt::format(" ({})", fmt::join(switches, ", ")));
}

std::string links_block(const NetworkSummary& s) {
  int64_t total = 0;
  for (const auto& [kind, k] : s.links) {
    total += k.count;
  }
  std::string out = fmt::format(
      "links      {} directed (2 per cable), bandwidth per link per "
      "direction\n",
      total);
  for (const LinkGroupSummary& g : s.link_groups) {
    const std::string ends = fmt::format("{} <-> {}", to_string(g.a), to_string(g.b));
    const std::string bundle =
        g.cables == 1 ? ""
                      : fmt::format(" ({} cables x {})", g.cables,
                                    gbps(g.bandwidth * (1.0 / static_cast<double>(g.cables))));
    out += fmt::format("  {:<8} {:>7}  {:<20} {}{}\n", to_string(g.kind), g.count, ends,
                       gbps(g.bandwidth), bundle);
  }
  return out;
}

}  // namespace

std::string format_summary(const ClusterSpec& spec, const NetworkSummary& s) {
  std::string out;
  out += fmt::format("cluster    {} ({})\n", spec.name, spec.source);
  out += fmt::format("           {}\n", spec.description);
  out += fmt::format("devices    {} x {} ({}) = {} x {}\n", s.devices, spec.chip.name,
                     spec.chip.description, plural(spec.nodes, "node"), spec.devices_per_node);
  if (spec.graph) {
    out += "network    explicit graph from the cluster file (/graph)\n";
  } else {
    out += fmt::format("scale-up   {}\n", scale_up_line(spec));
    out += fmt::format("scale-out  {}\n", scale_out_line(spec));
  }
  out += fmt::format("fabric     {}\n", s.layout);
  out += fmt::format("vertices   {}\n", vertices_line(s));
  out += links_block(s);
  out += fmt::format("bisection  {} per direction = {}\n", gbps(s.bisection_bandwidth),
                     s.bisection_formula);
  out +=
      fmt::format("diameter   {} hops (links) between the farthest two devices\n", s.diameter_hops);
  return out;
}

}  // namespace meshsim::topology
