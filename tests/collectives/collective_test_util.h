// Shared helpers for the collective tests: preset networks, groups, per-rank byte counts.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "meshsim/collectives/algorithms.h"
#include "meshsim/collectives/collective_planner.h"
#include "meshsim/collectives/comm_model.h"
#include "meshsim/collectives/schedule.h"
#include "meshsim/topology/chip.h"
#include "meshsim/topology/cluster.h"
#include "meshsim/topology/network.h"

namespace meshsim::collectives::testing {

inline const topology::Catalogue& catalogue() {
  static const topology::Catalogue cat = topology::Catalogue::builtin();
  return cat;
}

inline topology::ClusterSpec preset(const std::string& name) {
  return topology::load_cluster(name, catalogue());
}

inline topology::ClusterSpec dgx_h100(int64_t nodes) {
  return topology::resize_nodes(preset("dgx-h100"), nodes);
}

// Four GPUs behind two leaves joined by one 10 GB/s cable (100 GB/s from each GPU to its leaf):
// pairs (0, 2) and (1, 3) cross the cable, the smallest case of two transfers sharing a link.
inline topology::ClusterSpec two_leaves() {
  auto spec = dgx_h100(1);
  spec.devices_per_node = 4;
  topology::GraphSpec g;
  g.switches = {{"a", "leaf"}, {"b", "leaf"}};
  for (const char* d : {"gpu0", "gpu1"}) {
    g.links.push_back({d, "a", "network", GBps(100), Microseconds(1)});
  }
  for (const char* d : {"gpu2", "gpu3"}) {
    g.links.push_back({d, "b", "network", GBps(100), Microseconds(1)});
  }
  g.links.push_back({"a", "b", "network", GBps(10), Microseconds(1)});
  spec.graph = g;
  return spec;
}

// Devices first, first + 1, ..., first + count - 1.
inline std::vector<DeviceId> devices(int64_t first, int64_t count) {
  std::vector<DeviceId> out;
  for (int64_t i = 0; i < count; ++i) {
    out.push_back(DeviceId(static_cast<uint32_t>(first + i)));
  }
  return out;
}

inline Flow device_flow_for_test(const topology::Network& net, int64_t a, int64_t b, Bytes n) {
  return Flow{net.device_vertex(DeviceId(static_cast<uint32_t>(a))),
              net.device_vertex(DeviceId(static_cast<uint32_t>(b))), n};
}

// Bytes each vertex sends (or receives) over a whole schedule, repeats counted.
inline std::map<topology::VertexId, int64_t> bytes_by_vertex(const Schedule& s, bool sent) {
  std::map<topology::VertexId, int64_t> out;
  for (const Step& step : s.steps) {
    for (const Flow& f : step.flows) {
      out[sent ? f.src : f.dst] += f.bytes.count() * step.repeat;
    }
  }
  return out;
}

inline int64_t total_bytes(const Schedule& s) {
  int64_t total = 0;
  for (const Step& step : s.steps) {
    for (const Flow& f : step.flows) {
      total += f.bytes.count() * step.repeat;
    }
  }
  return total;
}

inline double relative_error(double got, double want) { return std::abs(got - want) / want; }
inline double relative_error(Duration got, Duration want) {
  return relative_error(got.seconds(), want.seconds());
}

// The time the planner's shape of a collective over `group` takes alone on the network.
inline Duration time_of(const CollectivePlanner& planner, CollectiveKind kind, Bytes bytes,
                        const std::vector<DeviceId>& group) {
  const std::vector<std::vector<DeviceId>> groups = {group};
  return planner.isolated_time(planner.collective(kind, bytes, groups));
}

// nccl-tests' bus bandwidth of a collective of `bytes` over `ranks` that took `t`.
inline double busbw_gb_per_s(CollectiveKind kind, Bytes bytes, int64_t ranks, Duration t) {
  const double algbw = bytes.as_double() / t.seconds();
  double factor = 1.0;
  const double p = static_cast<double>(ranks);
  if (kind == CollectiveKind::kAllReduce) {
    factor = 2.0 * (p - 1.0) / p;
  } else if (kind != CollectiveKind::kBroadcast && kind != CollectiveKind::kReduce) {
    factor = (p - 1.0) / p;
  }
  return algbw * factor * 1e-9;
}

}  // namespace meshsim::collectives::testing
