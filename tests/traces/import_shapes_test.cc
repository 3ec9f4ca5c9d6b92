// The importer's GEMM shapes, profiler event counts and measured timelines (import.h).
#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "import_test_util.h"
#include "meshsim/traces/import.h"

namespace meshsim::traces {
namespace {

using namespace testing;  // NOLINT: the importer tests' helpers

// A legacy (torch 1.13) trace as the reference trainer writes it: "Input Dims" on the GEMM
// operators, "Sequence number" on operators, autograd node spans ("BmmBackward0") without "::".
//   attention range: aten::matmul > aten::bmm [8,64,32]x[8,32,64] (10 us) > resolve_conj
//   aten::linear > aten::t, aten::addmm (bias, [128,64], [64,256]) (15 us)
//   evaluate_function: BmmBackward0 (seq 8, the attention bmm's) > BmmBackward0 > two bmm
//   aten::mm of an empty [0,4] matrix: no GEMM
const char* kLegacyGemms = R"([
 {"name":"ProfilerStep#0","ph":"X","ts":0,"dur":100,"tid":1,"pid":"CPU functions","args":{}},
 {"name":"attention","ph":"X","ts":1,"dur":20,"tid":1,"pid":"CPU functions","args":{}},
 {"name":"aten::matmul","ph":"X","ts":2,"dur":18,"tid":1,"pid":"CPU functions","args":{"Sequence number":7}},
 {"name":"aten::bmm","ph":"X","ts":3,"dur":10,"tid":1,"pid":"CPU functions","args":{"Input Dims":[[8,64,32],[8,32,64]],"Sequence number":8}},
 {"name":"aten::resolve_conj","ph":"X","ts":4,"dur":1,"tid":1,"pid":"CPU functions","args":{}},
 {"name":"aten::linear","ph":"X","ts":30,"dur":20,"tid":1,"pid":"CPU functions","args":{"Sequence number":9}},
 {"name":"aten::t","ph":"X","ts":31,"dur":1,"tid":1,"pid":"CPU functions","args":{}},
 {"name":"aten::addmm","ph":"X","ts":33,"dur":15,"tid":1,"pid":"CPU functions","args":{"Input Dims":[[256],[128,64],[64,256],[],[]],"Sequence number":10}},
 {"name":"autograd::engine::evaluate_function: BmmBackward0","ph":"X","ts":60,"dur":30,"tid":1,"pid":"CPU functions","args":{"Sequence number":8}},
 {"name":"BmmBackward0","ph":"X","ts":61,"dur":28,"tid":1,"pid":"CPU functions","args":{"Sequence number":8}},
 {"name":"aten::bmm","ph":"X","ts":62,"dur":12,"tid":1,"pid":"CPU functions","args":{"Input Dims":[[8,64,64],[8,64,32]]}},
 {"name":"aten::bmm","ph":"X","ts":75,"dur":13,"tid":1,"pid":"CPU functions","args":{"Input Dims":[[8,32,64],[8,64,64]]}},
 {"name":"aten::mm","ph":"X","ts":91,"dur":5,"tid":1,"pid":"CPU functions","args":{"Input Dims":[[0,4],[4,4]]}}
])";

void expect_gemm(const MeasuredGemm& g, OpClass c, MatmulShape s, double dur_us, int64_t events) {
  EXPECT_EQ(g.op_class, c) << g.name;
  EXPECT_EQ(g.shape.m, s.m) << g.name;
  EXPECT_EQ(g.shape.k, s.k) << g.name;
  EXPECT_EQ(g.shape.n, s.n) << g.name;
  EXPECT_EQ(g.shape.batch, s.batch) << g.name;
  EXPECT_EQ(g.duration, us(dur_us)) << g.name;
  EXPECT_EQ(g.events, events) << g.name;
}

TEST(ImportTrace, LegacyGemmShapesClassesAndEventCounts) {
  const MeasuredTrace t = import_trace_text(kLegacyGemms, "legacy.json");
  ASSERT_EQ(t.steps.size(), 1u);
  const MeasuredStep& s = t.steps[0];
  EXPECT_EQ(s.host_events, 12);
  // Top-level operators with the events inside them.
  ASSERT_EQ(s.ops.size(), 4u);
  EXPECT_EQ(s.ops[0].events, 3);  // matmul, bmm, resolve_conj
  EXPECT_EQ(s.ops[1].events, 3);  // linear, t, addmm
  EXPECT_EQ(s.ops[2].events, 4);  // the backward node, its span, two bmm
  EXPECT_EQ(s.ops[3].events, 1);
  // The backward of the attention bmm is attention (sequence number 8), not matmul.
  expect_totals(time_by_class(s), {{OpClass::kAttention, 48}, {OpClass::kMatmul, 25}});
  // Innermost GEMM operators with their shapes; the empty one is none.
  ASSERT_EQ(s.gemms.size(), 4u);
  expect_gemm(s.gemms[0], OpClass::kAttention, {64, 32, 64, 8}, 10, 2);
  expect_gemm(s.gemms[1], OpClass::kMatmul, {128, 64, 256, 1}, 15, 1);
  expect_gemm(s.gemms[2], OpClass::kAttention, {64, 64, 32, 8}, 12, 1);
  expect_gemm(s.gemms[3], OpClass::kAttention, {32, 64, 64, 8}, 13, 1);
}

