#include "meshsim/traces/rank_selection.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "meshsim/sim/error.h"

namespace meshsim::traces {
namespace {

using ::testing::HasSubstr;

// 16 ranks: 4 pipeline stages of 4 ranks; 8 ranks per node.
RankLayout layout() {
  return RankLayout{[](int64_t r) { return r / 4; }, [](int64_t r) { return r / 8; }};
}

std::vector<int64_t> parse(std::string_view spec) {
  return parse_rank_selection(spec, 16, layout()).ranks();
}

std::string error_of(std::string_view spec, const RankLayout& l = layout()) {
  try {
    parse_rank_selection(spec, 16, l);
  } catch (const InputError& e) {
    EXPECT_EQ(e.source(), "--trace-ranks");
    return e.what();
  }
  ADD_FAILURE() << "no error for '" << spec << "'";
  return "";
}

TEST(RankSelection, All) {
  const RankSelection s = parse_rank_selection("all", 16);
  EXPECT_TRUE(s.is_all());
  EXPECT_EQ(s.size(), 16);
  EXPECT_TRUE(s.contains(RankId(15)));
  EXPECT_FALSE(s.contains(RankId(16)));
}

TEST(RankSelection, RanksAndRangesUnion) {
  EXPECT_EQ(parse("0-3,9"), (std::vector<int64_t>{0, 1, 2, 3, 9}));
  EXPECT_EQ(parse(" 9 , 2-3 ,3"), (std::vector<int64_t>{2, 3, 9}));
  EXPECT_EQ(parse("5-5"), (std::vector<int64_t>{5}));
  EXPECT_EQ(parse("15"), (std::vector<int64_t>{15}));
}

TEST(RankSelection, StagesAndNodes) {
  EXPECT_EQ(parse("stage:0"), (std::vector<int64_t>{0, 1, 2, 3}));
  EXPECT_EQ(parse("stage:2-3"), (std::vector<int64_t>{8, 9, 10, 11, 12, 13, 14, 15}));
  EXPECT_EQ(parse("node:1"), (std::vector<int64_t>{8, 9, 10, 11, 12, 13, 14, 15}));
  EXPECT_EQ(parse("stage:0,node: 1, 4"),
            (std::vector<int64_t>{0, 1, 2, 3, 4, 8, 9, 10, 11, 12, 13, 14, 15}));
}

TEST(RankSelection, PredicateMatchesTheSelection) {
  const RankPredicate p = parse_rank_selection("1,3", 16).predicate();
  EXPECT_FALSE(p(RankId(0)));
  EXPECT_TRUE(p(RankId(1)));
  EXPECT_TRUE(p(RankId(3)));
  EXPECT_FALSE(p(RankId(99)));
}

TEST(RankSelection, ClearErrors) {
  EXPECT_THAT(error_of(""), HasSubstr("the selection is empty"));
  EXPECT_THAT(error_of("  "), HasSubstr("expected \"all\""));
  EXPECT_THAT(error_of("0-3,,5"), HasSubstr("\"0-3,,5\": item 2 is empty"));
  EXPECT_THAT(error_of("0-3,"), HasSubstr("item 2 is empty"));
  EXPECT_THAT(error_of("7-0"), HasSubstr("\"7-0\": the range is reversed"));
  EXPECT_THAT(error_of("16"), HasSubstr("rank 16 is out of range (the run has 16 ranks: 0-15)"));
  EXPECT_THAT(error_of("0-99"), HasSubstr("rank 99 is out of range"));
  EXPECT_THAT(error_of("abc"), HasSubstr("'abc' is not a rank number"));
  EXPECT_THAT(error_of("-3"), HasSubstr("'-3' is not a rank range"));
  EXPECT_THAT(error_of("1-"), HasSubstr("'1-' is not a rank range"));
  EXPECT_THAT(error_of("+3"), HasSubstr("is not a rank number"));
  EXPECT_THAT(error_of("99999999999999999999"), HasSubstr("is not a rank number"));
  EXPECT_THAT(error_of("stage:"), HasSubstr("'' is not a stage number"));
  EXPECT_THAT(error_of("stage:9"), HasSubstr("no rank is in stage 9 (this run has stages 0-3)"));
  EXPECT_THAT(error_of("node:2-5"), HasSubstr("no rank is in node 2-5 (this run has nodes 0-1)"));
  EXPECT_THAT(error_of("rack:1"), HasSubstr("unknown selector 'rack:'"));
  EXPECT_THAT(error_of("stage:1", RankLayout{}), HasSubstr("stage: selections are not available"));
  EXPECT_THAT(error_of("ALL"), HasSubstr("'ALL' is not a rank number"));
}

}  // namespace
}  // namespace meshsim::traces
