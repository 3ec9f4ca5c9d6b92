// Issue 16: a degraded NIC or link (topology::Network::degrade) slows only the traffic that
// crosses it, in the planner's costs and on the shared network the engine advances.
#include <gtest/gtest.h>

#include "collective_test_util.h"
#include "meshsim/sim/error.h"

namespace meshsim::collectives {
namespace {

using namespace testing;  // NOLINT

NetworkCommModel model(const topology::Network& net) {
  return NetworkCommModel(net,
                          topology::Placement::in_order(static_cast<int64_t>(net.num_devices())),
                          NetworkBackend::kAnalytical);
}

topology::LinkFault deg(DeviceId d, topology::LinkKind kind, double factor) {
  return topology::LinkFault::degraded(d, kind, factor);
}
using topology::LinkKind;

std::vector<RankId> ranks(uint32_t first, uint32_t count) {
  std::vector<RankId> out;
  for (uint32_t i = 0; i < count; ++i) {
    out.push_back(RankId(first + i));
  }
  return out;
}

TEST(DegradedLink, DeviceLinksNameTheNicCablesAndTheNvlink) {
  const auto net = topology::Network::build(dgx_h100(2));
  const auto nic = net.device_links(DeviceId(0), LinkKind::kNetwork);
  ASSERT_EQ(nic.size(), 2u);  // one NIC per GPU: its cable to the leaf, both directions
  for (const LinkId l : nic) {
    EXPECT_EQ(net.link(l).kind, LinkKind::kNetwork);
  }
  EXPECT_EQ(net.device_links(DeviceId(0), LinkKind::kNvlink).size(), 2u);
  EXPECT_TRUE(net.device_links(DeviceId(0), LinkKind::kIci).empty());
  auto bad = topology::Network::build(dgx_h100(2));
  EXPECT_THROW(bad.degrade({deg(DeviceId(0), LinkKind::kIci, 0.5)}),
               topology::LinkFaultError);
  EXPECT_THROW(bad.degrade({deg(DeviceId(0), LinkKind::kNetwork, 0.0)}), InternalError);
}

TEST(DegradedLink, SlowsOnlyTheSendsThatCrossIt) {
  const auto healthy_net = topology::Network::build(dgx_h100(2));
  auto degraded_net = topology::Network::build(dgx_h100(2));
  degraded_net.degrade({deg(DeviceId(0), LinkKind::kNetwork, 0.5)});
  auto healthy = model(healthy_net);
  auto degraded = model(degraded_net);
  const Bytes n = MB(100);
  // Across nodes from GPU 0: its NIC at half of 0.96 x 50 GB/s (comm_model_test's figures).
  EXPECT_LT(relative_error(degraded.p2p_time(RankId(0), RankId(8), n),
                           Microseconds(22.4) + n / GBps(24)),
            1e-6);
  // Other NICs and NVLink: untouched.
  EXPECT_EQ(degraded.p2p_time(RankId(1), RankId(9), n), healthy.p2p_time(RankId(1), RankId(9), n));
  EXPECT_EQ(degraded.p2p_time(RankId(0), RankId(1), n), healthy.p2p_time(RankId(0), RankId(1), n));
  // A collective across both nodes goes through GPU 0's NIC; one inside node 1 does not.
  EXPECT_GT(degraded.collective_time(CollectiveKind::kAllReduce, GiB(1), ranks(0, 16)),
            healthy.collective_time(CollectiveKind::kAllReduce, GiB(1), ranks(0, 16)));
  EXPECT_EQ(degraded.collective_time(CollectiveKind::kAllReduce, GiB(1), ranks(8, 8)),
            healthy.collective_time(CollectiveKind::kAllReduce, GiB(1), ranks(8, 8)));
}

// On the shared network: two sends start together, one through the degraded NIC; the other ends
// when it would alone.
TEST(DegradedLink, ConcurrentTrafficOnOtherLinksIsUnaffected) {
  auto net = topology::Network::build(dgx_h100(2));
  net.degrade({deg(DeviceId(0), LinkKind::kNetwork, 0.25)});
  const Bytes n = MB(100);
  auto alone = model(net);  // timings alone advance this model's clock, so a second one runs both
  const Duration slow_alone = alone.p2p_time(RankId(0), RankId(8), n);
  const Duration fast_alone = alone.p2p_time(RankId(1), RankId(9), n);
  EXPECT_GT(slow_alone, fast_alone * 3);
  auto m = model(net);
  const TransferId slow = m.start_p2p(SimTime::zero(), RankId(0), RankId(8), n);
  const TransferId fast = m.start_p2p(SimTime::zero(), RankId(1), RankId(9), n);
  CommAdvance a = m.advance(SimTime::max());
  ASSERT_EQ(a.finished, std::vector<TransferId>{fast});
  EXPECT_EQ(a.time, SimTime::zero() + fast_alone);
  a = m.advance(SimTime::max());
  ASSERT_EQ(a.finished, std::vector<TransferId>{slow});
  EXPECT_EQ(a.time, SimTime::zero() + slow_alone);
}

// The degraded NIC's utilisation counter: a send through it fills its outbound direction (half of
// the two directions' capacity); a send elsewhere does not touch it.
TEST(DegradedLink, WatchedLinksReportTheirUtilisation) {
  auto net = topology::Network::build(dgx_h100(2));
  net.degrade({deg(DeviceId(0), LinkKind::kNetwork, 0.5)});
  auto m = model(net);
  std::vector<WatchedUtilisation> seen;
  m.watch_links({net.device_links(DeviceId(0), LinkKind::kNetwork)},
                [&seen](const WatchedUtilisation& u) { seen.push_back(u); });
  m.start_p2p(SimTime::zero(), RankId(1), RankId(9), MB(100));
  const SimTime first_done = m.advance(SimTime::max()).time;
  EXPECT_TRUE(seen.empty());
  m.start_p2p(first_done, RankId(0), RankId(8), MB(100));
  m.advance(SimTime::max());
  ASSERT_FALSE(seen.empty());
  double peak = 0;
  for (const WatchedUtilisation& u : seen) {
    EXPECT_EQ(u.set, 0u);
    peak = std::max(peak, u.fraction);
  }
  EXPECT_NEAR(peak, 0.5, 1e-9);
}

}  // namespace
}  // namespace meshsim::collectives
