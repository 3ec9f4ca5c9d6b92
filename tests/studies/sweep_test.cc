// Sweeps: the spec's strict reading, the points' order, parts merged back into the one-process
// result, CSV rows, and the report's plots (Vega specs) built from the points.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <numeric>
#include <sstream>

#include <unistd.h>

#include "meshsim/sim/error.h"
#include "meshsim/studies/report_html.h"
#include "meshsim/studies/sweep.h"

namespace meshsim::studies {

using namespace meshsim::scenario;  // the step these studies run
namespace {

class SweepTest : public ::testing::Test {
 protected:
  std::string write(const nlohmann::json& spec) {
    const std::string path =
        (std::filesystem::temp_directory_path() /
         ("meshsim-sweep-" + std::to_string(::getpid()) + "-" + std::to_string(n_++) + ".json"))
            .string();
    std::ofstream(path) << spec.dump();
    paths_.push_back(path);
    return path;
  }
  void TearDown() override {
    for (const std::string& p : paths_) {
      std::filesystem::remove(p);
    }
  }
  std::string error_of(const nlohmann::json& spec) {
    try {
      load_sweep_spec(write(spec));
    } catch (const InputError& e) {
      return e.what();
    }
    return "no error";
  }
  int n_ = 0;
  std::vector<std::string> paths_;
};

nlohmann::json small_spec() {
  return {{"plans", "given"},
          {"base",
           {{"model", "llama3.2-1b"}, {"cluster", "dgx-h100"}, {"tp", 2}, {"pp", 2}, {"sp", true},
            {"gbs", 16}, {"seq", 1024}}},
          {"axes", {{"gpus", {8, 16}}, {"seq", {1024, 2048}}}}};
}

TEST_F(SweepTest, PointsAreTheProductOfTheAxesInNameOrder) {
  const SweepSpec s = load_sweep_spec(write(small_spec()));
  ASSERT_EQ(s.points(), 4);
  EXPECT_EQ(s.coordinates(0), (nlohmann::json{{"gpus", 8}, {"seq", 1024}}));
  EXPECT_EQ(s.coordinates(1), (nlohmann::json{{"gpus", 8}, {"seq", 2048}}));
  EXPECT_EQ(s.coordinates(3), (nlohmann::json{{"gpus", 16}, {"seq", 2048}}));
  EXPECT_FALSE(s.search);
}

TEST_F(SweepTest, PartsMergeIntoTheOneProcessResult) {
  const SweepSpec s = load_sweep_spec(write(small_spec()));
  const nlohmann::json one = merge_sweep(s, {run_sweep(s, {0, 1}, StepOptions{})});
  const nlohmann::json three = merge_sweep(s, {run_sweep(s, {2, 3}, StepOptions{}),
                                               run_sweep(s, {0, 3}, StepOptions{}),
                                               run_sweep(s, {1, 3}, StepOptions{})});
  EXPECT_EQ(one.dump(), three.dump());
  ASSERT_EQ(one.at("points").size(), 4u);
  // dp fills the devices of each point: 8 / (2 x 2), 16 / (2 x 2).
  EXPECT_EQ(one["points"][0]["rows"][0]["dp"], 2);
  EXPECT_EQ(one["points"][3]["rows"][0]["dp"], 4);
  EXPECT_EQ(one["points"][3]["notes"][0], "dp 4 to fill the 16 devices");
  // The longer sequence takes longer; twice the devices, about half the time.
  const auto step = [&](size_t i) {
    return one["points"][i]["rows"][0]["step_time_s"].get<double>();
  };
  EXPECT_GT(step(1), step(0));
  EXPECT_LT(step(2), 0.7 * step(0));
  std::ostringstream csv;
  write_sweep_csv(one, csv);
  const std::string text = csv.str();
  EXPECT_EQ(text.substr(0, 20), "gpus,seq,rank,plan,t");
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 5);
}

TEST_F(SweepTest, TheReportPlotsEveryPoint) {
  const SweepSpec s = load_sweep_spec(write(small_spec()));
  const nlohmann::json sweep = merge_sweep(s, {run_sweep(s, {0, 1}, StepOptions{})});
  const nlohmann::json charts = sweep_charts(sweep);
  EXPECT_EQ(charts["scaling_tokens"]["data"][0]["values"].size(), 4u);
  // Two series (seq 1024 and 2048), each with two device counts.
  EXPECT_EQ(charts["scaling_tokens"]["data"][0]["values"][0]["s"], "seq=1024");
  // Compute, five exposed kinds and the bubble for each point's best plan.
  EXPECT_EQ(charts["breakdown"]["data"][0]["values"].size(), 4u * 7u);
  // Two pipeline stages per point, six memory categories each.
  EXPECT_EQ(charts["memory"]["data"][0]["values"].size(), 4u * 2u * 6u);
  std::ostringstream html;
  write_sweep_html(sweep, HtmlOptions{}, html);
  EXPECT_NE(html.str().find("meshsimVegaName = \"vega-view\""), std::string::npos);
  EXPECT_EQ(html.str().find("<script src="), std::string::npos);  // nothing loaded from outside
  EXPECT_THROW(write_sweep_html(sweep, HtmlOptions{"/nonexistent"}, html), InputError);
}

TEST_F(SweepTest, BadSpecsNameTheFieldAndWhatWasExpected) {
  nlohmann::json bad = small_spec();
  bad["bogus"] = 1;
  EXPECT_NE(error_of(bad).find("/bogus"), std::string::npos) << error_of(bad);
  bad = small_spec();
  bad["axes"]["gpus"] = nlohmann::json::array();
  EXPECT_NE(error_of(bad).find("/axes/gpus: expected a non-empty array"), std::string::npos)
      << error_of(bad);
  bad = small_spec();
  bad["axes"]["tp"] = {2, -1};
  EXPECT_NE(error_of(bad).find("/axes/tp"), std::string::npos) << error_of(bad);
  bad = small_spec();
  bad["axes"]["colour"] = {"red"};
  EXPECT_NE(error_of(bad).find("colour"), std::string::npos) << error_of(bad);
  bad = small_spec();
  bad["plans"] = "all";
  EXPECT_NE(error_of(bad).find("/plans"), std::string::npos) << error_of(bad);
  bad = small_spec();
  bad["search"] = {{"min_headroom", 2}};
  EXPECT_NE(error_of(bad).find("/search/min_headroom"), std::string::npos) << error_of(bad);
  bad = small_spec();
  bad.erase("axes");
  EXPECT_NE(error_of(bad).find("axes"), std::string::npos) << error_of(bad);
}

// Issue 15: a sweep's points are bounded (2^16) before any is run; eight axes of 256 values made
// 2^64 points, which wrapped to zero in 64 bits (a sweep of nothing, exit 0).
TEST_F(SweepTest, ThePointCountIsBounded) {
  nlohmann::json spec = {{"axes", nlohmann::json::object()}};
  for (const char* field : {"seq", "gbs", "tp", "dp", "pp", "mbs", "cp", "ep"}) {
    std::vector<int64_t> values(256);
    std::iota(values.begin(), values.end(), 1);
    spec["axes"][field] = values;
  }
  EXPECT_NE(error_of(spec).find("/axes: 256 cp x 256 dp x"), std::string::npos) << error_of(spec);
  EXPECT_NE(error_of(spec).find("more than 65536 points"), std::string::npos) << error_of(spec);
  spec = {{"axes",
           {{"seq", std::vector<int64_t>(256, 1024)}, {"tp", std::vector<int64_t>(256, 1)}}}};
  EXPECT_EQ(load_sweep_spec(write(spec)).points(), 65536);  // at the bound
  spec["axes"]["gpus"] = std::vector<int64_t>(70000, 8);
  EXPECT_NE(error_of(spec).find("/axes/gpus: 70000 values"), std::string::npos) << error_of(spec);
  spec = small_spec();
  spec["search"] = {{"top", int64_t{1} << 62}};
  EXPECT_NE(error_of(spec).find("/search/top: 4611686018427387904 is above the limit"),
            std::string::npos)
      << error_of(spec);
}

// A "gpus" axis takes part of one node as well as whole nodes (topology::resize_devices).
TEST_F(SweepTest, AGpusAxisTakesPartOfANode) {
  nlohmann::json spec = small_spec();
  spec["axes"] = {{"gpus", {4, 8}}};
  const SweepSpec s = load_sweep_spec(write(spec));
  const nlohmann::json sweep = merge_sweep(s, {run_sweep(s, {0, 1}, StepOptions{})});
  ASSERT_FALSE(sweep["points"][0].contains("error")) << sweep["points"][0];
  EXPECT_EQ(sweep["points"][0]["rows"][0]["devices"], 4);
  EXPECT_EQ(sweep["points"][0]["rows"][0]["dp"], 1);  // tp 2 x pp 2 fill the four GPUs
  EXPECT_EQ(sweep["points"][1]["rows"][0]["devices"], 8);
}

TEST_F(SweepTest, APointThatCannotRunSaysWhyAndTheOthersRun) {
  nlohmann::json spec = small_spec();
  spec["axes"]["gpus"] = {8, 12};  // 12 GPUs are not whole 8-GPU nodes
  const SweepSpec s = load_sweep_spec(write(spec));
  const nlohmann::json sweep = merge_sweep(s, {run_sweep(s, {0, 1}, StepOptions{})});
  EXPECT_FALSE(sweep["points"][0].contains("error"));
  EXPECT_NE(sweep["points"][2]["error"].get<std::string>().find("whole 8-GPU nodes"),
            std::string::npos);
}

}  // namespace
}  // namespace meshsim::studies

