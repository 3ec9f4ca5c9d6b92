#include "meshsim/sim/json_input.h"

#include <gtest/gtest.h>

#include <fstream>
#include <functional>

#include "meshsim/sim/error.h"

namespace meshsim {
namespace {

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const InputError& e) {
    return e.what();
  }
  return "<no error>";
}

TEST(JsonObject, ReadsTypedFields) {
  const auto j = nlohmann::json::parse(
      R"({"n": 3, "bw": "400Gbps", "size": "80GiB", "lat": "1.5us", "peak": "989TFLOP/s", "f": 0.5})");
  JsonObject o(j, "c.json");
  EXPECT_EQ(o.positive_integer("n"), 3);
  EXPECT_DOUBLE_EQ(o.bandwidth("bw").value(), 50e9);
  EXPECT_EQ(o.bytes("size"), GiB(80));
  EXPECT_EQ(o.duration("lat").ps(), 1'500'000);
  EXPECT_DOUBLE_EQ(o.flops_rate("peak").value(), 989e12);
  EXPECT_DOUBLE_EQ(o.fraction("f"), 0.5);
  o.finish();
}

TEST(JsonObject, ErrorsNameFileFieldAndExpectation) {
  const auto j = nlohmann::json::parse(
      R"({"layers": -3, "links": [{"bandwidth": "10 Gbsp"}], "name": 5, "extra": 1})");
  EXPECT_EQ(error_of([&] {
              JsonObject o(j, "m.json");
              o.positive_integer("layers");
            }),
            "m.json: /layers: expected a positive integer, got -3");
  EXPECT_NE(error_of([&] {
              JsonObject o(j, "cluster.json");
              o.object_array("links")[0].bandwidth("bandwidth");
            }).find("cluster.json: /links/0/bandwidth: \"10 Gbsp\": unknown unit \"Gbsp\""),
            std::string::npos);
  EXPECT_EQ(error_of([&] {
              JsonObject o(j, "m.json");
              o.string("name");
            }),
            "m.json: /name: expected a string, got 5");
  EXPECT_EQ(error_of([&] {
              JsonObject o(j, "m.json");
              o.string("missing");
            }),
            "m.json: /missing: required field is missing");
  EXPECT_NE(error_of([&] {
              JsonObject o(j, "m.json");
              o.ignore("layers");
              o.ignore("links");
              o.ignore("name");
              o.finish();
            }).find("m.json: /extra: unknown field"),
            std::string::npos);
}

TEST(JsonFile, SyntaxErrorNamesFileAndOffset) {
  const std::string path = ::testing::TempDir() + "/bad.json";
  {
    std::ofstream(path) << "{\"a\": 1,, }";
  }
  const std::string msg = error_of([&] { load_json_file(path); });
  EXPECT_NE(msg.find("bad.json: byte"), std::string::npos) << msg;
  EXPECT_NE(msg.find("not valid JSON"), std::string::npos) << msg;
  EXPECT_NE(error_of([] { load_json_file("/nonexistent/x.json"); }).find("cannot open"),
            std::string::npos);
}

}  // namespace
}  // namespace meshsim
