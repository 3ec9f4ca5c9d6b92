// Ring and bidirectional ring schedules.
//
// The ring follows the group's rank order (rank i sends to rank i+1 mod p), except for a group
// spanning k >= 2 scale-up domains (nodes) with the same m >= 2 ranks in each: there, like NCCL
// (whose topology search builds several rings, "channels", each leaving a node through a
// different NIC so that every NIC carries traffic; src/graph/search.cc), it runs m rings at
// once, each carrying n/m: ring c visits the domains in order and, inside each, its members
// rotated by c, so ring c leaves every node from member c-1 and enters the next at member c.
// For p ranks and a buffer of n bytes (nccl-tests' convention, see CollectiveWork):
//   all-reduce       reduce-scatter step x (p-1), then all-gather step x (p-1); every rank sends
//                    n/p to its successor per step (n/(mp) on each of m rings):
//                    2(p-1)/p n per rank, 2(p-1) latencies
//   reduce-scatter,  one step x (p-1), n/p per rank per step: (p-1)/p n per rank
//   all-gather
//   all-to-all       p-1 distinct steps; at step k rank i sends its block n/p to rank i+k
//   broadcast,       pipelined chain root -> ... -> last (reduce: the reverse): in the limit of
//   reduce           many chunks every hop carries the whole buffer at once, so one step of p-1
//                    concurrent flows of n bytes, plus a fixed overhead of (p-2) hop latencies
//                    for the first chunk to cross the chain: (p-1) alpha + n / B
// Bidirectional ring (all-reduce, reduce-scatter, all-gather; one ring in rank order): the same
// steps with half of every block going each way round, n/(2p) per flow, so both directions of
// every ring link carry data. Through a switch both flows of a rank leave on the same uplink, so
// it only gains where ring neighbours have direct links in both directions (a torus axis).
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

void add_pairwise_all_to_all(Schedule& s, const topology::Network& net, Group group, Bytes bytes) {
  const auto p = static_cast<int64_t>(group.size());
  const auto rings = one_ring(group);
  const Bytes block = shard(bytes, 1, p);
  for (int64_t k = 1; k < p; ++k) {
    std::vector<Flow> flows;
    append_ring_flows(net, rings, k, block, flows);
    s.steps.push_back(
        make_step(std::move(flows), 1, fmt::format("all-to-all pairwise step {}", k)));
  }
}

}  // namespace

Reason ring_unsupported(CollectiveKind, Group, const topology::Network&) { return std::nullopt; }

Schedule plan_ring(CollectiveKind kind, Bytes bytes, Group group, const topology::Network& net) {
  Schedule s;
  s.algorithm = Algorithm::kRing;
  const auto p = static_cast<int64_t>(group.size());
  if (p < 2 || bytes.count() == 0) {
    return s;
  }
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
      add_pairwise_all_to_all(s, net, group, bytes);
      break;
    case CollectiveKind::kBroadcast:
      add_chain(s, net, group, bytes, false, "pipelined ring broadcast");
      break;
    case CollectiveKind::kReduce:
      add_chain(s, net, group, bytes, true, "pipelined ring reduce");
      break;
  }
  return s;
}

Schedule plan_bidirectional_ring(CollectiveKind kind, Bytes bytes, Group group,
                                 const topology::Network& net) {
  Schedule s;
  s.algorithm = Algorithm::kBidirectionalRing;
  const auto p = static_cast<int64_t>(group.size());
  if (p < 2 || bytes.count() == 0) {
    return s;
  }
  const int64_t both[] = {1, -1};
  const auto ring = one_ring(group);
  const Bytes half_block = shard(bytes, 1, 2 * p);
  const char* rs = "bidirectional ring reduce-scatter step";
  const char* ag = "bidirectional ring all-gather step";
  switch (kind) {
    case CollectiveKind::kAllReduce:
      add_ring_phase(s, net, ring, both, half_block, p - 1, rs);
      add_ring_phase(s, net, ring, both, half_block, p - 1, ag);
      break;
    case CollectiveKind::kReduceScatter:
      add_ring_phase(s, net, ring, both, half_block, p - 1, rs);
      break;
    case CollectiveKind::kAllGather:
      add_ring_phase(s, net, ring, both, half_block, p - 1, ag);
      break;
    default:
      SIM_CHECK(false, "bidirectional ring has no {} schedule", to_string(kind));
  }
  return s;
}

}  // namespace meshsim::collectives::detail
