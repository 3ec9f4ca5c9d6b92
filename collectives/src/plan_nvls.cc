// NVLS: in-switch reduction and multicast on an NVSwitch (NVLink SHARP, Hopper and later).
//
// Traffic model, per GPU of a group of p in one NVSwitch domain, buffer n bytes. NCCL's NVLS
// all-reduce is a reduce-scatter by multimem loads (GPU i asks the switch for slice i of n/p; the
// switch reads slice i from all p GPUs, the asking one included, reduces, and returns n/p) then an
// all-gather by multimem stores (GPU i stores its reduced n/p once; the switch writes it to all p
// GPUs), pipelined. Counting both phases on each GPU's NVLinks:
//   all-reduce      GPU -> switch: n (its p slices read) + n/p (its store) = n (p+1)/p
//                   switch -> GPU: n/p (its reduced slice) + n (p stores)  = n (p+1)/p
//   reduce-scatter  GPU -> switch n, switch -> GPU n/p
//   all-gather      GPU -> switch n/p, switch -> GPU n
// Source: S. Jeaugey (NCCL lead), NVIDIA/nccl-tests issue #212 and the correction in pull request
// #239 (2024-09-02): for NVLS all-reduce "algobw = busbw * n / (n+1)", busbw meaning the NVLink
// bandwidth, i.e. n (p+1)/p bytes cross each link direction. Measured 8x H100 algbw 258, 265,
// 270, 273 GB/s for p = 5..8 (NVIDIA/nccl issue #1455) imply a constant 308-310 GB/s per
// direction under this model, which is what confirms it.
// The rate these flows get is the NVLink capacity times BandwidthEfficiency::in_switch (NCCL's
// nvlsEfficiency, src/tuning/nvls.cc: Hopper 0.85, Blackwell 0.74).
// Schedule: one step of 2p concurrent flows (GPU -> switch and switch -> GPU, the pipelined
// phases overlapping), plus a fixed overhead that makes the latency a whole number of
// GPU -> switch -> GPU trips: two for all-reduce (load round trip, then store and multicast), one
// for reduce-scatter and all-gather. The flows already pay one hop.
#include <fmt/format.h>

#include <algorithm>

#include "meshsim/sim/error.h"
#include "planner_util.h"

namespace meshsim::collectives::detail {

Reason nvls_unsupported(CollectiveKind, Group group, const topology::Network& net) {
  const auto& chip = net.spec().chip;
  if (!chip.nvlink || chip.nvlink->generation < 4) {
    return fmt::format(
        "needs NVLink SHARP (NVSwitch with NVLink 4 or later, Hopper on); chip {} "
        "has {}",
        chip.name,
        chip.nvlink ? fmt::format("NVLink {}", chip.nvlink->generation) : std::string("no NVLink"));
  }
  std::optional<topology::VertexId> sw;
  for (const DeviceId d : group) {
    const auto s = net.nvswitch_of(d);
    if (!s) {
      return fmt::format("needs every device on an NVSwitch; device {} has none", d.value());
    }
    if (sw && *s != *sw) {
      return std::string(
          "needs the group inside one NVSwitch domain; this one spans several "
          "(NVLS across nodes needs SHARP in the network, not modelled)");
    }
    sw = s;
  }
  return std::nullopt;
}

Schedule plan_nvls(CollectiveKind kind, Bytes bytes, Group group, const topology::Network& net) {
  Schedule s;
  s.algorithm = Algorithm::kNvls;
  const auto p = static_cast<int64_t>(group.size());
  if (p < 2 || bytes.count() == 0) {
    return s;
  }
  const topology::VertexId sw = *net.nvswitch_of(group[0]);
  Bytes up;
  Bytes down;
  int64_t trips = 1;
  switch (kind) {
    case CollectiveKind::kAllReduce:
      up = down = shard(bytes, p + 1, p);
      trips = 2;
      break;
    case CollectiveKind::kReduceScatter:
      up = bytes;
      down = shard(bytes, 1, p);
      break;
    case CollectiveKind::kAllGather:
      up = shard(bytes, 1, p);
      down = bytes;
      break;
    default:
      SIM_CHECK(false, "NVLS has no {} schedule", to_string(kind));
  }
  std::vector<Flow> flows;
  for (const DeviceId d : group) {
    flows.push_back(Flow{net.device_vertex(d), sw, up});
    flows.push_back(Flow{sw, net.device_vertex(d), down});
  }
  const topology::VertexId v0 = net.device_vertex(group[0]);
  const Duration to_switch = latency_between(net, v0, sw);
  const Duration from_switch = latency_between(net, sw, v0);
  const Duration overhead = (to_switch + from_switch) * trips - std::max(to_switch, from_switch);
  s.steps.push_back(make_step(std::move(flows), 1,
                              fmt::format("NVLS {} (multimem, in-switch)", to_string(kind)),
                              overhead));
  return s;
}

}  // namespace meshsim::collectives::detail
