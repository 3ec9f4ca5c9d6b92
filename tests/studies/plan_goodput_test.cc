// `meshsim plan --rank-by goodput` end to end (issue 16): the top plans re-ranked by expected days
// to train under failures, with the checkpoint columns, in the table and the JSON.
#include "command_test.h"

namespace meshsim::testing {
namespace {

using ::testing::HasSubstr;

class PlanGoodputCommandTest : public CommandTest {};

TEST_F(PlanGoodputCommandTest, RanksByExpectedDaysWithCheckpointColumns) {
  const std::vector<std::string> args = {
      "plan",   "--model", "llama3-8b", "--nodes", "2",  "--seq", "4096", "--gbs",
      "32",     "--top",   "4",         "--tokens", "1T", "--rank-by", "goodput",
      "--node-storage-bandwidth", "0.5GB/s", "--json", "p.json"};
  const CommandResult r = meshsim(args);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("re-ranked by goodput"));
  EXPECT_THAT(r.output, HasSubstr("ckpt write"));
  const nlohmann::json j = read_json("p.json");
  ASSERT_FALSE(j.at("plans").empty());
  double previous = 0;
  for (const nlohmann::json& p : j.at("plans")) {
    const nlohmann::json& g = p.at("goodput");
    EXPECT_GT(g.at("goodput").get<double>(), 0.0);
    EXPECT_LT(g.at("goodput").get<double>(), 1.0);
    EXPECT_GE(g.at("days").get<double>(), previous);
    previous = g.at("days").get<double>();
  }
  std::vector<std::string> again = args;
  again.back() = "q.json";
  ASSERT_EQ(meshsim(again).exit_code, 0);
  EXPECT_EQ(read_file("p.json"), read_file("q.json"));
}

TEST_F(PlanGoodputCommandTest, NeedsTokensAndGoodBandwidths) {
  expect_input_error(meshsim({"plan", "--rank-by", "goodput"}), {"--rank-by", "--tokens"});
  expect_input_error(meshsim({"plan", "--model", "llama3-8b", "--nodes", "1", "--seq", "4096",
                              "--gbs", "16", "--top", "1", "--tokens", "1T", "--rank-by",
                              "goodput", "--node-storage-bandwidth", "fast"}),
                     {"--node-storage-bandwidth", "positive bandwidth"});
}

}  // namespace
}  // namespace meshsim::testing
