// Flags that once did nothing, or the wrong thing, without a word (issue 40), each through the real
// binary with its message checked: yes/no flags take true or false, "--json -" is standard
// output, a token budget names its scale, an algorithm a collective lacks is refused, a setting
// that changes nothing is said, a resize suggests the degree or size that works, the largest
// fabrics name the knob that attaches them, and the default headroom shows in run and plan.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "command_test.h"

namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using meshsim::testing::CommandResult;
using meshsim::testing::expect_input_error;
using meshsim::testing::expect_no_crash;

class FlagTrapTest : public meshsim::testing::CommandTest {
 protected:
  // Llama-3.2-1B on one DGX H100 node: a step that simulates in milliseconds.
  static std::vector<std::string> small(std::vector<std::string> more) {
    std::vector<std::string> args{"run",  "--model", "llama3.2-1b", "--cluster", "dgx-h100",
                                  "--nodes", "1",   "--gbs",       "8",         "--seq",
                                  "2048",  "--no-trace"};
    args.insert(args.end(), more.begin(), more.end());
    return args;
  }
};

TEST_F(FlagTrapTest, YesNoFlagsTakeTrueOrFalse) {
  const CommandResult off = meshsim(small({"--tp", "2", "--dp", "4", "--sp=false", "--json",
                                           "off.json"}));
  ASSERT_EQ(off.exit_code, 0) << off.output;
  EXPECT_EQ(read_json("off.json").at("inputs").at("sp"), false);
  const CommandResult on = meshsim(small({"--tp", "2", "--dp", "4", "--sp", "--json", "on.json"}));
  ASSERT_EQ(on.exit_code, 0) << on.output;
  EXPECT_EQ(read_json("on.json").at("inputs").at("sp"), true);
  expect_input_error(meshsim(small({"--tp", "2", "--dp", "4", "--sp=maybe"})), {"--sp", "maybe"});
  // The negative flags read the same way: --no-overlap-p2p=false keeps the overlap.
  const CommandResult keep = meshsim(small({"--dp", "8", "--no-overlap-p2p=false", "--json",
                                            "keep.json"}));
  ASSERT_EQ(keep.exit_code, 0) << keep.output;
}

TEST_F(FlagTrapTest, JsonDashIsStandardOutput) {
  const CommandResult r = meshsim_stdout(small({"--dp", "8", "--json", "-"}));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const nlohmann::json j = meshsim::testing::parse_json(r.output, "standard output");
  EXPECT_TRUE(j.contains("step_time_s")) << r.output.substr(0, 200);
  EXPECT_FALSE(std::filesystem::exists(path("-")));
}

TEST_F(FlagTrapTest, ATokenBudgetNeedsItsScale) {
  expect_input_error(meshsim(small({"--dp", "8", "--tokens", "15"})),
                     {"--tokens", "\"15\"", "15T", "1.5e13"});
  const CommandResult r = meshsim(small({"--dp", "8", "--tokens", "15T"}));
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("time to train"));
}

TEST_F(FlagTrapTest, AnAlgorithmTheCollectiveLacksIsRefused) {
  expect_input_error(meshsim({"collective", "--op", "allreduce", "--algo", "pat", "--sizes",
                              "1MiB:1MiB"}),
                     {"--algo", "pat", "all-reduce", "no all-reduce pattern"});
  const CommandResult ok = meshsim({"collective", "--op", "allgather", "--algo", "ring",
                                    "--sizes", "1MiB:1MiB"});
  EXPECT_EQ(ok.exit_code, 0) << ok.output;
}

// What Megatron's selective recompute does with a fused attention kernel is said: Megatron-Core
// re-runs it for almost no memory; Megatron-LM's legacy flash branch changes nothing. Judged on
// the plan as its stack runs it (megatron-2022's materialised scores say nothing).
TEST_F(FlagTrapTest, SelectiveRecomputeWithFusedAttentionIsSaidWhatItDoes) {
  const CommandResult r = meshsim(small({"--dp", "8", "--recompute", "selective"}));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("note: selective recompute"));
  EXPECT_THAT(r.output, HasSubstr("re-runs the kernel's forward"));
  const CommandResult legacy = meshsim(small({"--dp", "8", "--recompute", "selective", "--stack",
                                              "megatron-2023", "--attention", "flash"}));
  ASSERT_EQ(legacy.exit_code, 0) << legacy.output;
  EXPECT_THAT(legacy.output, HasSubstr("the same as --recompute none"));
  for (const std::vector<std::string>& naive :
       {std::vector<std::string>{"--attention", "naive"},
        std::vector<std::string>{"--stack", "megatron-2022"}}) {
    std::vector<std::string> args = {"--dp", "8", "--recompute", "selective"};
    args.insert(args.end(), naive.begin(), naive.end());
    const CommandResult n = meshsim(small(args));
    ASSERT_EQ(n.exit_code, 0) << n.output;
    EXPECT_THAT(n.output, Not(HasSubstr("note: selective recompute"))) << naive[1];
  }
}

TEST_F(FlagTrapTest, DegreesThatDoNotMultiplySuggestTheDataParallelDegree) {
  // The default plan (TP 8, PP 4, DP 64) on 512 nodes: DP 128 fills them.
  expect_input_error(meshsim({"--nodes", "512", "--no-trace"}), {"--dp", "expected dp 128"});
}

