#include "meshsim/collectives/schedule.h"

#include <array>
#include <map>
#include <utility>

#include "meshsim/sim/error.h"

namespace meshsim::collectives {
namespace {

constexpr std::array<std::pair<Algorithm, NcclAlgorithm>, 7> kNccl = {{
    {Algorithm::kTree, NcclAlgorithm::kTree},
    {Algorithm::kRing, NcclAlgorithm::kRing},
    {Algorithm::kCollNetDirect, NcclAlgorithm::kCollNetDirect},
    {Algorithm::kCollNetChain, NcclAlgorithm::kCollNetChain},
    {Algorithm::kNvls, NcclAlgorithm::kNvls},
    {Algorithm::kNvlsTree, NcclAlgorithm::kNvlsTree},
    {Algorithm::kPat, NcclAlgorithm::kPat},
}};

}  // namespace

std::optional<NcclAlgorithm> nccl_algorithm(Algorithm a) {
  for (const auto& [alg, nccl] : kNccl) {
    if (alg == a) {
      return nccl;
    }
  }
  return std::nullopt;
}

Algorithm from_nccl(NcclAlgorithm a) {
  for (const auto& [alg, nccl] : kNccl) {
    if (nccl == a) {
      return alg;
    }
  }
  return Algorithm::kRing;
}

BandwidthEfficiency BandwidthEfficiency::defaults_for(const topology::ClusterSpec& spec) {
  BandwidthEfficiency e;
  const topology::Chip& chip = spec.chip;
  auto set = [&e](topology::LinkKind k, double v) { e.link[static_cast<size_t>(k)] = v; };
  if (chip.nvlink) {
    set(topology::LinkKind::kNvlink, chip.nvlink->efficiency);
    e.in_switch = chip.nvlink->nvls_efficiency.value_or(1.0);
  }
  if (chip.ici) {
    set(topology::LinkKind::kIci, chip.ici->efficiency);
  }
  set(topology::LinkKind::kNetwork, chip.nic_efficiency);
  set(topology::LinkKind::kDcn, chip.dcn_efficiency);
  return e;
}

std::vector<topology::Path> route_step(const topology::Network& net, const Step& step) {
  std::vector<topology::Path> routes(step.flows.size());
  std::map<std::pair<uint32_t, uint32_t>, uint64_t> repeats;  // (src, dst) -> flows seen
  for (size_t i = 0; i < step.flows.size(); ++i) {
    const Flow& f = step.flows[i];
    if (f.src == f.dst || f.bytes.count() == 0) {
      continue;
    }
    uint64_t salt = 0;
    if (net.path_count(f.src, f.dst) > 1) {
      const int64_t host = net.vertex(f.dst).node;
      salt = static_cast<uint64_t>(host < 0 ? 0 : host) + repeats[{f.src.value(), f.dst.value()}]++;
    }
    routes[i] = net.route(f.src, f.dst, salt);
  }
  return routes;
}

BytesPerSec effective_bandwidth(const topology::Link& link, const BandwidthEfficiency& efficiency) {
  return link.bandwidth * efficiency.link[static_cast<size_t>(link.kind)];
}

double flow_weight(const topology::Network& net, const Flow& flow,
                   const BandwidthEfficiency& efficiency) {
  const bool in_switch = net.vertex(flow.src).kind == topology::VertexKind::kNvSwitch ||
                         net.vertex(flow.dst).kind == topology::VertexKind::kNvSwitch;
  return in_switch ? 1.0 / efficiency.in_switch : 1.0;
}

}  // namespace meshsim::collectives
