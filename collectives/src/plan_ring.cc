// Ring schedules (NCCL's ring: src/device/all_reduce.h and src/graph/search.cc, NCCL 2.30.7).
//
// The ring follows the group's rank order (rank i sends to rank i+1 mod p), except for a group
// spanning k >= 2 scale-up domains (nodes) with the same m >= 2 ranks in each: there, like NCCL
// (whose topology search builds several rings, "channels", each entering and leaving a node
// through its own NIC so that every NIC carries traffic), it runs m rings at once, each carrying
// n/m: ring c visits the domains in order and, inside each, its members rotated by c, so ring c
// enters every node at member c and leaves it from member c-1, whose data reaches the next node
// through member c's NIC (PXN: over NVLink to member c, then on rail c; planner_util.h), so no
// ring crosses rails in the fabric.
// For p ranks and a buffer of n bytes (nccl-tests' convention, see CollectiveWork):
//   all-reduce       reduce-scatter step x (p-1), then all-gather step x (p-1); every rank sends
//                    n/p to its successor per step (n/(mp) on each of m rings):
//                    2(p-1)/p n per rank, 2(p-1) latencies
//   reduce-scatter,  one step x (p-1), n/p per rank per step: (p-1)/p n per rank
//   all-gather
//   broadcast,       pipelined chain root -> ... -> last (reduce: the reverse): in the limit of
//   reduce           many chunks every hop carries the whole buffer at once, so one step of p-1
//                    concurrent flows of n bytes, plus a fixed overhead of (p-2) hop latencies
//                    for the first chunk to cross the chain: (p-1) alpha + n / B
#include <fmt/format.h>

#include <algorithm>

#include "meshsim/sim/error.h"
#include "planner_util.h"

namespace meshsim::collectives::detail {
namespace {

std::vector<std::vector<DeviceId>> one_ring(Group group) {
  return {std::vector<DeviceId>(group.begin(), group.end())};
}

// The ring's channels (see the top of the file).
std::vector<std::vector<DeviceId>> channels(Group group, const topology::Network& net) {
  const auto doms = domains(group, net);
  if (!spans_even_domains(doms)) {
    return one_ring(group);
  }
  const size_t m = doms.front().size();
  std::vector<std::vector<DeviceId>> rings(m);
  for (size_t c = 0; c < m; ++c) {
    for (const auto& dom : doms) {
      for (size_t j = 0; j < m; ++j) {
        rings[c].push_back(dom[(c + j) % m]);
      }
    }
  }
  return rings;
}

// Repeated ring steps over `rings` moving `block` per flow in each of `offsets` directions.
void add_ring_phase(Schedule& s, const topology::Network& net,
                    const std::vector<std::vector<DeviceId>>& rings,
                    std::span<const int64_t> offsets, Bytes block, int64_t repeat,
                    const std::string& label) {
  std::vector<Flow> flows;
  for (const int64_t off : offsets) {
    append_ring_flows(net, rings, off, block, flows);
  }
  s.steps.push_back(make_step(std::move(flows), repeat, label));
}

void add_chain(Schedule& s, const topology::Network& net, Group group, Bytes bytes,
               bool toward_root, const std::string& label) {
  const size_t p = group.size();
  std::vector<Flow> flows;
  Duration hop = Duration::zero();
  for (size_t i = 0; i + 1 < p; ++i) {
    const DeviceId a = toward_root ? group[i + 1] : group[i];
    const DeviceId b = toward_root ? group[i] : group[i + 1];
    flows.push_back(device_flow(net, a, b, bytes));
    hop = std::max(hop, device_latency(net, a, b));
  }
  s.steps.push_back(make_step(std::move(flows), 1, label, hop * static_cast<int64_t>(p - 2)));
}

}  // namespace

Reason ring_unsupported(CollectiveKind, Group, const topology::Network&) { return std::nullopt; }

Schedule plan_ring(CollectiveKind kind, Bytes bytes, Group group, const topology::Network& net) {
  Schedule s;
  s.algorithm = Algorithm::kRing;
  const auto p = static_cast<int64_t>(group.size());
  const int64_t fwd[] = {1};
  const auto rings = channels(group, net);
  const Bytes block = shard(bytes, 1, p * static_cast<int64_t>(rings.size()));
  switch (kind) {
    case CollectiveKind::kAllReduce:
      add_ring_phase(s, net, rings, fwd, block, p - 1, "ring reduce-scatter step");
      add_ring_phase(s, net, rings, fwd, block, p - 1, "ring all-gather step");
      break;
    case CollectiveKind::kReduceScatter:
      add_ring_phase(s, net, rings, fwd, block, p - 1, "ring reduce-scatter step");
      break;
    case CollectiveKind::kAllGather:
      add_ring_phase(s, net, rings, fwd, block, p - 1, "ring all-gather step");
      break;
    case CollectiveKind::kAllToAll:
      SIM_CHECK(false, "all-to-all runs on the send/recv engine, not the ring");
    case CollectiveKind::kBroadcast:
      add_chain(s, net, group, bytes, false, "pipelined ring broadcast");
      break;
    case CollectiveKind::kReduce:
      add_chain(s, net, group, bytes, true, "pipelined ring reduce");
      break;
  }
  return s;
}

}  // namespace meshsim::collectives::detail