TEST_F(FlagTrapTest, RunTakesGpus) {
  expect_input_error(meshsim({"run", "--model", "llama3.2-1b", "--cluster", "dgx-h100", "--nodes",
                              "1", "--gpus", "16", "--no-trace"}),
                     {"--gpus", "--nodes"});
  const CommandResult g =
      meshsim({"run", "--model", "llama3.2-1b", "--cluster", "dgx-h100", "--gpus", "16", "--dp",
               "16", "--gbs", "16", "--seq", "2048", "--no-trace", "--json", "g.json"});
  ASSERT_EQ(g.exit_code, 0) << g.output;
  EXPECT_EQ(read_json("g.json").at("devices"), 16);
  expect_input_error(meshsim({"run", "--model", "llama3.2-1b", "--cluster", "dgx-h100", "--gpus",
                              "12", "--no-trace"}),
                     {"--gpus", "multiple of 8"});
}

TEST_F(FlagTrapTest, AnNvl72RackAloneSuggestsANodeCount) {
  expect_input_error(meshsim({"--cluster", "gb200-nvl72", "--no-trace"}),
                     {"--cluster", "--nodes 16", "64 devices"});
}

TEST_F(FlagTrapTest, TheLargestFabricsNameTheKnobThatAttachesThem) {
  // 100,000 GPUs: a 3-tier radix-64 tree attaches 65,536 NICs non-blocking; 4:1 attaches them.
  expect_input_error(meshsim({"--nodes", "12500", "--no-trace"}),
                     {"--oversubscription", "at least 4:1", "at most 3 switch tiers"});
  expect_input_error(meshsim({"--nodes", "12500", "--tiers", "4", "--no-trace"}),
                     {"--tiers", "oversubscription"});
  // With the oversubscription the fabric builds, and the plan's degrees are the next question.
  expect_input_error(meshsim({"--nodes", "12500", "--oversubscription", "4", "--no-trace"}),
                     {"--dp", "expected dp 3125"});
}

TEST_F(FlagTrapTest, RunShowsTheHeadroomEveryCommandKeeps) {
  const CommandResult r = meshsim(small({"--dp", "8"}));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("% of memory free (plan, sweep and the out-of-memory "
                                  "suggestions keep at least 5 %)"));
}

TEST_F(FlagTrapTest, PlanTakesTheStackAttentionAndFabricFlagsRunTakes) {
  const CommandResult r = meshsim(
      {"plan", "--model", "llama3.2-1b", "--cluster", "dgx-h100", "--nodes", "2", "--gbs", "16",
       "--seq", "2048", "--top", "3", "--stack", "fsdp-compile", "--attention", "flash",
       "--oversubscription", "2", "--nic-bandwidth", "200Gbps", "--json", "p.json"});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("within the 5 % headroom"));
  // The fabric flags reach the cluster: a bad value is refused on its flag.
  expect_input_error(meshsim({"plan", "--model", "llama3.2-1b", "--cluster", "dgx-h100",
                              "--nodes", "2", "--oversubscription", "0.5"}),
                     {"--oversubscription", "down:up ratio"});
  const nlohmann::json j = read_json("p.json");
  ASSERT_FALSE(j.at("plans").empty());
  for (const nlohmann::json& p : j.at("plans")) {
    // torchtitan: FSDP2 (zero 3) without a pipeline, zero 1 with one; never plain DDP with TP.
    EXPECT_TRUE(p.at("pp") == 1 ? p.at("zero") != 1 && p.at("zero") != 2 : p.at("zero") == 1)
        << p.dump();
  }
  EXPECT_THAT(j.at("plans").front().at("plan").get<std::string>(), Not(HasSubstr("naive")));
  expect_input_error(meshsim({"plan", "--stack", "deepspeed"}), {"--stack", "deepspeed"});
}

TEST_F(FlagTrapTest, OutOfMemorySuggestionsAreAnnouncedAndKeepTheHeadroom) {
  const CommandResult r =
      meshsim({"run", "--model", "llama3-8b", "--cluster", "dgx-h100", "--nodes", "1", "--dp",
               "8", "--gbs", "8", "--seq", "8192", "--no-trace"});
  EXPECT_EQ(r.exit_code, 3) << r.output;
  EXPECT_THAT(r.output, HasSubstr("meshsim: out of memory: searching for plans that fit"));
  EXPECT_THAT(r.output, HasSubstr("plans that fit with 5 % of memory left free"));
  EXPECT_THAT(r.output, HasSubstr("headroom"));
  expect_no_crash(r);
}

// A trace stops at its limit instead of filling the disk (every rank of a long-sequence step
// writes tens of GB): exit 2 naming --trace-limit, the ranks and how to trace fewer, and no file
// left behind; under the limit the trace is written as before.
TEST_F(FlagTrapTest, ATraceStopsAtItsLimit) {
  std::vector<std::string> traced = small({"--dp", "8", "--trace", "t.json"});
  std::erase(traced, "--no-trace");
  std::vector<std::string> capped = traced;
  capped.insert(capped.end(), {"--trace-limit", "64KiB"});
  const CommandResult over = meshsim(capped);
  EXPECT_EQ(over.exit_code, 2) << over.output;
  EXPECT_THAT(over.output, HasSubstr("--trace-limit"));
  EXPECT_THAT(over.output, HasSubstr("t.json would pass its limit of"));
  EXPECT_THAT(over.output, HasSubstr("--trace-ranks"));
  for (const auto& entry : std::filesystem::directory_iterator(path("."))) {
    ADD_FAILURE() << "left behind: " << entry.path();
  }
  const CommandResult under = meshsim(traced);
  ASSERT_EQ(under.exit_code, 0) << under.output;
  EXPECT_GT(std::filesystem::file_size(path("t.json")), 64u * 1024u);
  std::vector<std::string> bad = traced;
  bad.insert(bad.end(), {"--trace-limit", "lots"});
  expect_input_error(meshsim(bad), {"--trace-limit", "lots"});
  expect_input_error(meshsim(small({"--trace-limit", "1GiB"})), {"--trace-limit", "--no-trace"});
}

}  // namespace
