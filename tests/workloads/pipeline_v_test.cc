// ZB-V (workloads/pipeline.h, zbv): the V's placement and peers, an order checked by hand, its
// step against the bound at unit costs and against 1F1B and ZB-H1 through the engine, and its
// memory against 1F1B's. The grid of pipeline_test.cc covers its invariants (every pass once and
// in dependency order, sends matching receives per channel, max_in_flight, no deadlock).
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "meshsim/workloads/pipeline.h"
#include "pipeline_harness.h"

namespace meshsim::workloads {
namespace {

using namespace pipeline_harness;  // NOLINT(google-build-using-namespace): the test's own harness

PipelineConfig zbv(int64_t pp, int64_t m) { return config(S::kZeroBubbleV, pp, m, 2); }

TEST(ZeroBubbleV, PlacesTheChunksInAV) {
  const auto c = zbv(4, 8);
  EXPECT_EQ(virtual_stage(c, 0, 0), 0);
  EXPECT_EQ(virtual_stage(c, 0, 1), 7);  // rank 0 holds the first and the last virtual stage
  EXPECT_EQ(virtual_stage(c, 3, 0), 3);
  EXPECT_EQ(virtual_stage(c, 3, 1), 4);
  for (int64_t vs = 0; vs < 8; ++vs) {
    const PipelinePeer home = virtual_stage_home(c, vs);
    EXPECT_EQ(virtual_stage(c, home.stage, home.chunk), vs);
  }
  EXPECT_FALSE(forward_source(c, 0, 0).has_value());
  EXPECT_FALSE(forward_destination(c, 0, 1).has_value());  // the loss
  EXPECT_EQ(forward_destination(c, 1, 0), (PipelinePeer{2, 0}));
  EXPECT_EQ(forward_destination(c, 3, 0), (PipelinePeer{3, 1}));  // the turn: the same rank
  EXPECT_EQ(forward_destination(c, 2, 1), (PipelinePeer{1, 1}));  // the return leg goes down
  EXPECT_EQ(forward_source(c, 1, 1), (PipelinePeer{2, 1}));
}

// pp 2, m 2 by hand, from the rule in pipeline.h (unit steps in brackets). Rank 0: F0.0 [0],
// F1.0 [1]; at [2] nothing is ready (F0.1 waits for rank 1's F0.1, which ends at 3); F0.1 [3]
// and at once the loss's B0.1 [4]; F1.1 [5], B1.1 [6]; B0.0 [7] after rank 1's B0.0; then W's
// fill in: W0.1 [8], B1.0 [9], W1.1, W0.0, W1.0 [10-12]. Rank 1 turns each microbatch around
// on itself: F0.0 [1], F0.1 [2], F1.0, F1.1, then B0.1 [5] after rank 0's, B0.0 [6] at the turn.
// 13 steps = 6m + p - 1: the bound.
TEST(ZeroBubbleV, SmallOrderByHand) {
  const auto c = zbv(2, 2);
  EXPECT_EQ(order_string(c, 0), "F0.0 F1.0 F0.1 B0.1 F1.1 B1.1 B0.0 W0.1 B1.0 W1.1 W0.0 W1.0");
  EXPECT_EQ(order_string(c, 1), "F0.0 F0.1 F1.0 F1.1 B0.1 B0.0 B1.1 B1.0 W0.1 W0.0 W1.1 W1.0");
  const auto order = pipeline_order(c, 0);
  EXPECT_EQ(order[3].kind, PassKind::kBackwardInput);
  EXPECT_EQ(order[7].kind, PassKind::kBackwardWeight);
  EXPECT_EQ(step_ps(simulate(c, {1, 0})), 13 * kForwardPs / 2);
}

// T_F = T_B = T_W (each chunk pass F/2): the step is at least 6m + p - 1 chunk passes (every rank
// runs 6m; rank p-1 cannot start before p-1 forwards upstream), a bubble of (p-1)/(6m+p-1)
// against ZB-H1's (p-1)/(3m+p-1) and 1F1B's (p-1)/(m+p-1) (the same costs: a whole-stage pass
// is two chunk passes). The greedy construction meets the bound for p <= 4 and stays within
// (p-1)/2 chunk passes of it (what it measured on this grid and, in its prototype, up to p = 32).
// Within that tolerance and with m >= 2p, ZB-V's bubble, at most 1.5(p-1)/(6m+1.5(p-1)), is
// below ZB-H1's and below a third of 1F1B's: both checked against the engine's runs of those.
// Prints the table reported with the change.
TEST(ZeroBubbleV, BubbleNearItsBoundAndBelowZbH1) {
  fmt::print("{:>3} {:>4} {:>10} {:>10} {:>10} {:>14}\n", "pp", "m", "1f1b", "zb-h1", "zbv",
             "(p-1)/(6m+p-1)");
  for (auto [pp, m] : {std::pair<int64_t, int64_t>{2, 4}, {3, 6}, {4, 8}, {4, 16}, {5, 10},
                       {6, 12}, {6, 24}, {8, 16}, {8, 32}, {8, 64}, {12, 24}, {16, 32}}) {
    const auto c = zbv(pp, m);
    const PipelineRun r = simulate(c, {1, 0});
    const int64_t chunk_ps = kForwardPs / 2;
    const int64_t bound = (6 * m + pp - 1) * chunk_ps;
    EXPECT_GE(step_ps(r), bound) << "pp " << pp << " m " << m;
    EXPECT_LE(2 * (step_ps(r) - bound), (pp - 1) * chunk_ps) << "pp " << pp << " m " << m;
    if (pp <= 4) {
      EXPECT_EQ(step_ps(r), bound) << "pp " << pp << " m " << m;
    }
    const double base = bubble(simulate(config(S::kOneFOneB, pp, m)), 0);
    const double h1 = bubble(simulate(config(S::kZeroBubble, pp, m)), 0);
    for (int64_t s = 0; s < pp; ++s) {
      EXPECT_LT(bubble(r, s), h1) << "pp " << pp << " m " << m << " stage " << s;
      EXPECT_LT(bubble(r, s), base / 3) << "pp " << pp << " m " << m << " stage " << s;
    }
    fmt::print("{:>3} {:>4} {:>10.6f} {:>10.6f} {:>10.6f} {:>14.6f}\n", pp, m, base, h1,
               bubble(r, 0), static_cast<double>(pp - 1) / static_cast<double>(6 * m + pp - 1));
  }
}

// 2 min(m, p) chunk passes held per rank, counting what W keeps: with m >= p that is 1F1B's first
// stage, p whole-stage microbatches (each chunk half a stage), on every rank; the engine's ledger
// (a chunk's activations held until its W) peaks at the same bytes as 1F1B's first stage.
TEST(ZeroBubbleV, HoldsOneFOneBsPeakOnEveryRank) {
  for (int64_t pp = 2; pp <= 8; ++pp) {
    for (int64_t m = 1; m <= 3 * pp; ++m) {
      for (int64_t s = 0; s < pp; ++s) {
        EXPECT_EQ(max_in_flight(zbv(pp, m), s), 2 * std::min(m, pp))
            << "pp " << pp << " m " << m << " stage " << s;
      }
    }
  }
  for (auto [pp, m] : {std::pair<int64_t, int64_t>{4, 8}, {8, 16}, {8, 5}}) {
    const PipelineRun base = simulate(config(S::kOneFOneB, pp, m), {2, 2});  // whole stage
    const PipelineRun held = simulate(zbv(pp, m), {1, 0});
    for (size_t s = 0; s < static_cast<size_t>(pp); ++s) {
      EXPECT_EQ(held.result.ranks[s].memory.peak, base.result.ranks[0].memory.peak);
    }
  }
}

}  // namespace
}  // namespace meshsim::workloads
