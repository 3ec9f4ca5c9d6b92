// End-to-end tests of `meshsim validate` and `meshsim calibrate` (cli/src/validate_command.h,
// cli/src/calibrate.h), running the real binary (MESHSIM_BIN) in a fresh temp directory:
//  * validate on the committed CPU smoke fixture (a real PyTorch CPU trace and its manifest);
//  * malformed manifests: exit 2 with the manifest's path and the JSON pointer in the message;
//  * calibrate recovers known efficiency parameters from SYNTHETIC traces: meshsim simulates a
//    step with a profile whose efficiencies are set (matmul 0.5, memory 0.7, launch 10 us), writes
//    its timeline as Chrome JSON, and the test rewrites the timeline's kernels as a legacy PyTorch
//    profiler trace (the importer's input format), one op per simulated kernel, named so that the
//    importer classifies it as the kernel's class.
#include "calibrate.h"
#include "command_test.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::Not;

using meshsim::testing::CommandResult;

nlohmann::json read_json_file(const fs::path& p) {
  return meshsim::testing::parse_json(meshsim::testing::read_text(p), p.string());
}

const std::string kFixtures = MESHSIM_FIXTURES;
const std::string kSource = MESHSIM_SOURCE_DIR;
const std::string kProfile = kSource + "/validation/profiles/cpu-generic.json";
const std::string kManifest = kFixtures + "/torch_cpu_smoke.manifest.json";

class ValidateTest : public meshsim::testing::CommandTest {
 protected:
  // The smoke manifest with its trace path made absolute, so that the copy can live here.
  nlohmann::json smoke_manifest() const {
    nlohmann::json m = read_json_file(kManifest);
    m["trace"]["path"] = kFixtures + "/torch_cpu_smoke.trace.json.gz";
    return m;
  }

  static void expect_input_error(const CommandResult& r, const std::vector<std::string>& words) {
    meshsim::testing::expect_input_error(r, words);
  }
};

TEST_F(ValidateTest, SmokeFixtureValidates) {
  const CommandResult r =
      meshsim({"validate", kManifest, "--hardware-profile", kProfile, "--json", "v.json"});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("step time"));
  EXPECT_THAT(r.output, HasSubstr("matmul"));
  EXPECT_THAT(r.output, HasSubstr("unclassified"));
  const nlohmann::json j = read_json("v.json");
  ASSERT_TRUE(j["step_time_error"].is_number());
  EXPECT_TRUE(std::isfinite(j["step_time_error"].get<double>()));
  EXPECT_DOUBLE_EQ(j["measured_step_s"].get<double>(), 0.023296574);
  EXPECT_GT(j["simulated_step_s"].get<double>(), 0);
  ASSERT_TRUE(j["op_classes"].contains("matmul")) << j.dump(2);
  EXPECT_GT(j["op_classes"]["matmul"]["measured_s"].get<double>(), 0);
  EXPECT_GT(j["op_classes"]["matmul"]["simulated_s"].get<double>(), 0);
  EXPECT_TRUE(std::isfinite(j["op_classes"]["matmul"]["error"].get<double>()));
}

TEST_F(ValidateTest, NeedsAHardwareProfile) {
  expect_input_error(meshsim({"validate", kManifest}), {"--hardware-profile"});
}

TEST_F(ValidateTest, MissingFieldNamesManifestAndPointer) {
  nlohmann::json m = smoke_manifest();
  m.erase("seq_len");
  write_json("m.json", m);
  expect_input_error(meshsim({"validate", "m.json", "--hardware-profile", kProfile}),
                     {"m.json", "/seq_len"});
  nlohmann::json b = smoke_manifest();
  b["batch"].erase("micro_batch");
  write_json("b.json", b);
  expect_input_error(meshsim({"validate", "b.json", "--hardware-profile", kProfile}),
                     {"b.json", "/batch/micro_batch"});
}

