#include "meshsim/traces/trace_writer.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "test_models.h"
#include "trace_test_support.h"

namespace meshsim::traces {
namespace {

std::string json_trace(TraceOptions options = test::test_options()) {
  return test::write_trace(TraceFormat::kChromeJson, std::move(options));
}

TEST(ChromeTrace, FormatsPicosecondsExactly) {
  EXPECT_EQ(format_us(SimTime::from_ps(1'500'000)), "1.500000");
  EXPECT_EQ(format_us(SimTime::from_ps(7)), "0.000007");
  EXPECT_EQ(format_us(Duration::from_ps(-3'000'001)), "-3.000001");
}

TEST(ChromeTrace, WritesValidJsonWithSlicesTracksCountersAndMetadata) {
  const std::string text = json_trace();
  const auto j = nlohmann::json::parse(text);
  std::map<std::string, int> phases;
  std::set<std::string> metadata_names;
  for (const auto& e : j["traceEvents"]) {
    ++phases[e["ph"].get<std::string>()];
    if (e["ph"] == "M") {
      metadata_names.insert(e["name"].get<std::string>());
    }
    if (e["ph"] == "X") {
      EXPECT_GE(e["dur"].get<double>(), 0.0);
    }
  }
  EXPECT_EQ(phases["X"], 24);  // 4 ranks x 6 ops
  // 3 processes (2 nodes + cluster) x 2 and 12 threads x 2.
  EXPECT_EQ(phases["M"], 3 * 2 + 12 * 2);
  EXPECT_EQ(phases["C"], 4 * 3 + 2);  // 3 memory samples per rank, 2 cluster samples
  EXPECT_EQ(phases["i"], 1);          // the scenario
  // Flows: all-reduce s,t,t,f; two all-gathers s,f; two send/recv s,f.
  EXPECT_EQ(phases["s"], 5);
  EXPECT_EQ(phases["t"], 2);
  EXPECT_EQ(phases["f"], 5);
  EXPECT_EQ(metadata_names, (std::set<std::string>{"process_name", "process_sort_index",
                                                   "thread_name", "thread_sort_index"}));
  EXPECT_EQ(j["metadata"]["model"], "tiny \"test\" model");
  EXPECT_EQ(j["metadata"]["meshsim_version"], "0.1.0");
}

TEST(ChromeTrace, FlowEventsFollowTheirSliceAndShareItsStart) {
  const auto j = nlohmann::json::parse(json_trace());
  const auto& events = j["traceEvents"];
  std::map<int64_t, std::vector<std::string>> phases_by_id;
  for (size_t i = 0; i < events.size(); ++i) {
    const std::string ph = events[i]["ph"];
    if (ph != "s" && ph != "t" && ph != "f") {
      continue;
    }
    ASSERT_GT(i, 0u);
    const auto& slice = events[i - 1];
    ASSERT_EQ(slice["ph"], "X");
    EXPECT_EQ(slice["ts"], events[i]["ts"]);
    EXPECT_EQ(slice["tid"], events[i]["tid"]);
    EXPECT_EQ(events[i]["bp"], "e");
    EXPECT_EQ(slice["args"]["match"], events[i]["id"]);
    phases_by_id[events[i]["id"].get<int64_t>()].push_back(ph);
  }
  for (const auto& [id, phases] : phases_by_id) {
    ASSERT_GE(phases.size(), 2u) << id;
    EXPECT_EQ(phases.front(), "s");
    EXPECT_EQ(phases.back(), "f");
  }
}

TEST(ChromeTrace, CountersSplitTheirNameSoImportersShowTheSameTrack) {
  const auto j = nlohmann::json::parse(json_trace());
  std::set<std::string> tracks;  // "<name> <arg key>", as Perfetto names JSON counter tracks
  for (const auto& e : j["traceEvents"]) {
    if (e["ph"] == "C") {
      for (const auto& [k, v] : e["args"].items()) {
        tracks.insert(e["name"].get<std::string>() + " " + k);
        EXPECT_GE(v.get<double>(), 0.0);
      }
    }
  }
  EXPECT_EQ(tracks,
            (std::set<std::string>{"rank 0000 memory", "rank 0001 memory", "rank 0002 memory",
                                   "rank 0003 memory", "nvlink utilization %"}));
}

TEST(ChromeTrace, EscapesNames) {
  TraceOptions o;
  o.placement = [](RankId r) {
    return RankPlacement{static_cast<int32_t>(r.value()) + 1, fmt::format("gpu {}\n", r.value()),
                         fmt::format("rank {}", r.value())};
  };
  const auto j = nlohmann::json::parse(json_trace(o));
  std::set<std::string> processes;
  bool quoted = false;
  for (const auto& e : j["traceEvents"]) {
    if (e["ph"] == "M" && e["name"] == "process_name") {
      processes.insert(e["args"]["name"].get<std::string>());
    }
    quoted |= e["ph"] == "X" && e["name"] == "fwd qkv \"L0\"";
  }
  EXPECT_TRUE(quoted);
  EXPECT_EQ(processes,
            (std::set<std::string>{"gpu 0\n", "gpu 1\n", "gpu 2\n", "gpu 3\n", "cluster"}));
}

TEST(ChromeTrace, ByteIdenticalAcrossRuns) { EXPECT_EQ(json_trace(), json_trace()); }

// A run without metadata or counters is a valid document.
TEST(ChromeTrace, MinimalRun) {
  testing::PsSimulation sim;
  Program p;
  p.add(testing::compute_op("only", 1'000'000));
  sim.add_rank(sim.add_program(std::move(p)), {}, {});
  std::ostringstream out;
  TraceWriter w(TraceFormat::kChromeJson, sim, out, TraceOptions{});
  sim.run();
  w.finish();
  const auto j = nlohmann::json::parse(out.str());
  EXPECT_EQ(j["traceEvents"].size(), 5u);  // process x2, thread x2, the slice
  EXPECT_EQ(w.events_written(), 5u);
  EXPECT_TRUE(j["metadata"].empty());
}

}  // namespace
}  // namespace meshsim::traces
