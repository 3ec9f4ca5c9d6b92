// compare_reports: the inputs that changed, every metric's change, and the step's change split
// into compute, exposed communication by kind and idle time, largest first.
#include <gtest/gtest.h>

#include "meshsim/sim/error.h"
#include "meshsim/scenario/compare.h"

namespace meshsim::scenario {
namespace {

nlohmann::json report(double step, double compute, double exposed, double tp, double dp,
                      const std::string& recompute) {
  return {{"simulated", true},
          {"step_time_s", step},
          {"tokens_per_s", 1000.0 / step},
          {"mfu", 0.5 / step},
          {"compute_s", compute},
          {"exposed_comm_s", exposed},
          {"bubble_fraction", 0.1},
          {"peak_memory_bytes", 1000},
          {"inputs", {{"tp", 8}, {"recompute", recompute}}},
          {"exposed_comm_by_kind_s", {{"tp", tp}, {"dp", dp}}},
          {"time_by_op_class_s", {{"matmul", compute * 0.8}, {"norm", compute * 0.2}}}};
}

TEST(CompareReports, SplitsTheStepsChangeLargestFirst) {
  const nlohmann::json a = report(1.0, 0.7, 0.2, 0.15, 0.05, "none");
  const nlohmann::json b = report(1.5, 1.1, 0.3, 0.15, 0.15, "full");
  const nlohmann::json c = compare_reports(a, "a.json", b, "b.json");
  ASSERT_EQ(c["inputs_changed"].size(), 1u);
  EXPECT_EQ(c["inputs_changed"][0]["field"], "recompute");
  EXPECT_EQ(c["inputs_changed"][0]["b"], "full");
  EXPECT_DOUBLE_EQ(c["step_change_s"].get<double>(), 0.5);
  // compute +0.4, exposed dp +0.1, idle (1.5-1.1-0.3) - (1.0-0.7-0.2) = 0.0, exposed tp 0.
  EXPECT_EQ(c["parts"][0]["part"], "compute");
  EXPECT_NEAR(c["parts"][0]["delta_s"].get<double>(), 0.4, 1e-12);
  EXPECT_EQ(c["parts"][1]["part"], "exposed dp");
  EXPECT_NEAR(c["parts"][1]["delta_s"].get<double>(), 0.1, 1e-12);
  EXPECT_EQ(c["op_classes"][0]["class"], "matmul");
  EXPECT_NE(c["verdict"].get<std::string>().find("grew by 500.00 ms (+50.0 %)"), std::string::npos)
      << c["verdict"];
  EXPECT_NE(c["verdict"].get<std::string>().find("compute (+400.00 ms, 80 % of it)"),
            std::string::npos)
      << c["verdict"];
}

TEST(CompareReports, NamesTheFileAndFieldOfABadReport) {
  nlohmann::json bad = report(1.0, 0.7, 0.2, 0.1, 0.1, "none");
  bad.erase("compute_s");
  try {
    compare_reports(report(1.0, 0.7, 0.2, 0.1, 0.1, "none"), "a.json", bad, "b.json");
    FAIL() << "no error";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("b.json: /compute_s"), std::string::npos) << e.what();
  }
  nlohmann::json oom = report(1.0, 0.7, 0.2, 0.1, 0.1, "none");
  oom["simulated"] = false;
  EXPECT_THROW(compare_reports(oom, "a.json", oom, "b.json"), InputError);
}

}  // namespace
}  // namespace meshsim::scenario
