// Pipeline schedules (workloads/pipeline.h): the orders by hand, their invariants over a grid, and
// each order executed by the real engine (pipeline_harness.h). ZB-V's own tests are in
// pipeline_v_test.cc; the grid here covers it too.
#include "meshsim/workloads/pipeline.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <tuple>

#include "meshsim/sim/error.h"
#include "pipeline_harness.h"

namespace meshsim::workloads {
namespace {

using namespace pipeline_harness;  // NOLINT(google-build-using-namespace): the test's own harness

// ---- orders by hand ------------------------------------------------------------------------

TEST(PipelineSchedule, NamesRoundTrip) {
  for (S s : {S::kGpipe, S::kOneFOneB, S::kInterleaved, S::kZeroBubble, S::kZeroBubbleV}) {
    EXPECT_EQ(parse_enum<PipelineSchedule>(to_string(s)), s);
  }
  EXPECT_EQ(to_string(S::kOneFOneB), "1f1b");
  EXPECT_EQ(to_string(S::kZeroBubble), "zb");
  EXPECT_EQ(to_string(S::kZeroBubbleV), "zbv");
  EXPECT_FALSE(parse_enum<PipelineSchedule>("1F1B").has_value());
  EXPECT_FALSE(parse_enum<PipelineSchedule>("").has_value());
}

TEST(PipelineOrder, GpipeRunsBackwardsInReverse) {
  EXPECT_EQ(order_string(config(S::kGpipe, 4, 3), 2), "F0 F1 F2 B2 B1 B0");
}

TEST(PipelineOrder, OneFOneBWarmsUpWithStagesMinusStageMinusOne) {
  const auto c = config(S::kOneFOneB, 4, 8);
  EXPECT_EQ(order_string(c, 0), "F0 F1 F2 F3 B0 F4 B1 F5 B2 F6 B3 F7 B4 B5 B6 B7");
  EXPECT_EQ(order_string(c, 1), "F0 F1 F2 B0 F3 B1 F4 B2 F5 B3 F6 B4 F7 B5 B6 B7");
  EXPECT_EQ(order_string(c, 3), "F0 B0 F1 B1 F2 B2 F3 B3 F4 B4 F5 B5 F6 B6 F7 B7");
  EXPECT_EQ(order_string(config(S::kOneFOneB, 4, 2), 0), "F0 F1 B0 B1");  // warm-up capped at m
}

TEST(PipelineOrder, InterleavedFollowsMegatronScheduleTable) {
  const auto c = config(S::kInterleaved, 2, 4, 2);
  // Stage 0: warm-up (2-0-1)*2 + (2-1)*2 = 4; stage 1: 2.
  EXPECT_EQ(order_string(c, 0),
            "F0.0 F1.0 F0.1 F1.1 F2.0 B0.1 F3.0 B1.1 F2.1 B0.0 F3.1 B1.0 B2.1 B3.1 B2.0 B3.0");
  EXPECT_EQ(order_string(c, 1),
            "F0.0 F1.0 F0.1 B0.1 F1.1 B1.1 F2.0 B0.0 F3.0 B1.0 F2.1 B2.1 F3.1 B3.1 B2.0 B3.0");
}

TEST(PipelineOrder, ZeroBubbleH1DelaysWByStage) {
  const auto c = config(S::kZeroBubble, 4, 6);
  EXPECT_EQ(order_string(c, 0), "F0 F1 F2 F3 B0 W0 F4 B1 W1 F5 B2 W2 B3 W3 B4 W4 B5 W5");
  EXPECT_EQ(order_string(c, 1), "F0 F1 F2 B0 F3 B1 W0 F4 B2 W1 F5 B3 W2 B4 W3 B5 W4 W5");
  EXPECT_EQ(order_string(c, 3), "F0 B0 F1 B1 F2 B2 F3 B3 W0 F4 B4 W1 F5 B5 W2 W3 W4 W5");
  const auto order = pipeline_order(c, 3);
  EXPECT_EQ(order[1].kind, PassKind::kBackwardInput);
  EXPECT_EQ(order[8].kind, PassKind::kBackwardWeight);
}

TEST(PipelinePeers, ChunksChainThroughVirtualStages) {
  const auto c = config(S::kInterleaved, 4, 8, 2);
  EXPECT_EQ(virtual_stage(c, 1, 1), 5);
  EXPECT_FALSE(forward_source(c, 0, 0).has_value());
  EXPECT_EQ(forward_destination(c, 0, 0), (PipelinePeer{1, 0}));
  EXPECT_EQ(forward_destination(c, 3, 0), (PipelinePeer{0, 1}));  // wraps to the next chunk
  EXPECT_EQ(forward_source(c, 0, 1), (PipelinePeer{3, 0}));
  EXPECT_FALSE(forward_destination(c, 3, 1).has_value());
  EXPECT_FALSE(forward_source(config(S::kOneFOneB, 1, 4), 0, 0).has_value());
}

// ---- validation ----------------------------------------------------------------------------

// The library names the plan field, never a flag: the edge says where the value came from.
void expect_plan_error(const PipelineConfig& c, PlanField field, const std::string& part) {
  try {
    validate(c);
    ADD_FAILURE() << "no error for " << to_string(c.schedule) << " pp " << c.stages;
  } catch (const PlanError& e) {
    EXPECT_EQ(e.field(), field) << e.what();
    EXPECT_NE(e.message().find(part), std::string::npos) << e.message();
    EXPECT_EQ(e.message().find("--"), std::string::npos) << e.message();
  }
}

TEST(PipelineValidate, NamesThePlanField) {
  using F = PlanField;
  expect_plan_error(config(S::kOneFOneB, 0, 4), F::kPp, "positive");
  expect_plan_error(config(S::kGpipe, 4, 0), F::kGbs, "microbatches");
  expect_plan_error(config(S::kInterleaved, 4, 8, 0), F::kVpp, "positive");
  expect_plan_error(config(S::kOneFOneB, 4, 8, 2), F::kSchedule, "the interleaved schedule");
  expect_plan_error(config(S::kZeroBubble, 4, 8, 2), F::kSchedule, "vpp 2");
  expect_plan_error(config(S::kZeroBubbleV, 4, 8, 1), F::kVpp, "exactly 2 model chunks");
  expect_plan_error(config(S::kZeroBubbleV, 4, 8, 3), F::kVpp, "got vpp 3");
  expect_plan_error(config(S::kZeroBubbleV, 1, 8, 2), F::kPp, "at least 2 pipeline stages");
  expect_plan_error(config(S::kZeroBubbleV, 4, 0, 2), F::kGbs, "microbatches");
  EXPECT_NO_THROW(validate(config(S::kZeroBubbleV, 8, 3, 2)));  // fewer microbatches: valid
  expect_plan_error(config(S::kInterleaved, 4, 8, 1), F::kVpp, "at least 2 model chunks");
  expect_plan_error(config(S::kInterleaved, 1, 8, 2), F::kPp, "at least 2 pipeline stages");
  expect_plan_error(config(S::kInterleaved, 4, 10, 2), F::kGbs, "not a multiple of pp 4");
  EXPECT_THROW(pipeline_order(config(S::kInterleaved, 4, 6, 2), 0), PlanError);
  EXPECT_NO_THROW(validate(config(S::kOneFOneB, 8, 3)));  // fewer microbatches than stages: valid
  EXPECT_THROW(pipeline_order(config(S::kOneFOneB, 4, 8), 4), InternalError);
}

// ---- bubbles through the engine ------------------------------------------------------------

TEST(PipelineBubble, GpipeAndOneFOneBMatchClosedForm) {
  for (S s : {S::kGpipe, S::kOneFOneB}) {
    for (auto [pp, m] : {std::pair<int64_t, int64_t>{2, 4}, {4, 8}, {4, 58}, {8, 16}}) {
      const auto c = config(s, pp, m);
      const PipelineRun r = simulate(c);
      EXPECT_EQ(step_ps(r), (m + pp - 1) * 3 * kForwardPs);
      expect_bubble(r, c, pp - 1, m + pp - 1);
    }
  }
  // Workbook 4.3b: PP = 4, m = 58.
  EXPECT_NEAR(bubble(simulate(config(S::kOneFOneB, 4, 58)), 0), 0.04918032786885246, 1e-15);
}

TEST(PipelineBubble, InterleavedDividesTheBubbleByVpp) {
  for (auto [pp, m, v] :
       {std::tuple<int64_t, int64_t, int64_t>{4, 8, 2}, {4, 16, 4}, {2, 4, 2}, {8, 16, 2}}) {
    const auto c = config(S::kInterleaved, pp, m, v);
    expect_bubble(simulate(c), c, pp - 1, v * m + pp - 1);
  }
}

// Uneven interleaved stages (Llama 3's first and last stages lighter), every layer F = kLayerPs,
// B = 2F. No closed form is claimed (the equal-stage one, (p-1) / (v m + p - 1), does not hold:
// the stages wait on each other's uneven chunks): the engine's step and each stage's bubble
// equal the direct list schedule above to the picosecond.
TEST(PipelineBubble, UnevenInterleavedMatchesADirectListSchedule) {
  // The recurrence itself reproduces the equal-stage closed form, (v m + p - 1) chunks.
  EXPECT_EQ(list_schedule_ps(config(S::kInterleaved, 4, 8, 2), {4, 4, 4, 4}),
            (2 * 8 + 4 - 1) * 3 * kLayerPs * 4);
  for (auto [pp, m, v, layers] : {std::tuple<int64_t, int64_t, int64_t, std::vector<int64_t>>{
                                      4, 8, 2, {3, 4, 4, 3}},
                                  {4, 16, 2, {3, 4, 4, 3}},
                                  {4, 8, 4, {1, 2, 2, 1}},
                                  {8, 16, 2, {3, 4, 4, 4, 4, 4, 4, 3}}}) {
    const auto c = config(S::kInterleaved, pp, m, v);
    const PipelineRun r = simulate(c, {}, layers);
    const int64_t expected = list_schedule_ps(c, layers);
    EXPECT_EQ(step_ps(r), expected) << "pp " << pp << " m " << m << " vpp " << v;
    for (int64_t s = 0; s < pp; ++s) {
      EXPECT_EQ(busy_ps(r, s), m * v * 3 * kLayerPs * layers[static_cast<size_t>(s)]);
    }
    // Equal stages of the busiest chunk would take (v m + p - 1) chunks: uneven is no slower.
    EXPECT_LE(expected, (v * m + pp - 1) * 3 * kLayerPs * layers[1]);
    fmt::print("uneven pp {} m {} vpp {}: step {} ps (direct {} ps), bubble of stage 1 {:.6f}\n",
               pp, m, v, step_ps(r), expected, bubble(r, 1));
  }
}

// Uneven interleaved stages with a closed form: the first stage lighter than the others, which
// are equal (a layer taken off the first stage to make room for the embedding, as Llama 3 does,
// Dubey et al. 2024, Sec. 3.3.2). With t = F + B of a full chunk and t0 = F + B of a first-stage
// chunk (t0 <= t), the step is
//     T = (v m + p - 2) t + t0,
// the equal-stage (v m + p - 1) t with one chunk of the first stage in place of a full one: the
// critical path starts with the first stage's first forward and ends with its last backward, and
// runs through the saturated full stages in between. (v = 1 gives the flow-shop makespan
// sum_s t_s + (m - 1) max_s t_s.) Every full stage then idles ((p - 2) t + t0) / T of the step.
// Lightening the last stage instead has no such form (the step drops by 19 of 24 units for 1
// unit of lightening, then saturates): the list-schedule test above covers it.
TEST(PipelineBubble, LighterFirstStageMatchesItsClosedForm) {
  for (auto [pp, m, v] : {std::tuple<int64_t, int64_t, int64_t>{4, 8, 2},
                          {4, 16, 2},
                          {4, 8, 4},
                          {8, 16, 2},
                          {2, 4, 2},
                          {4, 4, 3}}) {
    for (int64_t first : {1, 3, 5, 8}) {
      std::vector<int64_t> layers(static_cast<size_t>(pp), 8);
      layers[0] = first;
      const auto c = config(S::kInterleaved, pp, m, v);
      const PipelineRun r = simulate(c, {}, layers);
      const int64_t t = 3 * kLayerPs * 8;
      const int64_t t0 = 3 * kLayerPs * first;
      const int64_t closed = (v * m + pp - 2) * t + t0;
      EXPECT_EQ(step_ps(r), closed) << "pp " << pp << " m " << m << " vpp " << v << " first "
                                    << first;
      for (int64_t s = 1; s < pp; ++s) {
        EXPECT_EQ(step_ps(r) - busy_ps(r, s), (pp - 2) * t + t0) << "stage " << s;
      }
      EXPECT_EQ(busy_ps(r, 0), v * m * t0);
    }
  }
}

// ZB-H1 with T_F = T_B = T_W: the bubble is (p-1) T_F instead of 1F1B's (p-1)(T_F + T_B + T_W),
// a third (Qi et al. 2023, Sec. 2.1). Prints the table reported with the change.
TEST(PipelineBubble, ZeroBubbleH1BeatsOneFOneB) {
  fmt::print("{:>3} {:>4} {:>12} {:>12} {:>12}\n", "pp", "m", "1f1b", "zb-h1", "(p-1)/(3m+p-1)");
  for (auto [pp, m] : {std::pair<int64_t, int64_t>{2, 4}, {4, 8}, {4, 58}, {8, 16}, {8, 64}}) {
    const double base = bubble(simulate(config(S::kOneFOneB, pp, m)), 0);
    const auto c = config(S::kZeroBubble, pp, m);
    const PipelineRun r = simulate(c);
    expect_bubble(r, c, pp - 1, 3 * m + pp - 1);
    EXPECT_LT(bubble(r, 0), base);
    fmt::print("{:>3} {:>4} {:>12.6f} {:>12.6f} {:>12.6f}\n", pp, m, base, bubble(r, 0),
               static_cast<double>(pp - 1) / static_cast<double>(3 * m + pp - 1));
  }
}

// ---- memory: the order, the engine's ledger and max_in_flight agree ---------------------------

TEST(PipelineMemory, OneFOneBHoldsStagesMinusStage) {
  const auto c = config(S::kOneFOneB, 4, 8);
  const PipelineRun r = simulate(c);
  for (int64_t s = 0; s < 4; ++s) {
    EXPECT_EQ(counted_in_flight(pipeline_order(c, s)), 4 - s);
    EXPECT_EQ(max_in_flight(c, s), 4 - s);
    EXPECT_EQ(r.result.ranks[static_cast<size_t>(s)].memory.peak, MiB(static_cast<double>(4 - s)));
  }
  const auto g = config(S::kGpipe, 4, 8);
  const PipelineRun rg = simulate(g);
  for (int64_t s = 0; s < 4; ++s) {
    EXPECT_EQ(max_in_flight(g, s), 8);
    EXPECT_EQ(rg.result.ranks[static_cast<size_t>(s)].memory.peak, MiB(8));
  }
}

TEST(PipelineMemory, InterleavedFirstStageHoldsKorthikantiFactor) {
  // p*v + p - 1 chunk passes on rank 0: 4*2 + 3 = 11 for (pp 4, vpp 2).
  EXPECT_EQ(max_in_flight(config(S::kInterleaved, 4, 8, 2), 0), 11);
  EXPECT_EQ(max_in_flight(config(S::kInterleaved, 4, 8, 2), 3), 5);
  EXPECT_EQ(max_in_flight(config(S::kInterleaved, 4, 4, 2), 0), 8);  // all warm-up
}

// With W keeping half of a microbatch's activations until it runs, ZB-H1 never holds more than
// 1F1B's first stage (the paper's memory claim; M_W < M_B).
TEST(PipelineMemory, ZeroBubbleWithinOneFOneBPeak) {
  for (auto [pp, m] : {std::pair<int64_t, int64_t>{4, 8}, {8, 16}, {8, 5}}) {
    const PipelineRun base = simulate(config(S::kOneFOneB, pp, m), {2, 2});
    const PipelineRun zb = simulate(config(S::kZeroBubble, pp, m), {2, 1});
    for (const RankResult& rank : zb.result.ranks) {
      EXPECT_LE(rank.memory.peak, base.result.ranks[0].memory.peak);
    }
  }
}

// ---- invariants over the grid ----------------------------------------------------------------

std::vector<PipelineConfig> grid() {
  std::vector<PipelineConfig> out;
  for (int64_t pp = 1; pp <= 8; ++pp) {
    for (int64_t m = 1; m <= 24; ++m) {
      for (int64_t v = 1; v <= 4; ++v) {
        for (S s : {S::kGpipe, S::kOneFOneB, S::kInterleaved, S::kZeroBubble, S::kZeroBubbleV}) {
          const auto c = config(s, pp, m, v);
          try {
            validate(c);
            out.push_back(c);
          } catch (const PlanError&) {
          }
        }
      }
    }
  }
  return out;
}

std::string label(const PipelineConfig& c, int64_t stage = -1) {
  return fmt::format("{} pp {} m {} vpp {} stage {}", to_string(c.schedule), c.stages,
                     c.microbatches, c.virtual_stages, stage);
}

// Each (microbatch, chunk) once forward and once backward (or once B and once W), in order.
void expect_complete(const PipelineConfig& c, int64_t stage) {
  const auto order = pipeline_order(c, stage);
  const bool zb = splits_backward(c.schedule);
  EXPECT_EQ(order.size(), static_cast<size_t>(c.microbatches * c.virtual_stages * (zb ? 3 : 2)));
  std::map<std::pair<int32_t, int32_t>, std::string> seen;  // (mb, chunk) -> kinds so far
  for (const PipelinePass& p : order) {
    ASSERT_TRUE(p.microbatch >= 0 && p.microbatch < c.microbatches) << label(c, stage);
    ASSERT_TRUE(p.chunk >= 0 && p.chunk < c.virtual_stages) << label(c, stage);
    seen[{p.microbatch, p.chunk}] += std::string(to_string(p.kind)) + ",";
  }
  const std::string expected = zb ? "F,B_input,W," : "F,B,";
  EXPECT_EQ(seen.size(), static_cast<size_t>(c.microbatches * c.virtual_stages));
  for (const auto& [key, kinds] : seen) {
    EXPECT_EQ(kinds, expected) << label(c, stage) << " mb " << key.first << " chunk " << key.second;
  }
}

using Channel = std::tuple<int64_t, int64_t, bool>;  // (from rank, to rank, activations?)
using Messages = std::map<Channel, std::vector<std::pair<int32_t, int32_t>>>;

// Sends and receives per channel, each as the receiving pass's (microbatch, chunk), in order.
void expect_messages_match(const PipelineConfig& c) {
  Messages sent;
  Messages received;
  for (int64_t s = 0; s < c.stages; ++s) {
    for (const PipelinePass& p : pipeline_order(c, s)) {
      if (!(p.kind == PassKind::kForward || is_backward(p.kind))) {
        continue;
      }
      const bool fwd = p.kind == PassKind::kForward;
      const auto src = forward_source(c, s, p.chunk);
      const auto dst = forward_destination(c, s, p.chunk);
      const auto& from = fwd ? src : dst;
      const auto& to = fwd ? dst : src;
      if (from) {
        received[{from->stage, s, fwd}].emplace_back(p.microbatch, p.chunk);
      }
      if (to) {
        sent[{s, to->stage, fwd}].emplace_back(p.microbatch, to->chunk);
      }
    }
  }
  EXPECT_EQ(sent, received) << label(c);
}

TEST(PipelineGrid, OrdersAreCompleteAndMessagesMatchInOrder) {
  for (const PipelineConfig& c : grid()) {
    // The all-ranks forms (the plan search's memory bound, the step bound) are the per-rank ones.
    const std::vector<std::vector<PipelinePass>> orders = pipeline_orders(c);
    const std::vector<int64_t> held = max_in_flight_per_stage(c);
    ASSERT_EQ(orders.size(), static_cast<size_t>(c.stages)) << label(c);
    ASSERT_EQ(held.size(), static_cast<size_t>(c.stages)) << label(c);
    for (int64_t s = 0; s < c.stages; ++s) {
      EXPECT_TRUE(orders[static_cast<size_t>(s)] == pipeline_order(c, s)) << label(c, s);
      EXPECT_EQ(held[static_cast<size_t>(s)], max_in_flight(c, s)) << label(c, s);
    }
    for (int64_t s = 0; s < c.stages; ++s) {
      expect_complete(c, s);
      const bool v = c.schedule == S::kZeroBubbleV;
      const auto order = pipeline_order(c, s);
      EXPECT_EQ(v ? counted_until_weights(order) : counted_in_flight(order), max_in_flight(c, s))
          << label(c, s);
      for (int32_t chunk = 0; chunk < c.virtual_stages; ++chunk) {
        // zbv's chunk 1 comes from rank s+1, or at the turn from the same rank.
        const int64_t from = v && chunk == 1 ? std::min(s + 1, c.stages - 1)
                                             : (s + c.stages - 1) % c.stages;
        if (const auto src = forward_source(c, s, chunk)) {
          EXPECT_EQ(src->stage, from) << label(c, s) << " chunk " << chunk;
        }
        if (const auto dst = forward_destination(c, s, chunk)) {
          EXPECT_EQ(forward_source(c, dst->stage, dst->chunk), (PipelinePeer{s, chunk}))
              << label(c, s) << " chunk " << chunk;
        }
      }
    }
    expect_messages_match(c);
  }
}

// The engine finishes every schedule (no deadlock), its ledger peak is max_in_flight, and the
// bubble is the closed form: (p-1)/(m+p-1) for gpipe and 1f1b, (p-1)/(v*m+p-1) for interleaved
// (when vpp divides F exactly, m >= p by validation), (p-1)/(3m+p-1) for zb-h1 when m >= p; zbv
// runs in the step the direct list schedule of its orders gives, which is at least its bound
// (p-1)/(6m+p-1) (pipeline_v_test.cc tests how close). zbv's ledger holds a forward's
// activations until its W (the harness's B frees nothing), as its max_in_flight counts.
TEST(PipelineGrid, EngineRunsEveryScheduleToItsClosedForm) {
  size_t runs = 0;
  for (const PipelineConfig& c : grid()) {
    const bool v = c.schedule == S::kZeroBubbleV;
    const PipelineRun r = simulate(c, v ? MemoryUnits{1, 0} : MemoryUnits{});
    ++runs;
    for (int64_t s = 0; s < c.stages; ++s) {
      EXPECT_EQ(r.result.ranks[static_cast<size_t>(s)].memory.peak,
                MiB(static_cast<double>(max_in_flight(c, s))))
          << label(c, s);
    }
    const int64_t p = c.stages;
    const int64_t m = c.microbatches;
    switch (c.schedule) {
      case S::kGpipe:
      case S::kOneFOneB:
        expect_bubble(r, c, p - 1, m + p - 1);
        break;
      case S::kInterleaved:
        if (kForwardPs % c.virtual_stages == 0) {
          expect_bubble(r, c, p - 1, c.virtual_stages * m + p - 1);
        }
        break;
      case S::kZeroBubble:
        if (m >= p) {
          expect_bubble(r, c, p - 1, 3 * m + p - 1);
        } else {  // fewer microbatches than stages: W's pile up at the end, still ahead of 1F1B
          EXPECT_LT(step_ps(r), step_ps(simulate(config(S::kOneFOneB, p, m)))) << label(c);
        }
        break;
      case S::kZeroBubbleV: {
        EXPECT_EQ(step_ps(r), list_schedule_ps(c, {})) << label(c);
        const int64_t chunk_ps = kForwardPs / 2;
        EXPECT_GE(step_ps(r), (6 * m + p - 1) * chunk_ps) << label(c);
        for (int64_t s = 0; s < p; ++s) {
          EXPECT_EQ(busy_ps(r, s), 6 * m * chunk_ps) << label(c, s);
        }
        break;
      }
    }
  }
  EXPECT_GT(runs, 750u);
}

}  // namespace
}  // namespace meshsim::workloads
