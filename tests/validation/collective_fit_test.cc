// Calibrating a platform's collectives from measured sweeps (validation/collective_fit.h) on the
// committed real sweeps (validation/collectives/logs/, and the check sweeps of
// validation/collectives/sweeps.json): fitted on every other size, the sizes left out predicted
// within 10 % from 64 KiB on (issue 39's target); the fragment it writes loads back and predicts
// what the fit did; the facts a log leaves out are errors on the flag that states them; and
// `meshsim calibrate-collectives` end to end.
#include "meshsim/validation/collective_fit.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <functional>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>

#include "meshsim/collectives/volume.h"
#include "meshsim/sim/error.h"
#include "meshsim/topology/chip.h"
#include "validation_test_util.h"

namespace meshsim::validation::test {
namespace {

using ::testing::HasSubstr;
const std::string kLogs = kSource + "/validation/collectives/logs/";

topology::ClusterSpec cluster(const std::string& name) {
  return topology::load_cluster(name, topology::Catalogue::builtin());
}

// The largest |model / measured - 1| of the points that `fitted` (false: held out) selects, from
// `min_bytes` up, printed per point.
double worst_error(const CollectiveFit& fit, bool fitted, int64_t min_bytes) {
  double worst = 0;
  for (const PointResult& r : fit.points) {
    if (r.fitted != fitted || r.point.bytes < min_bytes) {
      continue;
    }
    const double e = r.calibrated / r.point.time - 1;
    std::cout << fmt::format("  {:>12} {:<13} measured {:>10.2f} us, fitted model {:>10.2f} us "
                             "({:+.1f}%){}\n",
                             r.point.bytes, r.point.column, r.point.time.microseconds(),
                             r.calibrated.microseconds(), 100 * e, fitted ? "" : " held out");
    worst = std::max(worst, std::abs(e));
  }
  return worst;
}

// Fits on every other size (by position in the size-sorted list of the sweep's sizes), from
// 64 KiB on; returns the fit.
CollectiveFit fit_on_half(const topology::ClusterSpec& base, const std::vector<CollectiveSweep>& s) {
  FitOptions o;
  o.min_bytes = KiB(64);
  o.use = [](size_t, const CollectivePoint& p) {
    return static_cast<int64_t>(std::log2(static_cast<double>(p.bytes))) % 2 == 0;
  };
  return fit_collective_platform(base, s, o);
}

const ParameterResult& parameter(const CollectiveFit& f, PlatformParameter p) {
  return f.parameters[static_cast<size_t>(p)];
}

// The motivating case: the 8x H100 Azure VM whose all-reduce takes 42 us from 64 KiB to 1 MiB.
// With NCCL's own choice (ring LL there) the shipped dgx-h100 predicts 19.5 us: +116 % busbw at
// 64 KiB. Fitted on half the sizes (its launch floor), the other half within 10 % from 64 KiB.
TEST(CollectiveFit, AzureH100VmHeldOutHalfWithin10Percent) {
  std::vector<CollectiveSweep> sweeps = read_sweep_file(kLogs + "azure-nd-h100-v5-all_reduce.json");
  ASSERT_EQ(sweeps.size(), 1u);
  EXPECT_EQ(sweeps[0].algorithm, collectives::Algorithm::kNvls);  // as the source ran it
  const topology::ClusterSpec dgx = cluster("dgx-h100");
  for (const collectives::Algorithm algo :
       {collectives::Algorithm::kNvls, collectives::Algorithm::kAuto}) {
    SCOPED_TRACE(std::string(collectives::to_string(algo)));
    sweeps[0].algorithm = algo;
    const CollectiveFit fit = fit_on_half(dgx, sweeps);
    const PointResult& at64k = *std::find_if(fit.points.begin(), fit.points.end(),
                                             [](const PointResult& r) {
                                               return r.point.bytes == 65536;
                                             });
    if (algo == collectives::Algorithm::kAuto) {
      EXPECT_GT(at64k.point.time / at64k.base - 1, 1.0);  // busbw more than twice the measured
    }
    EXPECT_LT(worst_error(fit, /*fitted=*/true, 65536), 0.10);
    EXPECT_LT(worst_error(fit, /*fitted=*/false, 65536), 0.10);
    // The floor is the VM's: 42.0-43.0 us measured from 64 KiB to 1 MiB.
    const ParameterResult& floor = parameter(fit, PlatformParameter::kLaunchFloor);
    EXPECT_TRUE(floor.pinned);
    EXPECT_NEAR(floor.fitted * 1e6, 42.5, 1.0);
    // One node: nothing tells the NICs' rate.
    EXPECT_FALSE(parameter(fit, PlatformParameter::kScaleOutEfficiency).pinned);
    EXPECT_LT(fit.rms_calibrated, fit.rms_base);
  }
}

// NVIDIA's DGX H100 sample (the dev sweep of sweeps.json, as a raw log): NCCL's release is not in
// the log; the dev sweep's 2.30 model.
TEST(CollectiveFit, DgxH100LogHeldOutHalfWithin10Percent) {
  SweepDefaults d;
  d.nccl = collectives::NcclVersion{2, 30};
  const std::vector<CollectiveSweep> sweeps =
      sweeps_from_log(traces::read_nccl_tests_log(kLogs + "dgxc-dgx-h100-all_reduce.log"), d);
  ASSERT_EQ(sweeps.size(), 1u);
  EXPECT_EQ(sweeps[0].points.size(), 64u);  // 32 sizes x out-of-place and in-place
  const CollectiveFit fit = fit_on_half(cluster("dgx-h100"), sweeps);
  EXPECT_LT(worst_error(fit, /*fitted=*/false, 65536), 0.10);
}

// The Azure H200 VM of sweeps.json's check set (busbw by size, NVLS forced, NCCL 2.20.5).
TEST(CollectiveFit, AzureH200VmHeldOutHalfWithin10Percent) {
  const nlohmann::json doc = read_json_file(kSource + "/validation/collectives/sweeps.json");
  CollectiveSweep s;
  for (const auto& sweep : doc.at("sweeps")) {
    if (sweep.at("id") != "azure-nd-h200-v5-allreduce") {
      continue;
    }
    s.label = "azure-nd-h200-v5-allreduce";
    s.ranks = 8;
    s.nccl = collectives::NcclVersion{2, 20};
    s.algorithm = collectives::Algorithm::kNvls;
    for (const auto& p : sweep.at("points")) {
      const auto bytes = p.at("bytes").get<int64_t>();
      const double factor = collectives::bus_bandwidth_factor(CollectiveKind::kAllReduce, 8);
      s.points.push_back({bytes,
                          Seconds(static_cast<double>(bytes) * factor /
                                  (p.at("busbw_gbps").get<double>() * 1e9)),
                          "busbw", "sweeps.json"});
    }
  }
  ASSERT_EQ(s.points.size(), 24u);
  const CollectiveFit fit = fit_on_half(
      cluster(kSource + "/validation/collectives/clusters/azure-nd-h200-v5.json"), {s});
  EXPECT_LT(worst_error(fit, /*fitted=*/false, 65536), 0.10);
}

// The fragment a fit gives loads as a cluster (base + figures) and predicts what the fit did.
TEST(CollectiveFit, FragmentLoadsBackAndPredictsTheFit) {
  const std::vector<CollectiveSweep> sweeps =
      read_sweep_file(kLogs + "azure-nd-h100-v5-all_reduce.json");
  FitOptions o;
  o.min_bytes = KiB(64);
  const CollectiveFit fit = fit_collective_platform(cluster("dgx-h100"), sweeps, o);
  const nlohmann::json doc = cluster_fragment(fit, "dgx-h100", "d", "fitted");
  EXPECT_EQ(doc.at("collectives").at("launch_floor").at("source"), "fitted");
  EXPECT_FALSE(doc.contains("scale_out"));  // unpinned figures are not written
  const topology::ClusterSpec loaded =
      topology::parse_cluster(doc, "frag.json", topology::Catalogue::builtin());
  EXPECT_EQ(loaded.name, "frag");
  EXPECT_EQ(loaded.collectives.launch_floor, fit.fitted.collectives.launch_floor);
  for (const PointResult& r : fit.points) {
    EXPECT_EQ(predict_collective(loaded, sweeps[0], Bytes::of(r.point.bytes)), r.calibrated)
        << r.point.bytes;
  }
}

// A forced algorithm the cluster cannot run is the sweep's input error, for a prediction as for a
// fit: NVLS across two nodes of dgx-h100, whose InfiniBand has no SHARP (a fuzzer finding).
TEST(CollectiveFit, AForcedAlgorithmTheClusterCannotRunNamesTheSweep) {
  std::vector<CollectiveSweep> sweeps = read_sweep_file(kLogs + "azure-nd-h100-v5-all_reduce.json");
  ASSERT_EQ(sweeps[0].algorithm, collectives::Algorithm::kNvls);
  sweeps[0].nodes = 2;
  const auto refused = [&](const std::function<void()>& f) {
    try {
      f();
    } catch (const InputError& e) {
      EXPECT_THAT(e.what(), HasSubstr(sweeps[0].label));
      EXPECT_THAT(e.what(), HasSubstr("needs IB SHARP"));
      return true;
    }
    return false;
  };
  EXPECT_TRUE(refused([&] { (void)predict_collective(cluster("dgx-h100"), sweeps[0], KiB(64)); }));
  EXPECT_TRUE(refused([&] { (void)fit_collective_platform(cluster("dgx-h100"), sweeps, {}); }));
}

traces::NcclTestsLog log_of(const std::string& text, const std::string& name = "t.log") {
  return traces::parse_nccl_tests_log(text, name);
}

const std::string kTable =
    "#  size count type redop root time algbw busbw #wrong time algbw busbw #wrong\n"
    " 1048576 262144 float sum -1 30.0 34.95 61.2 0 30.0 34.95 61.2 0\n";

SweepField field_of(const traces::NcclTestsLog& log, const SweepDefaults& d) {
  try {
    sweeps_from_log(log, d);
  } catch (const SweepError& e) {
    EXPECT_THAT(e.message(), HasSubstr(log.source));
    return e.field();
  }
  ADD_FAILURE() << "no SweepError";
  return SweepField::kColumns;
}

TEST(CollectiveFit, WhatALogLeavesOutIsAnErrorOnThatFact) {
  SweepDefaults d;
  d.ranks = 8;
  d.nodes = 1;
  EXPECT_EQ(field_of(log_of(kTable), d), SweepField::kTest);
  d.test = traces::NcclTest::kAllReduce;
  EXPECT_EQ(field_of(log_of(kTable), d), SweepField::kNccl);
  d.nccl = collectives::NcclVersion{2, 21};
  EXPECT_EQ(sweeps_from_log(log_of(kTable), d).front().points.size(), 2u);
  // The file name names the test when nothing else does.
  SweepDefaults no_test = d;
  no_test.test.reset();
  EXPECT_EQ(sweeps_from_log(log_of(kTable, "x/all_gather_perf.txt"), no_test).front().test,
            traces::NcclTest::kAllGather);
  // A flag that contradicts the log; a release meshsim does not model; a set of algorithms.
  EXPECT_EQ(field_of(log_of("x NCCL version 2.19.3+cuda12\n" + kTable), d), SweepField::kNccl);
  SweepDefaults open = d;
  open.nccl.reset();
  EXPECT_EQ(field_of(log_of("x NCCL version 2.8.4+cuda11\n" + kTable), open), SweepField::kNccl);
  EXPECT_EQ(field_of(log_of("h:1:1 [0] NCCL INFO NCCL_ALGO set by environment to ring,tree\n" +
                            kTable),
                     d),
            SweepField::kAlgorithm);
  EXPECT_EQ(sweeps_from_log(log_of("h:1:1 [0] NCCL INFO NCCL_ALGO set by environment to NVLS\n" +
                                   kTable),
                            d)
                .front()
                .algorithm,
            collectives::Algorithm::kNvls);
  // Devices listed: 2 ranks on 2 hosts; a flag saying otherwise is refused.
  const std::string devices =
      "#  Rank  0 Group  0 Pid 1 on a device  0 [0000:19:00] NVIDIA H100 80GB HBM3\n"
      "#  Rank  1 Group  0 Pid 2 on b device  0 [0000:19:00] NVIDIA H100 80GB HBM3\n";
  EXPECT_EQ(field_of(log_of(devices + kTable), d), SweepField::kRanks);
  SweepDefaults listed = d;
  listed.ranks.reset();
  listed.nodes.reset();
  EXPECT_EQ(sweeps_from_log(log_of(devices + kTable), listed).front().nodes, 2);
  // Host time is refused.
  const std::string cpu =
      "#  size count type redop root cputime algbw busbw #wrong cputime algbw busbw #wrong\n"
      " 1048576 262144 float sum -1 30.0 34.95 61.2 0 30.0 34.95 61.2 0\n";
  EXPECT_EQ(field_of(log_of(cpu), d), SweepField::kColumns);
}

TEST(CollectiveFit, SweepFilesAreReadStrictly) {
  const fs::path dir = fs::temp_directory_path();
  const auto error_of = [&](const nlohmann::json& doc) {
    const fs::path p = dir / "meshsim-sweep-test.json";
    std::ofstream(p) << doc.dump();
    try {
      read_sweep_file(p.string());
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  const nlohmann::json good = {{"source", "s"},   {"test", "all_reduce"}, {"ranks", 8},
                               {"nodes", 1},      {"nccl", "2.18.5"},
                               {"points", {{{"bytes", 1024}, {"time_us", 20.0}}}}};
  EXPECT_EQ(error_of(good), "no error");
  nlohmann::json bad = good;
  bad.erase("source");
  EXPECT_THAT(error_of(bad), HasSubstr("source"));
  bad = good;
  bad["points"][0]["busbw_gbps"] = 1.0;
  EXPECT_THAT(error_of(bad), HasSubstr("/points/0/busbw_gbps: expected one of"));
  bad = good;
  bad["nccl"] = "2.12";
  EXPECT_THAT(error_of(bad), HasSubstr("/nccl"));
  bad = good;
  bad["colour"] = 1;
  EXPECT_THAT(error_of(bad), HasSubstr("colour"));
  bad = good;
  bad["test"] = "gather";
  EXPECT_THAT(error_of(bad), HasSubstr("/test"));
  fs::remove(dir / "meshsim-sweep-test.json");
}

class CalibrateCollectivesTest : public ValidateTest {};

TEST_F(CalibrateCollectivesTest, WritesAFragmentThatRunsAndCollectiveAccept) {
  const CommandResult r =
      meshsim({"calibrate-collectives", kLogs + "azure-nd-h100-v5-all_reduce.json", "--cluster",
               "dgx-h100", "--out", "vm.json", "--json", "fit.json"});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("launch_floor"));
  EXPECT_THAT(r.output, HasSubstr("kept: the points do not pin it down"));
  const nlohmann::json frag = read_json("vm.json");
  EXPECT_EQ(frag.at("base"), "dgx-h100");
  const nlohmann::json fit = read_json("fit.json");
  EXPECT_LT(fit.at("rms_fitted").get<double>(), 0.05);
  // The fragment as a cluster: the collective at 64 KiB now takes the VM's 42 us.
  const CommandResult c = meshsim({"collective", "--cluster", "vm.json", "--nccl", "2.18",
                                   "--algo", "nvls", "--sizes", "64KiB:64KiB", "--json",
                                   "c.json"});
  ASSERT_EQ(c.exit_code, 0) << c.output;
  EXPECT_NEAR(read_json("c.json")[0].at("time_s").get<double>() * 1e6, 42.5, 1.0);
  // And a step on it runs.
  const CommandResult run = meshsim({"--no-trace", "--model", "llama3.2-1b", "--cluster",
                                     "vm.json", "--dp", "8", "--seq", "1024", "--gbs", "8"});
  EXPECT_EQ(run.exit_code, 0) << run.output;
}

TEST_F(CalibrateCollectivesTest, MissingFactsNameTheFlagAndTheLog) {
  expect_input_error(meshsim({"calibrate-collectives", kLogs + "dgxc-dgx-h100-all_reduce.log",
                              "--out", "x.json"}),
                     {"--nccl", "dgxc-dgx-h100-all_reduce.log", "which NCCL release"});
  expect_input_error(meshsim({"calibrate-collectives", kLogs + "sigma2-olivia-gh200-all_reduce.log",
                              "--out", "x.json", "--nccl", "2.18"}),
                     {"--nccl", "says 2.30, but 2.18 was given"});
  expect_input_error(meshsim({"calibrate-collectives", kLogs + "sigma2-olivia-gh200-all_reduce.log",
                              "--out", "x.json"}),
                     {"--cluster", "NVIDIA GH200 120GB", "no preset"});
  expect_input_error(meshsim({"calibrate-collectives", kLogs + "dgxc-dgx-h100-all_reduce.log",
                              "--nccl", "2.30", "--min-size", "1TiB", "--out", "x.json"}),
                     {"no measured point to fit"});
  expect_input_error(meshsim({"calibrate-collectives", kLogs + "dgxc-dgx-h100-all_reduce.log",
                              "--nccl", "2.30", "--cluster", "tpu-v5p", "--out", "x.json"}),
                     {"tpu-v5p"});
  EXPECT_FALSE(fs::exists(path("x.json")));
}

}  // namespace
}  // namespace meshsim::validation::test
