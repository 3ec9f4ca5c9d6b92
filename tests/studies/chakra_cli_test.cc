// `meshsim run --export-chakra` and `meshsim run --workload` end to end (the real binary): a step
// written as Chakra traces runs back in the full simulation's step time, the traces pass the
// independent reader of tools/chakra_et.py, and flags that do not apply to a workload are refused.
#include <cstdlib>

#include "command_test.h"

namespace meshsim::testing {
namespace {

using ::testing::HasSubstr;

class ChakraCommandTest : public CommandTest {};

const std::vector<std::string> kStep = {"--model", "llama3.2-1b", "--cluster", "dgx-h100",
                                        "--tp",    "2",           "--pp",      "2",
                                        "--dp",    "2",           "--gbs",     "8",
                                        "--seq",   "1024",        "--no-trace"};

TEST_F(ChakraCommandTest, ExportedStepRunsBackInTheSameStepTime) {
  std::vector<std::string> run = kStep;
  for (const char* a : {"--full-simulation", "--json", "a.json", "--export-chakra", "et"}) {
    run.emplace_back(a);
  }
  const CommandResult r = meshsim(run);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("Chakra traces         et/rank.0.et ... rank.7.et"));
  const CommandResult w = meshsim({"run", "--workload", "et", "--cluster", "dgx-h100",
                                   "--json", "b.json", "--trace", "w.json"});
  ASSERT_EQ(w.exit_code, 0) << w.output;
  EXPECT_THAT(w.output, HasSubstr("Chakra workload et: 8 ranks"));
  EXPECT_EQ(read_json("a.json").at("step_time_s").get<double>(),
            read_json("b.json").at("step_time_s").get<double>());
  EXPECT_TRUE(std::filesystem::exists(path("w.json")));
  // Chakra's schema and the attribute types its feeder reads, checked by a reader that shares
  // nothing with meshsim's (Python's standard library only).
  std::string check = "python3 ";
  check += shell_quote(std::string(MESHSIM_SOURCE_DIR) + "/tools/chakra_et.py");
  check += " check ";
  check += shell_quote(path("et").string());
  EXPECT_EQ(std::system(check.c_str()), 0);
}

TEST_F(ChakraCommandTest, FlagsThatDoNotApplyAreRefused) {
  std::vector<std::string> run = kStep;
  run.emplace_back("--export-chakra");
  run.emplace_back("et");
  ASSERT_EQ(meshsim(run).exit_code, 0);
  expect_input_error(meshsim({"run", "--workload", "et", "--cluster", "dgx-h100", "--tp", "2"}),
                     {"--tp", "does not apply to --workload"});
  expect_input_error(meshsim({"run", "--workload", "et"}), {"--workload", "--cluster"});
  expect_input_error(meshsim({"run", "--workload", "nothing-here", "--cluster", "dgx-h100"}),
                     {"nothing-here"});
  expect_input_error(meshsim({"run", "--workload", "et", "--cluster", "dgx-h100", "--nodes",
                              "1", "--shape", "2x2"}),
                     {"--shape"});
  expect_input_error(
      meshsim({"run", "--workload", "et", "--cluster", "tpu-v5e", "--shape", "2x2"}),
      {"8 ranks", "4 devices"});
}

}  // namespace
}  // namespace meshsim::testing
