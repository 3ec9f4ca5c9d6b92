// End-to-end tests of `meshsim validate` (cli/src/validate_command.h over the validation library),
// running the real binary (MESHSIM_BIN) in a fresh temp directory:
//  * validate on the committed CPU smoke fixture (a real PyTorch CPU trace and its manifest);
//  * malformed manifests: exit 2 with the manifest's path and the JSON pointer in the message.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
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


}  // namespace
}  // namespace meshsim::validation::test
