// Issue 16, end to end: the scenario's "faults" block and the fault flags of `meshsim run`, the
// report's fault section, the trace showing the slow rank, and bad input named where it was given.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "command_test.h"

namespace {

using ::testing::HasSubstr;
using meshsim::testing::CommandResult;
using meshsim::testing::expect_input_error;

class FaultsCli : public meshsim::testing::CommandTest {
 protected:
  nlohmann::json scenario() const {
    return {{"model", "llama3.2-1b"}, {"cluster", "dgx-h100"}, {"nodes", 1}, {"dp", 8},
            {"gbs", 16},              {"seq", 2048}};
  }
};

TEST_F(FaultsCli, ScenarioBlockSlowsTheStepAndTheReportSaysWhy) {
  nlohmann::json s = scenario();
  s["faults"] = {{"seed", 3},
                 {"slow_ranks", {{{"rank", 5}, {"factor", 1.5}}}},
                 {"kernel_jitter", 0.0},
                 {"degraded_links", {{{"device", 2}, {"link", "network"}, {"factor", 0.5}}}}};
  write_json("s.json", s);
  const CommandResult r = meshsim({"run", "s.json", "--json", "out.json", "--trace", "t.json"});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("the others wait on rank 5"));
  EXPECT_THAT(r.output, HasSubstr("every rank simulated: the faults make ranks differ"));
  EXPECT_THAT(r.output, HasSubstr("and the slow ranks"));
  const nlohmann::json j = read_json("out.json");
  EXPECT_EQ(j["simulation"]["mode"], "full");
  EXPECT_EQ(j["faults"]["busiest_rank"]["rank"], 5);
  EXPECT_EQ(j["faults"]["slow_ranks"], 1);
  EXPECT_EQ(j["faults"]["degraded_links"], 1);
  EXPECT_GT(j["faults"]["step_growth"].get<double>(), 0.4);
  EXPECT_EQ(j["inputs"]["faults"]["slow_ranks"][0]["rank"], 5);
  // The trace shows the slow rank's track ("rank 0005 compute"); the default selection alone
  // (rank 0, the TP group of rank 0) would not.
  const nlohmann::json t = read_json("t.json");
  bool rank5 = false;
  for (const auto& e : t["traceEvents"]) {
    if (e.value("ph", "") == "M" && e.contains("args") &&
        e["args"].value("name", "").find("rank 0005") != std::string::npos) {
      rank5 = true;
    }
  }
  EXPECT_TRUE(rank5) << "no track of rank 5 in the trace";
  // And a utilisation counter for the degraded NIC (idle here: one node talks over NVLink).
  bool degraded = false;
  for (const auto& e : t["traceEvents"]) {
    degraded |= e.value("ph", "") == "C" &&
                e.value("name", "").rfind("degraded: device 2 network at x0.50", 0) == 0;
  }
  EXPECT_TRUE(degraded) << "no counter for the degraded NIC";
}

TEST_F(FaultsCli, FlagsReplaceTheBlockAndMatchIt) {
  write_json("s.json", scenario());
  const CommandResult a = meshsim({"run", "s.json", "--no-trace", "--json", "a.json",
                                   "--slow-rank", "5:1.5", "--stragglers", "0.25:1.1:1.2",
                                   "--fault-seed", "9", "--kernel-jitter", "0.02"});
  ASSERT_EQ(a.exit_code, 0) << a.output;
  nlohmann::json s = scenario();
  s["faults"] = {{"seed", 9},
                 {"slow_ranks", {{{"rank", 5}, {"factor", 1.5}}}},
                 {"stragglers", {{"fraction", 0.25}, {"min_factor", 1.1}, {"max_factor", 1.2}}},
                 {"kernel_jitter", 0.02}};
  write_json("f.json", s);
  const CommandResult b = meshsim({"run", "f.json", "--no-trace", "--json", "b.json"});
  ASSERT_EQ(b.exit_code, 0) << b.output;
  EXPECT_EQ(read_json("a.json")["step_time_s"], read_json("b.json")["step_time_s"]);
  EXPECT_EQ(read_json("a.json")["inputs"]["faults"], read_json("b.json")["inputs"]["faults"]);
}

TEST_F(FaultsCli, BadFaultsAreNamedWhereTheyWereGiven) {
  nlohmann::json s = scenario();
  s["faults"] = {{"slow_ranks", {{{"rank", 5}, {"factr", 1.5}}}}};
  write_json("s.json", s);
  expect_input_error(meshsim({"run", "s.json", "--no-trace"}), {"s.json", "/faults/slow_ranks/0"});
  s["faults"] = {{"slow_ranks", {{{"rank", 64}, {"factor", 1.5}}}}};
  write_json("s.json", s);
  expect_input_error(meshsim({"run", "s.json", "--no-trace"}),
                     {"s.json", "/faults/slow_ranks/0/rank", "outside the run's 8 ranks"});
  s["faults"] = {{"degraded_links", {{{"device", 1}, {"link", "wifi"}, {"factor", 0.5}}}}};
  write_json("s.json", s);
  expect_input_error(meshsim({"run", "s.json", "--no-trace"}),
                     {"s.json", "/faults/degraded_links/0/link", "wifi"});
  write_json("s.json", scenario());
  expect_input_error(meshsim({"run", "s.json", "--no-trace", "--slow-rank", "5"}),
                     {"--slow-rank", "RANK:FACTOR"});
  expect_input_error(meshsim({"run", "s.json", "--no-trace", "--degrade", "1:network:1.5"}),
                     {"--degrade", "DEVICE:LINK:FACTOR"});
  expect_input_error(meshsim({"run", "s.json", "--no-trace", "--stragglers", "2:1:1"}),
                     {"--stragglers", "FRACTION:MIN:MAX"});
  expect_input_error(meshsim({"run", "s.json", "--no-trace", "--degrade", "9:network:0.5"}),
                     {"--degrade", "device 9 is outside"});
}

}  // namespace