TEST_F(ValidateTest, WrongTypeNamesManifestAndPointer) {
  nlohmann::json m = smoke_manifest();
  m["median_step_time_s"] = "fast";
  write_json("m.json", m);
  expect_input_error(meshsim({"validate", "m.json", "--hardware-profile", kProfile}),
                     {"m.json", "/median_step_time_s"});
  nlohmann::json d = smoke_manifest();
  d["model"]["num_layers"] = -2;
  write_json("d.json", d);
  expect_input_error(meshsim({"validate", "d.json", "--hardware-profile", kProfile}),
                     {"d.json", "/num_layers"});
}

TEST_F(ValidateTest, MissingTraceNamesManifestAndPointer) {
  nlohmann::json m = smoke_manifest();
  m["trace"]["path"] = "no-such-trace.json.gz";
  write_json("m.json", m);
  expect_input_error(meshsim({"validate", "m.json", "--hardware-profile", kProfile}),
                     {"m.json", "/trace/path", "no-such-trace.json.gz"});
}

TEST_F(ValidateTest, MultiDeviceMeshIsNotSupportedYet) {
  nlohmann::json m = smoke_manifest();
  m["mesh"]["data"] = 2;
  write_json("m.json", m);
  expect_input_error(meshsim({"validate", "m.json", "--hardware-profile", kProfile}),
                     {"m.json", "/mesh", "not supported yet"});
}

TEST_F(ValidateTest, CalibrateWithOneManifestSaysLeaveOneOutIsImpossible) {
  const CommandResult r =
      meshsim({"calibrate", kManifest, "--hardware-profile", kProfile, "--out", "fit.json"});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("leave-one-out: impossible"));
  const nlohmann::json p = read_json("fit.json");
  EXPECT_THAT(p["chips"]["cpu-generic"]["efficiency"]["matmul"]["source"].get<std::string>(),
              HasSubstr("fitted by meshsim calibrate from"));
  // The written profile is a valid profile.
  EXPECT_EQ(meshsim({"validate", kManifest, "--hardware-profile", "fit.json"}).exit_code, 0);
}

// A name the importer classifies as `op_class` (traces/include/meshsim/traces/import.h, rule 3).
std::string torch_name(const std::string& op_class) {
  static const std::map<std::string, std::string> names = {
      {"matmul", "aten::mm"},          {"attention", "aten::_softmax"},
      {"elementwise", "aten::add"},    {"norm", "aten::rms_norm"},
      {"embedding", "aten::embedding"}, {"loss", "aten::cross_entropy_loss"},
      {"optimizer", "aten::_fused_adamw_"}, {"copy", "aten::copy_"}};
  return names.at(op_class);
}

