// Golden traces (docs/style.md D.14c): the trace and report the meshsim command writes for a small
// scenario — 2 pipeline stages x 2 TP x 2 DP, 4 microbatches, 1F1B, every rank traced — must stay
// byte-identical to the files in tests/golden/<case>/, and must be structurally sound.
// Regenerate them on purpose with tools/update_goldens.sh (MESHSIM_UPDATE_GOLDENS=1) and review
// the diff.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>

#include "pftrace_decoder.h"

namespace meshsim {
namespace {

namespace fs = std::filesystem;

const std::string kCase = "pp2_tp2_dp2_1f1b";

std::string read_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

struct Outputs {
  std::string pftrace;
  std::string json_trace;
  std::string report;
};

// Runs the scenario from inside the case directory (its model path is relative), writing to a
// scratch directory.
Outputs run_case(const std::string& tag) {
  const fs::path dir = fs::path(MESHSIM_GOLDEN_DIR) / kCase;
  const fs::path out = fs::path(::testing::TempDir()) / ("golden_" + tag);
  fs::create_directories(out);
  for (const char* trace : {"trace.pftrace", "trace.json"}) {
    const std::string cmd = "cd '" + dir.string() + "' && '" MESHSIM_BIN "' run scenario.json " +
                            "--trace-ranks all --trace '" + (out / trace).string() + "' --json '" +
                            (out / "report.json").string() + "' > /dev/null 2>&1";
    const int status = std::system(cmd.c_str());
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << cmd;
  }
  return {read_file(out / "trace.pftrace"), read_file(out / "trace.json"),
          read_file(out / "report.json")};
}

// The scenario marker carries meshsim's version and the commit it was built from
// ("meshsim_version"), which changes with every commit. The golden files hold a placeholder there;
// the outputs are compared with theirs replaced by it, and everything else byte for byte.
const std::string kVersionPlaceholder = "@MESHSIM_VERSION@";

std::string pftrace_with_placeholder(const std::string& bytes) {
  perfetto::Trace trace;
  if (!trace.ParseFromString(bytes)) {
    return bytes;  // compared as it is, and the structure test says what is wrong
  }
  for (perfetto::TracePacket& p : *trace.mutable_packet()) {
    if (!p.has_track_event()) {
      continue;
    }
    for (perfetto::DebugAnnotation& a : *p.mutable_track_event()->mutable_debug_annotations()) {
      if (a.name() == "meshsim_version") {
        a.set_string_value(kVersionPlaceholder);
      }
    }
  }
  return trace.SerializeAsString();
}

std::string json_with_placeholder(const std::string& text) {
  static const std::regex version("\"meshsim_version\":\"[^\"]*\"");
  return std::regex_replace(text, version, "\"meshsim_version\":\"" + kVersionPlaceholder + "\"");
}

Outputs with_placeholders(const Outputs& o) {
  return {pftrace_with_placeholder(o.pftrace), json_with_placeholder(o.json_trace),
          json_with_placeholder(o.report)};
}

// What `meshsim --version` prints after "meshsim ".
std::string binary_version() {
  FILE* pipe = popen("'" MESHSIM_BIN "' --version", "r");
  std::string out;
  if (pipe != nullptr) {
    char buf[256];
    while (fgets(buf, sizeof buf, pipe) != nullptr) {
      out += buf;
    }
    pclose(pipe);
  }
  const std::string prefix = "meshsim ";
  if (out.rfind(prefix, 0) == 0) {
    out = out.substr(prefix.size());
  }
  while (!out.empty() && (out.back() == '\n' || out.back() == '\r')) {
    out.pop_back();
  }
  return out;
}

bool updating() {
  const char* v = std::getenv("MESHSIM_UPDATE_GOLDENS");
  return v != nullptr && std::string(v) == "1";
}

TEST(Golden, TraceAndReportMatchByteForByte) {
  const Outputs got = with_placeholders(run_case("a"));
  const fs::path dir = fs::path(MESHSIM_GOLDEN_DIR) / kCase;
  const std::map<std::string, const std::string*> files = {
      {"trace.pftrace", &got.pftrace}, {"trace.json", &got.json_trace}, {"report.json", &got.report}};
  for (const auto& [name, bytes] : files) {
    ASSERT_FALSE(bytes->empty()) << name;
    if (updating()) {
      std::ofstream(dir / name, std::ios::binary) << *bytes;
      std::printf("[ UPDATED  ] %s\n", (dir / name).c_str());
      continue;
    }
    const std::string want = read_file(dir / name);
    EXPECT_TRUE(want == *bytes) << name << " differs from the golden file (" << want.size()
                                << " vs " << bytes->size()
                                << " bytes); if the change is intended, run tools/update_goldens.sh "
                                   "and review the diff";
  }
}

TEST(Golden, TwoRunsAreIdentical) {
  const Outputs a = run_case("b");
  const Outputs b = run_case("c");
  EXPECT_TRUE(a.pftrace == b.pftrace);
  EXPECT_TRUE(a.json_trace == b.json_trace);
  EXPECT_EQ(a.report, b.report);
}

// The trace names the binary's version and commit, as --version prints them.
TEST(Golden, TraceCarriesTheVersion) {
  const Outputs got = run_case("e");
  const std::string version = binary_version();
  ASSERT_NE(version.find("(commit "), std::string::npos) << version;
  const auto j = nlohmann::json::parse(got.json_trace);
  EXPECT_EQ(j["metadata"]["meshsim_version"], version);
  const traces::test::DecodedTrace d = traces::test::decode_pftrace(got.pftrace);
  int found = 0;
  for (const auto& e : d.events) {
    for (const auto& a : e.event.debug_annotations()) {
      if (a.name() == "meshsim_version") {
        EXPECT_EQ(a.string_value(), version);
        ++found;
      }
    }
  }
  EXPECT_EQ(found, 1);
}

// The structure a trace reader relies on, checked on the decoded file.
TEST(Golden, StructureIsSound) {
  const Outputs got = run_case("d");
  const traces::test::DecodedTrace d = traces::test::decode_pftrace(got.pftrace);
  for (const std::string& e : d.errors) {
    ADD_FAILURE() << e;
  }
  // Every rank of the 2 x 2 x 2 run has a compute track.
  int compute_tracks = 0;
  for (const auto& [uuid, t] : d.tracks) {
    if (t.name().ends_with(" compute")) {
      ++compute_tracks;
    }
  }
  EXPECT_EQ(compute_tracks, 8);
  // Slices never overlap on a track; timestamps rise per track.
  std::map<uint64_t, int64_t> last_end;
  std::map<uint64_t, int> flow_slices;
  for (const auto& s : d.slices) {
    auto [it, fresh] = last_end.emplace(s.track, s.end);
    if (!fresh) {
      EXPECT_LE(it->second, s.ts) << s.name;
      it->second = s.end;
    }
    EXPECT_LE(s.ts, s.end) << s.name;
    for (const uint64_t f : s.flows) {
      ++flow_slices[f];
    }
    for (const uint64_t f : s.terminating) {
      ++flow_slices[f];
    }
  }
  EXPECT_GT(d.slices.size(), 1000u);
  EXPECT_FALSE(flow_slices.empty());
  for (const auto& [id, n] : flow_slices) {
    EXPECT_GE(n, 2) << "flow " << id << " has one end";
  }
  for (const auto& [track, samples] : d.counters) {
    for (const auto& [ts, v] : samples) {
      EXPECT_GE(v, 0.0) << "counter on track " << track << " at " << ts;
    }
  }
  // The JSON twin holds the same slices.
  const auto j = nlohmann::json::parse(got.json_trace);
  size_t complete = 0;
  for (const auto& e : j["traceEvents"]) {
    complete += e["ph"] == "X" ? 1u : 0u;
  }
  EXPECT_EQ(complete, d.slices.size());
}

}  // namespace
}  // namespace meshsim
