#include "planner_util.h"

#include <algorithm>
#include <map>
#include <utility>

#include "meshsim/sim/error.h"

namespace meshsim::collectives::detail {

Bytes shard(Bytes n, int64_t num, int64_t den) {
  SIM_CHECK(den > 0 && num >= 0 && n.count() >= 0, "bad shard {} * {} / {}", n.count(), num, den);
  // n * num / den without overflow: split n by den.
  const int64_t q = n.count() / den;
  const int64_t r = n.count() % den;
  const int64_t rest = r * num;  // r < den, num <= a few thousand in practice
  return Bytes::of(q * num + rest / den + (rest % den != 0 ? 1 : 0));
}

Flow device_flow(const topology::Network& net, DeviceId src, DeviceId dst, Bytes bytes) {
  return Flow{net.device_vertex(src), net.device_vertex(dst), bytes};
}

Step make_step(std::vector<Flow> flows, int64_t repeat, std::string label, Duration overhead) {
  Step s;
  s.flows = std::move(flows);
  s.repeat = repeat;
  s.overhead = overhead;
  s.label = std::move(label);
  return s;
}

Duration latency_between(const topology::Network& net, topology::VertexId a, topology::VertexId b) {
  if (a == b) {
    return Duration::zero();
  }
  return net.path_latency(net.route(a, b, 0));
}

Duration device_latency(const topology::Network& net, DeviceId a, DeviceId b) {
  return latency_between(net, net.device_vertex(a), net.device_vertex(b));
}

void append_ring_flows(const topology::Network& net, std::span<const std::vector<DeviceId>> rings,
                       int64_t offset, Bytes bytes, std::vector<Flow>& out) {
  std::vector<DeviceId> members;
  for (const auto& ring : rings) {
    members.insert(members.end(), ring.begin(), ring.end());
  }
  std::sort(members.begin(), members.end());
  for (const auto& ring : rings) {
    const auto p = static_cast<int64_t>(ring.size());
    if (p < 2) {
      continue;
    }
    for (int64_t i = 0; i < p; ++i) {
      const int64_t j = ((i + offset) % p + p) % p;
      append_pxn_flows(net, ring[static_cast<size_t>(i)], ring[static_cast<size_t>(j)], bytes,
                       members, out);
    }
  }
}

bool is_power_of_two(int64_t v) { return v > 0 && (v & (v - 1)) == 0; }

namespace {

// Domain key of a device: its NVSwitch vertex, or its host.
int64_t domain_of(const topology::Network& net, DeviceId d) {
  if (const auto sw = net.nvswitch_of(d)) {
    return static_cast<int64_t>(sw->value());
  }
  return -1 - net.vertex(net.device_vertex(d)).node;
}

}  // namespace

std::vector<std::vector<DeviceId>> domains(Group group, const topology::Network& net) {
  std::map<int64_t, size_t> index;
  std::vector<std::vector<DeviceId>> out;
  for (const DeviceId d : group) {
    const auto [it, added] = index.emplace(domain_of(net, d), out.size());
    if (added) {
      out.emplace_back();
    }
    out[it->second].push_back(d);
  }
  return out;
}

void append_pxn_flows(const topology::Network& net, DeviceId src, DeviceId dst, Bytes bytes,
                      std::span<const DeviceId> members, std::vector<Flow>& out) {
  const topology::ClusterSpec& spec = net.spec();
  if (spec.scale_out != topology::ScaleOutFabric::kFatTree || src == dst ||
      domain_of(net, src) == domain_of(net, dst)) {
    out.push_back(device_flow(net, src, dst, bytes));
    return;
  }
  const int64_t per_node = spec.devices_per_node;
  const int64_t node = static_cast<int64_t>(src.value()) / per_node;
  const DeviceId proxy(static_cast<uint32_t>(node * per_node + dst.value() % per_node));
  if (proxy == src || std::find(members.begin(), members.end(), proxy) == members.end()) {
    out.push_back(device_flow(net, src, dst, bytes));
    return;
  }
  out.push_back(device_flow(net, src, proxy, bytes));
  out.push_back(device_flow(net, proxy, dst, bytes));
}

bool spans_even_domains(const std::vector<std::vector<DeviceId>>& doms) {
  if (doms.size() < 2 || doms.front().size() < 2) {
    return false;
  }
  for (const auto& dom : doms) {
    if (dom.size() != doms.front().size()) {
      return false;
    }
  }
  return true;
}

}  // namespace meshsim::collectives::detail
