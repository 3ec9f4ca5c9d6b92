#include "meshsim/sim/json_input.h"

#include <gtest/gtest.h>

#include <fstream>
#include <functional>

#include "meshsim/sim/error.h"
#include "thrown.h"

namespace meshsim {
namespace {

std::string error_of(const std::function<void()>& f) {
  return testing::what_thrown<InputError>(f, "<no error>");
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
  // The error of reading `j` as `file` with `read`.
  const auto reading = [&](const char* file, const std::function<void(JsonObject&)>& read) {
    return error_of([&] {
      JsonObject o(j, file);
      read(o);
    });
  };
  EXPECT_EQ(reading("m.json", [](JsonObject& o) { o.positive_integer("layers"); }),
            "m.json: /layers: expected a positive integer, got -3");
  EXPECT_NE(reading("cluster.json",
                    [](JsonObject& o) { o.object_array("links")[0].bandwidth("bandwidth"); })
                .find("cluster.json: /links/0/bandwidth: \"10 Gbsp\": unknown unit \"Gbsp\""),
            std::string::npos);
  EXPECT_EQ(reading("m.json", [](JsonObject& o) { o.string("name"); }),
            "m.json: /name: expected a string, got 5");
  EXPECT_EQ(reading("m.json", [](JsonObject& o) { o.string("missing"); }),
            "m.json: /missing: required field is missing");
  EXPECT_NE(reading("m.json",
                    [](JsonObject& o) {
                      o.ignore("layers");
                      o.ignore("links");
                      o.ignore("name");
                      o.finish();
                    })
                .find("m.json: /extra: unknown field"),
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

// Issue 15: inputs however large, endless, deep or absurd are refused with a located error.

TEST(JsonLimitsTest, EndlessAndOversizedFilesAreNotReadToTheEnd) {
  // /dev/zero never ends: before, it was read until memory ran out.
  const std::string msg = error_of([] { load_json_file("/dev/zero"); });
  EXPECT_NE(msg.find("/dev/zero: larger than the 64 MiB limit on a JSON input"),
            std::string::npos)
      << msg;
  const std::string path = ::testing::TempDir() + "/big.json";
  {
    std::ofstream(path) << "[" << std::string(2000, ' ') << "]";
  }
  EXPECT_NE(error_of([&] { load_json_file(path, JsonLimits{.max_bytes = 1000}); })
                .find("larger than the 1000 B limit"),
            std::string::npos);
  EXPECT_TRUE(load_json_file(path, JsonLimits{.max_bytes = 4000}).is_array());
  EXPECT_THROW(load_json_file("/dev/zero"), InputSizeError);
  EXPECT_NE(error_of([] { load_json_file(::testing::TempDir()); }).find("is a directory"),
            std::string::npos);
}

TEST(JsonLimitsTest, DeepNestingIsRefusedBeforeAnythingRecurses) {
  // 100,000 levels parse fine, but copies, dumps and error messages recurse once per level.
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  EXPECT_EQ(error_of([&] { parse_json(deep, "d.json"); }),
            "d.json: byte 129: nested deeper than 128 levels (the limit: meshsim's inputs nest a "
            "few levels; deeper nesting is refused before anything walks it)");
  const std::string ok = std::string(128, '[') + std::string(128, ']');
  EXPECT_TRUE(parse_json(ok, "ok.json").is_array());
  // Brackets inside strings are text, not nesting.
  EXPECT_TRUE(parse_json("{\"a\": \"" + std::string(1000, '[') + "\\\"\"}", "s.json")
                  .is_object());
}

TEST(JsonLimitsTest, NumbersADoubleCannotHoldAreLocated) {
  // nlohmann throws out_of_range on these, which no loader caught: exit 1 before.
  EXPECT_EQ(error_of([] { parse_json(R"({"d_model": 1e400})", "m.json"); }),
            "m.json: byte 13: the number 1e400 is beyond the range of a double (about 1.8e308)");
  EXPECT_NE(error_of([] { parse_json("[-1E+309]", "m.json"); }).find("byte 2:"), std::string::npos);
  EXPECT_NE(error_of([] { parse_json("[" + std::string(400, '9') + "]", "m.json"); })
                .find("beyond the range of a double"),
            std::string::npos);
  EXPECT_DOUBLE_EQ(parse_json("[1e-400, 1e308]", "m.json")[1].get<double>(), 1e308);
}

TEST(JsonLimitsTest, IntegersPast2To63DoNotWrapToNegatives) {
  const auto j = parse_json(R"({"n": 18446744073709551615, "a": [9223372036854775808]})", "m.json");
  JsonObject o(j, "m.json");
  EXPECT_EQ(error_of([&] { o.positive_integer("n"); }),
            "m.json: /n: expected an integer below 2^63, got 18446744073709551615");
  EXPECT_NE(error_of([&] { o.positive_integer_array("a"); }).find("m.json: /a/0: expected a "
                                                                  "positive integer below 2^63"),
            std::string::npos);
}

TEST(JsonLimitsTest, RatesSizesAndDurationsWithinBounds) {
  const auto j = parse_json(
      R"({"bw": "1e308TB/s", "bw2": 1e300, "peak": "1e10PFLOP/s", "size": 1e19, "t": 1e300,
          "ok": "1000TB/s"})",
      "c.json");
  JsonObject o(j, "c.json");
  // Before: accepted and printed "inf".
  EXPECT_NE(error_of([&] { o.bandwidth("bw"); }).find("above the limit of 1 EB/s"),
            std::string::npos);
  EXPECT_NE(error_of([&] { o.bandwidth("bw2"); }).find("c.json: /bw2: 1e+300 B/s is above"),
            std::string::npos);
  EXPECT_NE(error_of([&] { o.flops_rate("peak"); }).find("above the limit of 1 ZFLOP/s"),
            std::string::npos);
  EXPECT_NE(error_of([&] { o.bytes("size"); }).find("below 2^63"), std::string::npos);
  EXPECT_NE(error_of([&] { o.duration("t"); }).find("c.json: /t: 1e+300 s is longer than int64"),
            std::string::npos);
  EXPECT_DOUBLE_EQ(o.bandwidth("ok").value(), 1e15);
}

}  // namespace
}  // namespace meshsim
