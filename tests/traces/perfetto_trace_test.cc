#include "meshsim/traces/trace_writer.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <set>

#include "meshsim/sim/error.h"
#include "pftrace_decoder.h"
#include "trace_test_support.h"

namespace meshsim::traces {
namespace {

using test::decode_pftrace;
using test::DecodedSlice;
using test::DecodedTrace;
using test::write_trace;
namespace pb = ::meshsim::perfetto;

std::string pftrace(TraceOptions options = test::test_options()) {
  return write_trace(TraceFormat::kPerfetto, std::move(options));
}

std::string track_name(const DecodedTrace& d, uint64_t uuid) { return d.tracks.at(uuid).name(); }

TEST(PerfettoTrace, DecodesAndEveryBeginHasItsEnd) {
  const DecodedTrace d = decode_pftrace(pftrace());
  EXPECT_TRUE(d.errors.empty()) << fmt::format("{}", fmt::join(d.errors, "\n"));
  // 4 ranks x 6 ops.
  ASSERT_EQ(d.slices.size(), 24u);
  for (const DecodedSlice& s : d.slices) {
    EXPECT_GE(s.end, s.ts) << s.name;
  }
}

TEST(PerfettoTrace, SlicesCarryArgsAndCategories) {
  const DecodedTrace d = decode_pftrace(pftrace());
  const auto qkv = std::find_if(d.slices.begin(), d.slices.end(),
                                [](const DecodedSlice& s) { return s.name == "fwd qkv \"L0\""; });
  ASSERT_NE(qkv, d.slices.end());
  EXPECT_EQ(qkv->category, "compute");
  EXPECT_EQ(qkv->args.at("op_class"), "matmul");
  EXPECT_EQ(qkv->args.at("dtype"), "bf16");
  EXPECT_EQ(qkv->args.at("flops"), "1234567");
  EXPECT_EQ(qkv->args.at("bytes"), "411522");
  EXPECT_EQ(qkv->args.at("shape"), "128x256x512");
  EXPECT_EQ(qkv->args.at("layer"), "0");
  EXPECT_EQ(qkv->args.at("microbatch"), "0");
  EXPECT_EQ(qkv->args.at("stage"), "0");
  EXPECT_EQ(qkv->args.at("tflop_per_s"), "1");  // 1 FLOP per ps
  EXPECT_EQ(qkv->args.at("hbm_gb_per_s"), "333.333");
  EXPECT_EQ(track_name(d, qkv->track), "rank 0000 compute");
  EXPECT_EQ(qkv->ts, 0);
  EXPECT_EQ(qkv->end, 1234);  // 1'234'567 ps floored to ns

  const auto ar = std::find_if(d.slices.begin(), d.slices.end(),
                               [](const DecodedSlice& s) { return s.name == "grad all-reduce"; });
  ASSERT_NE(ar, d.slices.end());
  EXPECT_EQ(ar->category, "collective");
  EXPECT_EQ(ar->args.at("collective"), "all-reduce");
  EXPECT_EQ(ar->args.at("bytes"), "500000");
  EXPECT_EQ(ar->args.at("algbw_gb_per_s"), "250");  // 500 kB in 2 us
  EXPECT_TRUE(ar->args.contains("match"));
}

TEST(PerfettoTrace, FlowsTieCollectivesAndSendRecvPairs) {
  const DecodedTrace d = decode_pftrace(pftrace());
  // Flow id -> slices on it, in sorted (time, file) order, which is the order flows follow.
  std::map<uint64_t, std::vector<const DecodedSlice*>> flows;
  for (const DecodedSlice& s : d.slices) {
    for (const uint64_t id : s.flows) {
      flows[id].push_back(&s);
    }
    for (const uint64_t id : s.terminating) {
      flows[id].push_back(&s);
    }
  }
  // One all-reduce (4 members), two all-gathers (2 each), two send/recv pairs.
  ASSERT_EQ(flows.size(), 5u);
  for (const auto& [id, members] : flows) {
    ASSERT_GE(members.size(), 2u) << "flow " << id;
    for (size_t i = 0; i < members.size(); ++i) {
      const bool last = i + 1 == members.size();
      EXPECT_EQ(members[i]->terminating.size(), last ? 1u : 0u) << "flow " << id << " #" << i;
      EXPECT_EQ(members[i]->ts, members[0]->ts) << "a flow's slices start together";
      EXPECT_EQ(members[i]->args.at("match"), fmt::format("{}", id));
    }
    if (members[0]->category == "p2p") {
      EXPECT_EQ(members[0]->args.at("direction"), "send");
      EXPECT_EQ(members[1]->args.at("direction"), "recv");
    } else {  // collective members in rank order
      for (size_t i = 1; i < members.size(); ++i) {
        EXPECT_LT(track_name(d, members[i - 1]->track), track_name(d, members[i]->track));
      }
    }
  }
}

TEST(PerfettoTrace, TracksAreNamedAndOrderedByRank) {
  const DecodedTrace d = decode_pftrace(pftrace());
  ASSERT_TRUE(d.tracks.contains(0));  // the root descriptor with the ordering hints
  EXPECT_EQ(d.tracks.at(0).process_ordering(), pb::TrackDescriptor::PROCESS_ORDERING_EXPLICIT);
  std::vector<std::pair<int32_t, std::string>> threads;  // (sort rank, name)
  std::map<int32_t, std::string> processes;
  for (const auto& [uuid, t] : d.tracks) {
    if (t.has_thread()) {
      threads.emplace_back(t.sibling_order_rank(), t.name());
      EXPECT_EQ(t.name(), t.thread().thread_name());
      EXPECT_TRUE(d.tracks.contains(process_track_uuid(t.thread().pid()))) << t.name();
    } else if (t.has_process()) {
      processes[t.process().pid()] = t.process().process_name();
    }
  }
  ASSERT_EQ(threads.size(), 12u);  // 4 ranks x 3 streams
  // In sort-rank order, the rank prefixes ("rank 0003") sort by name too: a UI that orders by
  // name keeps the ranks in order (within a rank, "comm k" sorts before "compute").
  std::sort(threads.begin(), threads.end());
  for (size_t i = 1; i < threads.size(); ++i) {
    EXPECT_LE(threads[i - 1].second.substr(0, 9), threads[i].second.substr(0, 9));
    EXPECT_LT(threads[i - 1].first, threads[i].first);
  }
  std::vector<std::string> by_name;
  for (const auto& [rank, name] : threads) {
    by_name.push_back(name);
  }
  std::sort(by_name.begin(), by_name.end());
  for (size_t i = 0; i < by_name.size(); ++i) {
    EXPECT_EQ(by_name[i].substr(0, 9), threads[i].second.substr(0, 9)) << "names sort by rank";
  }
  EXPECT_EQ(threads.front().second, "rank 0000 compute");
  EXPECT_EQ(threads.back().second, "rank 0003 comm 2");
  EXPECT_EQ(processes, (std::map<int32_t, std::string>{
                           {1, "node 0000"}, {2, "node 0001"}, {kClusterPid, "cluster"}}));
}

TEST(PerfettoTrace, CountersForMemoryAndClusterSamples) {
  const DecodedTrace d = decode_pftrace(pftrace());
  int memory_tracks = 0;
  for (const auto& [uuid, samples] : d.counters) {
    const pb::TrackDescriptor& t = d.tracks.at(uuid);
    ASSERT_TRUE(t.has_counter()) << t.name();
    for (const auto& [ts, v] : samples) {
      EXPECT_GE(v, 0.0) << t.name() << " at " << ts;
    }
    if (t.counter().unit() == pb::CounterDescriptor::UNIT_SIZE_BYTES) {
      ++memory_tracks;
      // Weights + optimizer state coalesced into one sample at 0; +8 MiB; -8 MiB.
      ASSERT_EQ(samples.size(), 3u) << t.name();
      EXPECT_EQ(samples[0].second, 192.0 * 1024 * 1024);
      EXPECT_EQ(samples[1].second, 200.0 * 1024 * 1024);
      EXPECT_EQ(samples[2].second, 192.0 * 1024 * 1024);
    } else {
      EXPECT_EQ(t.name(), "nvlink utilization %");
      EXPECT_EQ(t.parent_uuid(), process_track_uuid(kClusterPid));
      EXPECT_EQ(samples, (std::vector<std::pair<int64_t, double>>{{0, 0.0}, {2000, 37.5}}));
    }
  }
  EXPECT_EQ(memory_tracks, 4);
}

TEST(PerfettoTrace, ScenarioMetadataIsAnInstantOnTheClusterProcess) {
  const DecodedTrace d = decode_pftrace(pftrace());
  const auto it = std::find_if(d.events.begin(), d.events.end(), [](const test::DecodedEvent& e) {
    return e.event.type() == pb::TrackEvent::TYPE_INSTANT;
  });
  ASSERT_NE(it, d.events.end());
  EXPECT_EQ(it->event.name(), "scenario");
  EXPECT_EQ(it->track, process_track_uuid(kClusterPid));
  ASSERT_EQ(it->event.debug_annotations_size(), 2);
  EXPECT_EQ(it->event.debug_annotations(0).name(), "model");
  EXPECT_EQ(it->event.debug_annotations(0).string_value(), "tiny \"test\" model");
}

// The writer relies on the trace processor's sort; make sure the test run needs it.
TEST(PerfettoTrace, FileIsNotGloballySortedButEachTrackIs) {
  const DecodedTrace d = decode_pftrace(pftrace());
  EXPECT_TRUE(d.errors.empty());  // includes "time goes back on track"
  bool unsorted = false;
  for (size_t i = 1; i < d.events.size(); ++i) {
    unsorted |= d.events[i].ts < d.events[i - 1].ts;
  }
  EXPECT_TRUE(unsorted);
}

TEST(PerfettoTrace, RankSelectionLimitsTracksAndFlows) {
  TraceOptions o = test::test_options();
  o.include_rank = [](RankId r) { return r.value() <= 1; };
  const DecodedTrace d = decode_pftrace(pftrace(o));
  EXPECT_TRUE(d.errors.empty());
  EXPECT_EQ(d.slices.size(), 12u);
  std::set<uint64_t> flow_ids;
  for (const DecodedSlice& s : d.slices) {
    EXPECT_TRUE(track_name(d, s.track).starts_with("rank 0000") ||
                track_name(d, s.track).starts_with("rank 0001"));
    flow_ids.insert(s.flows.begin(), s.flows.end());
  }
  EXPECT_EQ(flow_ids.size(), 3u);  // all-reduce (2 of 4 traced), all-gather, send/recv
}

TEST(PerfettoTrace, ByteIdenticalAcrossRuns) {
  const std::string a = pftrace();
  EXPECT_EQ(a, pftrace());
  EXPECT_GT(a.size(), 1000u);
}

TEST(PerfettoTrace, CounterTimeMustNotGoBack) {
  test::SmallCluster c;
  std::ostringstream out;
  TraceWriter w(TraceFormat::kPerfetto, c.sim, out, {});
  w.add_counter_sample("ib utilization %", SimTime::from_ps(10), 1.0);
  EXPECT_THROW(w.add_counter_sample("ib utilization %", SimTime::from_ps(9), 1.0), InternalError);
}

TEST(TraceWriter, FormatFromFileName) {
  EXPECT_EQ(trace_format_for_path("out/step.pftrace"), TraceFormat::kPerfetto);
  EXPECT_EQ(trace_format_for_path("step.json"), TraceFormat::kChromeJson);
  EXPECT_EQ(trace_format_for_path("step.txt"), std::nullopt);
  EXPECT_EQ(trace_format_for_path("pftrace"), std::nullopt);
  EXPECT_EQ(trace_format_for_path("step.json.gz"), std::nullopt);
}

// The JSON twin holds the same slices: names, tracks, start and end (ns), args and flows.
TEST(PerfettoTrace, ChromeJsonTwinHoldsTheSameSlices) {
  const DecodedTrace d = decode_pftrace(pftrace());
  const auto j = nlohmann::json::parse(write_trace(TraceFormat::kChromeJson));
  std::map<std::pair<int64_t, int64_t>, std::string> thread_names;  // (pid, tid)
  for (const auto& e : j["traceEvents"]) {
    if (e["ph"] == "M" && e["name"] == "thread_name") {
      thread_names[{e["pid"], e["tid"]}] = e["args"]["name"];
    }
  }
  using Key = std::tuple<std::string, std::string, int64_t, int64_t>;  // track, name, ts, end
  std::map<Key, std::map<std::string, std::string>> json_slices;
  auto ps = [](const nlohmann::json& us) { return std::llround(us.get<double>() * 1e6); };
  for (const auto& e : j["traceEvents"]) {
    if (e["ph"] != "X") {
      continue;
    }
    const int64_t start = ps(e["ts"]);
    const int64_t end = start + ps(e["dur"]);
    std::map<std::string, std::string> args;
    for (const auto& [k, v] : e["args"].items()) {
      args[k] = v.is_string()           ? v.get<std::string>()
                : v.is_number_integer() ? fmt::format("{}", v.get<int64_t>())
                                        : fmt::format("{}", v.get<double>());
    }
    args["category"] = e["cat"];
    json_slices[{thread_names.at({e["pid"], e["tid"]}), e["name"], start / 1000, end / 1000}] =
        args;
  }
  ASSERT_EQ(json_slices.size(), d.slices.size());
  for (const DecodedSlice& s : d.slices) {
    const Key key{track_name(d, s.track), s.name, s.ts, s.end};
    ASSERT_TRUE(json_slices.contains(key)) << s.name << " at " << s.ts;
    auto args = s.args;
    args["category"] = s.category;
    EXPECT_EQ(json_slices.at(key), args) << s.name;
  }
}

}  // namespace
}  // namespace meshsim::traces
