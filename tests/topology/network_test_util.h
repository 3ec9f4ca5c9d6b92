// Helpers for the network tests: presets by name, ids, and route checks.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "meshsim/topology/cluster.h"
#include "meshsim/topology/network.h"

namespace meshsim::topology::testing {

inline const Catalogue& catalogue() {
  static const Catalogue cat = Catalogue::builtin();
  return cat;
}

inline ClusterSpec preset(const std::string& name) { return load_cluster(name, catalogue()); }
inline ClusterSpec dgx_h100(int64_t nodes) { return resize_nodes(preset("dgx-h100"), nodes); }
inline ClusterSpec torus(const std::string& name, std::vector<int64_t> shape) {
  return resize_torus(preset(name), std::move(shape));
}

inline DeviceId dev(int64_t d) { return DeviceId(static_cast<uint32_t>(d)); }
inline VertexId vtx(int64_t d) { return VertexId(static_cast<uint32_t>(d)); }

inline int64_t count_kind(const Network& net, VertexKind kind) {
  int64_t n = 0;
  for (size_t v = 0; v < net.num_vertices(); ++v) {
    n += net.vertex(VertexId(static_cast<uint32_t>(v))).kind == kind ? 1 : 0;
  }
  return n;
}

// The path is a walk of links from a to b; unless devices forward (tori), every vertex strictly
// inside it is a switch or NIC.
inline void expect_walk(const Network& net, VertexId a, VertexId b, const Path& p,
                        bool devices_forward) {
  ASSERT_FALSE(p.empty());
  VertexId at = a;
  for (size_t i = 0; i < p.size(); ++i) {
    const Link& l = net.link(p[i]);
    ASSERT_EQ(l.src, at) << "link " << i << " does not continue the path";
    at = l.dst;
    if (i + 1 < p.size() && !devices_forward) {
      EXPECT_NE(net.vertex(at).kind, VertexKind::kDevice) << net.vertex(at).name;
    }
  }
  EXPECT_EQ(at, b);
}

inline std::vector<Path> sorted(std::vector<Path> paths) {
  std::sort(paths.begin(), paths.end());
  return paths;
}

// Devices [0, n/2) and [n/2, n).
inline std::pair<std::vector<DeviceId>, std::vector<DeviceId>> halves(const Network& net) {
  std::pair<std::vector<DeviceId>, std::vector<DeviceId>> out;
  const auto n = static_cast<int64_t>(net.num_devices());
  for (int64_t d = 0; d < n; ++d) {
    (d < n / 2 ? out.first : out.second).push_back(dev(d));
  }
  return out;
}

}  // namespace meshsim::topology::testing
