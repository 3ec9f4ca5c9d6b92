// The network as a shared resource (shared_network.h), as a conformance suite over both models:
// the fluid model and SimGrid's L07 ptasks. A transfer alone takes isolated_time; transfers on a
// shared link each get their max-min share and re-share when one ends; weights, caps, latencies
// and floors; advancing to a limit; many networks in one process.
#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <string>

#include "meshsim/collectives/comm_shape.h"
#include "meshsim/collectives/shared_network.h"

namespace meshsim::collectives {
namespace {

using Factory = std::function<std::unique_ptr<SharedNetwork>(std::vector<double>)>;

struct Backend {
  std::string name;
  Factory make;
  double tolerance;  // relative, on times (SimGrid works in double seconds)
};

class SharedNetworkTest : public ::testing::TestWithParam<Backend> {
 protected:
  // Three links of 10, 10 and 20 GB/s.
  std::unique_ptr<SharedNetwork> make() { return GetParam().make({10e9, 10e9, 20e9}); }
  void expect_time(SimTime got, Duration want, const std::string& what) {
    EXPECT_NEAR(got.seconds(), want.seconds(), GetParam().tolerance * want.seconds() + 1e-12)
        << what;
  }
  // The network's next completion is `t` alone, at `at`.
  void expect_next_end(SharedNetwork& n, TransferId t, Duration at, const std::string& what) {
    const NetworkAdvance end = n.advance(SimTime::max());
    EXPECT_EQ(end.finished, std::vector<TransferId>{t}) << what;
    expect_time(end.time, at, what);
  }
};

CommShape shape(std::vector<LinkLoad> loads, Bytes bytes, Duration latency = Duration::zero(),
                std::optional<double> cap = std::nullopt, Duration floor = Duration::zero()) {
  CommShape s;
  s.loads = std::move(loads);
  s.bytes = bytes;
  s.latency = latency;
  s.floor = floor;
  if (cap) {
    s.rate_cap = BytesPerSec::of(*cap);
  }
  return s;
}

TransferId start(SharedNetwork& n, SimTime at, const CommShape& s) {
  return n.start(at, n.add_shape(s), s.bytes, s.latency, s.floor);
}

TEST_P(SharedNetworkTest, AloneItTakesIsolatedTime) {
  const std::vector<double> caps = {10e9, 10e9, 20e9};
  for (const CommShape& s :
       {shape({{LinkId(0), 1.75}}, MB(100), Microseconds(56)),
        shape({{LinkId(0), 1.0}, {LinkId(2), 2.0}}, MB(10), Microseconds(3)),
        shape({{LinkId(1), 1.0}}, MB(10), Microseconds(1), 2e9),
        shape({{LinkId(1), 1.0}}, KB(1), Microseconds(1), std::nullopt, Microseconds(40))}) {
    auto net = make();
    const Duration want = isolated_time(s, caps);
    const Duration got = run_alone(*net, s);
    if (GetParam().name == "analytical") {
      EXPECT_EQ(got, want);  // exactly: the engine's answer when nothing overlaps
    }
    EXPECT_NEAR(got.seconds(), want.seconds(), GetParam().tolerance * want.seconds());
  }
}

TEST_P(SharedNetworkTest, TwoTransfersOnASharedLinkEachGetHalfThenTheRest) {
  // A and B cross link 0 (10 GB/s); A moves 10 MB, B 30 MB. Max-min: 5 GB/s each until A ends at
  // 2 ms; then B alone at 10 GB/s for its last 20 MB: 4 ms.
  auto n = make();
  const TransferId a = start(*n, SimTime::zero(), shape({{LinkId(0), 1.0}}, MB(10)));
  const TransferId b = start(*n, SimTime::zero(), shape({{LinkId(0), 1.0}}, MB(30)));
  expect_next_end(*n, a, Milliseconds(2), "A");
  expect_next_end(*n, b, Milliseconds(4), "B");
  EXPECT_EQ(n->active(), 0u);
}

TEST_P(SharedNetworkTest, WeightsCapsAndOtherLinks) {
  // A puts 2 bytes on link 0 per byte of progress (and 1 on link 2), B 1 byte. Link 0 is each
  // one's most loaded link: they share its bytes equally, 5 GB/s each, so B (10 MB) ends at 2 ms
  // while A has moved 5 MB; alone, A's last 5 MB take 1 ms more (10 GB/s / 2).
  auto n = make();
  const TransferId a =
      start(*n, SimTime::zero(), shape({{LinkId(0), 2.0}, {LinkId(2), 1.0}}, MB(10)));
  const TransferId b = start(*n, SimTime::zero(), shape({{LinkId(0), 1.0}}, MB(10)));
  expect_next_end(*n, b, Milliseconds(2), "B");
  expect_next_end(*n, a, Milliseconds(3), "A");
  // A cap: C is capped at 2 GB/s on link 1, D shares the link and takes the other 8 GB/s.
  auto m = make();
  const TransferId c = start(*m, SimTime::zero(), shape({{LinkId(1), 1.0}}, MB(8), {}, 2e9));
  const TransferId d = start(*m, SimTime::zero(), shape({{LinkId(1), 1.0}}, MB(8)));
  expect_next_end(*m, d, Milliseconds(1), "D at 8 GB/s");
  expect_next_end(*m, c, Milliseconds(4), "C at its cap");
}

TEST_P(SharedNetworkTest, ShapesOverTheSameLinksAndShapesThatLaterCrossThem) {
  // C and D cross links 0 and 1 alone (of whatever size, as a node's tensor-parallel collectives
  // on its NVLink); C is capped at 2 GB/s, D takes the other 8 GB/s of both links.
  auto n = make();
  const std::vector<LinkLoad> both = {{LinkId(0), 1.0}, {LinkId(1), 1.0}};
  const TransferId c = start(*n, SimTime::zero(), shape(both, MB(8), {}, 2e9));
  const TransferId d = start(*n, SimTime::zero(), shape(both, MB(8)));
  expect_next_end(*n, d, Milliseconds(1), "D at 8 GB/s");
  expect_next_end(*n, c, Milliseconds(4), "C at its cap");
  // A crosses links 0 and 1 alone and ends at 1 ms. B, over link 1 alone (a shape first seen
  // then), starts at 1 ms with 20 MB; at 1.5 ms (5 MB moved) A2, of A's shape, starts with 10 MB:
  // it must find B on link 1, and they share it at 5 GB/s each. A2 ends at 3.5 ms, and B, with
  // 5 MB left alone, at 4 ms.
  auto m = make();
  const CommShape a_shape = shape(both, MB(10));
  start(*m, SimTime::zero(), a_shape);
  expect_time(m->advance(SimTime::max()).time, Milliseconds(1), "A alone");
  const TransferId b =
      start(*m, SimTime::zero() + Milliseconds(1), shape({{LinkId(1), 1.0}}, MB(20)));
  EXPECT_TRUE(m->advance(SimTime::zero() + Microseconds(1500)).finished.empty());
  const TransferId a2 = start(*m, SimTime::zero() + Microseconds(1500), a_shape);
  expect_next_end(*m, a2, Microseconds(3500), "A2");
  expect_next_end(*m, b, Milliseconds(4), "B");
}

TEST_P(SharedNetworkTest, AShapeOverManyLinksAndTheFewShapesItMeets) {
  // W crosses four 10 GB/s links that few other shapes cross (as a collective with its images
  // does): the fluid model searches from it through the shapes it meets, not its links.
  const std::vector<double> caps(4, 10e9);
  const CommShape w = shape(
      {{LinkId(0), 1.0}, {LinkId(1), 1.0}, {LinkId(2), 1.0}, {LinkId(3), 1.0}}, MB(20));
  // S, over link 3 alone, starts with W: 5 GB/s each; S (10 MB) ends at 2 ms, W's last 10 MB
  // alone take 1 ms more.
  auto n = GetParam().make(caps);
  const TransferId w1 = start(*n, SimTime::zero(), w);
  const TransferId s = start(*n, SimTime::zero(), shape({{LinkId(3), 1.0}}, MB(10)));
  expect_next_end(*n, s, Milliseconds(2), "S");
  expect_next_end(*n, w1, Milliseconds(3), "W");
  // T, over link 2 and first seen at 1 ms (W alone has 10 MB left), shares it with W at 5 GB/s:
  // W ends at 3 ms, T has 30 MB left. W2, of W's shape, starts then with 10 MB and must meet T,
  // a shape added after W's: 5 GB/s each, W2 ends at 5 ms, T's last 20 MB alone take 2 ms more.
  auto m = GetParam().make(caps);
  const TransferId w3 = start(*m, SimTime::zero(), w);
  EXPECT_TRUE(m->advance(SimTime::zero() + Milliseconds(1)).finished.empty());
  const TransferId t =
      start(*m, SimTime::zero() + Milliseconds(1), shape({{LinkId(2), 1.0}}, MB(40)));
  expect_next_end(*m, w3, Milliseconds(3), "W before T");
  const TransferId w4 = start(*m, SimTime::zero() + Milliseconds(3), shape(w.loads, MB(10)));
  expect_next_end(*m, w4, Milliseconds(5), "W2 beside T");
  expect_next_end(*m, t, Milliseconds(7), "T");
}

TEST_P(SharedNetworkTest, LatencyPhasesLimitsAndLateStarts) {
  auto n = make();
  // A: 1 ms of latency, then 10 MB on link 0 alone: ends at 2 ms unless B interferes.
  const TransferId a =
      start(*n, SimTime::zero(), shape({{LinkId(0), 1.0}}, MB(10), Milliseconds(1)));
  // Nothing completes before 0.5 ms.
  const NetworkAdvance early = n->advance(SimTime::zero() + Microseconds(500));
  EXPECT_TRUE(early.finished.empty());
  EXPECT_EQ(early.time, SimTime::zero() + Microseconds(500));
  // B starts at 1.5 ms with 5 MB on link 0: from 1.5 ms both run at 5 GB/s; A has 5 MB left, B
  // 5 MB: both end at 2.5 ms (A's first completion estimate, 2 ms, is superseded).
  const NetworkAdvance mid = n->advance(SimTime::zero() + Microseconds(1500));
  EXPECT_TRUE(mid.finished.empty());
  const TransferId b =
      start(*n, SimTime::zero() + Microseconds(1500), shape({{LinkId(0), 1.0}}, MB(5)));
  const NetworkAdvance end = n->advance(SimTime::max());
  EXPECT_EQ(end.finished, (std::vector<TransferId>{std::min(a, b), std::max(a, b)}));
  expect_time(end.time, Microseconds(2500), "both");
}

TEST_P(SharedNetworkTest, FloorHoldsAQuickTransfer) {
  auto n = make();
  const CommShape s =
      shape({{LinkId(0), 1.0}}, KB(10), Microseconds(2), std::nullopt, Microseconds(20));
  start(*n, SimTime::zero(), s);
  expect_time(n->advance(SimTime::max()).time, Microseconds(20), "the floor");
}

TEST_P(SharedNetworkTest, ManyNetworksInOneProcess) {
  auto a = make();
  auto b = make();
  const CommShape s = shape({{LinkId(2), 1.0}}, MB(20));
  EXPECT_NEAR(run_alone(*a, s).seconds(), 1e-3, 1e-9);
  EXPECT_NEAR(run_alone(*b, s).seconds(), 1e-3, 1e-9);
  EXPECT_NEAR(run_alone(*a, s).seconds(), 1e-3, 1e-9);  // again, from a's later clock
}

INSTANTIATE_TEST_SUITE_P(
    Models, SharedNetworkTest,
    ::testing::Values(Backend{"analytical", make_fluid_network, 1e-12},
                      Backend{"simgrid", make_simgrid_network, 1e-6}),
    [](const auto& param_info) { return param_info.param.name; });

TEST(FluidNetwork, EqualShapesReshareFromTheMemo) {
  // The same overlap again later gives the same times (the memoized solution), offset in time.
  auto n = make_fluid_network({10e9, 10e9});
  const CommShape s = shape({{LinkId(0), 1.0}, {LinkId(1), 0.5}}, MB(10));
  std::vector<Duration> ends;
  for (int round = 0; round < 3; ++round) {
    const SimTime t0 = n->now();
    start(*n, t0, s);
    start(*n, t0, s);
    ends.push_back(n->advance(SimTime::max()).time - t0);
  }
  EXPECT_EQ(ends[0], Milliseconds(2));
  EXPECT_EQ(ends[1], ends[0]);
  EXPECT_EQ(ends[2], ends[0]);
}

TEST(FluidNetwork, ReportsTheRatesItAssigns) {
  auto n = make_fluid_network({10e9, 10e9});
  std::vector<TransferRate> rates;
  n->on_rate([&rates](const TransferRate& r) { rates.push_back(r); });
  const TransferId t = start(*n, SimTime::zero(), shape({{LinkId(0), 2.0}}, MB(10)));
  n->advance(SimTime::max());
  ASSERT_EQ(rates.size(), 2u);  // 5 GB/s of progress (link 0 full) from 0, none from the end
  EXPECT_EQ(rates[0].transfer, t);
  EXPECT_DOUBLE_EQ(rates[0].bytes_per_s, 5e9);
  EXPECT_DOUBLE_EQ(rates[1].bytes_per_s, 0.0);
  EXPECT_EQ(rates[1].from, SimTime::zero() + Milliseconds(2));
}

}  // namespace
}  // namespace meshsim::collectives
