// `meshsim plan` and the time to train of `meshsim run` end to end (the real binary).
#include "command_test.h"

#include <algorithm>
#include <set>

namespace meshsim::testing {
namespace {

using ::testing::HasSubstr;

class StudiesCommandTest : public CommandTest {};

TEST_F(StudiesCommandTest, PlanRanksAndWritesCsvAndJson) {
  const CommandResult r =
      meshsim({"plan", "--model", "llama3-8b", "--cluster", "dgx-h100", "--nodes", "1", "--seq",
               "4096", "--gbs", "16", "--top", "3", "--exact", "--csv", "p.csv", "--json",
               "p.json", "--tokens", "1T"});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("ranking     proven"));
  EXPECT_THAT(r.output, HasSubstr("invalid"));
  EXPECT_THAT(r.output, HasSubstr("pruned by the lower bound"));
  EXPECT_THAT(r.output, HasSubstr("time to train"));
  const nlohmann::json j = read_json("p.json");
  ASSERT_EQ(j.at("plans").size(), 3u);
  EXPECT_TRUE(j.at("search").at("exact").get<bool>());
  double previous = 0;
  for (const nlohmann::json& p : j.at("plans")) {
    const double step = p.at("step_time_s");
    EXPECT_GE(step, previous);
    EXPECT_LE(p.at("lower_bound_s").get<double>(), step);
    EXPECT_EQ(p.at("tp").get<int64_t>() * p.at("cp").get<int64_t>() * p.at("pp").get<int64_t>() *
                  p.at("dp").get<int64_t>(),
              8);
    // 1T tokens at the plan's tokens/s, by hand.
    EXPECT_NEAR(p.at("days").get<double>(), 1e12 / p.at("tokens_per_s").get<double>() / 86400.0,
                1e-6);
    previous = step;
  }
  const std::string csv = read_file("p.csv");
  EXPECT_EQ(std::count(csv.begin(), csv.end(), '\n'), 4);  // header + 3 rows
  EXPECT_THAT(csv, HasSubstr("plan,tp,sp,cp,pp,vpp,schedule,dp,zero"));
  // Deterministic: the same search writes the same bytes.
  ASSERT_EQ(meshsim({"plan", "--model", "llama3-8b", "--cluster", "dgx-h100", "--nodes", "1",
                     "--seq", "4096", "--gbs", "16", "--top", "3", "--exact", "--csv", "q.csv"})
                .exit_code,
            0);
  EXPECT_EQ(read_file("q.csv").substr(0, 200), csv.substr(0, 200));
}

// --offload-layers end to end: the plan line says so, the JSON echoes it, the copies are the copy
// class, and the timeline puts them on two tracks of their own named as host copies.
TEST_F(StudiesCommandTest, OffloadedActivationsRunOnHostCopyTracks) {
  const CommandResult r =
      meshsim({"--model", "llama3-8b", "--cluster", "dgx-h100", "--nodes", "1", "--dp", "8",
               "--zero", "3", "--mbs", "2", "--gbs", "16", "--seq", "8192", "--offload-layers",
               "8", "--json", "o.json", "--trace", "o.trace.json", "--trace-ranks", "0"});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("activations of 8 layers per chunk offloaded"));
  const nlohmann::json j = read_json("o.json");
  EXPECT_EQ(j.at("inputs").at("offload_layers"), 8);
  EXPECT_GT(j.at("time_by_op_class_s").at("copy").get<double>(), 0.0);
  const nlohmann::json t = read_json("o.trace.json");
  std::set<std::string> tracks;
  int copies = 0;
  for (const nlohmann::json& e : t.at("traceEvents")) {
    if (e.value("ph", "") == "M" && e.value("name", "") == "thread_name") {
      tracks.insert(e.at("args").at("name").get<std::string>());
    }
    const std::string name = e.value("name", "");
    // The copies' own slices, not the host track's slices of their issue.
    copies += e.value("ph", "") == "X" && e.value("cat", "") != "host" &&
              (name.ends_with(".offload_activations") || name.ends_with(".reload_activations"));
  }
  EXPECT_EQ(copies, 16);  // 8 layers out and back, one microbatch
  EXPECT_EQ(std::count_if(tracks.begin(), tracks.end(),
                          [](const std::string& n) { return n.find("host copy") != n.npos; }),
            2);
}

