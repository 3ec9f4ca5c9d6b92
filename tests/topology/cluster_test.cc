#include "meshsim/topology/cluster.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <limits>
#include <string>
#include <vector>

#include "meshsim/sim/error.h"
#include "test_files.h"

namespace meshsim::topology {
namespace {

using testing::capture_input_error;
using testing::expect_error;
using testing::read_source_json;
using ::testing::HasSubstr;
using testing::write_temp;

class ClusterTest : public ::testing::Test {
 protected:
  Catalogue cat_ = Catalogue::builtin();
  ClusterSpec load(const std::string& name) { return load_cluster(name, cat_); }
};

TEST_F(ClusterTest, EveryPresetLoadsWithTheRightDeviceCount) {
  const std::vector<std::pair<std::string, int64_t>> expected = {
      {"dgx-a100", 8},  {"dgx-b200", 8},  {"dgx-h100", 8},  {"gb200-nvl72", 72},
      {"h200", 8},      {"tpu-v3", 1024}, {"tpu-v4", 64},   {"tpu-v5e", 256},
      {"tpu-v5p", 64},  {"tpu-v6e", 256}};
  std::vector<std::string> names;
  for (const auto& [name, devices] : expected) {
    SCOPED_TRACE(name);
    names.push_back(name);
    const ClusterSpec spec = load(name);
    EXPECT_EQ(spec.device_count(), devices);
    EXPECT_EQ(spec.name, name);
    EXPECT_FALSE(spec.description.empty());
    EXPECT_GT(spec.intra_node_bandwidth().value(), 0.0);
    EXPECT_GT(spec.inter_node_bandwidth().value(), 0.0);
    EXPECT_GT(spec.intra_node_latency().ps(), 0);
    EXPECT_GT(spec.inter_node_latency().ps(), 0);
    EXPECT_FALSE(spec.sources.at("/scale_up/latency").empty());
    EXPECT_FALSE(spec.sources.at("/scale_out/latency").empty());
  }
  EXPECT_EQ(cluster_presets(), names);
}

TEST_F(ClusterTest, DgxH100) {
  const ClusterSpec spec = load("dgx-h100");
  EXPECT_EQ(spec.chip.name, "h100-sxm");
  EXPECT_EQ(spec.nodes, 1);
  EXPECT_EQ(spec.devices_per_node, 8);
  EXPECT_EQ(spec.scale_up, ScaleUpFabric::kNvSwitch);
  EXPECT_EQ(spec.scale_up_domain_size(), 8);
  EXPECT_DOUBLE_EQ(spec.intra_node_bandwidth().value(), 450e9);  // 18 x 25 GB/s per direction
  EXPECT_DOUBLE_EQ(spec.inter_node_bandwidth().value(), 50e9);   // 400 Gb/s
  EXPECT_EQ(spec.intra_node_latency(), Microseconds(3.4));
  EXPECT_EQ(spec.inter_node_latency(), Microseconds(14));
  ASSERT_TRUE(spec.fat_tree.has_value());
  EXPECT_EQ(spec.fat_tree->transport, Transport::kInfiniBand);
  EXPECT_TRUE(spec.fat_tree->rail_optimized);
  EXPECT_EQ(spec.fat_tree->tiers, 2);
  EXPECT_EQ(spec.fat_tree->max_endpoints(), 2048);  // 64 x 32
  EXPECT_FALSE(spec.sources.at("/scale_out/switch_radix").empty());
}

TEST_F(ClusterTest, DgxA100AndGb200) {
  const ClusterSpec a100 = load("dgx-a100");
  EXPECT_DOUBLE_EQ(a100.intra_node_bandwidth().value(), 300e9);
  EXPECT_DOUBLE_EQ(a100.inter_node_bandwidth().value(), 25e9);  // 200 Gb/s HDR
  EXPECT_EQ(a100.fat_tree->max_endpoints(), 40 * 20 * 20);

  const ClusterSpec gb = load("gb200-nvl72");
  EXPECT_EQ(gb.scale_up, ScaleUpFabric::kNvlinkDomain);
  EXPECT_EQ(gb.scale_up_domain_size(), 72);
  EXPECT_EQ(gb.scale_up_domains(), 1);
  EXPECT_EQ(gb.nodes, 18);
  EXPECT_DOUBLE_EQ(gb.intra_node_bandwidth().value(), 900e9);
}

TEST_F(ClusterTest, TpuSlices) {
  const ClusterSpec v5p = load("tpu-v5p");
  EXPECT_EQ(v5p.torus_shape, (std::vector<int64_t>{4, 4, 4}));
  EXPECT_EQ(v5p.torus_wraparound, (std::vector<bool>{true, true, true}));
  EXPECT_EQ(v5p.nodes, 16);
  EXPECT_DOUBLE_EQ(v5p.intra_node_bandwidth().value(), 90e9);  // one ICI link
  EXPECT_DOUBLE_EQ(v5p.scale_up_bandwidth().value(), 540e9);   // six links
  EXPECT_DOUBLE_EQ(v5p.inter_node_bandwidth().value(), Gbps(50).value());
  EXPECT_EQ(v5p.intra_node_latency(), Microseconds(1));

  const ClusterSpec v5e = load("tpu-v5e");
  EXPECT_EQ(v5e.torus_shape, (std::vector<int64_t>{16, 16}));
  EXPECT_EQ(v5e.torus_wraparound, (std::vector<bool>{true, true}));
  EXPECT_EQ(v5e.devices_per_node, 8);
  EXPECT_EQ(v5e.nodes, 32);

  const ClusterSpec v3 = load("tpu-v3");  // the whole 1024-chip pod
  EXPECT_EQ(v3.torus_shape, (std::vector<int64_t>{32, 32}));
  EXPECT_EQ(v3.torus_wraparound, (std::vector<bool>{true, true}));
  EXPECT_EQ(v3.devices_per_node, 4);
  EXPECT_EQ(v3.nodes, 256);
  EXPECT_DOUBLE_EQ(v3.intra_node_bandwidth().value(), 100e9);  // one ICI link
  EXPECT_DOUBLE_EQ(v3.scale_up_bandwidth().value(), 400e9);    // four links
  EXPECT_DOUBLE_EQ(v3.inter_node_bandwidth().value(), Gbps(50).value());
}

TEST_F(ClusterTest, ResizeNodes) {
  const ClusterSpec big = resize_nodes(load("dgx-h100"), 256);
  EXPECT_EQ(big.device_count(), 2048);  // fills the 2-tier radix-64 tree exactly
  const ClusterSpec gb = resize_nodes(load("gb200-nvl72"), 36);
  EXPECT_EQ(gb.device_count(), 144);
  EXPECT_EQ(gb.scale_up_domains(), 2);
  // 16 of an NVL72 rack's 18 trays: one NVLink domain of the 64 GPUs, no network between them.
  const ClusterSpec part = resize_nodes(load("gb200-nvl72"), 16);
  EXPECT_EQ(part.device_count(), 64);
  EXPECT_EQ(part.scale_up_domain_size(), 64);
  EXPECT_EQ(part.scale_up_domains(), 1);
  EXPECT_NE(part.description.find("64 of one 72-GPU NVLink domain"), std::string::npos);
}

// 2 or 4 GPUs of an 8-GPU node: one node of that many GPUs, each with its own NVLink links through
// the switch and its own NIC; a multiple of the node is whole nodes; anything else is refused.
TEST_F(ClusterTest, ResizeDevicesTakesWholeNodesOrPartOfOne) {
  const ClusterSpec h100 = load("dgx-h100");
  const ClusterSpec two = resize_devices(h100, 2);
  EXPECT_EQ(two.nodes, 1);
  EXPECT_EQ(two.devices_per_node, 2);
  EXPECT_EQ(two.device_count(), 2);
  EXPECT_DOUBLE_EQ(two.scale_up_bandwidth().value(), h100.scale_up_bandwidth().value());
  EXPECT_NE(two.description.find("2 GPUs of one 8-GPU node"), std::string::npos);
  EXPECT_EQ(resize_devices(h100, 16).nodes, 2);
  EXPECT_EQ(resize_devices(h100, 16).devices_per_node, 8);
  // A GB200 tray is 4 GPUs: 2 of one, one NVLink domain of 2.
  const ClusterSpec gb = resize_devices(load("gb200-nvl72"), 2);
  EXPECT_EQ(gb.device_count(), 2);
  EXPECT_EQ(gb.scale_up_domain_size(), 2);
  const std::string src = "builtin:topology/clusters/dgx-h100.json";
  for (const int64_t bad : {3, 12, 0, -2}) {
    expect_error(capture_input_error([&] { resize_devices(h100, bad); }), src, "/nodes",
                 "expected whole 8-GPU nodes (a multiple of 8) or part of one node (a divisor "
                 "of 8)");
  }
  expect_error(capture_input_error([&] { resize_devices(load("tpu-v5e"), 4); }),
               "builtin:topology/clusters/tpu-v5e.json", "/nodes", "sized by its torus shape");
}

TEST_F(ClusterTest, ResizeNodesValidates) {
  const ClusterSpec h100 = load("dgx-h100");
  const std::string src = "builtin:topology/clusters/dgx-h100.json";
  expect_error(capture_input_error([&] { resize_nodes(h100, 0); }), src, "/nodes",
               "expected a positive number of nodes");
  expect_error(capture_input_error([&] { resize_nodes(h100, -3); }), src, "/nodes",
               "expected a positive number of nodes");
  // Issue 12: more than 2048 GPUs without editing the file: the fat tree grows a tier.
  const ClusterSpec big = resize_nodes(h100, 257);
  EXPECT_EQ(big.fat_tree->tiers, 3);
  EXPECT_NE(big.description.find("3 switch tiers for 2056 NICs"), std::string::npos);
  EXPECT_EQ(resize_nodes(h100, 256).fat_tree->tiers, 2);
  expect_error(capture_input_error([&] { resize_nodes(load("gb200-nvl72"), 20); }),
               "builtin:topology/clusters/gb200-nvl72.json", "/nodes",
               "not a whole number of 72-device NVLink domains");
  expect_error(capture_input_error([&] { resize_nodes(load("tpu-v5p"), 32); }),
               "builtin:topology/clusters/tpu-v5p.json", "/nodes", "sized by its torus shape");
}

// Issue 12: the fabric knobs (flags and scenario keys) without editing the file.
TEST_F(ClusterTest, FabricOverrides) {
  const ClusterSpec h100 = resize_nodes(load("dgx-h100"), 64);
  FabricOverrides o;
  o.oversubscription = 4.0;
  o.nics_per_device = 2;
  o.nic_bandwidth = Gbps(200);
  o.rail_optimized = false;
  o.sharp = true;
  const ClusterSpec c = override_fabric(h100, o);
  EXPECT_EQ(c.fat_tree->oversubscription, 4.0);
  EXPECT_EQ(c.fat_tree->nics_per_device, 2);
  EXPECT_EQ(c.fat_tree->nic_bandwidth, Gbps(200));
  EXPECT_FALSE(c.fat_tree->rail_optimized);
  EXPECT_TRUE(c.fat_tree->sharp);
  EXPECT_NE(c.description.find("oversubscription 4:1"), std::string::npos);
  EXPECT_EQ(override_fabric(h100, {}).description, h100.description);  // nothing asked
  auto field_of = [&](FabricOverrides bad) {
    try {
      override_fabric(h100, bad);
    } catch (const FabricError& e) {
      return e.field();
    }
    ADD_FAILURE() << "accepted";
    return FabricField::kSharp;
  };
  FabricOverrides under;
  under.oversubscription = 0.5;
  EXPECT_EQ(field_of(under), FabricField::kOversubscription);
  FabricOverrides one_tier;
  one_tier.tiers = 1;  // 512 NICs on one radix-64 switch
  EXPECT_EQ(field_of(one_tier), FabricField::kTiers);
  FabricOverrides no_nic;
  no_nic.nics_per_device = 0;
  EXPECT_EQ(field_of(no_nic), FabricField::kNicsPerDevice);
  // Issue 15: upper bounds. A leaf keeps an uplink (radix 64: at most 63:1); the network model
  // builds 3 tiers; devices x NICs stays far from 2^63.
  FabricOverrides no_uplink;
  no_uplink.oversubscription = 64.0;
  EXPECT_EQ(field_of(no_uplink), FabricField::kOversubscription);
  no_uplink.oversubscription = std::numeric_limits<double>::infinity();
  EXPECT_EQ(field_of(no_uplink), FabricField::kOversubscription);
  FabricOverrides most_uplinks;
  most_uplinks.oversubscription = 63.0;
  EXPECT_EQ(override_fabric(h100, most_uplinks).fat_tree->oversubscription, 63.0);
  FabricOverrides four_tiers;
  four_tiers.tiers = 4;
  EXPECT_EQ(field_of(four_tiers), FabricField::kTiers);
  FabricOverrides many_nics;
  many_nics.nics_per_device = std::numeric_limits<int64_t>::max();
  EXPECT_EQ(field_of(many_nics), FabricField::kNicsPerDevice);
  many_nics.nics_per_device = kMaxNicsPerDevice + 1;
  EXPECT_EQ(field_of(many_nics), FabricField::kNicsPerDevice);
  FabricOverrides tpu;
  tpu.tiers = 2;
  EXPECT_THROW(override_fabric(load("tpu-v5p"), tpu), FabricError);  // no fat tree
}

// A resize is checked with the fabric knobs given beside it: 12,288 DGX nodes fit three tiers of
// radix-64 switches only at 3:1 oversubscription (98,304 NICs), and the order in which the knobs
// and the node count are given must not matter. Tiers given are kept, not grown.
TEST_F(ClusterTest, ResizeIsCheckedWithTheFabricKnobs) {
  FabricOverrides o;
  o.oversubscription = 3.0;
  o.tiers = 3;
  // 98,304 GPUs: past the 3 tiers the network model builds, the knob that attaches them is the
  // leaf oversubscription (issue 40: the error once asked for more tiers, which --tiers refuses).
  try {
    resize_nodes(load("dgx-h100"), 12288);
    ADD_FAILURE() << "98,304 NICs on a non-blocking 3-tier tree accepted";
  } catch (const FabricError& e) {
    EXPECT_EQ(e.field(), FabricField::kOversubscription);
    EXPECT_THAT(e.what(), HasSubstr("attaches at most 65536 NICs"));
    EXPECT_THAT(e.what(), HasSubstr("at least 3:1, which attaches 98304 NICs"));
  }
  const ClusterSpec big = override_fabric(resize_nodes(load("dgx-h100"), 12288, o), o);
  EXPECT_EQ(big.device_count(), 98304);
  EXPECT_EQ(big.fat_tree->oversubscription, 3.0);
  EXPECT_EQ(big.fat_tree->tiers, 3);
  FabricOverrides two_tiers = o;
  two_tiers.tiers = 2;  // 3,072 NICs at 3:1: refused on the tiers given, not grown to 3
  try {
    resize_nodes(load("dgx-h100"), 12288, two_tiers);
    ADD_FAILURE() << "2 tiers accepted for 98,304 NICs";
  } catch (const FabricError& e) {
    EXPECT_EQ(e.field(), FabricField::kTiers);
    EXPECT_THAT(e.what(), HasSubstr("2-tier fat tree"));
  }
  FabricOverrides one_tier;
  one_tier.tiers = 1;  // 32 NICs on one switch: fine at 4 nodes, although not at the preset's 256
  EXPECT_EQ(override_fabric(resize_nodes(load("dgx-h100"), 4, one_tier), one_tier).fat_tree->tiers,
            1);
  FabricOverrides under;
  under.oversubscription = 0.5;  // checked before it sizes anything
  EXPECT_THROW(resize_nodes(load("dgx-h100"), 64, under), FabricError);
}

TEST_F(ClusterTest, ResizeTorus) {
  const ClusterSpec v5p = load("tpu-v5p");
  const ClusterSpec two_cubes = resize_torus(v5p, {4, 4, 8});
  EXPECT_EQ(two_cubes.device_count(), 128);
  EXPECT_EQ(two_cubes.nodes, 32);
  EXPECT_EQ(two_cubes.torus_wraparound, (std::vector<bool>{true, true, true}));
  const ClusterSpec sub_cube = resize_torus(v5p, {2, 4, 4});
  EXPECT_EQ(sub_cube.device_count(), 32);
  EXPECT_EQ(sub_cube.torus_wraparound, (std::vector<bool>{false, false, false}));
  const ClusterSpec one_host = resize_torus(v5p, {2, 2, 1});
  EXPECT_EQ(one_host.nodes, 1);
  EXPECT_EQ(one_host.devices_per_node, 4);

  const ClusterSpec v5e = resize_torus(load("tpu-v5e"), {8, 16});
  EXPECT_EQ(v5e.device_count(), 128);
  EXPECT_EQ(v5e.nodes, 16);
  EXPECT_EQ(v5e.torus_wraparound, (std::vector<bool>{false, true}));
  const ClusterSpec tiny = resize_torus(load("tpu-v5e"), {2, 2});
  EXPECT_EQ(tiny.nodes, 1);
  EXPECT_EQ(tiny.devices_per_node, 4);

  // v3's pod edge is 32: a 16x32 half pod wraps only on its 32-chip axis, a 16x16 on neither.
  const ClusterSpec v3_half = resize_torus(load("tpu-v3"), {16, 32});
  EXPECT_EQ(v3_half.device_count(), 512);
  EXPECT_EQ(v3_half.nodes, 128);
  EXPECT_EQ(v3_half.torus_wraparound, (std::vector<bool>{false, true}));
  EXPECT_EQ(resize_torus(load("tpu-v3"), {16, 16}).torus_wraparound,
            (std::vector<bool>{false, false}));
}

TEST_F(ClusterTest, ResizeTorusValidates) {
  const ClusterSpec v5p = load("tpu-v5p");
  const std::string src = "builtin:topology/clusters/tpu-v5p.json";
  expect_error(capture_input_error([&] {
                 resize_torus(v5p, {8, 8});
               }),
               src, "/scale_up/shape", "expected 3 extents");
  expect_error(capture_input_error([&] {
                 resize_torus(v5p, {4, 0, 4});
               }),
               src, "/scale_up/shape/1", "expected a positive extent");
  expect_error(capture_input_error([&] {
                 resize_torus(load("tpu-v6e"), {32, 8});
               }),
               "builtin:topology/clusters/tpu-v6e.json", "/scale_up/shape/0", "at most 16");
  expect_error(capture_input_error([&] {
                 resize_torus(load("tpu-v3"), {32, 64});
               }),
               "builtin:topology/clusters/tpu-v3.json", "/scale_up/shape/1",
               "at most 32: a tpu-v3 pod is a 32x32 torus");
  expect_error(capture_input_error([&] {
                 resize_torus(load("dgx-h100"), {4, 4});
               }),
               "builtin:topology/clusters/dgx-h100.json", "/scale_up/shape",
               "sized by its number of nodes");
}

TEST_F(ClusterTest, LoadsAFilePath) {
  nlohmann::json doc = read_source_json("topology/clusters/dgx-h100.json");
  doc["nodes"] = 4;
  const std::string path = write_temp("my-cluster.json", doc);
  const ClusterSpec spec = load(path);
  EXPECT_EQ(spec.name, "my-cluster");
  EXPECT_EQ(spec.source, path);
  EXPECT_EQ(spec.device_count(), 32);
}

TEST_F(ClusterTest, UnknownPresetListsPresets) {
  const InputError e = capture_input_error([&] { load("dgx-h900"); });
  EXPECT_EQ(e.source(), "dgx-h900");
  EXPECT_NE(e.message().find("unknown cluster preset"), std::string::npos) << e.what();
  EXPECT_NE(e.message().find("tpu-v5p"), std::string::npos) << e.what();
  const std::string missing = testing::source_path("no/such/cluster.json");
  expect_error(capture_input_error([&] { load(missing); }), missing, "", "cannot open file");
}

struct BadCase {
  std::string preset;
  std::function<void(nlohmann::json&)> mutate;
  std::string pointer;
  std::string expectation;
};

// One broken copy of a shipped preset per class of bad input.
std::vector<BadCase> bad_cluster_cases() {
  return {
      {"dgx-h100", [](auto& d) { d["bogus"] = true; }, "/bogus", "unknown field"},
      {"dgx-h100", [](auto& d) { d["scale_up"]["bandwidth"] = "450GB/s"; }, "/scale_up/bandwidth",
       "unknown field"},
      {"dgx-h100", [](auto& d) { d["nodes"] = "8"; }, "/nodes", "expected an integer"},
      {"dgx-h100", [](auto& d) { d["nodes"] = 0; }, "/nodes", "expected a positive integer, got 0"},
      {"dgx-h100", [](auto& d) { d["devices_per_node"] = -8; }, "/devices_per_node",
       "expected a positive integer"},
      {"dgx-h100", [](auto& d) { d["chip"] = "h900"; }, "/chip", "unknown chip \"h900\""},
      {"dgx-h100", [](auto& d) { d["chip"] = 100; }, "/chip", "expected a string"},
      {"dgx-h100",
       [](auto& d) {
         d["scale_out"]["nic_bandwidth"] = {{"value", "0Gbps"}, {"source", "test"}};
       },
       "/scale_out/nic_bandwidth/value", "expected a positive bandwidth"},
      {"dgx-h100",
       [](auto& d) {
         d["scale_up"]["link_bandwidth"] = {{"value", "-25GB/s"}, {"source", "test"}};
       },
       "/scale_up/link_bandwidth/value", "non-negative"},
      {"dgx-h100", [](auto& d) { d["scale_up"]["latency"]["value"] = "0us"; },
       "/scale_up/latency/value", "expected a positive duration"},
      {"dgx-h100", [](auto& d) { d["scale_up"]["latency"].erase("source"); },
       "/scale_up/latency/source", "required field is missing"},
      {"dgx-h100", [](auto& d) { d["scale_out"]["oversubscription"]["value"] = 0.5; },
       "/scale_out/oversubscription", "expected a down:up ratio from 1 (non-blocking)"},
      {"dgx-h100", [](auto& d) { d["scale_out"]["transport"] = "ethernet"; },
       "/scale_out/transport", "not one of"},
      {"dgx-h100",
       [](auto& d) {
         d["scale_up"]["shape"] = {2, 4};
       },
       "/scale_up/shape", "only an \"ici_torus\" fabric has a shape"},
      {"dgx-h100", [](auto& d) { d["scale_out"]["fabric"] = "dcn"; }, "/scale_out/fabric",
       "needs a tpu chip"},
      {"tpu-v5p",
       [](auto& d) {
         d["scale_up"]["shape"] = {4, 4, 8};
       },
       "/scale_up/shape", "has 128 chips, but nodes x devices_per_node is 16 x 4 = 64"},
      {"tpu-v5p",
       [](auto& d) {
         d["scale_up"]["shape"] = {8, 8};
       },
       "/scale_up/shape", "expected 3 extents"},
      {"tpu-v5p",
       [](auto& d) {
         d["scale_up"]["shape"] = {4, -4, 4};
       },
       "/scale_up/shape/1", "expected a positive integer"},
      {"tpu-v5p", [](auto& d) { d["scale_up"]["fabric"] = "nvswitch"; }, "/scale_up/fabric",
       "needs a gpu chip"},
      {"tpu-v5e", [](auto& d) { d["slices"] = 0; }, "/slices", "expected a positive integer"},
      {"gb200-nvl72", [](auto& d) { d["scale_up"]["domain_devices"] = 70; },
       "/scale_up/domain_devices", "multiple of devices_per_node"},
  };
}

TEST_F(ClusterTest, EachClassOfBadInputIsNamed) {
  const std::vector<BadCase> cases = bad_cluster_cases();
  for (size_t i = 0; i < cases.size(); ++i) {
    SCOPED_TRACE(cases[i].pointer);
    nlohmann::json doc = read_source_json("topology/clusters/" + cases[i].preset + ".json");
    cases[i].mutate(doc);
    const std::string path = write_temp("bad_cluster_" + std::to_string(i) + ".json", doc);
    expect_error(capture_input_error([&] { load(path); }), path, cases[i].pointer,
                 cases[i].expectation);
  }
}

}  // namespace
}  // namespace meshsim::topology
