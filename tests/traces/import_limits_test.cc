// Issue 15: the importer reads, inflates and holds at most its limits, and no event, dims or step
// makes a time or count past 64 bits; every refusal is located in the trace.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <zlib.h>

#include <string>

#include "import_test_util.h"
#include "meshsim/traces/import.h"

namespace meshsim::traces {
namespace {

using namespace testing;  // NOLINT: the importer tests' helpers
using ::testing::HasSubstr;

// `text` as one gzip member.
std::string gzip(const std::string& text) {
  z_stream zs{};
  // deflateInit2 is a macro with an old-style cast; call the function it expands to.
  EXPECT_EQ(deflateInit2_(&zs, 9, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY, ZLIB_VERSION,
                          static_cast<int>(sizeof(z_stream))),
            Z_OK);
  std::string out(deflateBound(&zs, static_cast<uLong>(text.size())), '\0');
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(text.data()));
  zs.avail_in = static_cast<uInt>(text.size());
  zs.next_out = reinterpret_cast<Bytef*>(out.data());
  zs.avail_out = static_cast<uInt>(out.size());
  EXPECT_EQ(deflate(&zs, Z_FINISH), Z_STREAM_END);
  out.resize(zs.total_out);
  deflateEnd(&zs);
  return out;
}

// A legacy PyTorch trace: one step and the given extra events.
std::string legacy_trace(const std::string& extra) {
  return R"([{"ph": "X", "name": "ProfilerStep#1", "pid": "CPU functions", "tid": 1, "ts": 0,
              "dur": 100},
             {"ph": "X", "name": "aten::add", "pid": "CPU functions", "tid": 1, "ts": 1,
              "dur": 2})" +
         extra + "]";
}

TEST(ImportLimits, AGzipBombIsRefusedBeforeItInflates) {
  // 8 MiB of spaces compress to a few KB; inflating them past the text limit is refused.
  const std::string bomb = gzip("[" + std::string(8 << 20, ' ') + "]");
  ASSERT_LT(bomb.size(), 64u << 10);
  const ImportLimits limits{.max_file_bytes = 1 << 20, .max_text_bytes = 1 << 20, .max_depth = 16};
  const InputError e = input_error([&] { import_trace_bytes(bomb, "bomb.json.gz", limits); });
  EXPECT_EQ(e.source(), "bomb.json.gz");
  EXPECT_THAT(e.message(), HasSubstr("inflates to more than the 1 MiB limit"));
  EXPECT_THROW(import_trace_bytes(bomb, "bomb.json.gz", limits), InputSizeError);
}

TEST(ImportLimits, FilesAndTextPastTheirLimitsAreNotRead) {
  const std::string path = write_temp("limits_big.json", legacy_trace(""));
  EXPECT_THAT(input_error([&] {
                import_trace(path, ImportLimits{.max_file_bytes = 64, .max_text_bytes = 1 << 20});
              }).message(),
              HasSubstr("larger than the 64 B limit on a trace file"));
  EXPECT_THAT(input_error([&] {
                import_trace_text(legacy_trace(""), "t.json", ImportLimits{.max_text_bytes = 64});
              }).message(),
              HasSubstr("larger than the 64 B limit on a trace's JSON text"));
  // /dev/zero never ends.
  EXPECT_THAT(input_error([] { import_trace("/dev/zero"); }).message(), HasSubstr("64 MiB"));
  EXPECT_EQ(import_trace_text(legacy_trace(""), "t.json").steps.size(), 1u);
}

TEST(ImportLimits, DeepNestingAnywhereIsRefused) {
  const std::string deep = std::string(5000, '[') + std::string(5000, ']');
  const InputError e = input_error([&] {
    import_trace_text(legacy_trace(R"(, {"ph": "X", "name": "a", "args": )" + deep + "}"),
                      "t.json");
  });
  EXPECT_THAT(e.what(), HasSubstr("nested deeper than 128 levels"));
  EXPECT_TRUE(e.location().starts_with("byte ")) << e.what();
  // An event that is a deep array is reported without dumping it.
  const InputError shallow = input_error([&] {
    import_trace_text(legacy_trace(", " + std::string(100, '[') + std::string(100, ']')), "t.json");
  });
  EXPECT_EQ(shallow.location(), "/2");
  EXPECT_THAT(shallow.message(), HasSubstr("expected an event object, got an array"));
}

TEST(ImportLimits, AnEventEndingPast2To63PicosecondsIsLocated) {
  // ts and dur each below 2^63 ps, their sum past it: before, the end wrapped negative.
  const InputError e = input_error([&] {
    import_trace_text(legacy_trace(R"(, {"ph": "X", "name": "aten::mul", "pid": "CPU functions",
                                         "tid": 1, "ts": 4e12, "dur": 6e12})"),
                      "t.json");
  });
  EXPECT_EQ(e.location(), "/2/dur");
  EXPECT_THAT(e.message(), HasSubstr("106 days"));
}

TEST(ImportLimits, OpsOfAStepSummingPastInt64AreLocated) {
  std::string ops;
  for (int i = 0; i < 4; ++i) {  // overlapping ops of 3e12 us (3e18 ps) each: 1.2e19 in all
    ops += R"(, {"ph": "X", "name": "aten::mul", "pid": "CPU functions", "tid": )" +
           std::to_string(i + 2) + R"(, "ts": 1, "dur": 3e12})";
  }
  const std::string text = R"([{"ph": "X", "name": "ProfilerStep#1", "pid": "CPU functions",
                                "tid": 1, "ts": 0, "dur": 3.1e12})" +
                           ops + "]";
  const InputError e = input_error([&] { import_trace_text(text, "t.json"); });
  EXPECT_EQ(e.location(), "/");
  EXPECT_THAT(e.message(), HasSubstr("the ops of step 0 add up to more than 2^63 ps"));
}

TEST(ImportLimits, GemmDimsPastTheirBoundsAreLocated) {
  const auto mm = [](const std::string& dims) {
    return R"(, {"ph": "X", "name": "aten::mm", "pid": "CPU functions", "tid": 1, "ts": 10,
                 "dur": 1, "args": {"Input Dims": )" +
           dims + "}}";
  };
  const InputError huge = input_error(
      [&] { import_trace_text(legacy_trace(mm("[[4294967296, 2], [2, 2]]")), "t.json"); });
  EXPECT_EQ(huge.location(), "/2/args/Input Dims");
  EXPECT_THAT(huge.message(), HasSubstr("at most 2^31 - 1"));
  const InputError wrap = input_error([&] {
    import_trace_text(legacy_trace(mm("[[18446744073709551615, 2], [2, 2]]")), "t.json");
  });
  EXPECT_THAT(wrap.message(), HasSubstr("at most 2^31 - 1"));
  const InputError elements = input_error([&] {
    import_trace_text(legacy_trace(mm("[[2147483647, 2147483647], [2147483647, 2]]")), "t.json");
  });
  EXPECT_THAT(elements.message(), HasSubstr("more than 2^48 elements"));
}

TEST(ImportLimits, MetadataWhoseNameIsNotAStringIsIgnored) {
  // nlohmann's value("name", "") threw type_error on these (an internal error, exit 1).
  const MeasuredTrace t = import_trace_text(
      legacy_trace(R"(, {"ph": "M", "name": 5}, {"ph": "M", "name": ["process_name"]})"), "t.json");
  EXPECT_EQ(t.steps.size(), 1u);
}

}  // namespace
}  // namespace meshsim::traces