TEST_F(StudiesCommandTest, PlanHoldsFixedDegreesAndConstraints) {
  const CommandResult r =
      meshsim({"plan", "--model", "llama3-8b", "--gpus", "8", "--seq", "4096", "--gbs", "16",
               "--top", "2", "--tp", "2", "--min-headroom", "20%", "--json", "p.json"});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("within the 20 % headroom"));
  const nlohmann::json plans = read_json("p.json");  // the range of a temporary's member dangled
  for (const nlohmann::json& p : plans.at("plans")) {
    EXPECT_EQ(p.at("tp"), 2);
    EXPECT_GE(p.at("headroom").get<double>(), 0.2);
  }
}

// HSDP and multi-slice in `meshsim plan`: --fsdp holds the shard group (the table shows it as
// HSDPfxr, the JSON as fsdp and zero_replicas), --slices joins TPU slices and --dcn-dp holds the
// replicas across them; --fsdp with --dcn-dp is refused, naming the flag.
TEST_F(StudiesCommandTest, PlanHoldsHsdpAndSlices) {
  const CommandResult r =
      meshsim({"plan", "--model", "llama3-8b", "--cluster", "dgx-h100", "--nodes", "2", "--seq",
               "4096", "--gbs", "16", "--top", "2", "--fsdp", "8", "--tp", "1", "--pp", "1",
               "--cp", "1", "--json", "h.json"});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("HSDP8x2"));
  const nlohmann::json h = read_json("h.json");
  ASSERT_FALSE(h.at("plans").empty());
  for (const nlohmann::json& p : h.at("plans")) {
    EXPECT_EQ(p.at("fsdp"), 8);
    EXPECT_EQ(p.at("zero_replicas"), 2);
    EXPECT_NE(p.at("zero"), 0);
  }
  const CommandResult tpu =
      meshsim({"plan", "--model", "llama3-8b", "--cluster", "tpu-v5p", "--shape", "4x4x4",
               "--slices", "2", "--dcn-dp", "2", "--zero", "3", "--tp", "1", "--pp", "1",
               "--seq", "4096", "--gbs", "128", "--top", "1", "--json", "t.json"});
  ASSERT_EQ(tpu.exit_code, 0) << tpu.output;
  EXPECT_THAT(tpu.output, HasSubstr("128 devices in 2 slices of 4x4x4 joined by DCN"));
  EXPECT_THAT(tpu.output, HasSubstr("HSDP64x2"));
  const nlohmann::json t = read_json("t.json");
  ASSERT_EQ(t.at("plans").size(), 1u);
  EXPECT_EQ(t.at("plans")[0].at("slices"), 2);
  EXPECT_EQ(t.at("plans")[0].at("fsdp").get<int64_t>() * 2,
            t.at("plans")[0].at("dp").get<int64_t>());
  const CommandResult both =
      meshsim({"plan", "--model", "llama3-8b", "--nodes", "2", "--fsdp", "4", "--dcn-dp", "2"});
  EXPECT_EQ(both.exit_code, 2);
  EXPECT_THAT(both.output, HasSubstr("--dcn-dp"));
}

// Issue 13 through the studies library: a plan no framework runs is refused by its stack with
// the framework's reason (issue 40), and under the custom stack prints that reason as its caveat
// and writes it to the JSON; HSDP shows in the plan line and its key is echoed with the inputs.
TEST_F(StudiesCommandTest, RunReportsCaveatsAndHsdp) {
  std::vector<std::string> args = {
      "run",   "--model", "llama3-8b", "--cluster", "dgx-h100", "--nodes", "2",
      "--tp",  "1",       "--pp",      "2",         "--dp",     "8",       "--zero",
      "3",     "--fsdp",  "4",         "--mbs",     "1",        "--gbs",   "16",
      "--seq", "2048",    "--no-trace", "--json",   "r.json"};
  expect_input_error(meshsim(args), {"--zero", "the megatron stack does not run ZeRO-2 or 3 "
                                               "with pipeline parallelism"});
  args.insert(args.end(), {"--stack", "custom"});
  const CommandResult r = meshsim(args);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("HSDP: sharded over 4, 2 replicas"));
  EXPECT_THAT(r.output, HasSubstr("caveat      the megatron stack does not run ZeRO-2 or 3 with "
                                  "pipeline parallelism"));
  const nlohmann::json j = read_json("r.json");
  ASSERT_EQ(j.at("caveats").size(), 1u);
  EXPECT_EQ(j.at("inputs").at("fsdp"), 4);
  EXPECT_FALSE(j.at("inputs").contains("moe_load_skew"));
  const CommandResult plain =
      meshsim({"run",  "--model", "llama3-8b", "--cluster",  "dgx-h100", "--nodes", "1",
               "--tp", "8",       "--dp",      "1",          "--mbs",    "1",       "--gbs",
               "8",    "--seq",   "2048",      "--no-trace", "--json",   "q.json"});
  ASSERT_EQ(plain.exit_code, 0) << plain.output;
  EXPECT_FALSE(read_json("q.json").contains("caveats"));
}