TEST(ImportTrace, GpuGemmTimeIsTheTimeOfTheKernelsItLaunched) {
  const MeasuredTrace t = import_trace(kFixtures + "/torch_gpu_mini.trace.json");
  ASSERT_EQ(t.steps[0].gemms.size(), 1u);
  // aten::mm [64,128]x[128,256] launched the 40 us sm90_xmma_gemm kernel.
  expect_gemm(t.steps[0].gemms[0], OpClass::kMatmul, {64, 128, 256, 1}, 40, 0);
  EXPECT_TRUE(t.steps[1].gemms.empty());  // step 2's aten::mm records no shapes
  for (const MeasuredOp& op : t.steps[0].ops) {
    EXPECT_EQ(op.events, 0);  // device kernels carry no profiler overhead
  }
}

TEST(ImportTrace, MalformedInputDimsNameTheEvent) {
  const std::string step =
      R"({"name":"ProfilerStep#0","ph":"X","ts":0,"dur":10,"tid":1,"pid":"CPU functions"},)";
  auto with_mm = [&](const std::string& dims) {
    return "[" + step + R"({"name":"aten::mm","ph":"X","ts":1,"dur":2,"tid":1,"pid":"CPU functions","args":{"Input Dims":)" +
           dims + "}}]";
  };
  const InputError a =
      input_error([&] { (void)import_trace_text(with_mm("[[2,3],[4,5]]"), "a.json"); });
  EXPECT_EQ(a.location(), "/1/args/Input Dims");
  EXPECT_NE(std::string(a.what()).find("do not multiply"), std::string::npos) << a.what();
  const InputError b = input_error([&] { (void)import_trace_text(with_mm("[[2,3]]"), "b.json"); });
  EXPECT_EQ(b.location(), "/1/args/Input Dims");
  EXPECT_NE(std::string(b.what()).find("input 1"), std::string::npos) << b.what();
  const InputError c =
      input_error([&] { (void)import_trace_text(with_mm("[[2,-3],[-3,5]]"), "c.json"); });
  EXPECT_NE(std::string(c.what()).find("non-negative"), std::string::npos) << c.what();
}


TEST(MeasuredTimeline, AMeasuredStepBecomesAProgramAndItsRecords) {
  const MeasuredTrace t = import_trace_text(kLegacyGemms, "legacy.json");
  const MeasuredTimeline m = to_timeline(t.steps[0], RankId(3));
  ASSERT_EQ(m.program.size(), 4u);  // the four top-level operators
  ASSERT_EQ(m.timeline.ops.size(), 4u);
  const std::vector<std::pair<double, double>> expected_us = {{2, 20}, {30, 50}, {60, 90}, {91, 96}};
  for (size_t i = 0; i < 4; ++i) {
    const OpRecord& r = m.timeline.ops[i];
    EXPECT_EQ(r.rank, RankId(3));
    EXPECT_EQ(r.op, OpId(static_cast<uint32_t>(i)));  // ended in program order here
    EXPECT_EQ(r.stream, 0);
    EXPECT_EQ(r.start, SimTime::zero() + us(expected_us[i].first));
    EXPECT_EQ(r.end, SimTime::zero() + us(expected_us[i].second));
    const Op& op = m.program.op(r.op);
    EXPECT_EQ(op.name, t.steps[0].ops[i].name);
    EXPECT_EQ(std::get<ComputeWork>(op.work).op_class, t.steps[0].ops[i].op_class);
  }
}

TEST(MeasuredTimeline, StreamsAreNumberedAndOverlapsOnAStreamAreRemoved) {
  MeasuredStep s;
  s.start = SimTime::zero() + us(100);
  auto op = [](double start, double dur, int64_t stream) {
    MeasuredOp o;
    o.name = "k";
    o.start = SimTime::zero() + us(start);
    o.duration = us(dur);
    o.stream = stream;
    return o;
  };
  s.ops = {op(100, 10, 7), op(105, 10, 9), op(108, 4, 7)};  // the third overlaps the first
  const MeasuredTimeline m = to_timeline(s, RankId(0));
  ASSERT_EQ(m.timeline.ops.size(), 3u);
  // In order of end: op 0 (stream 0, [0, 10)), op 2 (stream 0, moved to [10, 14)), op 1
  // (stream 1, [5, 15)).
  EXPECT_EQ(m.timeline.ops[0].op, OpId(0));
  EXPECT_EQ(m.timeline.ops[1].op, OpId(2));
  EXPECT_EQ(m.timeline.ops[1].start, SimTime::zero() + us(10));
  EXPECT_EQ(m.timeline.ops[1].end, SimTime::zero() + us(14));
  EXPECT_EQ(m.timeline.ops[2].op, OpId(1));
  EXPECT_EQ(m.timeline.ops[2].stream, 1);
}

}  // namespace
}  // namespace meshsim::traces
