// `meshsim validate TRACE...` and `meshsim calibrate TRACE...` end to end (cli/src/
// validate_traces.h, calibrate_traces.h), the real binary on synthetic per-rank Kineto traces and
// on the committed real ones (validation/traces/multi-gpu/).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "command_test.h"
#include "kineto_builder.h"

namespace meshsim::validation::test {
namespace {

using meshsim::testing::CommandTest;
using meshsim::testing::expect_has_all;
using meshsim::testing::KinetoBuilder;
using ::testing::HasSubstr;

// One rank of a two-rank data-parallel step: GEMMs with shapes, an all-reduce overlapping the last.
std::string rank_trace(int64_t rank) {
  KinetoBuilder b(rank, 2);
  for (int step = 0; step < 3; ++step) {
    const double t = 2000.0 * step;
    b.step(step, t, 1000);
    for (int i = 0; i < 4; ++i) {
      b.op("aten::mm", t + 10 * i, 8, {{2048, 4096}, {4096, 4096}},
           {"c10::BFloat16", "c10::BFloat16"});
      b.kernel("sm90_xmma_gemm_bf16bf16_bf16f32", t + 50 + 120 * i, 110, 7, t + 10 * i + 1, 2);
    }
    b.kernel("ncclDevKernel_AllReduce_Sum_bf16_RING_LL", t + 400, 250, 20, t + 45, 2,
             KinetoBuilder::all_reduce(int64_t{1} << 24, {0, 1}));
  }
  return b.text();
}

class TraceCommandTest : public CommandTest {
 protected:
  void write_ranks() {
    std::filesystem::create_directory(path("job"));
    write_file("job/rank0.json", rank_trace(0));
    write_file("job/rank1.json", rank_trace(1));
  }
};

TEST_F(TraceCommandTest, ValidateReplaysEveryRankOfADirectory) {
  write_ranks();
  const auto r = meshsim({"validate", "job", "--json", "v.json", "--trace", "v.trace.json"});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  expect_has_all(r.output, {"h100-sxm (deviceProperties: \"NVIDIA H100 80GB HBM3\"", "dgx-h100",
                            "rank 0 (job/rank0.json): 3 step(s) by ProfilerStep#N ranges",
                            "rank 1 (job/rank1.json)", "exposed communication",
                            "collective all-reduce 33.6 MB over 2"});
  const nlohmann::json j = read_json("v.json");
  ASSERT_EQ(j["ranks"].size(), 2u);
  EXPECT_EQ(j["world_size"], 2);
  EXPECT_EQ(j["ranks"][1]["rank"], 1);
  EXPECT_EQ(j["ranks"][0]["steps"].size(), 3u);
  // Measured: 4 GEMMs of 110 us every 120 us from t0 = 50, the all-reduce from 400 to 650.
  const nlohmann::json& m = j["ranks"][0]["steps"][0]["measured"];
  EXPECT_NEAR(m["step_s"].get<double>(), 600e-6, 1e-12);
  EXPECT_NEAR(m["compute_s"].get<double>(), 440e-6, 1e-12);
  EXPECT_NEAR(m["overlap_s"].get<double>(), 110e-6, 1e-12);  // under the last GEMM
  EXPECT_NEAR(m["exposed_communication_s"].get<double>(), 140e-6, 1e-12);
  EXPECT_GT(j["ranks"][0]["measured_time_by_cost_s"]["gemm"].get<double>(), 0);
  const std::string trace = read_file("v.trace.json");
  expect_has_all(trace, {"simulated: rank 0000, step", "measured: rank 0001, step", "stream 20"});
}

TEST_F(TraceCommandTest, CalibrateWritesAProfileRunAndValidateTake) {
  write_ranks();
  const auto c = meshsim({"calibrate", "job", "--out", "fitted.json", "--json", "c.json"});
  ASSERT_EQ(c.exit_code, 0) << c.output;
  expect_has_all(c.output, {"pinned by the traces", "not pinned: catalogue value kept",
                            "held out: each rank's steps replayed"});
  const nlohmann::json j = read_json("c.json");
  EXPECT_EQ(j["held_out_by"], "rank");
  EXPECT_EQ(j["cases"].size(), 6u);
  const auto v = meshsim({"validate", "job", "--hardware-profile", "fitted.json"});
  EXPECT_EQ(v.exit_code, 0) << v.output;
  EXPECT_THAT(v.output, HasSubstr("h100-sxm (fitted.json)"));
  const auto run = meshsim({"run", "--model", "llama3-8b", "--cluster", "dgx-h100",
                            "--hardware-catalogue", "fitted.json", "--tp", "8", "--no-trace"});
  EXPECT_EQ(run.exit_code, 0) << run.output;
}

TEST_F(TraceCommandTest, HostileTracesExitTwoNamingTheFile) {
  write_ranks();
  const std::string good = read_file("job/rank0.json");
  write_file("cut.json", good.substr(0, good.size() / 2));
  meshsim::testing::expect_input_error(meshsim({"validate", "cut.json"}),
                                       {"cut.json: byte ", "truncated"});
  write_file("huge.json",
             R"({"traceEvents":[{"ph":"X","cat":"kernel","name":"k","ts":1e999,"dur":1}]})");
  meshsim::testing::expect_input_error(meshsim({"validate", "huge.json"}),
                                       {"huge.json: /traceEvents/0/ts"});
  write_file("nodev.json", R"({"distributedInfo":{"rank":0,"world_size":1},"traceEvents":[)"
                           R"({"ph":"X","cat":"user_annotation","name":"ProfilerStep#1",)"
                           R"("ts":0,"dur":9},)"
                           R"({"ph":"X","cat":"kernel","name":"k","ts":1,"dur":1}]})");
  meshsim::testing::expect_input_error(meshsim({"validate", "nodev.json"}),
                                       {"--hardware-profile", "no deviceProperties"});
  write_file("job/rank0b.json", rank_trace(0));
  const auto twice = meshsim({"validate", "job"});  // found at the second file, after the first
  EXPECT_EQ(twice.exit_code, 2) << twice.output;
  EXPECT_THAT(twice.output, HasSubstr("meshsim: error: job/rank0b.json: /distributedInfo/rank: "
                                      "rank 0 appears in two of the traces given"));
  meshsim::testing::expect_no_crash(twice);
  std::filesystem::remove(path("job/rank0b.json"));
  meshsim::testing::expect_input_error(meshsim({"validate", "job", "--cluster", "nope.json"}),
                                       {"nope.json"});
}

// The committed real ranks (validation/traces/multi-gpu/README.md): each validates, and what it
// says about itself comes out (world, chip, steps, modelled share).
TEST_F(TraceCommandTest, CommittedRealTracesValidate) {
  const std::string dir = std::string(MESHSIM_SOURCE_DIR) + "/validation/traces/multi-gpu/";
  const auto r = meshsim({"validate", dir + "hta-a100x2-nccl-rank0.json.gz", "--json", "r.json"});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const nlohmann::json j = read_json("r.json");
  EXPECT_EQ(j["chip"], "a100-40gb");
  EXPECT_EQ(j["world_size"], 2);
  EXPECT_EQ(j["ranks"][0]["steps"].size(), 3u);
  // Its NCCL kernels carry their metadata: the all-reduces are costed on the network.
  EXPECT_GT(j["ranks"][0]["measured_time_by_cost_s"]["collective"].get<double>(), 0);
  const auto g = meshsim({"validate", dir + "hta-a100x8-rank3.json.gz", "--json", "g.json"});
  ASSERT_EQ(g.exit_code, 0) << g.output;
  EXPECT_GT(read_json("g.json")["ranks"][0]["measured_time_by_cost_s"]["gemm"].get<double>(), 0);
}

// hta-a100x16-rank0's GPU runs about 160 ms behind its host: its steps are measured from the end
// of the work queued ahead of them, so in the steady state each lasts what the host's
// ProfilerStep range lasts (215.5-216.5 ms in the trace), not the 375 ms from its first op (a copy
// on another stream) to its last; the kernels launched before the trace and the step whose
// training kernels never ran are set aside and said so.
TEST_F(TraceCommandTest, AGpuRunningBehindItsHostIsMeasuredAtItsPeriod) {
  const std::string dir = std::string(MESHSIM_SOURCE_DIR) + "/validation/traces/multi-gpu/";
  const auto r = meshsim({"validate", dir + "hta-a100x16-rank0.json.gz", "--json", "r.json"});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  expect_has_all(r.output,
                 {"880 device ops launched before the trace began", "1 step(s) left out"});
  const nlohmann::json j = read_json("r.json");
  ASSERT_EQ(j["ranks"][0]["steps"].size(), 3u);
  for (const nlohmann::json& step : j["ranks"][0]["steps"]) {
    EXPECT_NEAR(step["measured_s"].get<double>(), 0.216, 0.0015) << step.dump();
  }
}

}  // namespace
}  // namespace meshsim::validation::test