// Multi-slice TPU from flags: --slices joins slices by DCN, --dcn-dp makes HSDP with the
// replicas across them; a --dcn-dp that does not divide --dp is an error on that flag.
TEST_F(StudiesCommandTest, RunMultiSliceWithDcnDp) {
  const std::vector<std::string> base = {
      "run",   "--model", "llama3-8b", "--cluster", "tpu-v5p", "--shape",    "4x4x4", "--slices",
      "2",     "--dp",    "128",       "--zero",    "3",       "--gbs",      "128",   "--seq",
      "2048",  "--no-trace"};
  std::vector<std::string> ok = base;
  ok.insert(ok.end(), {"--dcn-dp", "2", "--json", "m.json"});
  const CommandResult r = meshsim(ok);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("HSDP: sharded over 64, 2 replicas"));
  const nlohmann::json j = read_json("m.json");
  EXPECT_EQ(j.at("inputs").at("slices"), 2);
  EXPECT_EQ(j.at("inputs").at("devices"), 128);
  EXPECT_EQ(j.at("inputs").at("fsdp"), 64);
  std::vector<std::string> bad = base;
  bad.insert(bad.end(), {"--dcn-dp", "3"});
  expect_input_error(meshsim(bad), {"--dcn-dp", "divisor of dp (128)"});
  expect_input_error(meshsim({"run", "--cluster", "dgx-h100", "--slices", "2", "--no-trace"}),
                     {"--slices", "GPU cluster"});
}

TEST_F(StudiesCommandTest, PlanBadInputNamesTheFlag) {
  expect_input_error(meshsim({"plan", "--model", "llama3-8b", "--gpus", "12"}),
                     {"--gpus", "12 GPUs", "8-GPU nodes"});
  expect_input_error(meshsim({"plan", "--min-headroom", "120%"}), {"--min-headroom", "[0, 1)"});
  expect_input_error(meshsim({"plan", "--tokens-per-step", "5000", "--seq", "4096"}),
                     {"--tokens-per-step", "multiple of the sequence length 4096"});
  expect_input_error(meshsim({"plan", "--model", "nope"}), {"nope"});
}

TEST_F(StudiesCommandTest, RunGivesTheTimeToTrainAndItsCost) {
  const CommandResult r = meshsim({"run", "--model", "llama3-8b", "--cluster", "dgx-h100",
                                   "--dp", "8", "--zero", "1", "--gbs", "64", "--seq", "4096",
                                   "--no-trace",
                                   "--tokens", "2T", "--usd-per-device-hour", "3", "--json",
                                   "r.json"});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("time to train"));
  EXPECT_THAT(r.output, HasSubstr("--usd-per-device-hour"));
  const nlohmann::json j = read_json("r.json");
  const nlohmann::json& t = j.at("time_to_train");
  const double days = 2e12 / j.at("tokens_per_s").get<double>() / 86400.0;
  EXPECT_NEAR(t.at("days").get<double>(), days, 1e-9 * days);
  EXPECT_NEAR(t.at("cost_usd").get<double>(), 8 * days * 24 * 3.0, 1e-6 * days);
  // Energy from the builtin table: an H100 node training draws 76 % of DGX H100's 10.2 kW
  // (measured, studies/data/prices.json), over 8 GPUs.
  EXPECT_NEAR(t.at("it_energy_mwh").get<double>(), 8 * days * 24 * 969.0 * 1e-6, 1e-6);
  expect_input_error(meshsim({"--tokens", "lots", "--no-trace"}), {"--tokens", "lots"});
  expect_input_error(meshsim({"--tokens", "1T", "--days", "3", "--no-trace"}), {"not both"});
}

