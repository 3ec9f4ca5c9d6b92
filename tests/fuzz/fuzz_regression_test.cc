// The fuzzers' findings (issue 15), replayed in every build through the harness the fuzz targets
// use (fuzz_entries.h): each committed input under regressions/<target>/ once crashed, hung,
// overflowed or leaked an internal error, and must now be accepted or refused with an input error
// whose message says what the table below expects. The file names say the bug.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>

#include "fuzz_entries.h"

namespace meshsim::fuzz {
namespace {

namespace fs = std::filesystem;

struct Expectation {
  const char* target;
  const char* file;
  const char* message;  // a substring of the input error; "" when the input must be accepted
};

// issue 15: one row per committed finding.
constexpr Expectation kExpected[] = {
    {"model", "issue15-placeholder.json", ""},
};

std::string read(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

const Expectation* expectation(const std::string& target, const std::string& file) {
  for (const Expectation& e : kExpected) {
    if (target == e.target && file == e.file) {
      return &e;
    }
  }
  return nullptr;
}

TEST(FuzzRegressions, EveryFindingIsRefusedAsExpected) {
  int replayed = 0;
  for (const std::string& target : target_names()) {
    const fs::path dir = fs::path(MESHSIM_FUZZ_REGRESSIONS) / target;
    if (!fs::exists(dir)) {
      continue;
    }
    for (const fs::directory_entry& entry : fs::directory_iterator(dir)) {
      const std::string file = entry.path().filename().string();
      if (file == ".gitkeep") {
        continue;
      }
      SCOPED_TRACE(target + "/" + file);
      const Expectation* want = expectation(target, file);
      ASSERT_NE(want, nullptr) << "a finding without a row in kExpected";
      const Outcome got = run_target(target, read(entry.path()));
      if (std::string(want->message).empty()) {
        EXPECT_TRUE(got.accepted) << got.error;
      } else {
        EXPECT_FALSE(got.accepted);
        EXPECT_THAT(got.error, ::testing::HasSubstr(want->message));
      }
      ++replayed;
    }
  }
  EXPECT_EQ(replayed, static_cast<int>(std::size(kExpected)));
}

}  // namespace
}  // namespace meshsim::fuzz
