// The streaming Kineto reader (traces/kineto.h), the steps and breakdown of a rank
// (traces/rank_steps.h): synthetic traces with known answers, hostile inputs, and the committed
// real traces (validation/traces/multi-gpu/, with their sources).
#include "meshsim/traces/kineto.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <zlib.h>

#include <filesystem>
#include <string>

#include "json_splitter.h"
#include "kineto_builder.h"
#include "kineto_decode.h"
#include "meshsim/sim/error.h"
#include "meshsim/traces/rank_steps.h"
#include "thrown.h"

namespace meshsim::traces {
namespace {

using ::testing::HasSubstr;
using testing::KinetoBuilder;

Duration us(double v) { return Microseconds(v); }

std::string gzip(const std::string& text) {
  z_stream zs{};
  deflateInit2_(&zs, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY, ZLIB_VERSION,
                static_cast<int>(sizeof(z_stream)));
  std::string out(deflateBound(&zs, text.size()) + 64, '\0');
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(text.data()));
  zs.avail_in = static_cast<uInt>(text.size());
  zs.next_out = reinterpret_cast<Bytef*>(out.data());
  zs.avail_out = static_cast<uInt>(out.size());
  deflate(&zs, Z_FINISH);
  out.resize(zs.total_out);
  deflateEnd(&zs);
  return out;
}

// The InputError's "source: location: message" for `text`.
std::string error_of(const std::string& text, const KinetoLimits& limits = {}) {
  return meshsim::testing::what_thrown<InputError>(
      [&] { (void)read_kineto_bytes(text, "t.json", limits); }, "accepted");
}

TEST(JsonSplitter, CutsTheSameEventsWhateverTheChunks) {
  const std::string text =
      R"({"schemaVersion":1,"traceName":"a \"}]{[ b","traceEvents":[{"ph":"X","name":"k{}[]\\\""},)"
      R"( {"ph":"M","args":{"x":[1,{"y":"}"}]}}],"z":[1,2]})";
  const auto split = [&text](size_t chunk) {
    std::vector<std::string> events;
    std::vector<std::string> headers;
    detail::JsonSplitter s(
        "t", {1 << 20, 1 << 20, 64},
        [&](std::string_view e, int64_t, int64_t) { events.emplace_back(e); },
        [&](const std::string& key, std::string_view v, int64_t) {
          headers.push_back(key + "=" + std::string(v));
        });
    for (size_t i = 0; i < text.size(); i += chunk) {
      std::string piece = text.substr(i, chunk) + std::string(64, ' ');
      s.feed(std::string_view(piece).substr(0, std::min(chunk, text.size() - i)));
    }
    s.finish();
    return std::make_pair(events, headers);
  };
  const auto whole = split(text.size());
  ASSERT_EQ(whole.first.size(), 2u);
  EXPECT_EQ(whole.first[0], R"({"ph":"X","name":"k{}[]\\\""})");
  EXPECT_EQ(whole.second,
            (std::vector<std::string>{"schemaVersion=1", R"(traceName="a \"}]{[ b")", "z=[1,2]"}));
  for (const size_t chunk : {1u, 2u, 3u, 7u, 64u}) {
    EXPECT_EQ(split(chunk), whole) << "chunks of " << chunk;
  }
}

TEST(KinetoReader, ReadsTimesExactlyInNanoseconds) {
  EXPECT_EQ(detail::parse_microseconds("1661203462602585.123"), 1661203462602585123);
  EXPECT_EQ(detail::parse_microseconds("4458676524648.7975"), 4458676524648798);  // rounded
  EXPECT_EQ(detail::parse_microseconds("12"), 12000);
  EXPECT_EQ(detail::parse_microseconds("1.5e3"), 1500000);
  EXPECT_EQ(detail::parse_microseconds("-2.5"), -2500);
  EXPECT_EQ(detail::parse_microseconds("1e400"), std::nullopt);
  EXPECT_EQ(detail::parse_microseconds("99999999999999999"), std::nullopt);  // 17 digits of us
  const RankTrace t = read_kineto_bytes(
      R"({"traceEvents":[{"ph":"X","cat":"kernel","name":"k","pid":0,"tid":7,)"
      R"("ts":1661203462602585.123,"dur":2.5,"args":{"device":3,"stream":9,"correlation":5}}]})",
      "t");
  ASSERT_EQ(t.events.size(), 1u);
  EXPECT_EQ(t.events[0].ts_ns, 1661203462602585123);
  EXPECT_EQ(t.events[0].dur_ns, 2500);
  EXPECT_EQ(t.events[0].device, 3);
  EXPECT_EQ(t.events[0].tid, 9);
  EXPECT_EQ(t.events[0].correlation, 5);
}

TEST(KinetoReader, ReadsTheHeaderAndTheCollectiveMetadata) {
  KinetoBuilder b(1, 2, "NVIDIA A100-SXM4-80GB");
  b.doc()["distributedInfo"]["pg_config"] = {
      {{"pg_name", "0"}, {"pg_desc", "default_pg"}, {"pg_size", 2}, {"ranks", {0, 1}}}};
  b.doc()["record_shapes"] = 1;
  b.op("aten::mm", 0, 10, {{64, 32}, {32, 16}}, {"c10::BFloat16", "c10::BFloat16"});
  b.kernel("ncclDevKernel_AllReduce_Sum_bf16_RING_LL", 20, 5, 20, 1, 1,
           KinetoBuilder::all_reduce(1024, {0, 1}));
  const RankTrace t = read_kineto_bytes(gzip(b.text()), "t.json.gz");
  EXPECT_EQ(t.rank, 1);
  EXPECT_EQ(t.world_size, 2);
  ASSERT_EQ(t.groups.size(), 1u);
  EXPECT_EQ(t.groups[0].ranks, (std::vector<int64_t>{0, 1}));
  ASSERT_EQ(t.devices.size(), 1u);
  EXPECT_EQ(t.devices[0].memory_bytes, 85'000'000'000);
  EXPECT_TRUE(t.record_shapes);
  ASSERT_EQ(t.collectives.size(), 1u);
  EXPECT_EQ(t.collectives[0].name, "allreduce");
  EXPECT_EQ(t.collectives[0].in_nelems, 1024);
  EXPECT_EQ(t.collectives[0].group_ranks, (std::vector<int64_t>{0, 1}));
  ASSERT_EQ(t.inputs.size(), 1u);
  EXPECT_EQ(t.inputs[0].tensor_bytes, (64 * 32 + 32 * 16) * 2);
  EXPECT_EQ(t.inputs[0].largest_tensor_bytes, 64 * 32 * 2);
  EXPECT_EQ(t.inputs[0].dtype, Dtype::kBf16);
  ASSERT_NE(t.inputs[0].shape, kNoIndex);
  const KinetoShape& shape = t.shapes[t.inputs[0].shape];
  EXPECT_EQ(shape.rank[1], 2);
  EXPECT_EQ(shape.dims[1][0], 32);
  EXPECT_EQ(shape.dims[1][1], 16);
}

TEST(KinetoReader, HostileInputsAreInputErrorsNamingWhereAndWhat) {
  KinetoBuilder b;
  b.step(1, 0, 100);
  b.kernel("k", 10, 5, 7, 1);
  const std::string good = b.text();
  EXPECT_EQ(error_of(good), "accepted");
  // Truncated anywhere: an error naming the byte, never a partial result.
  for (const size_t cut : {size_t{0}, size_t{1}, good.size() / 3, good.size() / 2, good.size() - 1}) {
    EXPECT_THAT(error_of(good.substr(0, cut)), HasSubstr("t.json: byte ")) << cut;
  }
  EXPECT_THAT(error_of(R"({"traceEvents":[{"ph":"X","cat":"kernel","name":"k","ts":1e400,"dur":1}]})"),
              HasSubstr("/traceEvents/0/ts"));
  EXPECT_THAT(error_of(R"({"traceEvents":[{"ph":"X","cat":"kernel","name":"k","ts":1,"dur":-1}]})"),
              HasSubstr("/traceEvents/0/dur: negative duration"));
  EXPECT_THAT(error_of(R"({"traceEvents":[{"ph":"X","cat":"kernel","name":"k","ts":"1","dur":1}]})"),
              HasSubstr("/traceEvents/0/ts: expected a number of microseconds"));
  EXPECT_THAT(error_of(R"({"traceEvents":[{"ph":"X","cat":"kernel","name":"k","dur":1}]})"),
              HasSubstr("/traceEvents/0/ts: missing"));
  EXPECT_THAT(error_of(R"({"traceEvents":[{"name":"k"},{"cat":"kernel"}]})"),
              HasSubstr("/traceEvents/0/ph: missing"));
  EXPECT_THAT(error_of(R"({"traceEvents":[{"ph":"X","cat":"kernel","name":7,"ts":1,"dur":1}]})"),
              HasSubstr("/traceEvents/0/name: expected a string"));
  EXPECT_THAT(error_of(R"({"traceEvents":[{"ph":"X","cat":"kernel","name":"k","ts":1,"dur":1,)"
                       R"("args":{"correlation":"x"}}]})"),
              HasSubstr("/traceEvents/0/args/correlation: expected a number"));
  EXPECT_THAT(error_of(R"({"traceEvents":[1]})"), HasSubstr("/traceEvents/0: expected an event"));
  EXPECT_THAT(error_of(R"({"traceEvents":{}})"), HasSubstr("/traceEvents: expected an array"));
  EXPECT_THAT(error_of(R"({"schemaVersion":1})"), HasSubstr("/traceEvents: missing"));
  EXPECT_THAT(error_of(R"({"traceEvents":[]} x)"), HasSubstr("text after the end"));
  EXPECT_THAT(error_of(R"({"traceEvents":[{"ph":"X"} {"ph":"X"}]})"), HasSubstr("expected ','"));
  EXPECT_THAT(error_of(R"({"traceEvents":[],"traceEvents":[]})"), HasSubstr("appears twice"));
  EXPECT_THAT(error_of(R"({"distributedInfo":{"rank":5,"world_size":2},"traceEvents":[]})"),
              HasSubstr("/distributedInfo/rank"));
  EXPECT_THAT(error_of(R"({"deviceProperties":[{"name":3}],"traceEvents":[]})"),
              HasSubstr("/deviceProperties/0/name: expected a string"));
  EXPECT_THAT(error_of(std::string("{\"traceEvents\":[{\"ph\":\"X\",\"a\":") +
                       std::string(100, '[') + std::string(100, ']') + "}]}"),
              HasSubstr("nesting deeper than the limit of 64"));
  KinetoLimits small;
  small.max_event_bytes = 64;
  EXPECT_THAT(error_of(good, small), HasSubstr("limit on one event's text"));
  small = {};
  small.max_kept_events = 2;
  EXPECT_THAT(error_of(good, small), HasSubstr("limit of 2 kept events"));
  const std::string gz = gzip(good);
  EXPECT_THAT(error_of(gz.substr(0, gz.size() / 2)), HasSubstr("truncated gzip stream"));
  EXPECT_THAT(error_of(gz.substr(0, 10) + std::string(40, 'x')), HasSubstr("corrupt gzip"));
}

// A GEMM of 100 us on stream 7 and an all-reduce of 100 us on stream 20 starting 60 us into it:
// 40 us of overlap, 60 exposed, step 160 us; a second rank with 30 us of overlap.
TEST(RankSteps, ExposedCommunicationAndOverlapComeOutExactly) {
  for (const auto& [rank, gemm, ar_start, ar_dur, overlap] :
       {std::tuple{0, 100.0, 60.0, 100.0, 40.0}, std::tuple{1, 120.0, 90.0, 60.0, 30.0}}) {
    KinetoBuilder b(rank, 2);
    b.step(7, 0, 10);
    b.kernel("sm90_xmma_gemm_bf16bf16_bf16f32", 5, gemm, 7, 1, 2);
    b.kernel("ncclDevKernel_AllReduce_Sum_bf16_RING_LL", 5 + ar_start, ar_dur, 20, 3, 2,
             KinetoBuilder::all_reduce(1 << 20, {0, 1}));
    const RankTrace t = read_kineto_bytes(b.text(), "r");
    const RankSteps s = find_steps(t);
    ASSERT_EQ(s.steps.size(), 1u);
    EXPECT_EQ(s.method, "ProfilerStep#N ranges");
    EXPECT_EQ(s.steps[0].number, 7);
    const StepBreakdown d = breakdown(measured_spans(s.steps[0]), SimTime::zero());
    const double end = std::max(gemm, ar_start + ar_dur);
    EXPECT_EQ(d.step, us(end));
    EXPECT_EQ(d.compute, us(gemm));
    EXPECT_EQ(d.comm, us(ar_dur));
    EXPECT_EQ(d.overlap, us(overlap));
    EXPECT_EQ(d.exposed_comm, us(ar_dur - overlap));
    EXPECT_EQ(d.idle, Duration::zero());
    EXPECT_EQ(d.by_class[static_cast<size_t>(OpClass::kMatmul)], us(gemm));
    EXPECT_EQ(d.by_class[static_cast<size_t>(OpClass::kCommunication)], us(ar_dur));
  }
}

// Kernels go to the step whose range their launch started in, even when they run in the next
// one; host-launch gaps count idle time the host had not yet launched into; p2p waits are bubble.
TEST(RankSteps, StepsByLaunchAndGapsByWhoWasLate) {
  KinetoBuilder b;
  b.step(1, 0, 50);
  b.step(2, 50, 50);
  b.kernel("elementwise_kernel", 10, 20, 7, 1);  // launched 1..2, runs 10..30
  b.kernel("elementwise_kernel", 55, 20, 7, 45);  // launched in step 1, runs in step 2's range
  // Step 2: idle 75..90, then a kernel launched at 85 (host late: counts), then idle 100..110
  // before a kernel launched at 60 (queued early: not the host's), then a receive 120..150.
  b.kernel("elementwise_kernel", 90, 10, 7, 85, 2);
  b.kernel("reduce_kernel", 110, 10, 8, 60, 2);
  b.kernel("ncclDevKernel_SendRecv", 120, 30, 9, 62, 2);
  const RankSteps s = find_steps(read_kineto_bytes(b.text(), "r"));
  ASSERT_EQ(s.steps.size(), 2u);
  EXPECT_EQ(s.steps[0].ops.size(), 2u);
  EXPECT_EQ(s.steps[1].ops.size(), 3u);
  const StepBreakdown d = breakdown(measured_spans(s.steps[1]), SimTime::zero());
  EXPECT_EQ(d.step, us(150 - 90));
  EXPECT_EQ(d.idle, us(10));  // 100..110
  EXPECT_EQ(d.host_gap, Duration::zero());  // 100..110 was queued work waiting: not the host
  EXPECT_EQ(d.exposed_p2p, us(30));
  EXPECT_EQ(d.bubble, us(40));
  const StepBreakdown first = breakdown(measured_spans(s.steps[0]), SimTime::zero());
  EXPECT_EQ(first.step, us(75 - 10));
  EXPECT_EQ(first.host_gap, us(55 - 30));  // its second kernel launched at 45..46, after the gap
}

// A GPU running behind its host, as in a software pipeline that copies the next batch while the
// current one trains: each step's copy starts at once on its own stream, its compute waits on
// stream 7 for the step before. Steps are measured from the end of the work queued ahead of them,
// so they tile the timeline (the period, 100 us) instead of overlapping (150 us spans); the work
// launched before the trace (correlation below every call's) is in no step but still delays the
// first; a last step whose work never ran before the trace ended is left out.
TEST(RankSteps, AStepRunningBehindItsHostIsMeasuredFromTheWorkQueuedAheadOfIt) {
  KinetoBuilder b;
  b.unlaunched_kernel("elementwise_kernel", 0, 50, 7, 10);  // step 0's tail
  for (int k = 1; k <= 3; ++k) {
    const double t = 100.0 * (k - 1);
    b.step(k, t, 100);
    b.kernel("Memcpy HtoD (Pinned -> Device)", t + 2, 5, 25, t + 1, 1, nlohmann::json::object(),
             "gpu_memcpy");
    b.kernel("gemm_kernel", t + 50, 100, 7, t + 3);  // queued behind the step before
  }
  b.step(4, 300, 100);
  b.kernel("Memcpy HtoD (Pinned -> Device)", 302, 5, 25, 301, 1, nlohmann::json::object(),
           "gpu_memcpy");  // then the
  // trace stops recording the device: step 4's compute never appears
  const RankSteps s = find_steps(read_kineto_bytes(b.text(), "r"));
  EXPECT_EQ(s.before_trace_ops, 1);
  EXPECT_EQ(s.unlinked_ops, 0);
  EXPECT_EQ(s.unfinished_steps, 1);
  ASSERT_EQ(s.steps.size(), 3u);
  for (size_t k = 0; k < 3; ++k) {
    const RankStep& step = s.steps[k];
    EXPECT_EQ(step.ops.size(), 2u);
    EXPECT_EQ(step.duration(), us(100)) << "step " << step.number;
    const StepBreakdown d = breakdown(measured_spans(step), SimTime::zero());
    EXPECT_EQ(d.step, us(100));
    EXPECT_EQ(d.compute, us(100));  // the copy before t0 is the previous step's time
    EXPECT_EQ(d.idle, Duration::zero());
    EXPECT_EQ(d.by_class[static_cast<size_t>(OpClass::kMatmul)], us(100));
  }
  // Without the queue (an idle GPU between steps) the span is kept: StepsByLaunch... above.
}

TEST(RankSteps, RepeatedStructureWithoutProfilerSteps) {
  KinetoBuilder b;
  double t = 0;
  for (int rep = 0; rep < 4; ++rep) {
    for (const char* k : {"embedding_kernel", "gemm_a", "softmax_kernel", "gemm_a", "adam_kernel"}) {
      b.kernel(k, t + 1, 1, 7, t);
      t += 3;
    }
  }
  const RankSteps s = find_steps(read_kineto_bytes(b.text(), "r"));
  EXPECT_THAT(s.method, HasSubstr("repeated structure: 3 repeats"));
  ASSERT_EQ(s.steps.size(), 3u);
  for (const RankStep& step : s.steps) {
    EXPECT_EQ(step.ops.size(), 5u);
  }
  KinetoBuilder none;
  none.kernel("a", 1, 1, 7, 0);
  none.kernel("b", 3, 1, 7, 2);
  EXPECT_THROW((void)find_steps(read_kineto_bytes(none.text(), "r")), InputError);
}

TEST(RankSteps, HostDispatchMediansFromTheLinks) {
  KinetoBuilder b;
  b.step(1, 0, 1000);
  for (int i = 0; i < 5; ++i) {  // an operator at 100 i, its launch 4 us in, lasting 3 us
    const double at = 100.0 * i;
    b.op("aten::add", at, 10);
    b.kernel("elementwise_kernel", at + 9, 2, 7, at + 4, 3);
  }
  const RankTrace t = read_kineto_bytes(b.text(), "r");
  const HostDispatch h = host_dispatch(t, find_steps(t));
  EXPECT_EQ(h.op_to_launch, us(4));
  EXPECT_EQ(h.launch_call, us(3));
  EXPECT_EQ(h.launch_interval, us(100));
  EXPECT_EQ(h.launch_latency, us(2));  // idle device: from the call's end (7) to the start (9)
  EXPECT_EQ(h.launch_call_samples, 5);
}

// The committed real traces (validation/traces/multi-gpu/README.md names their sources).
TEST(KinetoReader, ReadsTheCommittedRealTraces) {
  const std::filesystem::path dir = std::filesystem::path(MESHSIM_SOURCE_DIR) / "validation" /
                                    "traces" / "multi-gpu";
  const std::vector<std::string> files = trace_files({dir.string()});
  ASSERT_GE(files.size(), 2u);
  for (const std::string& f : files) {
    const RankTrace t = read_kineto(f);
    const RankSteps s = find_steps(t);
    EXPECT_GE(s.steps.size(), 2u) << f;
    EXPECT_TRUE(t.world_size.has_value()) << f;
    for (const RankStep& step : s.steps) {
      EXPECT_GT(step.duration(), Duration::zero()) << f;
    }
  }
}

}  // namespace
}  // namespace meshsim::traces