TEST_F(StudiesCommandTest, CompareSaysWhatChangedAndWhyTheStepMoved) {
  const std::vector<std::string> base = {"--model", "llama3-8b", "--cluster", "dgx-h100", "--dp",
                                         "8", "--zero", "1", "--gbs", "32", "--seq", "4096",
                                         "--no-trace", "--json"};
  std::vector<std::string> a = base;
  a.push_back("a.json");
  std::vector<std::string> b = base;
  b.insert(b.end(), {"b.json", "--recompute", "full"});
  ASSERT_EQ(meshsim(a).exit_code, 0);
  ASSERT_EQ(meshsim(b).exit_code, 0);
  const CommandResult r = meshsim({"compare", "a.json", "b.json"});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("recompute: none -> full"));
  EXPECT_THAT(r.output, HasSubstr("why the step moved: the step grew"));
  EXPECT_THAT(r.output, HasSubstr("the largest part of the change is compute"));
  write_json("not-a-report.json", {{"step_time_s", 1.0}});
  expect_input_error(meshsim({"compare", "a.json", "not-a-report.json"}),
                     {"not-a-report.json", "/tokens_per_s"});
}

// `meshsim goodput` (issue 16): the step simulated, then the run under the Llama 3 table; the
// same seed writes the same bytes, and bad input names its flag or its file and field.
TEST_F(StudiesCommandTest, GoodputIsDeterministicAndNamesBadInput) {
  const std::vector<std::string> base = {"goodput", "--model", "llama3-8b", "--cluster",
                                         "dgx-h100", "--dp", "8", "--zero", "1", "--gbs", "64",
                                         "--seq", "4096", "--tokens", "1T"};
  const auto with = [&](std::vector<std::string> more) {
    std::vector<std::string> a = base;
    a.insert(a.end(), more.begin(), more.end());
    return a;
  };
  const CommandResult r = meshsim(with({"--json", "g1.json", "--runs", "50"}));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("monte carlo"));
  EXPECT_THAT(r.output, HasSubstr("Young"));
  const nlohmann::json j = read_json("g1.json");
  const nlohmann::json& g = j.at("goodput");
  EXPECT_EQ(g.at("monte_carlo").at("runs"), 50);
  EXPECT_EQ(g.at("interval").at("used_s"), g.at("interval").at("optimal_s"));  // auto
  const double goodput = g.at("monte_carlo").at("goodput").at("mean");
  EXPECT_GT(goodput, 0.5);
  EXPECT_LT(goodput, 1.0);
  // Failure-free days: the tokens at the simulated throughput.
  EXPECT_NEAR(g.at("work_days").get<double>(),
              1e12 / j.at("step").at("tokens_per_s").get<double>() / 86400.0, 1e-9);
  ASSERT_EQ(meshsim(with({"--json", "g2.json", "--runs", "50"})).exit_code, 0);
  EXPECT_EQ(read_file("g1.json"), read_file("g2.json"));
  ASSERT_EQ(meshsim(with({"--json", "g3.json", "--runs", "50", "--seed", "2"})).exit_code, 0);
  EXPECT_NE(read_file("g1.json"), read_file("g3.json"));

  expect_input_error(meshsim(with({"--checkpoint-interval", "5parsecs"})),
                     {"--checkpoint-interval", "5parsecs", "30min"});
  expect_input_error(meshsim(with({"--runs", "0"})), {"--runs", "1 to 1000000"});
  expect_input_error(meshsim(with({"--seed", "-1"})), {"--seed", "0 to 2^64 - 1"});
  expect_input_error(meshsim(with({"--checkpoint-interval", "0s"})),
                     {"--checkpoint-interval", "positive interval"});
  expect_input_error(meshsim(with({"--storage-bandwidth", "fast"})),
                     {"--storage-bandwidth", "2TB/s"});
  expect_input_error(meshsim({"goodput", "--model", "llama3-8b", "--dp", "8"}),
                     {"--tokens", "15T"});
  nlohmann::json table = nlohmann::json::parse(R"({"source": "s", "observed": {"days": 54,
      "gpus": 16384, "nodes": 2048, "switches": 1280, "source": "s"},
      "categories": [{"name": "a", "component": "gpus", "count": 1, "source": "s"}]})");
  write_json("bad-table.json", table);
  expect_input_error(meshsim(with({"--failure-table", "bad-table.json"})),
                     {"bad-table.json", "/categories/0/component", "gpus"});
  // An asynchronous write that outlasts the interval.
  expect_input_error(meshsim(with({"--async-checkpoint", "--storage-bandwidth", "1GB/s",
                                   "--checkpoint-interval", "10s"})),
                     {"--checkpoint-interval", "asynchronous write"});
}

}  // namespace
}  // namespace meshsim::testing
