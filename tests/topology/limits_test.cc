// Issue 15: upper bounds on clusters and hardware figures, each stated in a located error, and
// the checked products behind them (sizes whose products wrapped, divided by zero or asked for
// unbounded networks before).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "meshsim/sim/error.h"
#include "meshsim/topology/cluster.h"
#include "meshsim/topology/compute_model.h"
#include "test_files.h"

namespace meshsim::topology {
namespace {

using testing::capture_input_error;
using testing::expect_error;
using ::testing::HasSubstr;
using testing::read_source_json;

struct LimitCase {
  std::string preset;
  std::function<void(nlohmann::json&)> mutate;
  std::string pointer;
  std::string expectation;
};

TEST(ClusterLimits, EverySizeHasAStatedBound) {
  const Catalogue cat = Catalogue::builtin();
  const std::vector<LimitCase> cases = {
      {"dgx-h100", [](auto& d) { d["nodes"] = int64_t{1} << 62; }, "/nodes",
       "is more than 131072 devices, the most meshsim simulates"},
      {"dgx-h100", [](auto& d) { d["devices_per_node"] = int64_t{1} << 40; }, "/devices_per_node",
       "more than 131072 devices"},
      // nodes x devices_per_node wraps to 0 in int64 (2^32 x 2^32).
      {"dgx-h100",
       [](auto& d) {
         d["nodes"] = int64_t{1} << 32;
         d["devices_per_node"] = int64_t{1} << 32;
       },
       "/nodes", "more than 131072 devices"},
      {"tpu-v5p",
       [](auto& d) {
         d["scale_up"]["shape"] = {int64_t{1} << 32, int64_t{1} << 32, 4};
       },
       "/scale_up/shape/0", "has more than 131072 chips"},
      {"tpu-v5e", [](auto& d) { d["slices"] = int64_t{1} << 40; }, "/slices",
       "more than the 131072 chips"},
      {"dgx-h100", [](auto& d) { d["scale_out"]["switch_radix"]["value"] = int64_t{1} << 40; },
       "/scale_out/switch_radix/value", "above the limit of 65536 (2^16)"},
      {"dgx-h100", [](auto& d) { d["scale_out"]["nics_per_device"]["value"] = 100000; },
       "/scale_out/nics_per_device/value", "above the limit of 65536"},
      {"dgx-h100",
       [](auto& d) {
         d["scale_out"]["nic_bandwidth"] = {{"value", "1e308TB/s"}, {"source", "x"}};
       },
       "/scale_out/nic_bandwidth/value", "above the limit of 1 EB/s"},
      {"dgx-h100", [](auto& d) { d["scale_up"]["latency"]["value"] = "2s"; },
       "/scale_up/latency/value", "above the limit of 1 s"},
      {"dgx-h100", [](auto& d) { d["scale_up"]["latency"]["value"] = 1e300; },
       "/scale_up/latency/value", "longer than int64 picoseconds"},
      {"gb200-nvl72", [](auto& d) { d["scale_up"]["domain_devices"] = int64_t{1} << 40; },
       "/scale_up/domain_devices", "more than the 131072 devices"},
      {"dgx-h100", [](auto& d) { d["scale_out"]["tiers"]["value"] = 4; },
       "/scale_out/tiers", "expected 1 to 3 switch tiers"},
      {"dgx-h100", [](auto& d) { d["scale_out"]["nics_per_device"]["value"] = 65536; },
       "/scale_out/nics_per_device", "above the limit of 16 NICs per device"},
      {"dgx-h100", [](auto& d) { d["scale_out"]["oversubscription"]["value"] = 1e300; },
       "/scale_out/oversubscription", "a radix-64 leaf keeps at least one uplink"},
  };
  for (const LimitCase& c : cases) {
    SCOPED_TRACE(c.pointer);
    nlohmann::json doc = read_source_json("topology/clusters/" + c.preset + ".json");
    c.mutate(doc);
    expect_error(capture_input_error([&] { parse_cluster(doc, "c.json", cat); }), "c.json",
                 c.pointer, c.expectation);
  }
}

TEST(ClusterLimits, ResizingPastTheBoundIsRefused) {
  const Catalogue cat = Catalogue::builtin();
  nlohmann::json three_tier = read_source_json("topology/clusters/dgx-h100.json");
  three_tier["scale_out"]["tiers"]["value"] = 3;  // 65,536 NICs
  const ClusterSpec gpu = parse_cluster(three_tier, "c.json", cat);
  EXPECT_THAT(capture_input_error([&] { resize_nodes(gpu, int64_t{1} << 61); }).message(),
              HasSubstr("more than 131072 devices"));
  EXPECT_EQ(resize_nodes(gpu, 8192).device_count(), 65536);  // 3 tiers attach 65,536 NICs
  EXPECT_THAT(capture_input_error([&] { resize_nodes(gpu, 16385); }).message(),
              HasSubstr("16385 nodes x 8 devices is more than 131072 devices"));
  // Tiers are added up to the 3 the network model builds; past that the resize is refused (a 4th
  // tier passed here and was refused later, blamed on the file's /scale_out/tiers).
  nlohmann::json radix8 = read_source_json("topology/clusters/dgx-h100.json");
  radix8["scale_out"]["switch_radix"]["value"] = 8;  // 3 tiers: 128 NICs
  const ClusterSpec small = parse_cluster(radix8, "c.json", cat);
  EXPECT_EQ(resize_nodes(small, 16).fat_tree->tiers, 3);
  EXPECT_THAT(capture_input_error([&] { resize_nodes(small, 64); }).message(),
              HasSubstr("a 3-tier fat tree of radix-8 switches"));
  // A --shape whose extents multiply past 2^64 divided by zero (SIGFPE) before.
  const ClusterSpec tpu = load_cluster("tpu-v5p", cat);
  const InputError e = capture_input_error([&] {
    resize_torus(tpu, {int64_t{1} << 32, int64_t{1} << 32, 4});
  });
  EXPECT_EQ(e.location(), "/scale_up/shape/0");
  EXPECT_THAT(e.message(), HasSubstr("more than 131072 chips"));
  EXPECT_EQ(resize_torus(tpu, {64, 64, 32}).device_count(), 131072);
  EXPECT_THAT(capture_input_error([&] { resize_torus(tpu, {64, 64, 33}); }).message(),
              HasSubstr("more than 131072 chips"));
}

TEST(ClusterLimits, AnExplicitGraphHoldsAtMost2To20Links) {
  nlohmann::json doc = read_source_json("topology/clusters/dgx-h100.json");
  doc["nodes"] = 1;
  doc["devices_per_node"] = 2;
  // The loader counts the links before it reads one, so only the first is a link object (2^20 + 1
  // link objects took over a minute to build and walk under the sanitizers). Were a link read
  // before the count, the error would name /graph/links/1 and this test would fail.
  nlohmann::json links(static_cast<size_t>(kMaxGraphLinks) + 1, nullptr);
  links[0] = {{"a", "gpu0"}, {"b", "gpu1"}, {"bandwidth", "1GB/s"}, {"latency", "1us"}};
  doc["graph"]["links"] = std::move(links);
  expect_error(capture_input_error([&] { parse_cluster(doc, "g.json", Catalogue::builtin()); }),
               "g.json", "/graph/links", "above the limit of 1048576");
}

TEST(ClusterLimits, AnExplicitGraphHoldsAtMost2To17Switches) {
  nlohmann::json doc = read_source_json("topology/clusters/dgx-h100.json");
  doc["nodes"] = 1;
  doc["devices_per_node"] = 2;
  // Counted before a switch is read, as the links are: only the first entry is a switch.
  nlohmann::json switches(static_cast<size_t>(kMaxDevices) + 1, nullptr);
  switches[0] = {{"name", "sw0"}};
  doc["graph"]["switches"] = std::move(switches);
  doc["graph"]["links"] = nlohmann::json::array(
      {{{"a", "gpu0"}, {"b", "gpu1"}, {"bandwidth", "1GB/s"}, {"latency", "1us"}}});
  expect_error(capture_input_error([&] { parse_cluster(doc, "g.json", Catalogue::builtin()); }),
               "g.json", "/graph/switches", "above the limit of 131072");
}

TEST(ClusterLimits, FatTreeCapacitySaturatesInsteadOfWrapping) {
  FatTreeSpec ft;
  ft.tiers = 5;
  ft.switch_radix = 65536;  // 65536 x 65536 x 32768^3: past int64
  EXPECT_EQ(ft.max_endpoints(), std::numeric_limits<int64_t>::max());
  ft.tiers = 2;
  ft.switch_radix = 64;
  EXPECT_EQ(ft.max_endpoints(), 2048);
}

TEST(ChipLimits, HardwareFiguresHaveStatedBounds) {
  const auto chip_error = [](const std::function<void(nlohmann::json&)>& mutate) {
    nlohmann::json doc = read_source_json("topology/chips.json");
    mutate(doc["chips"]["h100-sxm"]);
    return capture_input_error([&] { Catalogue::parse(doc, "chips.json"); });
  };
  const std::string base = "/chips/h100-sxm";
  expect_error(chip_error([](auto& c) { c["peak"]["bf16"]["value"] = "1e308TFLOP/s"; }),
               "chips.json", base + "/peak/bf16/value", "above the limit of 1 ZFLOP/s");
  expect_error(chip_error([](auto& c) { c["gpu"]["sm_count"]["value"] = int64_t{1} << 40; }),
               "chips.json", base + "/gpu/sm_count/value", "above the limit of 65536");
  expect_error(chip_error([](auto& c) { c["gpu"]["boost_clock"]["value"] = "1e9GHz"; }),
               "chips.json", base + "/gpu/boost_clock/value", "above the limit of 100 GHz");
  expect_error(chip_error([](auto& c) { c["efficiency"]["launch_overhead"]["value"] = "1e6s"; }),
               "chips.json", base + "/efficiency/launch_overhead/value", "above the limit of 1 s");
}

TEST(ComputeLimits, GemmTilesAreACheckedProduct) {
  MatmulShapeEfficiency m;
  m.tile_m = 1;
  m.tile_n = 1;
  m.units = 1;
  const int64_t big = int64_t{1} << 31;
  EXPECT_DOUBLE_EQ(gemm_tiling(m, MatmulShape{big, 1, big, 1}).quantization, 1.0);
  // 2^31 x 2^31 x 2^31 tiles: a LimitError, not a wrapped count.
  EXPECT_THROW(gemm_tiling(m, MatmulShape{big, 1, big, big}), LimitError);
  // m near 2^63 no longer overflows ceil(m / tile) (a + b - 1 did).
  m.tile_m = 128;
  EXPECT_GT(gemm_tiling(m, MatmulShape{std::numeric_limits<int64_t>::max(), 1, 1, 1}).quantization,
            0.0);
}

}  // namespace
}  // namespace meshsim::topology
