// End-to-end tests of `meshsim validate` and `meshsim calibrate` (cli/src/validate_command.h,
// cli/src/calibrate_command.h, over the validation library), running the real binary
// (MESHSIM_BIN) in a fresh temp directory:
//  * validate on the committed CPU smoke fixture (a real PyTorch CPU trace and its manifest);
//  * malformed manifests: exit 2 with the manifest's path and the JSON pointer in the message;
//  * calibrate recovers known efficiency parameters from SYNTHETIC traces: meshsim simulates
//    steps of eager PyTorch kernels with a profile whose five fitted parameters are set (matmul
//    0.5, memory 0.7, launch 10 us, k_half 48, GEMM call 25 us), writes the timeline as Chrome
//    JSON, and the test rewrites its kernels as a legacy PyTorch profiler trace (the importer's
//    input format): one op per simulated kernel, GEMMs as aten::mm / aten::bmm with their
//    "Input Dims", each inside the record_function range of its class.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "meshsim/validation/manifest.h"
#include "validation_test_util.h"

namespace meshsim::validation::test {
namespace {

using ::testing::HasSubstr;

TEST_F(ValidateTest, SmokeFixtureValidates) {
  const CommandResult r =
      meshsim({"validate", kManifest, "--hardware-profile", kProfile, "--json", "v.json"});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("step time"));
  EXPECT_THAT(r.output, HasSubstr("matmul"));
  EXPECT_THAT(r.output, HasSubstr("largest per-op discrepancies"));
  const nlohmann::json j = read_json("v.json");
  ASSERT_TRUE(j["step_time_error"].is_number());
  EXPECT_TRUE(std::isfinite(j["step_time_error"].get<double>()));
  EXPECT_DOUBLE_EQ(j["measured_step_s"].get<double>(),
                   read_json_file(kManifest)["median_step_time_s"].get<double>());
  EXPECT_NEAR(j["step_time_error"].get<double>(),
              j["simulated_step_s"].get<double>() / j["measured_step_s"].get<double>() - 1, 1e-12);
  ASSERT_TRUE(j["op_classes"].contains("matmul")) << j.dump(2);
  EXPECT_GT(j["op_classes"]["matmul"]["measured_s"].get<double>(), 0);
  EXPECT_GT(j["op_classes"]["matmul"]["simulated_s"].get<double>(), 0);
  EXPECT_TRUE(std::isfinite(j["op_classes"]["matmul"]["error"].get<double>()));
  // The twin's trace and meshsim's plan hold the same GEMMs, shape by shape.
  ASSERT_FALSE(j["gemms"].empty());
  for (const nlohmann::json& g : j["gemms"]) {
    EXPECT_EQ(g["measured_count"], g["simulated_count"]) << g.dump();
  }
}

TEST_F(ValidateTest, MaxStepErrorFailsWithExitCodeFour) {
  const CommandResult strict =
      meshsim({"validate", kManifest, "--hardware-profile", kProfile, "--max-step-error", "1e-9"});
  EXPECT_EQ(strict.exit_code, 4) << strict.output;
  EXPECT_THAT(strict.output, HasSubstr("FAIL: step-time error"));
  const CommandResult loose =
      meshsim({"validate", kManifest, "--hardware-profile", kProfile, "--max-step-error", "100"});
  EXPECT_EQ(loose.exit_code, 0) << loose.output;
  expect_input_error(
      meshsim({"validate", kManifest, "--hardware-profile", kProfile, "--max-step-error", "-1"}),
      {"--max-step-error"});
}

TEST_F(ValidateTest, TraceShowsTheSimulatedAndTheMeasuredStepSideBySide) {
  const CommandResult r = meshsim(
      {"validate", kManifest, "--hardware-profile", kProfile, "--trace", "cmp.json"});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const nlohmann::json t = read_json("cmp.json");
  std::map<int, std::string> processes;
  std::map<int, int> slices;
  std::map<int, double> first;
  for (const nlohmann::json& e : t["traceEvents"]) {
    if (e["ph"] == "M" && e["name"] == "process_name") {
      processes[e["pid"].get<int>()] = e["args"]["name"].get<std::string>();
    } else if (e["ph"] == "X") {
      const int pid = e["pid"].get<int>();
      ++slices[pid];
      const double ts = e["ts"].get<double>();
      first[pid] = first.count(pid) ? std::min(first[pid], ts) : ts;
    }
  }
  EXPECT_THAT(processes[1], HasSubstr("simulated"));
  EXPECT_THAT(processes[2], HasSubstr("measured"));
  // The simulated process holds the plan's kernels, the measured one the ops of a trace step.
  const Manifest m = load_manifest(kManifest);
  EXPECT_EQ(slices[1], static_cast<int>(step_kernels(m).size()));
  EXPECT_EQ(slices[2], 536);  // the median (second) step of the smoke trace
  EXPECT_EQ(first[1], 0.0);
  EXPECT_EQ(first[2], 0.0);
  const CommandResult pf = meshsim(
      {"validate", kManifest, "--hardware-profile", kProfile, "--trace", "cmp.pftrace"});
  ASSERT_EQ(pf.exit_code, 0) << pf.output;
  EXPECT_GT(fs::file_size(path("cmp.pftrace")), 10000u);
  expect_input_error(
      meshsim({"validate", kManifest, "--hardware-profile", kProfile, "--trace", "cmp.txt"}),
      {"--trace", ".pftrace"});
}

TEST_F(ValidateTest, ProfilerCostIsRemovedOnlyWhereTheTrainerMeasuredIt) {
  const CommandResult with = meshsim({"validate", kManifest, "--hardware-profile", kProfile,
                                      "--json", "with.json"});
  ASSERT_EQ(with.exit_code, 0) << with.output;
  EXPECT_THAT(with.output, HasSubstr("(measured by the trainer)"));
  EXPECT_GT(read_json("with.json")["profiler_overhead_per_event_s"].get<double>(), 0);
  nlohmann::json m = smoke_manifest();
  m["trace"].erase("profiler_overhead_per_event_s");
  write_json("m.json", m);
  const CommandResult without =
      meshsim({"validate", "m.json", "--hardware-profile", kProfile, "--json", "without.json"});
  ASSERT_EQ(without.exit_code, 0) << without.output;
  EXPECT_THAT(without.output, HasSubstr("not measured by the trainer: none removed"));
  EXPECT_EQ(read_json("without.json")["profiler_overhead_per_event_s"].get<double>(), 0.0);
  // Either way the classes are rescaled to the unprofiled step, so the step time is the same.
  EXPECT_EQ(read_json("without.json")["simulated_step_s"],
            read_json("with.json")["simulated_step_s"]);
}

TEST_F(ValidateTest, ExecutionSaysWhichKernelsToSimulate) {
  nlohmann::json m = smoke_manifest();
  m.erase("execution");
  write_json("m.json", m);
  expect_input_error(meshsim({"validate", "m.json", "--hardware-profile", kProfile}),
                     {"m.json", "/execution", "kernels"});
  nlohmann::json k = smoke_manifest();
  k["execution"]["kernels"] = "jit";
  write_json("k.json", k);
  expect_input_error(meshsim({"validate", "k.json", "--hardware-profile", kProfile}),
                     {"k.json", "/execution/kernels", "eager"});
  // Fused kernels are fewer and move fewer bytes than eager ones: a shorter simulated step.
  nlohmann::json f = smoke_manifest();
  f["execution"]["kernels"] = "fused";
  f["execution"]["optimizer_kernels"] = "fused";
  write_json("f.json", f);
  ASSERT_EQ(meshsim({"validate", "f.json", "--hardware-profile", kProfile, "--json", "f-v.json"})
                .exit_code, 0);
  ASSERT_EQ(meshsim({"validate", kManifest, "--hardware-profile", kProfile, "--json", "e-v.json"})
                .exit_code, 0);
  EXPECT_LT(read_json("f-v.json")["simulated_step_s"].get<double>(),
            read_json("e-v.json")["simulated_step_s"].get<double>());
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
  EXPECT_THAT(p["chips"][kChip]["efficiency"]["matmul"]["source"].get<std::string>(),
              HasSubstr("fitted by meshsim calibrate"));
  // The written profile is a valid profile.
  EXPECT_EQ(meshsim({"validate", kManifest, "--hardware-profile", "fit.json"}).exit_code, 0);
}

// The record_function range that gives an op its class (none for matmul, elementwise and copy,
// which the op's own name gives), and the op's name (traces/include/meshsim/traces/import.h).
std::string torch_range(const std::string& op_class) {
  static const std::map<std::string, std::string> ranges = {
      {"attention", "attention"}, {"norm", "rmsnorm"}, {"embedding", "embedding"},
      {"loss", "loss"}, {"optimizer", "Optimizer.step#AdamW.step"}};
  const auto it = ranges.find(op_class);
  return it == ranges.end() ? "" : it->second;
}

std::string torch_name(const std::string& op_class) {
  return op_class == "copy" ? "aten::copy_" : op_class == "matmul" ? "aten::mm" : "aten::add";
}

// "BxMxKxN" or "MxKxN" -> PyTorch's Input Dims of bmm or mm.
nlohmann::json input_dims(const std::string& shape) {
  std::vector<int64_t> d;
  std::stringstream in(shape);
  std::string part;
  while (std::getline(in, part, 'x')) {
    d.push_back(std::stoll(part));
  }
  if (d.size() == 3) {
    return {{d[0], d[1]}, {d[1], d[2]}};
  }
  return {{d[0], d[1], d[2]}, {d[0], d[2], d[3]}};
}

// The simulated kernels of `sim` (a meshsim Chrome trace) as two profiler steps of a legacy
// PyTorch trace, one op per kernel, back to back.
nlohmann::json legacy_trace(const nlohmann::json& sim) {
  std::vector<std::pair<double, nlohmann::json>> kernels;
  for (const nlohmann::json& e : sim["traceEvents"]) {
    if (e.value("ph", "") == "X" && e.contains("args") && e["args"].contains("op_class")) {
      kernels.emplace_back(e["ts"].get<double>(), e);
    }
  }
  std::sort(kernels.begin(), kernels.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  nlohmann::json events = nlohmann::json::array();
  auto event = [](const std::string& name, double ts, double dur, nlohmann::json args) {
    return nlohmann::json{{"name", name}, {"ph", "X"}, {"ts", ts}, {"dur", dur}, {"tid", 1},
                          {"pid", "CPU functions"}, {"args", std::move(args)}};
  };
  double t = 10;
  for (int step = 0; step < 2; ++step) {
    const double start = t;
    nlohmann::json ops = nlohmann::json::array();
    for (const auto& [ts, e] : kernels) {
      const double dur = e["dur"].get<double>();
      const std::string cls = e["args"]["op_class"].get<std::string>();
      nlohmann::json args = nlohmann::json::object();
      std::string name = torch_name(cls);
      if (e["args"].contains("shape")) {
        const std::string shape = e["args"]["shape"].get<std::string>();
        args["Input Dims"] = input_dims(shape);
        name = args["Input Dims"][0].size() == 3 ? "aten::bmm" : "aten::mm";
      }
      if (const std::string range = torch_range(cls); !range.empty()) {
        ops.push_back(event(range, t, dur, nlohmann::json::object()));
      }
      ops.push_back(event(name, t, dur, args));
      t += dur;
    }
    events.push_back(event("ProfilerStep#" + std::to_string(step), start, t - start,
                           nlohmann::json::object()));
    for (const nlohmann::json& op : ops) {
      events.push_back(op);
    }
    t += 5;
  }
  return events;
}

// A cluster of one `chip` for `meshsim run`: one node, an NVSwitch domain of one and a one-switch
// fat tree, neither of which a single-device step uses.
nlohmann::json one_device_cluster(const std::string& chip) {
  const nlohmann::json unused = {{"value", 1}, {"source", "unused by a single-device step"}};
  const nlohmann::json latency = {{"value", "1us"}, {"source", "unused by a single-device step"}};
  nlohmann::json radix = unused;
  radix["value"] = 64;
  return {{"description", "one " + chip},
          {"chip", chip},
          {"nodes", 1},
          {"devices_per_node", 1},
          {"scale_up", {{"fabric", "nvswitch"}, {"latency", latency}}},
          {"scale_out",
           {{"fabric", "fat_tree"},
            {"transport", "infiniband"},
            {"rail_optimized", true},
            {"nics_per_device", unused},
            {"tiers", unused},
            {"switch_radix", radix},
            {"oversubscription", unused},
            {"latency", latency}}}};
}

// The base CPU profile with the five fitted parameters set.
nlohmann::json profile_with(double matmul, double memory, const std::string& launch, double k_half,
                            const std::string& call) {
  nlohmann::json profile = read_json_file(kProfile);
  nlohmann::json& eff = profile["chips"][kChip]["efficiency"];
  eff["matmul"]["value"] = matmul;
  eff["memory"]["value"] = memory;
  eff["launch_overhead"]["value"] = launch;
  eff["matmul_shape"]["k_half"]["value"] = k_half;
  eff["matmul_shape"]["call_overhead"]["value"] = call;
  return profile;
}

TEST_F(ValidateTest, CalibrateRecoversKnownParametersFromSyntheticTraces) {
  // The profile with known efficiencies, and calibrate's start far from them.
  write_json("truth.json", profile_with(0.5, 0.7, "10us", 48, "25us"));
  write_json("base.json", profile_with(0.05, 0.2, "1us", 2, "1us"));

  const nlohmann::json smoke = read_json_file(kManifest);
  write_json("model.json", smoke["model"]);
  write_json("cluster.json", one_device_cluster(kChip));

  std::vector<std::string> manifests;
  const std::vector<std::pair<int, int>> shapes = {{2, 64}, {4, 128}, {1, 256}};  // batch, seq
  for (const auto& [batch, seq] : shapes) {
    const std::string tag = std::to_string(batch) + "x" + std::to_string(seq);
    const CommandResult run = meshsim(
        {"run", "--model", "model.json", "--cluster", "cluster.json", "--hardware-catalogue",
         "truth.json", "--mbs", std::to_string(batch), "--gbs", std::to_string(batch), "--seq",
         std::to_string(seq), "--dtype", "fp32", "--attention", "naive", "--kernels", "eager",
         "--optimizer-kernels", "per-tensor", "--trace", "sim-" + tag + ".json", "--json",
         "sim-" + tag + "-report.json"});
    ASSERT_EQ(run.exit_code, 0) << run.output;
    const double step_s =
        read_json("sim-" + tag + "-report.json")["step_time_s"].get<double>();
    write_json("trace-" + tag + ".json", legacy_trace(read_json("sim-" + tag + ".json")));
    nlohmann::json m = smoke;
    m["case"] = "synthetic-" + tag;
    m["batch"] = {{"global_batch", batch}, {"micro_batch", batch}};
    m["seq_len"] = seq;
    m["median_step_time_s"] = step_s;
    m["step_times_s"] = {step_s, step_s};
    m["trace"]["path"] = "trace-" + tag + ".json";
    m["trace"]["profiler_overhead_per_event_s"] = 0.0;
    write_json("manifest-" + tag + ".json", m);
    manifests.push_back("manifest-" + tag + ".json");
  }

  std::vector<std::string> args = {"calibrate"};
  args.insert(args.end(), manifests.begin(), manifests.end());
  for (const char* a : {"--hardware-profile", "base.json", "--out", "fit.json", "--json",
                        "fit-report.json"}) {
    args.emplace_back(a);
  }
  const CommandResult r = meshsim(args);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::cout << r.output;  // the before/after and held-out report, for the log
  EXPECT_THAT(r.output, HasSubstr("held out"));
  const nlohmann::json fitted = read_json("fit.json")["chips"][kChip]["efficiency"];
  auto micros = [](const nlohmann::json& v) {
    const std::string s = v["value"].get<std::string>();
    EXPECT_EQ(s.substr(s.size() - 2), "us");
    return std::stod(s.substr(0, s.size() - 2));
  };
  EXPECT_NEAR(fitted["matmul"]["value"].get<double>(), 0.5, 0.5 * 0.02) << r.output;
  EXPECT_NEAR(fitted["memory"]["value"].get<double>(), 0.7, 0.7 * 0.02) << r.output;
  EXPECT_NEAR(micros(fitted["launch_overhead"]), 10.0, 10.0 * 0.02) << r.output;
  EXPECT_NEAR(fitted["matmul_shape"]["k_half"]["value"].get<double>(), 48, 48 * 0.02) << r.output;
  EXPECT_NEAR(micros(fitted["matmul_shape"]["call_overhead"]), 25.0, 25.0 * 0.02) << r.output;
  // Every case, in and out of the fit, is reproduced.
  const nlohmann::json report = read_json("fit-report.json");
  ASSERT_EQ(report["cases"].size(), 3u);
  for (const nlohmann::json& c : report["cases"]) {
    EXPECT_LT(std::fabs(c["step_time_error_after"].get<double>()), 0.005) << c.dump();
    EXPECT_LT(std::fabs(c["step_time_error_held_out"].get<double>()), 0.005) << c.dump();
    EXPECT_GT(std::fabs(c["step_time_error_before"].get<double>()), 0.5) << c.dump();
  }

  // The fitted profile reproduces the synthetic step times through validate.
  const CommandResult v = meshsim(
      {"validate", manifests.front(), "--hardware-profile", "fit.json", "--json", "v.json"});
  ASSERT_EQ(v.exit_code, 0) << v.output;
  EXPECT_LT(std::fabs(read_json("v.json")["step_time_error"].get<double>()), 0.005)
      << v.output;
}

}  // namespace
}  // namespace meshsim::validation::test