namespace meshsim::studies {
namespace {

// Issue 40: zipped axes advance together, one dimension of the product; a "gpus" axis sizes a
// TPU slice too (the most balanced torus), so GPU against TPU at N chips is one sweep.
TEST_F(SweepTest, ZippedAxesAdvanceTogether) {
  nlohmann::json spec = small_spec();
  spec["axes"] = {{"cluster", {"dgx-h100", "tpu-v5p"}}, {"gpus", {16, 16}}, {"seq", {1024, 2048}}};
  spec["zip"] = nlohmann::json::array({nlohmann::json::array({"cluster", "gpus"})});
  const SweepSpec s = load_sweep_spec(write(spec));
  ASSERT_EQ(s.points(), 4);  // 2 (cluster, gpus) x 2 seq, not 2 x 2 x 2
  EXPECT_EQ(s.coordinates(0),
            (nlohmann::json{{"cluster", "dgx-h100"}, {"gpus", 16}, {"seq", 1024}}));
  EXPECT_EQ(s.coordinates(3),
            (nlohmann::json{{"cluster", "tpu-v5p"}, {"gpus", 16}, {"seq", 2048}}));
  spec["axes"]["gpus"] = {16, 32, 64};
  EXPECT_NE(error_of(spec).find("/zip/0/1"), std::string::npos) << error_of(spec);
  spec["axes"]["gpus"] = {16, 16};
  spec["zip"] = nlohmann::json::array({nlohmann::json::array({"cluster", "nodes"})});
  EXPECT_NE(error_of(spec).find("expected the name of an axis"), std::string::npos);
}

TEST_F(SweepTest, AGpusAxisSizesATpuSlice) {
  EXPECT_EQ(balanced_torus(2048, 3), (std::vector<int64_t>{16, 16, 8}));
  EXPECT_EQ(balanced_torus(256, 2), (std::vector<int64_t>{16, 16}));
  EXPECT_EQ(balanced_torus(16, 3), (std::vector<int64_t>{4, 2, 2}));
  nlohmann::json spec = {
      {"plans", "search"},
      {"search", {{"top", 1}, {"max_simulations", 2}}},
      {"base", {{"model", "llama3.2-1b"}, {"cluster", "dgx-h100"}, {"gbs", 16}, {"seq", 1024}}},
      {"axes", {{"cluster", {"dgx-h100", "tpu-v5p"}}, {"gpus", {16, 16}}}},
      {"zip", nlohmann::json::array({nlohmann::json::array({"cluster", "gpus"})})}};
  const SweepSpec s = load_sweep_spec(write(spec));
  EXPECT_EQ(s.search_options.min_headroom, kDefaultHeadroom);  // the default headroom
  const nlohmann::json sweep = merge_sweep(s, {run_sweep(s, {0, 1}, StepOptions{})});
  const nlohmann::json& points = sweep.at("points");
  ASSERT_EQ(points.size(), 2u);
  for (const nlohmann::json& p : points) {
    ASSERT_FALSE(p.contains("error")) << p.dump();
    EXPECT_EQ(p.at("rows").front().at("devices"), 16) << p.dump();
    EXPECT_EQ(p.at("search").at("min_headroom"), kDefaultHeadroom);
    EXPECT_GE(p.at("rows").front().at("headroom").get<double>(), kDefaultHeadroom);
  }
  EXPECT_EQ(points[1].at("notes").front(), "16 chips: a 4x2x2 torus");
}

}  // namespace
}  // namespace meshsim::studies
