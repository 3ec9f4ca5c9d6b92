// Cluster fragments (a "base" and the figures written over it, what `meshsim
// calibrate-collectives` writes) and the platform's achieved link fractions (scale_up.efficiency,
// scale_up.nvls_efficiency, scale_out.efficiency), which replace the chip catalogue's.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "meshsim/sim/error.h"
#include "meshsim/topology/cluster.h"
#include "test_files.h"

namespace meshsim::topology {
namespace {

using testing::capture_input_error;
using testing::expect_error;
using testing::write_temp;

nlohmann::json sourced(const nlohmann::json& value) {
  return {{"value", value}, {"source", "a test"}};
}

class ClusterFragmentTest : public ::testing::Test {
 protected:
  Catalogue cat_ = Catalogue::builtin();
  ClusterSpec load(const std::string& path) { return load_cluster(path, cat_); }
};

TEST_F(ClusterFragmentTest, OverlaysAPresetFigureByFigure) {
  const std::string path = write_temp(
      "vm.json", {{"base", "dgx-h100"},
                  {"collectives", {{"launch_floor", sourced("42us")}}},
                  {"scale_up", {{"nvls_efficiency", sourced(0.9)}, {"efficiency", sourced(0.7)}}},
                  {"scale_out", {{"efficiency", sourced(0.8)}}}});
  const ClusterSpec base = load("dgx-h100");
  const ClusterSpec vm = load(path);
  EXPECT_EQ(vm.name, "vm");
  EXPECT_EQ(vm.description, base.description);  // the base's, not given over it
  EXPECT_EQ(vm.collectives.launch_floor, Microseconds(42));
  EXPECT_EQ(vm.collectives.host_cpu, base.collectives.host_cpu);  // kept from the base
  EXPECT_EQ(vm.scale_up_latency, base.scale_up_latency);
  EXPECT_DOUBLE_EQ(vm.chip.nvlink->efficiency, 0.7);
  EXPECT_DOUBLE_EQ(*vm.chip.nvlink->nvls_efficiency, 0.9);
  EXPECT_DOUBLE_EQ(vm.chip.nic_efficiency, 0.8);
  EXPECT_NE(base.chip.nvlink->efficiency, 0.7);
  EXPECT_EQ(vm.sources.at("/collectives/launch_floor"), "a test");
  EXPECT_EQ(vm.sources.at("/scale_up/efficiency"), "a test");
}

// A figure given over the base's replaces it whole: its source never stays the base's.
TEST_F(ClusterFragmentTest, AFigureNeedsItsOwnSource) {
  const std::string path = write_temp(
      "nosource.json",
      {{"base", "dgx-h100"}, {"collectives", {{"launch_floor", {{"value", "42us"}}}}}});
  expect_error(capture_input_error([&] { load(path); }), path,
               "/collectives/launch_floor/source", "required field is missing");
}

TEST_F(ClusterFragmentTest, BaseFileIsRelativeToTheFragment) {
  nlohmann::json base = testing::read_source_json("topology/clusters/dgx-h100.json");
  base["nodes"] = 4;
  write_temp("my-base.json", base);
  const std::string path =
      write_temp("on-file.json", {{"base", "my-base.json"}, {"description", "mine"}});
  const ClusterSpec c = load(path);
  EXPECT_EQ(c.nodes, 4);
  EXPECT_EQ(c.description, "mine");
}

TEST_F(ClusterFragmentTest, BadFragmentsNameTheFragmentThePointerAndWhatWasExpected) {
  const auto error = [&](const std::string& name, const nlohmann::json& doc) {
    const std::string path = write_temp(name, doc);
    return std::pair{path, capture_input_error([&] { load(path); })};
  };
  {
    const auto [p, e] = error("f1.json", {{"base", "dgx-h900"}});
    expect_error(e, p, "/base", "unknown cluster preset \"dgx-h900\"");
  }
  {
    const auto [p, e] = error("f2.json", {{"base", 3}});
    expect_error(e, p, "/base", "expected the name of a cluster preset");
  }
  {
    const auto [p, e] = error("f3.json", {{"base", "missing.json"}});
    expect_error(e, p, "/base", "missing.json");
  }
  {
    write_temp("fragment-base.json", {{"base", "dgx-h100"}});
    const auto [p, e] = error("f4.json", {{"base", "fragment-base.json"}});
    expect_error(e, p, "/base", "not a whole cluster file");
  }
  {
    const auto [p, e] = error("f5.json", {{"base", "dgx-h100"}, {"collectives", nullptr}});
    expect_error(e, p, "/collectives", "cannot remove");
  }
  {
    const auto [p, e] =
        error("f6.json", {{"base", "dgx-h100"}, {"scale_up", {{"efficency", sourced(0.5)}}}});
    expect_error(e, p, "/scale_up/efficency", "unknown field");
  }
  {
    const auto [p, e] =
        error("f7.json", {{"base", "dgx-h100"}, {"scale_up", {{"efficiency", sourced(1.5)}}}});
    expect_error(e, p, "/scale_up/efficiency/value", "");
  }
  {
    const auto [p, e] =
        error("f8.json", {{"base", "dgx-a100"}, {"scale_up", {{"nvls_efficiency", sourced(0.9)}}}});
    expect_error(e, p, "/scale_up/nvls_efficiency", "no NVLink SHARP");
  }
}

// A TPU slice's ICI and DCN fractions.
TEST_F(ClusterFragmentTest, EfficienciesOfATpuSlice) {
  const std::string path = write_temp(
      "tpu.json", {{"base", "tpu-v5p"},
                   {"scale_up", {{"efficiency", sourced(0.5)}}},
                   {"scale_out", {{"efficiency", sourced(0.6)}}}});
  const ClusterSpec c = load(path);
  EXPECT_DOUBLE_EQ(c.chip.ici->efficiency, 0.5);
  EXPECT_DOUBLE_EQ(c.chip.dcn_efficiency, 0.6);
}

}  // namespace
}  // namespace meshsim::topology
