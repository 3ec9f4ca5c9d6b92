// Explicit graphs ("graph" in a cluster file) and impossible networks: every bad input gives an
// InputError naming the source, the JSON pointer and what was expected.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "meshsim/sim/error.h"
#include "meshsim/topology/network.h"
#include "network_test_util.h"
#include "test_files.h"

namespace meshsim::topology {
namespace {

using nlohmann::json;
using testing::capture_input_error;
using testing::dev;
using testing::dgx_h100;
using testing::expect_error;
using testing::preset;
using testing::vtx;

constexpr const char* kPreset = "builtin:topology/clusters/dgx-h100.json";

json link(const std::string& a, const std::string& b, const std::string& bw,
          const std::string& latency = "1us") {
  return json{{"a", a}, {"b", b}, {"bandwidth", bw}, {"latency", latency}};
}

// A 4-GPU, 1-node cluster file with `graph` as its graph section.
json cluster_with(const json& graph) {
  json doc = testing::read_source_json("topology/clusters/dgx-h100.json");
  doc["nodes"] = 1;
  doc["devices_per_node"] = 4;
  doc["graph"] = graph;
  return doc;
}

// Two islands of two GPUs, joined by one thin cable between their switches.
json islands() {
  return json{{"switches", json::array({json{{"name", "sw0"}, {"kind", "leaf"}},
                                        json{{"name", "sw1"}, {"kind", "leaf"}}})},
              {"links", json::array({link("gpu0", "sw0", "100GB/s"), link("gpu1", "sw0", "100GB/s"),
                                     link("gpu2", "sw1", "100GB/s"), link("gpu3", "sw1", "100GB/s"),
                                     link("sw0", "sw1", "50GB/s", "2us")})}};
}

ClusterSpec load_doc(const std::string& name, const json& doc) {
  return load_cluster(testing::write_temp(name, doc), testing::catalogue());
}

TEST(ExplicitGraph, IslandsRouteThroughTheirSwitches) {
  const ClusterSpec spec = load_doc("islands.json", cluster_with(islands()));
  ASSERT_TRUE(spec.graph.has_value());
  const Network net = Network::build(spec);
  EXPECT_EQ(net.num_vertices(), 6U);
  EXPECT_EQ(net.num_links(), 10U);
  EXPECT_EQ(net.vertex(vtx(2)).name, "gpu2");
  EXPECT_EQ(net.hops(dev(0), dev(1)), 2);
  EXPECT_EQ(net.hops(dev(0), dev(3)), 3);
  const Path p = net.route(vtx(0), vtx(3));
  testing::expect_walk(net, vtx(0), vtx(3), p, false);
  EXPECT_EQ(net.path_latency(p), Microseconds(4));
  EXPECT_EQ(net.path_bandwidth(p), GBps(50));
  EXPECT_FALSE(net.nvswitch_of(dev(0)).has_value());
  EXPECT_TRUE(net.torus_coords(dev(0)).empty());
  const NetworkSummary s = net.summary();
  EXPECT_EQ(s.switches, 2);
  EXPECT_EQ(s.bisection_bandwidth, GBps(50));
  EXPECT_EQ(s.diameter_hops, 3);
  EXPECT_NE(format_summary(spec, s).find("explicit graph"), std::string::npos);
  expect_error(capture_input_error([&] { resize_nodes(spec, 2); }), spec.source, "/graph",
               "explicit graph");
}

TEST(ExplicitGraph, ARingOfDevicesForwardsThroughDevices) {
  json graph{
      {"links", json::array({link("gpu0", "gpu1", "100GB/s"), link("gpu1", "gpu2", "100GB/s"),
                             link("gpu2", "gpu3", "100GB/s"), link("gpu3", "gpu0", "100GB/s")})}};
  graph["links"][0]["kind"] = "ici";
  const Network net = Network::build(load_doc("ring.json", cluster_with(graph)));
  EXPECT_EQ(net.hops(dev(0), dev(1)), 1);
  EXPECT_EQ(net.hops(dev(0), dev(2)), 2);
  EXPECT_EQ(net.paths(vtx(0), vtx(2)).size(), 2U);  // both ways round
  EXPECT_EQ(net.link(net.route(vtx(0), vtx(1)).at(0)).kind, LinkKind::kIci);
  EXPECT_EQ(net.link(net.route(vtx(1), vtx(2)).at(0)).kind, LinkKind::kNetwork);  // the default
  // Halves {0,1} | {2,3}: the cables 1-2 and 3-0 cross.
  EXPECT_EQ(net.summary().bisection_bandwidth, GBps(200));
  EXPECT_EQ(net.summary().diameter_hops, 2);
}

TEST(ExplicitGraph, NvSwitchOfADevice) {
  const json graph{
      {"switches", json::array({json{{"name", "nvs"}, {"kind", "nvswitch"}}})},
      {"links", json::array({link("gpu0", "nvs", "450GB/s"), link("gpu1", "nvs", "450GB/s"),
                             link("gpu2", "nvs", "450GB/s"), link("nvs", "gpu3", "450GB/s")})}};
  const Network net = Network::build(load_doc("nvs.json", cluster_with(graph)));
  ASSERT_TRUE(net.nvswitch_of(dev(3)).has_value());
  EXPECT_EQ(net.vertex(*net.nvswitch_of(dev(3))).kind, VertexKind::kNvSwitch);
  EXPECT_EQ(net.route(vtx(0), *net.nvswitch_of(dev(0))).size(), 1U);
}

TEST(ExplicitGraph, BadGraphsNameTheField) {
  struct Case {
    std::string what, pointer, expectation;
    json graph;
  };
  std::vector<Case> cases;
  json g = islands();
  g["links"][1]["b"] = "sw9";
  cases.push_back({"unknown switch", "/graph/links/1/b", "unknown vertex \"sw9\"", g});
  g = islands();
  g["links"][1]["a"] = "gpu4";  // devices are gpu0..gpu3
  cases.push_back({"device out of range", "/graph/links/1/a", "expected a device gpu0 .. gpu3", g});
  g = islands();
  g["links"].push_back(link("sw0", "gpu1", "100GB/s"));
  cases.push_back({"duplicate cable", "/graph/links/5/b", "duplicate link", g});
  g = islands();
  g["links"][0]["b"] = "gpu0";
  cases.push_back({"self link", "/graph/links/0/b", "to itself", g});
  g = islands();
  g["links"][4]["bandwidth"] = "0GB/s";
  cases.push_back(
      {"zero bandwidth", "/graph/links/4/bandwidth", "expected a positive bandwidth", g});
  g = islands();
  g["switches"][1]["name"] = "sw0";
  cases.push_back({"duplicate switch", "/graph/switches/1/name", "duplicate switch", g});
  g = islands();
  g["switches"][1]["name"] = "gpu7";
  cases.push_back({"switch named like a device", "/graph/switches/1/name", "device name", g});
  g = islands();
  g["switches"][0]["kind"] = "router";
  cases.push_back({"unknown switch kind", "/graph/switches/0/kind", "not one of", g});
  g = islands();
  g["links"][2]["colour"] = "red";
  cases.push_back({"unknown key", "/graph/links/2/colour", "unknown field", g});
  g = islands();
  g["links"] = json::array();
  cases.push_back({"no links", "/graph/links", "at least one link", g});
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    const std::string path = testing::write_temp("bad_graph.json", cluster_with(c.graph));
    expect_error(capture_input_error([&] { load_cluster(path, testing::catalogue()); }), path,
                 c.pointer, c.expectation);
  }
}

TEST(ExplicitGraph, DisconnectedGraphIsRejectedByBuild) {
  json g = islands();
  g["links"].erase(4);  // no cable between the islands
  const ClusterSpec spec = load_doc("split.json", cluster_with(g));
  expect_error(capture_input_error([&] { Network::build(spec); }), spec.source, "/graph/links",
               "disconnected");
}

TEST(ImpossibleNetworks, ZeroBandwidths) {
  ClusterSpec spec = dgx_h100(2);
  spec.scale_up_link_bandwidth = BytesPerSec::of(0.0);
  expect_error(capture_input_error([&] { Network::build(spec); }), kPreset,
               "/scale_up/link_bandwidth", "expected a positive bandwidth");
  spec = dgx_h100(2);
  spec.fat_tree->nic_bandwidth = BytesPerSec::of(-1.0);
  expect_error(capture_input_error([&] { Network::build(spec); }), kPreset,
               "/scale_out/nic_bandwidth", "expected a positive bandwidth");
  spec = preset("tpu-v5p");
  spec.slices = 2;
  spec.nodes = 32;
  spec.dcn_bandwidth = BytesPerSec::of(0.0);
  expect_error(capture_input_error([&] { Network::build(spec); }),
               "builtin:topology/clusters/tpu-v5p.json", "/scale_out/bandwidth",
               "expected a positive bandwidth");
}

TEST(ImpossibleNetworks, CountsThatDoNotFit) {
  ClusterSpec spec = preset("tpu-v5p");
  spec.nodes = 17;  // 68 devices for a 64-chip torus
  expect_error(capture_input_error([&] { Network::build(spec); }),
               "builtin:topology/clusters/tpu-v5p.json", "/scale_up/shape",
               "expected equal counts");
  spec = dgx_h100(2);
  spec.fat_tree->tiers = 4;
  expect_error(capture_input_error([&] { Network::build(spec); }), kPreset, "/scale_out/tiers",
               "expected 1 to 3 tiers");
  spec = dgx_h100(9);
  spec.fat_tree->switch_radix = 8;  // 8 rails x 3 leaf groups = 24 leaves > 8 spine ports
  expect_error(capture_input_error([&] { Network::build(spec); }), kPreset, "/nodes",
               "expected 3 tiers or fewer nodes");
}

}  // namespace
}  // namespace meshsim::topology
