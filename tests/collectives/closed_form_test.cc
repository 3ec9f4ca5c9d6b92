// Closed forms of the collective model, one per algorithm/protocol pair, without contention: a
// collective alone takes max(floor, latency + n / min(cap, min over its links of C / w))
// (comm_shape.h), with NCCL's latencies and bandwidths (NCCL 2.30.7 src/graph/tuning.cc), the
// run-time NVLS chunk model (nccl_runtime.h), the catalogue's link efficiencies and the
// platform's floor; TPU torus collectives against the scaling book's multi-axis forms; the
// workbook's cases.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>

#include "collective_test_util.h"
#include "meshsim/collectives/comm_shape.h"
#include "meshsim/collectives/volume.h"

namespace meshsim::collectives {
namespace {

using namespace testing;  // NOLINT
using K = CollectiveKind;

CollectiveOptions forced(Algorithm a, std::optional<NcclProtocol> p = std::nullopt) {
  CollectiveOptions o;
  o.algorithm = a;
  o.protocol = p;
  return o;
}

// latency_us + n / rate, as Duration (the model's own rounding: ceil to the picosecond).
Duration closed(double latency_us, Bytes n, double rate_bytes_per_s) {
  return Microseconds(latency_us) + n / BytesPerSec::of(rate_bytes_per_s);
}

void expect_near(Duration got, Duration want, const std::string& what) {
  EXPECT_LT(relative_error(got, want), 1e-9) << what << ": " << got.microseconds() << " us vs "
                                             << want.microseconds();
}

TEST(ClosedForm, RingOnOneH100NodeForEachProtocol) {
  const auto net = topology::Network::build(dgx_h100(1));
  const auto group = devices(0, 8);
  // Simple: 8.4 + 14 x 3.4 us; 12 channels x 30 GB/s = 360 GB/s busbw (the links' 370.8 do not
  // bind). LL: 6.6 + 14 x 0.6, min(141, 360 / 2); LL128: 14 + 14 x 1.9, 0.92 x 360.
  struct Row {
    NcclProtocol p;
    double lat;
    double busbw;
  };
  for (const Row r : {Row{NcclProtocol::kSimple, 56.0, 360.0}, Row{NcclProtocol::kLL, 15.0, 141.0},
                      Row{NcclProtocol::kLL128, 40.6, 331.2}}) {
    const CollectivePlanner planner(net, forced(Algorithm::kRing, r.p));
    for (const Bytes n : {MiB(64), GiB(1)}) {
      expect_near(time_of(planner, K::kAllReduce, n, group),
                  closed(r.lat, n, r.busbw * 1e9 * 8 / 14), std::string(to_string(r.p)));
    }
  }
  // All-gather: n-1 steps, algbw = busbw n / (n - 1).
  const CollectivePlanner simple(net, forced(Algorithm::kRing, NcclProtocol::kSimple));
  expect_near(time_of(simple, K::kAllGather, GiB(1), group),
              closed(8.4 + 7 * 3.4, GiB(1), 360e9 * 8 / 7), "all-gather");
  // Below the platform's launch floor (DGX H100: 19.5 us), the floor.
  const CollectivePlanner ll(net, forced(Algorithm::kRing, NcclProtocol::kLL));
  EXPECT_EQ(time_of(ll, K::kAllReduce, KiB(4), group), Microseconds(19.5));
}

TEST(ClosedForm, A100RingRunsAtTheAchievedNvlinkBandwidth) {
  // NCCL believes 12 x 20 = 240 GB/s; the catalogue's achieved 0.772 x 300 GB/s binds: every
  // rank's link carries 2(p-1)/p of the buffer. The latency: NCCL's 56 us and the platform's
  // measured 10 us on each of the ring's 14 steps inside the node.
  const auto net = topology::Network::build(preset("dgx-a100"));
  const CollectivePlanner planner(net, forced(Algorithm::kRing, NcclProtocol::kSimple));
  const Bytes n = GiB(1);
  const double link = 300e9 * 0.772;
  expect_near(time_of(planner, K::kAllReduce, n, devices(0, 8)),
              closed(56.0 + 14 * 10.0, n, link / 1.75), "A100 ring");
  // Across nodes each ring step crosses the network, whose step latency NCCL's figure prices: the
  // platform's overhead is not added (a ring of 16 over 2 nodes takes as long without it).
  topology::ClusterSpec two = topology::resize_nodes(preset("dgx-a100"), 2);
  topology::ClusterSpec bare = two;
  bare.collectives.simple_step_overhead = Duration::zero();
  const auto ring_of = [&](const topology::ClusterSpec& spec) {
    const auto network = topology::Network::build(spec);
    const CollectivePlanner p(network, forced(Algorithm::kRing, NcclProtocol::kSimple));
    return time_of(p, K::kAllReduce, n, devices(0, 16));
  };
  EXPECT_EQ(ring_of(two), ring_of(bare));
}

TEST(ClosedForm, NvlsRunsInChunksOfNcclsChunkSize) {
  // NVLS all-reduce on 8 H100: NCCL's 272 GB/s (8 x 40 x 0.85 x 7/8 x 2 x 8/14) at the 128 KiB
  // chunk; smaller operations shrink the chunk (1 GiB / 64 / 8 / 2 x 128 ops boundaries) and pay
  // c0 = 0.7 us per chunk per channel: rate x g(c); latency 9 us + 14 chunk fills.
  const auto net = topology::Network::build(dgx_h100(1));
  const CollectivePlanner planner(net, forced(Algorithm::kNvls));
  const double bw = 8 * 59.5 * 8 / 14 * 1e9;
  const double per_channel = bw / 16;
  const double k0 = 0.7e-6 * per_channel;
  const double cmax = 131072;
  for (const auto& [n, chunk] :
       {std::pair{MiB(2), 16384.0}, {MiB(32), 32768.0}, {MiB(256), 65536.0}, {GiB(2), cmax}}) {
    const double g = (chunk / (chunk + k0)) / (cmax / (cmax + k0));
    const double rate = bw * g;
    const double fill_us = 14 * chunk / (rate / 16) * 1e6;
    expect_near(time_of(planner, K::kAllReduce, n, devices(0, 8)), closed(9 + fill_us, n, rate),
                std::to_string(n.count()));
  }
}

TEST(ClosedForm, BlackwellLowLatencyProtocolsRunAtTheirPerChannelRates) {
  // 4 GB200 of one NVL72 tray, NCCL 2.25 (ring 16 x 45, 32 CTAs). NCCL 2.25 prices LL at
  // min(2 x 141, 720 / 2) = 282 GB/s busbw and LL128 at min(0.92 x 720, 16 x 2 x 36.7) = 662.4;
  // they run at Hopper's LL rate per CTA (32 x 141 / 24 = 188) and at 2.29's re-measured LL128
  // cap (16 x 40 = 640). Latencies are NCCL's: 6.6 + 6 x 0.6 and 14 + 6 x 1.9 us.
  const auto net = topology::Network::build(preset("gb200-nvl72"));
  const auto group = devices(0, 4);
  struct Row {
    NcclProtocol p;
    double lat;
    double busbw;
  };
  for (const Row r : {Row{NcclProtocol::kLL, 10.2, 32 * 141.0 / 24},
                      Row{NcclProtocol::kLL128, 25.4, 640.0}}) {
    CollectiveOptions o = forced(Algorithm::kRing, r.p);
    o.nccl_version = NcclVersion{2, 25};
    const CollectivePlanner planner(net, o);
    expect_near(time_of(planner, K::kAllReduce, MiB(64), group),
                closed(r.lat, MiB(64), r.busbw * 1e9 * 4 / 6), std::string(to_string(r.p)));
  }
}

TEST(ClosedForm, NvlsOnAFullNvl72RackFillsOneLoopPerHead) {
  // 72 GPUs, NCCL 2.25: 32 NVLS channels, 32 heads (the NVLS graph's channels, capped by
  // NCCL_MAX_NVLS_ARITY), so ops = 1024 and 4 GiB runs 64 KiB chunks. Rate: the lower of 2.25's
  // 32 x min(20, 40) x 5/6 and 2.30's 32 x 20 x 0.74 x 31/32 x 2 x 72/142 (the re-measured NVLS
  // efficiency), times g(64 KiB); fill 1.75 loops of 32 chunks.
  const auto net = topology::Network::build(preset("gb200-nvl72"));
  CollectiveOptions o = forced(Algorithm::kNvls);
  o.nccl_version = NcclVersion{2, 25};
  const CollectivePlanner planner(net, o);
  const double bw = std::min(32 * 20 * 5.0 / 6, 32 * 20 * 0.74 * 31 / 32 * 2 * 72 / 142) * 1e9;
  const double k0 = 0.7e-6 * bw / 32;
  const double chunk = 65536;
  const double g = (chunk / (chunk + k0)) / (131072 / (131072 + k0));
  const double rate = bw * g;
  const double fill_us = 1.75 * 32 * chunk / (rate / 32) * 1e6;
  expect_near(time_of(planner, K::kAllReduce, GiB(4), devices(0, 72)),
              closed(9 + fill_us, GiB(4), rate), "nvl72");
}

TEST(ClosedForm, TreeAndNvlsTreeAcrossNodes) {
  // Tree on one node (forced): 8.4 + 2 x 7 x 4 us, 0.92 x 360 / 2 GB/s times NCCL's size
  // correction (Simple, 64 MiB: log2(64 MiB / 64) = 20 -> 0.8).
  const auto one = topology::Network::build(dgx_h100(1));
  const CollectivePlanner tree(one, forced(Algorithm::kTree, NcclProtocol::kSimple));
  expect_near(time_of(tree, K::kAllReduce, MiB(64), devices(0, 8)),
              closed(64.4, MiB(64), 165.6e9 * 0.8), "tree");
  // NVLSTree on 2 nodes at 8 GiB: 25 + 2 x 20.9 - 25 + 9 us and the chunk fill; 8 x 57.7 x 16/30.
  const auto two = topology::Network::build(dgx_h100(2));
  const CollectivePlanner nvt(two, {});
  const double bw = 8 * 57.7 * 16 / 30 * 1e9;
  const double fill_us = 14 * 131072 / (bw / 16) * 1e6;
  const std::vector<std::vector<DeviceId>> g = {devices(0, 16)};
  const CommShape s = nvt.collective(K::kAllReduce, GiB(8), g);
  EXPECT_EQ(s.algorithm, Algorithm::kNvlsTree);
  expect_near(nvt.isolated_time(s), closed(66.8 - 25 + 9 + fill_us, GiB(8), bw), "nvls-tree");
}

TEST(ClosedForm, NvlsTreeKeepsLargerChunksThanNvls) {
  // NVLSTree's own chunking (src/enqueue.cc calcCollChunking): 128 KiB on 2 nodes, 64 KiB below
  // 4 x ops chunks and 32 KiB below 1 x ops, ops = 16 channels x 8 heads; NVLS's rule (64 x, 8 x,
  // 2 x) would give 64, 32 and 16 KiB at these sizes.
  const auto two = topology::Network::build(dgx_h100(2));
  const CollectivePlanner nvt(two, forced(Algorithm::kNvlsTree));
  const double bw = 8 * 57.7 * 16 / 30 * 1e9;
  const double k0 = 0.7e-6 * bw / 16;
  const double cmax = 131072;
  for (const auto& [n, chunk] :
       {std::pair{MiB(4), 32768.0}, {MiB(32), 65536.0}, {MiB(256), cmax}}) {
    const double g = (chunk / (chunk + k0)) / (cmax / (cmax + k0));
    const double rate = bw * g;
    const double fill_us = 1.75 * 8 * chunk / (rate / 16) * 1e6;
    expect_near(time_of(nvt, K::kAllReduce, n, devices(0, 16)),
                closed(66.8 - 25 + 9 + fill_us, n, rate), std::to_string(n.count()));
  }
}

TEST(ClosedForm, PatWithOneRankPerNode) {
  // 16 H100 on 16 nodes, all-gather: 8 + 4 x 14 / 3.5 + 2.8 x 16 us, 2 x 24 x 0.75 GB/s.
  const auto net = topology::Network::build(dgx_h100(16));
  std::vector<DeviceId> group;
  for (int64_t n = 0; n < 16; ++n) {
    group.emplace_back(static_cast<uint32_t>(8 * n));
  }
  const CollectivePlanner planner(net, {});
  const std::vector<std::vector<DeviceId>> groups = {group};
  const CommShape s = planner.collective(K::kAllGather, MiB(1), groups);
  EXPECT_EQ(s.algorithm, Algorithm::kPat);
  expect_near(planner.isolated_time(s), closed(68.8, MiB(1), 36e9), "pat");
}

// ICI link of the v5p torus (one direction) and the per-hop latency.
std::pair<double, Duration> ici(const topology::Network& net) {
  const auto l = net.link_between(net.device_vertex(net.device_at({0, 0, 0})),
                                  net.device_vertex(net.device_at({1, 0, 0})));
  EXPECT_TRUE(l.has_value());
  return {net.link(*l).bandwidth.value() * 0.82, net.link(*l).latency};  // catalogue: ICI 0.82
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

TEST(ClosedForm, TorusAllGatherOverOneTwoAndThreeAxesOfV5p) {
  // The scaling book's multi-axis collectives: d (e-1) hops of latency and (p-1)/p n over the
  // 2d incoming links of every chip, all axes at once (bidirectional rings on wrapping axes).
  const auto net = topology::Network::build(preset("tpu-v5p"));
  ASSERT_EQ(net.spec().torus_shape, (std::vector<int64_t>{4, 4, 4}));
  const CollectivePlanner planner(net, {});
  const auto [b, hop] = ici(net);
  const Bytes n = MiB(384);  // divisible by 3 x 64
  for (int d = 1; d <= 3; ++d) {
    const auto group = subgrid(net, d);
    const double p = static_cast<double>(group.size());
    const Duration want = hop * (3 * d) + n / BytesPerSec::of(2.0 * d * b * p / (p - 1));
    EXPECT_LT(relative_error(time_of(planner, K::kAllGather, n, group), want), 1e-6) << d;
    // All-reduce = reduce-scatter + all-gather: twice the all-gather.
    EXPECT_LT(relative_error(time_of(planner, K::kAllReduce, n, group), want * 2), 1e-6) << d;
  }
}

TEST(ClosedForm, TorusLineWithoutWraparoundRunsAFoldedRing) {
  // TPU v5e 4x4: no wraparound (only 16-chip axes wrap), so an axis of 4 is a line; the folded
  // ring 0 2 3 1 puts one flow on each link direction per step, two hops at most:
  // 3 steps of 2 hops, and 3 n/4 over every link.
  const auto net = topology::Network::build(topology::resize_torus(preset("tpu-v5e"), {4, 4}));
  const auto l = net.link_between(net.device_vertex(net.device_at({0, 0})),
                                  net.device_vertex(net.device_at({1, 0})));
  ASSERT_TRUE(l.has_value());
  const double b = net.link(*l).bandwidth.value() * 0.82;
  std::vector<DeviceId> line;
  for (int64_t x = 0; x < 4; ++x) {
    line.push_back(net.device_at({x, 0}));
  }
  const Bytes n = MiB(64);
  const CollectivePlanner planner(net, {});
  const Duration want = net.link(*l).latency * 6 + n / BytesPerSec::of(b * 4 / 3);
  EXPECT_LT(relative_error(time_of(planner, K::kAllGather, n, line), want), 1e-6);
}

nlohmann::json workbook_case(const std::string& id) {
  std::ifstream in(std::string(MESHSIM_SOURCE_DIR) + "/validation/workbook/workbook_cases.json");
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
    const Schedule s = plan_collective(K::kAllReduce, tensor, devices(0, p), Algorithm::kRing, net);
    const auto sent = bytes_by_vertex(s, true);
    for (const auto& [v, bytes] : sent) {
      EXPECT_LT(relative_error(static_cast<double>(bytes), c.at("expected").get<double>()),
                c.at("rel_tol").get<double>())
          << id;
    }
    EXPECT_EQ(sent.size(), static_cast<size_t>(p));
  }
  // 2.3a: those bytes at 450 GB/s: the ring's load on a device's NVLink at line rate.
  const auto c = workbook_case("2.3a");
  const Bytes n = Bytes::of(134217728);
  const Schedule s = plan_collective(K::kAllReduce, n, devices(0, 8), Algorithm::kRing, net);
  CommShape shape;
  shape.bytes = n;
  shape.loads = schedule_loads(net, s, BandwidthEfficiency::ideal(), n);
  const Duration t = isolated_time(shape, link_capacities(net, BandwidthEfficiency::ideal()));
  EXPECT_EQ(c.at("inputs").at("bandwidth").get<double>(), 450e9);
  EXPECT_LT(relative_error(t.seconds(), c.at("expected").get<double>()),
            c.at("rel_tol").get<double>());
}

}  // namespace
}  // namespace meshsim::collectives
