// The analytical backend: max-min fair sharing, contention between concurrent groups, ECMP
// spreading, determinism and edge cases.
#include <gtest/gtest.h>

#include "collective_test_util.h"
#include "meshsim/sim/error.h"

namespace meshsim::collectives {
namespace {

using namespace testing;  // NOLINT

// Four GPUs: gpu0, gpu1 on leaf a; gpu2, gpu3 on leaf b; 100 GB/s device links and one 10 GB/s
// a <-> b cable, 1 us per link.
topology::ClusterSpec two_leaves() {
  auto spec = dgx_h100(1);
  spec.devices_per_node = 4;
  topology::GraphSpec g;
  g.switches = {{"a", "leaf"}, {"b", "leaf"}};
  auto link = [](std::string x, std::string y, double gbps) {
    return topology::GraphLinkSpec{std::move(x), std::move(y), "network", GBps(gbps),
                                   Microseconds(1)};
  };
  g.links = {link("gpu0", "a", 100), link("gpu1", "a", 100), link("gpu2", "b", 100),
             link("gpu3", "b", 100), link("a", "b", 10)};
  spec.graph = g;
  return spec;
}

Step step_of(std::vector<Flow> flows) {
  Step s;
  s.flows = std::move(flows);
  return s;
}

Duration one_step(NetworkBackend& backend, const Step& step) {
  return backend.step_times(std::span<const Step>(&step, 1)).at(0);
}

TEST(AnalyticalBackend, OneFlowTakesPathLatencyPlusBytesOverBottleneck) {
  const auto net = topology::Network::build(two_leaves());
  AnalyticalBackend backend(net);
  const Bytes n = MB(100);
  const Step s = step_of({device_flow_for_test(net, 0, 2, n)});
  EXPECT_EQ(one_step(backend, s), Microseconds(3) + n / GBps(10));
}

TEST(AnalyticalBackend, MaxMinFairSharing) {
  // f1 0->2 and f2 1->3 share the 10 GB/s a->b cable: 5 GB/s each. f3 2->3 shares b->gpu3
  // (100 GB/s) with f2 only, so max-min gives it the 95 GB/s f2 leaves (equal shares would give
  // 50). f3 carries 30x the bytes, so it ends last, after its 2 links' latency.
  const auto net = topology::Network::build(two_leaves());
  AnalyticalBackend backend(net);
  const Bytes n = MB(10);
  const Step s = step_of({device_flow_for_test(net, 0, 2, n), device_flow_for_test(net, 1, 3, n),
                          device_flow_for_test(net, 2, 3, n * 30)});
  const Duration want = Microseconds(2) + (n * 30) / GBps(95);
  EXPECT_LT(relative_error(one_step(backend, s), want), 1e-9);
  // Alone, f1 gets the whole cable.
  EXPECT_EQ(one_step(backend, step_of({device_flow_for_test(net, 0, 2, n)})),
            Microseconds(3) + n / GBps(10));
}

TEST(AnalyticalBackend, TwoConcurrentGroupsSharingALinkGetHalfItsBandwidth) {
  const auto net = topology::Network::build(two_leaves());
  AnalyticalBackend backend(net);
  const std::vector<std::vector<DeviceId>> groups = {{DeviceId(0), DeviceId(2)},
                                                     {DeviceId(1), DeviceId(3)}};
  const Bytes n = MB(100);
  using K = CollectiveKind;
  const Duration alone =
      time_of(plan_collective(K::kAllGather, n, groups[0], Algorithm::kRing, net), backend);
  const Duration together =
      time_of(plan_concurrent(K::kAllGather, n, groups, Algorithm::kRing, net), backend);
  // Ring all-gather over 2: each rank sends n/2 across the cable, 3 us of path latency.
  EXPECT_EQ(alone, Microseconds(3) + (n / 2) / GBps(10));
  EXPECT_EQ(together, Microseconds(3) + (n / 2) / GBps(5));
}

TEST(AnalyticalBackend, CrossRailFlowsAreNicBound) {
  // 4 DGX H100 nodes, non-blocking: every GPU of node i sends to the GPU of node i+1 on another
  // rail (leaf -> spine -> leaf); the fabric is non-blocking and the flows spread over the
  // spines, so the step takes the NIC-bound time.
  const auto net = topology::Network::build(dgx_h100(4));
  AnalyticalBackend backend(net);
  const Bytes n = MB(100);
  std::vector<Flow> flows;
  for (int64_t g = 0; g < 8; ++g) {
    for (int64_t node = 0; node < 4; ++node) {
      flows.push_back(
          device_flow_for_test(net, node * 8 + g, ((node + 1) % 4) * 8 + (g + 1) % 8, n));
    }
  }
  const Duration t = one_step(backend, step_of(flows));
  const Duration nic_bound = Microseconds(14) + n / net.spec().inter_node_bandwidth();
  EXPECT_LT(relative_error(t, nic_bound), 1e-6);
  EXPECT_EQ(one_step(backend, step_of(flows)), t);  // deterministic
}

TEST(AnalyticalBackend, LocalFlowsEmptyStepsAndZeroBytesTakeNoTime) {
  const auto net = topology::Network::build(two_leaves());
  AnalyticalBackend backend(net);
  EXPECT_EQ(one_step(backend, step_of({})), Duration::zero());
  EXPECT_EQ(one_step(backend, step_of({device_flow_for_test(net, 1, 1, MB(1))})), Duration::zero());
  EXPECT_EQ(one_step(backend, step_of({device_flow_for_test(net, 0, 1, Bytes::zero())})),
            Duration::zero());
  Schedule s;
  s.steps.push_back(step_of({device_flow_for_test(net, 0, 1, MB(1))}));
  s.steps.back().repeat = 3;
  s.steps.back().overhead = Microseconds(1);
  const Duration one = one_step(backend, s.steps.back());
  EXPECT_EQ(schedule_time(s, backend), (one + Microseconds(1)) * 3);
}

TEST(AnalyticalBackend, InSwitchFlowsRunAtTheNvlsEfficiency) {
  const auto net = topology::Network::build(dgx_h100(1));
  BandwidthEfficiency e = BandwidthEfficiency::ideal();
  e.in_switch = 0.5;
  AnalyticalBackend backend(net, e);
  const auto sw = *net.nvswitch_of(DeviceId(0));
  const Bytes n = GB(1);
  const Step s = step_of({Flow{net.device_vertex(DeviceId(0)), sw, n}});
  EXPECT_EQ(one_step(backend, s), Microseconds(1.7) + n / GBps(225));
}

}  // namespace
}  // namespace meshsim::collectives