TEST_F(ValidateTest, CalibrateRecoversKnownParametersFromSyntheticTraces) {
  // The profile with known efficiencies.
  nlohmann::json profile = read_json_file(kProfile);
  nlohmann::json& eff = profile["chips"]["cpu-generic"]["efficiency"];
  eff["matmul"]["value"] = 0.5;
  eff["memory"]["value"] = 0.7;
  eff["launch_overhead"]["value"] = "10us";
  write_json("truth.json", profile);
  // Start calibrate far from the truth.
  eff["matmul"]["value"] = 0.05;
  eff["memory"]["value"] = 0.2;
  eff["launch_overhead"]["value"] = "1us";
  write_json("base.json", profile);

  const nlohmann::json smoke = read_json_file(kManifest);
  write_json("model.json", smoke["model"]);
  write_json("cluster.json", meshsim::cli::single_device_cluster("cpu-generic"));

  std::vector<std::string> manifests;
  const std::vector<std::pair<int, int>> shapes = {{2, 64}, {4, 128}, {1, 256}};  // batch, seq
  for (const auto& [batch, seq] : shapes) {
    const std::string tag = std::to_string(batch) + "x" + std::to_string(seq);
    const CommandResult run = meshsim(
        {"run", "--model", "model.json", "--cluster", "cluster.json", "--hardware-catalogue",
         "truth.json", "--mbs", std::to_string(batch), "--gbs", std::to_string(batch), "--seq",
         std::to_string(seq), "--attention", "naive", "--trace", "sim-" + tag + ".json", "--json",
         "sim-" + tag + "-report.json"});
    ASSERT_EQ(run.exit_code, 0) << run.output;
    const double step_s =
        read_json("sim-" + tag + "-report.json")["step_time_s"].get<double>();
    // The simulated kernels, in time order, become the ops of two identical profiler steps.
    const nlohmann::json sim = read_json("sim-" + tag + ".json");
    std::vector<std::pair<double, nlohmann::json>> kernels;
    for (const nlohmann::json& e : sim["traceEvents"]) {
      if (e.value("ph", "") == "X" && e.contains("args") && e["args"].contains("op_class")) {
        kernels.emplace_back(e["ts"].get<double>(), e);
      }
    }
    ASSERT_FALSE(kernels.empty()) << "no compute slices with args.op_class in the trace";
    std::sort(kernels.begin(), kernels.end(),
              [](const auto& a, const auto& b) { return a.first < b.first; });
    nlohmann::json events = nlohmann::json::array();
    double t = 10;
    for (int step = 0; step < 2; ++step) {
      const double start = t;
      nlohmann::json ops = nlohmann::json::array();
      for (const auto& [ts, e] : kernels) {
        const double dur = e["dur"].get<double>();
        ops.push_back({{"name", torch_name(e["args"]["op_class"].get<std::string>())},
                       {"ph", "X"}, {"ts", t}, {"dur", dur}, {"tid", 1},
                       {"pid", "CPU functions"}, {"args", nlohmann::json::object()}});
        t += dur;
      }
      events.push_back({{"name", "ProfilerStep#" + std::to_string(step)}, {"ph", "X"},
                        {"ts", start}, {"dur", t - start}, {"tid", 1},
                        {"pid", "CPU functions"}, {"args", nlohmann::json::object()}});
      for (const nlohmann::json& op : ops) {
        events.push_back(op);
      }
      t += 5;
    }
    write_json("trace-" + tag + ".json", events);
    nlohmann::json m = smoke;
    m["case"] = "synthetic-" + tag;
    m["batch"] = {{"global_batch", batch}, {"micro_batch", batch}};
    m["seq_len"] = seq;
    m["median_step_time_s"] = step_s;
    m["step_times_s"] = {step_s, step_s};
    m["trace"]["path"] = "trace-" + tag + ".json";
    write_json("manifest-" + tag + ".json", m);
    manifests.push_back("manifest-" + tag + ".json");
  }

  std::vector<std::string> args = {"calibrate"};
  args.insert(args.end(), manifests.begin(), manifests.end());
  for (const char* a : {"--hardware-profile", "base.json", "--out", "fit.json"}) {
    args.emplace_back(a);
  }
  const CommandResult r = meshsim(args);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("leave-one-out (fit on the others"));
  const nlohmann::json fitted = read_json("fit.json")["chips"]["cpu-generic"]["efficiency"];
  const double matmul = fitted["matmul"]["value"].get<double>();
  const double memory = fitted["memory"]["value"].get<double>();
  const std::string launch = fitted["launch_overhead"]["value"].get<std::string>();
  ASSERT_EQ(launch.substr(launch.size() - 2), "us");
  const double launch_us = std::stod(launch.substr(0, launch.size() - 2));
  std::cout << r.output;  // the before/after and leave-one-out report, for the log
  EXPECT_NEAR(matmul, 0.5, 0.5 * 0.05) << r.output;
  EXPECT_NEAR(memory, 0.7, 0.7 * 0.05) << r.output;
  EXPECT_NEAR(launch_us, 10.0, 10.0 * 0.05) << r.output;

  // The fitted profile reproduces the synthetic step times.
  const CommandResult v = meshsim(
      {"validate", manifests.front(), "--hardware-profile", "fit.json", "--json", "v.json"});
  ASSERT_EQ(v.exit_code, 0) << v.output;
  EXPECT_LT(std::fabs(read_json("v.json")["step_time_error"].get<double>()), 0.02)
      << v.output;
}

}  // namespace
