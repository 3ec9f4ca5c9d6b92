// Tests of calibration (validation/include/meshsim/validation/calibrate.h) and of `meshsim
// calibrate` (cli/src/calibrate_command.h), the latter running the real binary (MESHSIM_BIN) in a
// fresh temp directory:
//  * the fit's fast prediction is the roofline model, for any efficiency;
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
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "calibrate_fit.h"
#include "meshsim/validation/comparison.h"
#include "meshsim/validation/manifest.h"
#include "meshsim/validation/profile.h"
#include "validation_test_util.h"

namespace meshsim::validation::test {
namespace {

using ::testing::HasSubstr;

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

// The fit's fast prediction (src/calibrate_fit.h: predict) is the roofline model
// (compute_model.h), for any efficiency: the same step and per-class times as simulating the
// kernels on the chip with that efficiency.
TEST(CalibrateModel, PredictionIsTheRooflineModel) {
  const Manifest m = load_manifest(kManifest);
  const Profile profile = load_profile(kProfile);
  const std::vector<StepKernel> kernels = step_kernels(m);
  Measured measured;
  measured.step = Seconds(1);
  const FitCase c = make_fit_case(kernels, profile.chip, measured);
  EXPECT_LT(c.kernels.size(), kernels.size());  // identical kernels merged
  topology::Efficiency e = profile.chip.efficiency;
  ASSERT_TRUE(e.matmul_shape);
  e.matmul = 0.6;
  e.memory = 0.3;
  e.launch_overhead = Microseconds(7);
  e.matmul_shape->k_half = 40;
  e.matmul_shape->call_overhead = Microseconds(30);
  e.memory_by_class[static_cast<size_t>(OpClass::kOptimizer)] = 0.7;
  topology::Efficiency ideal = e;  // every efficiency 1, no overheads
  ideal.matmul = 1;
  ideal.memory = 1;
  ideal.memory_by_class = {};
  ideal.launch_overhead = Duration::zero();
  ideal.matmul_shape->k_half = 0;
  ideal.matmul_shape->call_overhead = Duration::zero();
  // The simulator rounds each kernel's roofline terms up to whole picoseconds (units.h), the
  // prediction does not: at most 2 ps per kernel apart.
  const double rounding = 2e-12 * static_cast<double>(kernels.size());
  for (const topology::Efficiency& q : {profile.chip.efficiency, e}) {
    const Prediction t = predict(c, q);
    topology::Chip chip = profile.chip;
    chip.efficiency = q;
    const Simulated s = simulate_kernels(kernels, chip);
    EXPECT_NEAR(t.step_s, s.step.seconds(), rounding);
    EXPECT_GT(std::fabs(t.step_s - predict(c, ideal).step_s), 1e-4);  // the parameters matter
    for (size_t k = 0; k < t.by_class.size(); ++k) {
      EXPECT_NEAR(t.by_class[k], s.by_class[k].seconds(), rounding) << k;
    }
  }
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

TEST_F(ValidateTest, CalibrateRecoversKnownParametersFromSyntheticTraces) {
  // The profile with known efficiencies.
  nlohmann::json profile = read_json_file(kProfile);
  nlohmann::json& eff = profile["chips"][kChip]["efficiency"];
  eff["matmul"]["value"] = 0.5;
  eff["memory"]["value"] = 0.7;
  eff["launch_overhead"]["value"] = "10us";
  eff["matmul_shape"]["k_half"]["value"] = 48;
  eff["matmul_shape"]["call_overhead"]["value"] = "25us";
  write_json("truth.json", profile);
  // Start calibrate far from the truth.
  eff["matmul"]["value"] = 0.05;
  eff["memory"]["value"] = 0.2;
  eff["launch_overhead"]["value"] = "1us";
  eff["matmul_shape"]["k_half"]["value"] = 2;
  eff["matmul_shape"]["call_overhead"]["value"] = "1us";
  write_json("base.json", profile);

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
