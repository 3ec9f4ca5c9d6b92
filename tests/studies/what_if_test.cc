// What a new user trying what-ifs meets (issue 14): naming only a model or a cluster runs, with
// the default plan or a searched one and a note saying which; run --help lists the flags;
// --version names the commit; warnings for silent traps; OOM verdicts suggest plans that fit;
// messages that used to mislead.
#include "command_test.h"

namespace meshsim::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

class WhatIfTest : public CommandTest {};

TEST_F(WhatIfTest, NamingOnlyAClusterKeepsTheDefaultPlanWhenItApplies) {
  const CommandResult r = meshsim({"--cluster", "h200", "--no-trace"});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("no plan given: kept the default scenario's plan"));
  EXPECT_THAT(r.output, HasSubstr("256 node(s) x 8 NVIDIA H200"));
  EXPECT_THAT(r.output, HasSubstr("TP 8 (SP) x CP 1 x PP 4 (interleaved, 5 virtual stages)"));
}

TEST_F(WhatIfTest, NamingOnlyAModelSearchesWhenTheDefaultPlanDoesNotApply) {
  const CommandResult r =
      meshsim({"--model", "llama3-8b", "--cluster", "dgx-h100", "--nodes", "1", "--no-trace"});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("the default plan does not apply"));
  EXPECT_THAT(r.output, HasSubstr("took the best"));
  EXPECT_THAT(r.output, HasSubstr("step time"));
  EXPECT_THAT(r.output, Not(HasSubstr("ranks, but cluster")));
  // A plan field given: the scenario is the user's, as before.
  const CommandResult given = meshsim({"--model", "llama3-8b", "--tp", "8", "--no-trace"});
  EXPECT_EQ(given.exit_code, 0) << given.output;
  EXPECT_THAT(given.output, Not(HasSubstr("no plan given")));
}

TEST_F(WhatIfTest, RunHelpListsTheFlagsAndVersionNamesTheCommit) {
  const CommandResult help = meshsim({"run", "--help"});
  EXPECT_EQ(help.exit_code, 0);
  for (const char* flag : {"--tp", "--gbs", "--schedule", "--json", "--trace", "--tokens"}) {
    EXPECT_THAT(help.output, HasSubstr(flag));
  }
  const CommandResult v = meshsim({"--version"});
  EXPECT_EQ(v.exit_code, 0);
  EXPECT_THAT(v.output, ::testing::ContainsRegex(R"(meshsim [0-9.]+ \(commit [^)]+\))"));
}

TEST_F(WhatIfTest, SilentTrapsGetWarnings) {
  // No --gbs with a pipeline: one microbatch per pipeline, a 50 % bubble at pp 2.
  const CommandResult no_gbs = meshsim({"--model", "llama3-8b", "--cluster", "dgx-h100", "--pp",
                                        "2", "--dp", "4", "--zero", "1", "--no-trace"});
  ASSERT_EQ(no_gbs.exit_code, 0) << no_gbs.output;
  EXPECT_THAT(no_gbs.output, HasSubstr("warning: no global batch given"));
  EXPECT_THAT(no_gbs.output, HasSubstr("= 50 %"));
  // 77.5 of 79.65 GiB (Megatron's fp32 gradients: 29.9 GiB of them): within 5 % of the chip's
  // memory.
  const CommandResult tight =
      meshsim({"--model", "llama3-8b", "--cluster", "dgx-h100", "--dp", "8", "--zero", "1", "--mbs",
               "1", "--gbs", "16", "--seq", "4608", "--no-trace"});
  ASSERT_EQ(tight.exit_code, 0) << tight.output;
  EXPECT_THAT(tight.output, HasSubstr("within 5 % of the 79.65 GiB"));
  // The default's exposed kinds overlap: they add up to more than the total.
  const CommandResult d = meshsim({"--no-trace"});
  EXPECT_THAT(d.output, HasSubstr("the kinds add up to"));
  EXPECT_THAT(d.output, Not(HasSubstr("warning:")));
}

TEST_F(WhatIfTest, OutOfMemorySuggestsPlansThatFit) {
  const CommandResult r = meshsim({"--model", "llama3-8b", "--cluster", "dgx-h100", "--dp", "8",
                                   "--gbs", "8", "--seq", "4096", "--no-trace"});
  EXPECT_EQ(r.exit_code, 3) << r.output;
  EXPECT_THAT(r.output, HasSubstr("OUT OF MEMORY"));
  EXPECT_THAT(r.output, HasSubstr("plans that fit"));
}

TEST_F(WhatIfTest, MessagesSayWhatIsWrong) {
  expect_input_error(meshsim({"run", "--tpp", "8"}),
                     {"\"8\" is not a scenario file", "that flag is unknown"});
  // The interleaved schedule's batch rule suggests batches that exist (not "0 or 2").
  const CommandResult gbs = meshsim({"--pp", "2", "--dp", "128", "--gbs", "128", "--no-trace"});
  expect_input_error(gbs, {"--gbs", "use e.g. 2 microbatches"});
  EXPECT_THAT(gbs.output, Not(HasSubstr("0 or")));
  // --shape on the default (GPU) scenario: no "not both" about a --nodes nobody gave.
  const CommandResult shape = meshsim({"--shape", "8x8x8", "--no-trace"});
  expect_input_error(shape, {"--shape", "GPU cluster"});
  EXPECT_THAT(shape.output, Not(HasSubstr("not both")));
  expect_input_error(meshsim({"--cluster", "tpu-v5p", "--nodes", "4", "--dp", "16"}),
                     {"--nodes", "sized by its torus shape"});
  EXPECT_THAT(meshsim({"--cluster", "tpu-v5p", "--nodes", "4", "--dp", "16"}).output,
              Not(HasSubstr("resize_torus")));
}

}  // namespace
}  // namespace meshsim::testing
