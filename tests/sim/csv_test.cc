// split_csv_line against RFC 4180's rules as sim/csv.h states them: commas separate fields, quotes
// protect commas and double to stand for themselves, blanks around a field (a CRLF's carriage
// return too) are dropped but what stands inside quotes is kept.
#include "meshsim/sim/csv.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace meshsim {
namespace {

using Fields = std::vector<std::string>;

TEST(SplitCsvLine, SeparatesAtCommasOutsideQuotes) {
  EXPECT_EQ(split_csv_line("h100-sxm,8192,4096,bf16"),
            (Fields{"h100-sxm", "8192", "4096", "bf16"}));
  EXPECT_EQ(split_csv_line("a,\"b,c\",d"), (Fields{"a", "b,c", "d"}));
  EXPECT_EQ(split_csv_line("\"say \"\"hi\"\"\",x"), (Fields{"say \"hi\"", "x"}));
}

TEST(SplitCsvLine, EmptyFieldsAndLinesAreFields) {
  EXPECT_EQ(split_csv_line(""), (Fields{""}));
  EXPECT_EQ(split_csv_line(","), (Fields{"", ""}));
  EXPECT_EQ(split_csv_line("a,,b,"), (Fields{"a", "", "b", ""}));
  EXPECT_EQ(split_csv_line("\"\""), (Fields{""}));
}

TEST(SplitCsvLine, BlanksAroundFieldsGoButBlanksInsideQuotesStay) {
  EXPECT_EQ(split_csv_line(" a ,\tb\t, c\r"), (Fields{"a", "b", "c"}));
  EXPECT_EQ(split_csv_line(" \" a , b \" ,c"), (Fields{" a , b ", "c"}));
  EXPECT_EQ(split_csv_line("x,4096\r"), (Fields{"x", "4096"}));
  // Blanks between words of an unquoted field are part of it.
  EXPECT_EQ(split_csv_line("NVIDIA H100 SXM,1"), (Fields{"NVIDIA H100 SXM", "1"}));
}

TEST(SplitCsvLine, AnUnterminatedQuoteRunsToTheEndOfTheLine) {
  EXPECT_EQ(split_csv_line("a,\"b,c"), (Fields{"a", "b,c"}));
}

}  // namespace
}  // namespace meshsim
