// Issue 16: a failed NIC or link (topology::Network::apply_faults) carries nothing; its traffic
// takes the alternatives the fabric has (the node's other NICs over NVLink, the other way round
// a torus ring), slowing only the traffic that shares them, by what the bandwidth implies; where
// there is no alternative the fault is refused.
#include <gtest/gtest.h>

#include <algorithm>

#include "collective_test_util.h"
#include "meshsim/sim/error.h"

namespace meshsim::collectives {
namespace {

using namespace testing;  // NOLINT
using topology::LinkFault;
using topology::LinkKind;

NetworkCommModel model(const topology::Network& net,
                       NetworkBackend backend = NetworkBackend::kAnalytical) {
  return NetworkCommModel(
      net, topology::Placement::in_order(static_cast<int64_t>(net.num_devices())), backend);
}

bool crosses(const topology::Network& net, const topology::Path& p, topology::VertexId v) {
  return std::any_of(p.begin(), p.end(), [&](LinkId l) { return net.link(l).dst == v; });
}

topology::VertexId vertex_named(const topology::Network& net, const std::string& name) {
  for (uint32_t v = 0; v < net.num_vertices(); ++v) {
    if (net.vertex(topology::VertexId(v)).name == name) {
      return topology::VertexId(v);
    }
  }
  ADD_FAILURE() << "no vertex " << name;
  return topology::VertexId(0);
}

// The end times of sends started together at time zero, in the order given.
std::vector<Duration> run_together(NetworkCommModel& m,
                                   const std::vector<std::pair<uint32_t, uint32_t>>& sends,
                                   Bytes n) {
  std::vector<TransferId> ids;
  for (const auto& [a, b] : sends) {
    ids.push_back(m.start_p2p(SimTime::zero(), RankId(a), RankId(b), n));
  }
  std::vector<Duration> end(sends.size());
  for (size_t done = 0; done < sends.size();) {
    const CommAdvance a = m.advance(SimTime::max());
    for (const TransferId t : a.finished) {
      const auto i = static_cast<size_t>(std::find(ids.begin(), ids.end(), t) - ids.begin());
      end[i] = a.time - SimTime::zero();
      ++done;
    }
  }
  return end;
}

void expect_refused(topology::Network net, const std::vector<LinkFault>& faults, size_t index,
                    const std::string& why) {
  try {
    net.apply_faults(faults);
    ADD_FAILURE() << "expected a LinkFaultError: " << why;
  } catch (const topology::LinkFaultError& e) {
    EXPECT_EQ(e.index(), index);
    EXPECT_NE(e.message().find(why), std::string::npos) << e.message();
  }
}

TEST(FailedLink, NicDownSendsOverNvlinkToAPeerOfTheNode) {
  auto net = topology::Network::build(dgx_h100(2));
  const std::vector<std::string> how =
      net.apply_faults({LinkFault::failed(DeviceId(0), LinkKind::kNetwork)});
  ASSERT_EQ(how.size(), 1u);
  EXPECT_NE(how[0].find("NVLink to devices 1, 2, 3, 4, 5, 6, 7 of node 0"), std::string::npos)
      << how[0];
  for (const LinkId l : net.device_links(DeviceId(0), LinkKind::kNetwork)) {
    EXPECT_TRUE(net.is_down(l));
  }
  const topology::VertexId nic0 = vertex_named(net, "node0/nic0");
  const topology::VertexId a = net.device_vertex(DeviceId(0));
  const topology::VertexId b = net.device_vertex(DeviceId(8));
  // Seven peers' NICs (other rails than GPU 8's) x 4 spines; none through the failed NIC.
  EXPECT_EQ(net.path_count(a, b), 7 * 4);
  for (const topology::Path& p : net.paths(a, b)) {
    EXPECT_FALSE(crosses(net, p, nic0));
    EXPECT_EQ(net.link(p.front()).kind, LinkKind::kNvlink);
    for (const LinkId l : p) {
      EXPECT_FALSE(net.is_down(l));
    }
  }
  // Traffic into GPU 0 enters through a peer too; inside the node nothing changes.
  for (const topology::Path& p : net.paths(b, a)) {
    EXPECT_EQ(net.link(p.back()).kind, LinkKind::kNvlink);
  }
  EXPECT_EQ(net.hops(DeviceId(0), DeviceId(1)), 2);
  EXPECT_EQ(net.hops(DeviceId(0), DeviceId(8)), 2 + 6);  // NVLink to the peer, then 6 hops
}

// The closed form on the smallest case: GPU 0's send to node 1 goes out through GPU 1's NIC
// (ECMP salt 1, node 1's host number), where GPU 1's own send meets it: both move at half the NIC
// rate, so the bandwidth phase takes twice as long; a send through another NIC is untouched.
TEST(FailedLink, ReroutedTrafficSlowsOnlyWhatSharesTheSurvivingNic) {
  const auto healthy_net = topology::Network::build(dgx_h100(2));
  auto net = topology::Network::build(dgx_h100(2));
  net.apply_faults({LinkFault::failed(DeviceId(0), LinkKind::kNetwork)});
  ASSERT_TRUE(crosses(net, net.route(net.device_vertex(DeviceId(0)),
                                     net.device_vertex(DeviceId(8)), 1),
                      vertex_named(net, "node0/nic1")));
  const Bytes n = MB(100);
  const BytesPerSec nic = GBps(50) * 0.96;  // ConnectX-7 at 400 Gb/s, NIC efficiency 0.96
  auto healthy = model(healthy_net);
  const Duration alone = healthy.p2p_time(RankId(1), RankId(9), n);
  const Duration latency = alone - n / nic;
  auto m = model(net);
  const std::vector<Duration> end = run_together(m, {{0, 8}, {1, 9}, {2, 10}}, n);
  EXPECT_LT(relative_error(end[0], latency + n / (nic * 0.5)), 1e-3);
  EXPECT_LT(relative_error(end[1], latency + n / (nic * 0.5)), 1e-3);
  EXPECT_EQ(end[2], alone);
  // Without the failure the three sends do not meet.
  auto h = model(healthy_net);
  const std::vector<Duration> healthy_end = run_together(h, {{0, 8}, {1, 9}, {2, 10}}, n);
  EXPECT_EQ(healthy_end[0], alone);
  EXPECT_EQ(healthy_end[1], alone);
}

TEST(FailedLink, SimGridAgreesOnTheReroutedCase) {
  auto net = topology::Network::build(dgx_h100(2));
  net.apply_faults({LinkFault::failed(DeviceId(0), LinkKind::kNetwork)});
  const Bytes n = MB(100);
  auto fluid = model(net);
  auto simgrid = model(net, NetworkBackend::kSimGrid);
  const std::vector<Duration> a = run_together(fluid, {{0, 8}, {1, 9}, {2, 10}}, n);
  const std::vector<Duration> b = run_together(simgrid, {{0, 8}, {1, 9}, {2, 10}}, n);
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_LT(relative_error(b[i], a[i]), 0.05) << i;
  }
  EXPECT_GT(b[0] / b[2], 1.5);  // SimGrid sees the shared NIC too
}

TEST(FailedLink, OneOfSeveralNicsDownLeavesTheOthers) {
  auto spec = dgx_h100(2);
  spec.fat_tree->nics_per_device = 2;
  auto net = topology::Network::build(spec);
  const topology::VertexId a = net.device_vertex(DeviceId(0));
  const topology::VertexId b = net.device_vertex(DeviceId(8));
  const int64_t before = net.path_count(a, b);
  LinkFault f = LinkFault::failed(DeviceId(0), LinkKind::kNetwork);
  f.nic = 1;
  const auto how = net.apply_faults({f});
  EXPECT_NE(how[0].find("other NIC (0)"), std::string::npos) << how[0];
  EXPECT_EQ(net.path_count(a, b), before / 2);
  const topology::VertexId nic1 = vertex_named(net, "node0/nic1");
  for (const topology::Path& p : net.paths(a, b)) {
    EXPECT_FALSE(crosses(net, p, nic1));
    EXPECT_EQ(net.link(p.front()).kind, LinkKind::kPcie);  // still its own NIC
  }
}

// A leaf's uplinks to one spine down: traffic between rails (leaf -> spine -> leaf) keeps ECMP
// over the other spines; traffic that never climbs to that spine is untouched.
TEST(FailedLink, LeafUplinkDownLeavesTheOtherSpines) {
  auto net = topology::Network::build(dgx_h100(2));
  const topology::VertexId a = net.device_vertex(DeviceId(0));
  const topology::VertexId b = net.device_vertex(DeviceId(9));  // node 1, rail 1
  ASSERT_EQ(net.path_count(a, b), 4);                          // 4 spines
  LinkFault f = LinkFault::failed(DeviceId(0), LinkKind::kNetwork);
  f.spine = 1;
  const auto how = net.apply_faults({f});
  EXPECT_NE(how[0].find("leaf rail0 #0 through the spines takes ECMP over its other spines "
                        "(0, 2, 3)"),
            std::string::npos)
      << how[0];
  const topology::VertexId spine1 = vertex_named(net, "spine 1");
  EXPECT_EQ(net.path_count(a, b), 3);
  EXPECT_EQ(net.path_count(b, a), 3);
  for (const topology::Path& p : net.paths(a, b)) {
    EXPECT_FALSE(crosses(net, p, spine1));
  }
  const topology::VertexId c = net.device_vertex(DeviceId(1));  // rail 1 to rail 2: untouched
  EXPECT_EQ(net.path_count(c, net.device_vertex(DeviceId(10))), 4);
  EXPECT_EQ(net.detour_links(f).size(), 6u);  // the leaf's 3 other uplinks, both directions
  // Every spine of a leaf down: it reaches no other leaf.
  std::vector<LinkFault> all;
  for (int64_t j = 0; j < 4; ++j) {
    all.push_back(f);
    all.back().spine = j;
  }
  expect_refused(topology::Network::build(dgx_h100(2)), all, 3, "no longer reach a common spine");
  f.spine = 4;
  expect_refused(topology::Network::build(dgx_h100(2)), {f}, 0, "below the 4 spines");
}

// A 4x4x4 TPU v5p torus: chip 0's +x link (to chip 1) down; 0 -> 1 goes the long way round the x
// ring (0 -> 3 -> 2 -> 1), sharing link 3 -> 2 with a send from 3 to 2: both at half the ICI rate.
TEST(FailedLink, TorusRingGoesTheOtherWayRound) {
  auto net = topology::Network::build(preset("tpu-v5p"));
  const auto healthy_net = topology::Network::build(preset("tpu-v5p"));
  LinkFault f = LinkFault::failed(DeviceId(0), LinkKind::kIci);
  f.ici_axis = 0;
  f.ici_direction = 1;
  const auto how = net.apply_faults({f});
  EXPECT_NE(how[0].find("x ring goes the other way round"), std::string::npos) << how[0];
  EXPECT_EQ(net.hops(DeviceId(0), DeviceId(1)), 3);
  EXPECT_EQ(net.hops(DeviceId(1), DeviceId(0)), 3);  // both directions of the cable are down
  EXPECT_EQ(net.hops(DeviceId(0), DeviceId(4)), 1);  // other axes untouched
  EXPECT_EQ(net.detour_links(f).size(), 6u);         // the ring's other 3 cables, both ways
  const Bytes n = MB(100);
  auto healthy = model(healthy_net);
  const Duration alone = healthy.p2p_time(RankId(3), RankId(2), n);
  auto m = model(net);
  const std::vector<Duration> end = run_together(m, {{0, 1}, {3, 2}, {1, 2}}, n);
  const topology::Link& l32 = healthy_net.link(*healthy_net.link_between(
      net.device_vertex(DeviceId(3)), net.device_vertex(DeviceId(2))));
  const BandwidthEfficiency eff = BandwidthEfficiency::defaults_for(preset("tpu-v5p"));
  const BytesPerSec ici = l32.bandwidth * eff.link[static_cast<size_t>(LinkKind::kIci)];
  const Duration latency = alone - n / ici;
  EXPECT_LT(relative_error(end[1], latency + n / (ici * 0.5)), 1e-3);
  EXPECT_GT(end[0], end[1]);  // and it pays two more hops' latency
  EXPECT_EQ(end[2], alone);   // 1 -> 2 (+x) shares nothing with the detour (-x)
}

TEST(FailedLink, NoAlternativeIsRefusedSayingWhy) {
  const auto gpu = [] { return topology::Network::build(dgx_h100(2)); };
  expect_refused(gpu(), {LinkFault::failed(DeviceId(3), LinkKind::kNvlink)}, 0,
                 "only path to the other GPUs of its NVLink domain");
  std::vector<LinkFault> node;
  for (uint32_t d = 0; d < 8; ++d) {
    node.push_back(LinkFault::failed(DeviceId(d), LinkKind::kPcie));
  }
  expect_refused(gpu(), node, 7, "node 0 has no other working NIC");
  auto single = dgx_h100(2);
  single.devices_per_node = 1;
  expect_refused(topology::Network::build(single),
                 {LinkFault::failed(DeviceId(1), LinkKind::kNetwork)}, 0,
                 "node 1 has no other working NIC");
  LinkFault nic9 = LinkFault::failed(DeviceId(0), LinkKind::kNetwork);
  nic9.nic = 9;
  expect_refused(gpu(), {nic9}, 0, "NIC index below the device's 1 NIC");
  expect_refused(gpu(), {LinkFault::failed(DeviceId(0), LinkKind::kIci)}, 0, "no ici links");
  const auto tpu = [] { return topology::Network::build(preset("tpu-v5p")); };
  expect_refused(tpu(), {LinkFault::failed(DeviceId(0), LinkKind::kIci)}, 0,
                 "every ICI link down is cut off");
  LinkFault x0 = LinkFault::failed(DeviceId(0), LinkKind::kIci);
  x0.ici_axis = 0;
  LinkFault x2 = x0;
  x2.device = DeviceId(2);
  expect_refused(tpu(), {x0, x2}, 1, "already has a link down");
  expect_refused(topology::Network::build(topology::resize_torus(preset("tpu-v5p"), {2, 4, 4})),
                 {x0}, 0, "does not wrap around");
}

// Same faults, same bytes: the reroute and the times do not depend on anything but the input.
TEST(FailedLink, Deterministic) {
  const Bytes n = MB(64);
  std::vector<std::vector<Duration>> runs;
  for (int i = 0; i < 2; ++i) {
    auto net = topology::Network::build(dgx_h100(2));
    net.apply_faults({LinkFault::failed(DeviceId(5), LinkKind::kNetwork)});
    auto m = model(net);
    runs.push_back(run_together(m, {{5, 13}, {6, 14}, {13, 5}}, n));
  }
  EXPECT_EQ(runs[0], runs[1]);
}

}  // namespace
}  // namespace meshsim::collectives
