// Schedules on the analytical backend against their closed forms, without contention: the ring on
// an NVSwitch node (DESIGN.md: 2(p-1) alpha + 2(p-1)/p n/B), reduce-scatter / all-gather,
// halving-doubling's log2 p latency, the bidirectional ring's halved bandwidth term, torus
// all-gathers over one, two and three axes of a TPU v5p 4x4x4, NVLS, and the workbook's
// collective byte and time cases.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "collective_test_util.h"
#include "meshsim/collectives/ring_model.h"
#include "meshsim/collectives/volume.h"

namespace meshsim::collectives {
namespace {

using namespace testing;  // NOLINT

// alpha and B of one NVSwitch path (device -> NVSwitch -> device), at line rate.
LinkParams nvswitch_path(const topology::Network& net) {
  const auto path = net.route(net.device_vertex(DeviceId(0)), net.device_vertex(DeviceId(1)));
  return {net.path_bandwidth(path), net.path_latency(path)};
}

TEST(ClosedForm, RingOnOneNvSwitchNode) {
  const auto net = topology::Network::build(dgx_h100(1));
  const LinkParams link = nvswitch_path(net);
  EXPECT_EQ(link.bandwidth, GBps(450));
  EXPECT_EQ(link.latency, Microseconds(3.4));
  AnalyticalBackend ideal(net, BandwidthEfficiency::ideal());
  for (const int64_t p : {2, 4, 8}) {
    for (const Bytes n : {MiB(1), MiB(64), GiB(1)}) {
      const double a = link.latency.seconds();
      const double b = link.bandwidth.value();
      const double pd = static_cast<double>(p);
      const double nd = n.as_double();
      const double ar = 2 * (pd - 1) * a + 2 * (pd - 1) / pd * nd / b;
      const double rs = (pd - 1) * a + (pd - 1) / pd * nd / b;
      const auto group = devices(0, p);
      using K = CollectiveKind;
      const auto t = [&](K k) {
        return time_of(plan_collective(k, n, group, Algorithm::kRing, net), ideal).seconds();
      };
      EXPECT_LT(relative_error(t(K::kAllReduce), ar), 0.005) << p << " ranks, " << n.count();
      EXPECT_LT(relative_error(t(K::kReduceScatter), rs), 0.005);
      EXPECT_LT(relative_error(t(K::kAllGather), rs), 0.005);
      // The same as the simple ring model's closed form.
      for (const K k : {K::kAllReduce, K::kReduceScatter, K::kAllGather, K::kBroadcast}) {
        EXPECT_LT(relative_error(t(k), ring_collective_time(k, n, p, link).seconds()), 0.005)
            << to_string(k);
      }
    }
  }
}

TEST(ClosedForm, DefaultBackendUsesNcclsEffectiveNvlinkBandwidth) {
  // NCCL src/graph/topo.h: SM90_NVLINK_BW 20.6 GB/s per NVLink4 link, 18 links = 370.8 GB/s.
  const auto net = topology::Network::build(dgx_h100(1));
  AnalyticalBackend backend(net);
  const LinkParams link{GBps(370.8), nvswitch_path(net).latency};
  const Bytes n = GiB(1);
  const Duration t =
      time_of(plan_collective(CollectiveKind::kAllReduce, n, devices(0, 8), Algorithm::kRing, net),
              backend);
  EXPECT_LT(relative_error(t, ring_collective_time(CollectiveKind::kAllReduce, n, 8, link)), 0.005);
}

TEST(ClosedForm, HalvingDoublingPaysLog2pLatencies) {
  const auto net = topology::Network::build(dgx_h100(1));
  AnalyticalBackend ideal(net, BandwidthEfficiency::ideal());
  const LinkParams link = nvswitch_path(net);
  for (const int64_t p : {2, 4, 8}) {
    const auto group = devices(0, p);
    const Schedule rs = plan_collective(CollectiveKind::kReduceScatter, Bytes::of(p), group,
                                        Algorithm::kHalvingDoubling, net);
    const int64_t log2p = p == 2 ? 1 : p == 4 ? 2 : 3;
    EXPECT_EQ(static_cast<int64_t>(rs.steps.size()), log2p);
    // A tiny buffer: the time is the latency term, log2 p alphas (the ring pays p - 1).
    EXPECT_LT(relative_error(time_of(rs, ideal), link.latency * log2p), 0.005);
    const Schedule ar = plan_collective(CollectiveKind::kAllReduce, Bytes::of(p), group,
                                        Algorithm::kHalvingDoubling, net);
    EXPECT_LT(relative_error(time_of(ar, ideal), link.latency * (2 * log2p)), 0.005);
    // Large buffers: the bandwidth term equals the ring's, (p-1)/p n / B.
    const Bytes n = GiB(1);
    const Duration big = time_of(
        plan_collective(CollectiveKind::kAllGather, n, group, Algorithm::kHalvingDoubling, net),
        ideal);
    const double want = static_cast<double>(log2p) * link.latency.seconds() +
                        allgather_bytes_per_rank(n, p).as_double() / link.bandwidth.value();
    EXPECT_LT(relative_error(big.seconds(), want), 0.005);
  }
}

// ICI link of the v5p torus (one direction) and the per-hop latency.
LinkParams ici(const topology::Network& net) {
  const auto l = net.link_between(net.device_vertex(net.device_at({0, 0, 0})),
                                  net.device_vertex(net.device_at({1, 0, 0})));
  EXPECT_TRUE(l.has_value());
  return {net.link(*l).bandwidth, net.link(*l).latency};
}

TEST(ClosedForm, BidirectionalRingHalvesTheBandwidthTermOnATorusAxis) {
  const auto net = topology::Network::build(preset("tpu-v5p"));
  AnalyticalBackend backend(net);
  const LinkParams link = ici(net);
  std::vector<DeviceId> axis;
  for (int64_t x = 0; x < 4; ++x) {
    axis.push_back(net.device_at({x, 0, 0}));
  }
  const Bytes n = GiB(1);
  const auto t = [&](Algorithm a) {
    return time_of(plan_collective(CollectiveKind::kAllReduce, n, axis, a, net), backend);
  };
  const Duration latency = link.latency * 6;  // 2 (p - 1) ring steps of one hop
  const double ring_bw = (t(Algorithm::kRing) - latency).seconds();
  const double bidir_bw = (t(Algorithm::kBidirectionalRing) - latency).seconds();
  EXPECT_LT(relative_error(ring_bw, 1.5 * n.as_double() / link.bandwidth.value()), 0.005);
  EXPECT_LT(relative_error(bidir_bw, 0.5 * ring_bw), 0.005);
  // Through an NVSwitch both directions of a rank leave on one uplink: no gain.
  const auto dgx = topology::Network::build(dgx_h100(1));
  AnalyticalBackend nv(dgx);
  const auto tn = [&](Algorithm a) {
    return time_of(plan_collective(CollectiveKind::kAllReduce, n, devices(0, 8), a, dgx), nv);
  };
  EXPECT_LT(relative_error(tn(Algorithm::kBidirectionalRing), tn(Algorithm::kRing)), 0.005);
}

// A TPU v5p 4x4x4 group over `axes` (the others at 0).
std::vector<DeviceId> subgrid(const topology::Network& net, int axes) {
  std::vector<DeviceId> out;
  const int64_t ey = axes >= 2 ? 4 : 1;
  const int64_t ez = axes >= 3 ? 4 : 1;
  for (int64_t z = 0; z < ez; ++z) {
    for (int64_t y = 0; y < ey; ++y) {
      for (int64_t x = 0; x < 4; ++x) {
        out.push_back(net.device_at({x, y, z}));
      }
    }
  }
  return out;
}

// Time of a ring all-gather along one wrapping axis of extent e that moves `chunk` bytes per
// chip per step, bidirectionally: (e - 1) (alpha + chunk / (2 B)), i.e. the scaling book's
// (e-1)/e * share / (2 B) for the share e * chunk the ring gathers.
double axis_ring(int64_t e, double chunk, const LinkParams& link) {
  const double ed = static_cast<double>(e);
  return (ed - 1) * link.latency.seconds() + (ed - 1) * chunk / (2 * link.bandwidth.value());
}

TEST(ClosedForm, TorusAllGatherOverOneTwoAndThreeAxesOfV5p) {
  const auto net = topology::Network::build(preset("tpu-v5p"));
  ASSERT_EQ(net.spec().torus_shape, (std::vector<int64_t>{4, 4, 4}));
  AnalyticalBackend backend(net);
  const LinkParams link = ici(net);
  const Bytes n = MiB(384);  // divisible by 3 x 64
  for (int d = 1; d <= 3; ++d) {
    const auto group = subgrid(net, d);
    const auto p = static_cast<int64_t>(group.size());
    const Duration t =
        time_of(plan_collective(CollectiveKind::kAllGather, n, group, Algorithm::kTorusRings, net),
                backend);
    // Data split over the d axes, all axes at once; part j gathers axis after axis, its chunk
    // growing 4x per phase from n / (d p): phases in sequence, each one ring per axis.
    double want = 0.0;
    double chunk = n.as_double() / d / static_cast<double>(p);
    for (int phase = 0; phase < d; ++phase, chunk *= 4) {
      want += axis_ring(4, chunk, link);
    }
    EXPECT_LT(relative_error(t.seconds(), want), 0.005) << d << " axes";
    // ... which is d (e-1) alpha + (p-1)/p n / (2 d B): every chip receives (p-1)/p n over its
    // 2d incoming links.
    const double bound =
        d * 3 * link.latency.seconds() + (static_cast<double>(p) - 1) / static_cast<double>(p) *
                                             n.as_double() / (2.0 * d * link.bandwidth.value());
    EXPECT_LT(relative_error(t.seconds(), bound), 0.005) << d << " axes";
    // One axis is exactly the scaling book's (e-1)/e * n / (2 B) plus 3 hops.
    if (d == 1) {
      EXPECT_LT(
          relative_error(t.seconds(), 3 * link.latency.seconds() +
                                          0.75 * n.as_double() / (2 * link.bandwidth.value())),
          0.005);
    }
    // All-reduce = reduce-scatter + all-gather: twice the all-gather.
    const Duration ar =
        time_of(plan_collective(CollectiveKind::kAllReduce, n, group, Algorithm::kTorusRings, net),
                backend);
    EXPECT_LT(relative_error(ar, t * 2), 0.005) << d << " axes";
  }
}

TEST(ClosedForm, TorusLineWithoutWraparoundRunsAFoldedRing) {
  // TPU v5e 4x4: no wraparound (only 16-chip axes wrap), so an axis of 4 is a line; the folded
  // ring 0 2 3 1 puts one flow on each link direction, two hops at most: (e-1)(2 alpha + c/B).
  auto spec = topology::resize_torus(preset("tpu-v5e"), {4, 4});
  const auto net = topology::Network::build(spec);
  AnalyticalBackend backend(net);
  const auto l = net.link_between(net.device_vertex(net.device_at({0, 0})),
                                  net.device_vertex(net.device_at({1, 0})));
  ASSERT_TRUE(l.has_value());
  const double b = net.link(*l).bandwidth.value();
  const double a = net.link(*l).latency.seconds();
  std::vector<DeviceId> line;
  for (int64_t x = 0; x < 4; ++x) {
    line.push_back(net.device_at({x, 0}));
  }
  const Bytes n = MiB(64);
  const Duration t = time_of(
      plan_collective(CollectiveKind::kAllGather, n, line, Algorithm::kTorusRings, net), backend);
  EXPECT_LT(relative_error(t.seconds(), 3 * (2 * a + n.as_double() / 4 / b)), 0.005);
}

TEST(ClosedForm, NvlsMovesNTimesPPlusOneOverPEachWay) {
  const auto net = topology::Network::build(dgx_h100(1));
  AnalyticalBackend ideal(net, BandwidthEfficiency::ideal());
  const LinkParams link = nvswitch_path(net);
  const Bytes n = GiB(1);
  for (const int64_t p : {2, 4, 8}) {
    const double pd = static_cast<double>(p);
    const Duration ar = time_of(
        plan_collective(CollectiveKind::kAllReduce, n, devices(0, p), Algorithm::kNvls, net),
        ideal);
    const double want = 2 * link.latency.seconds() + n.as_double() * (pd + 1) / pd / 450e9;
    EXPECT_LT(relative_error(ar.seconds(), want), 0.005) << p;
    const Duration ag = time_of(
        plan_collective(CollectiveKind::kAllGather, n, devices(0, p), Algorithm::kNvls, net),
        ideal);
    EXPECT_LT(relative_error(ag.seconds(), link.latency.seconds() + n.as_double() / 450e9), 0.005);
  }
}

nlohmann::json workbook_case(const std::string& id) {
  std::ifstream in(std::string(MESHSIM_REFERENCE_DIR) + "/workbook_cases.json");
  const auto doc = nlohmann::json::parse(in);
  for (const auto& c : doc.at("cases")) {
    if (c.at("id") == id) {
      return c;
    }
  }
  ADD_FAILURE() << "no workbook case " << id;
  return {};
}

TEST(ClosedForm, WorkbookCollectiveCases) {
  const auto net = topology::Network::build(dgx_h100(1));
  // 2.2 and 4.2: bytes each device sends in a ring all-reduce of the tensor over 8 devices.
  for (const std::string id : {"2.2", "4.2"}) {
    const auto c = workbook_case(id);
    const auto tensor = Bytes::of(c.at("inputs").at("tensor_bytes").get<int64_t>());
    const int64_t p = c.at("inputs").at("devices").get<int64_t>();
    const Schedule s =
        plan_collective(CollectiveKind::kAllReduce, tensor, devices(0, p), Algorithm::kRing, net);
    const auto sent = bytes_by_vertex(s, true);
    for (const auto& [v, bytes] : sent) {
      EXPECT_LT(relative_error(static_cast<double>(bytes), c.at("expected").get<double>()),
                c.at("rel_tol").get<double>())
          << id;
    }
    EXPECT_EQ(sent.size(), static_cast<size_t>(p));
  }
  // 2.3a: those bytes at 450 GB/s: the bandwidth term of the 2.2 all-reduce on one H100 node at
  // NVLink line rate.
  const auto c = workbook_case("2.3a");
  AnalyticalBackend ideal(net, BandwidthEfficiency::ideal());
  const Duration t = time_of(plan_collective(CollectiveKind::kAllReduce, Bytes::of(134217728),
                                             devices(0, 8), Algorithm::kRing, net),
                             ideal);
  const Duration bandwidth_term = t - nvswitch_path(net).latency * 14;
  EXPECT_EQ(c.at("inputs").at("bandwidth").get<double>(), 450e9);
  EXPECT_LT(relative_error(bandwidth_term.seconds(), c.at("expected").get<double>()),
            c.at("rel_tol").get<double>());
}

}  // namespace
}  // namespace meshsim::collectives
