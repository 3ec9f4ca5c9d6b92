// Issue 16, end to end: the scenario's "faults" block and the fault flags of `meshsim run`, the
// report's fault section, the trace showing the slow rank, and bad input named where it was given.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "command_test.h"

namespace {

using meshsim::testing::CommandResult;
using meshsim::testing::expect_has_all;
using meshsim::testing::expect_input_error;

class FaultsCli : public meshsim::testing::CommandTest {
 protected:
  nlohmann::json scenario() const {
    return {{"model", "llama3.2-1b"}, {"cluster", "dgx-h100"}, {"nodes", 1}, {"dp", 8},
            {"gbs", 16},              {"seq", 2048}};
  }
  // `meshsim run` refuses the scenario with `faults`: exit 2, and the message has every one of
  // `words`.
  void expect_faults_refused(const nlohmann::json& faults, const std::vector<std::string>& words) {
    nlohmann::json s = scenario();
    s["faults"] = faults;
    write_json("s.json", s);
    expect_input_error(meshsim({"run", "s.json", "--no-trace"}), words);
  }
  // `meshsim run s.json` refuses `flag` with `value`: exit 2, and the message names the flag and
  // says `expected`.
  void expect_flag_refused(const std::string& flag, const std::string& value,
                           const std::string& expected) {
    expect_input_error(meshsim({"run", "s.json", "--no-trace", flag, value}), {flag, expected});
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
  expect_has_all(r.output,
                 {"the others wait on rank 5", "every rank simulated: the faults make ranks differ",
                  "and the slow ranks"});
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
  expect_faults_refused({{"slow_ranks", {{{"rank", 5}, {"factr", 1.5}}}}},
                        {"s.json", "/faults/slow_ranks/0"});
  expect_faults_refused({{"slow_ranks", {{{"rank", 64}, {"factor", 1.5}}}}},
                        {"s.json", "/faults/slow_ranks/0/rank", "outside the run's 8 ranks"});
  expect_faults_refused({{"degraded_links", {{{"device", 1}, {"link", "wifi"}, {"factor", 0.5}}}}},
                        {"s.json", "/faults/degraded_links/0/link", "wifi"});
  write_json("s.json", scenario());
  expect_flag_refused("--slow-rank", "5", "RANK:FACTOR");
  expect_flag_refused("--degrade", "1:network:1.5", "DEVICE:LINK:FACTOR");
  expect_flag_refused("--stragglers", "2:1:1", "FRACTION:MIN:MAX");
  expect_flag_refused("--degrade", "9:network:0.5", "device 9 is outside");
}

// A failed NIC: two nodes, so the data-parallel all-reduce crosses the NICs. The step grows, the
// report says where the traffic went, the trace's counter for the failed NIC shows the load on
// the links it was rerouted over, the flag and the file agree, and the bytes repeat.
TEST_F(FaultsCli, FailedNicIsReroutedAndReported) {
  nlohmann::json s = scenario();
  s["nodes"] = 2;
  s["dp"] = 16;
  s["gbs"] = 32;
  write_json("n.json", s);
  const CommandResult n = meshsim({"run", "n.json", "--no-trace", "--json", "n.out.json"});
  ASSERT_EQ(n.exit_code, 0) << n.output;
  s["faults"] = {{"failed_links", {{{"device", 0}, {"link", "network"}}}}};
  write_json("s.json", s);
  const CommandResult r = meshsim({"run", "s.json", "--json", "out.json", "--trace", "t.json"});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  expect_has_all(r.output, {"1 link down, rerouted",
                            "device 0 network down: rerouted over NVLink to devices 1, 2"});
  const nlohmann::json j = read_json("out.json");
  EXPECT_GT(j["step_time_s"].get<double>(), read_json("n.out.json")["step_time_s"].get<double>());
  EXPECT_EQ(j["faults"]["failed_links"], 1);
  EXPECT_EQ(j["inputs"]["faults"]["failed_links"][0]["device"], 0);
  double peak = 0;
  const nlohmann::json trace = read_json("t.json");
  for (const auto& e : trace["traceEvents"]) {
    if (e.value("ph", "") == "C" &&
        e.value("name", "").rfind("failed: device 0 network down", 0) == 0) {
      for (const auto& kv : e["args"].items()) {
        peak = std::max(peak, kv.value().get<double>());
      }
    }
  }
  EXPECT_GT(peak, 0.0) << "no load on the links the failed NIC's traffic took";
  const CommandResult f = meshsim(
      {"run", "n.json", "--no-trace", "--json", "f.json", "--fail", "0:network"});
  ASSERT_EQ(f.exit_code, 0) << f.output;
  EXPECT_EQ(read_json("f.json")["step_time_s"], j["step_time_s"]);
  EXPECT_EQ(read_json("f.json")["inputs"]["faults"], j["inputs"]["faults"]);
  ASSERT_EQ(meshsim({"run", "n.json", "--no-trace", "--json", "g.json", "--fail", "0:network"})
                .exit_code,
            0);
  EXPECT_EQ(read_file("f.json"), read_file("g.json"));
}

// A model with no plan runs the plan the search picks, with the faults still on it (they were
// dropped with the rest of the scenario when the default plan was swapped for the search's).
TEST_F(FaultsCli, FaultsApplyToTheSearchedPlan) {
  const CommandResult r =
      meshsim({"run", "--model", "llama3.2-1b", "--nodes", "2", "--no-trace", "--fail",
               "0:network", "--slow-rank", "3:1.5"});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  expect_has_all(r.output, {"no plan given", "1 slow rank, up to x1.50; 1 link down, rerouted"});
}

TEST_F(FaultsCli, UnroutableFailuresAreRefusedWhereTheyWereGiven) {
  expect_faults_refused({{"failed_links", {{{"device", 3}, {"link", "nvlink"}}}}},
                        {"s.json", "/faults/failed_links/0/device", "no route is left"});
  expect_faults_refused({{"failed_links", {{{"device", 3}, {"link", "ici"}, {"direction", "w+"}}}}},
                        {"s.json", "/faults/failed_links/0/direction", "x+, x-"});
  write_json("s.json", scenario());
  expect_flag_refused("--fail", "3:nvlink", "only path to the other GPUs");
  expect_flag_refused("--fail", "3", "DEVICE:LINK[:WHICH]");
}

}  // namespace
