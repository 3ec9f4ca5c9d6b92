// End-to-end tests of the meshsim command: exit codes, error messages, reports and traces.
//
// Each test runs the real binary (MESHSIM_BIN) through the shell in a fresh temp directory and
// looks at its exit code and its combined stdout + stderr. The contract (cli/src/main.cc):
//   0 success, 2 bad input ("meshsim: error: <source>: <location>: <what>", naming the file or
//   flag, the field and what was expected), 3 the configuration does not fit in memory,
//   1 internal error. Bad input must never end in a crash, a stack trace or an "internal error".
#include "command_test.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::Not;

using meshsim::testing::CommandResult;
using meshsim::testing::expect_input_error;
using meshsim::testing::expect_no_crash;

// True when `a` and `b` agree to `rel` relative to the larger magnitude.
::testing::AssertionResult near_relative(double a, double b, double rel) {
  const double scale = std::max(std::fabs(a), std::fabs(b));
  if (std::fabs(a - b) <= rel * scale) {
    return ::testing::AssertionSuccess();
  }
  return ::testing::AssertionFailure() << a << " and " << b << " differ by more than " << rel
                                       << " relative";
}

class CliTest : public meshsim::testing::CommandTest {
 protected:
  // `meshsim run ARGS... --no-trace`: a run that leaves no trace behind.
  CommandResult run(const std::vector<std::string>& args) const {
    std::vector<std::string> all{"run"};
    all.insert(all.end(), args.begin(), args.end());
    all.emplace_back("--no-trace");
    return meshsim(all);
  }

  static std::string read_source(const std::string& relative) {
    std::ifstream f(fs::path(MESHSIM_SOURCE_DIR) / relative, std::ios::binary);
    EXPECT_TRUE(f) << "cannot read " << relative;
    std::stringstream s;
    s << f.rdbuf();
    return s.str();
  }

};

// ---- bad flags ---------------------------------------------------------------------------------

TEST_F(CliTest, UnknownFlagNamesTheFlag) {
  const CommandResult r = run({"--bogus"});
  expect_input_error(r, {"--bogus"});
}

TEST_F(CliTest, UnknownTopLevelFlagNamesTheFlag) {
  const CommandResult r = meshsim({"--frobnicate"});
  expect_input_error(r, {"--frobnicate"});
}

TEST_F(CliTest, ZeroDataParallelIsRejectedAsNotPositive) {
  const CommandResult r = run({"--dp", "0"});
  expect_input_error(r, {"--dp", "positive", "0"});
}

TEST_F(CliTest, NegativeDataParallelIsRejectedAsNotPositive) {
  const CommandResult r = run({"--dp", "-4"});
  expect_input_error(r, {"--dp", "positive", "-4"});
}

TEST_F(CliTest, GlobalBatchNotDivisibleByDataParallel) {
  const CommandResult r =
      run({"--model", "llama3.2-1b", "--cluster", "dgx-h100", "--gbs", "60", "--dp", "8"});
  expect_input_error(r, {"--gbs", "60", "divisible", "8"});
}

TEST_F(CliTest, DegreesMustMultiplyToTheDeviceCount) {
  const CommandResult r = run({"--cluster", "dgx-h100", "--dp", "4"});
  expect_input_error(r, {"--dp", "4", "dgx-h100", "8 devices", "device count"});
}

TEST_F(CliTest, UnknownModelPresetListsThePresets) {
  const CommandResult r = run({"--model", "llama9-1t"});
  expect_input_error(r, {"llama9-1t", "unknown model preset", "llama3-70b", "gpt2-small",
                         "llama3.2-1b"});
}

TEST_F(CliTest, UnknownClusterPresetListsThePresets) {
  const CommandResult r = run({"--cluster", "dgx-z900"});
  expect_input_error(r, {"dgx-z900", "unknown cluster preset", "dgx-h100", "dgx-a100"});
}

TEST_F(CliTest, Fp8OnA100IsRejected) {
  const CommandResult r = run({"--dtype", "fp8", "--cluster", "dgx-a100", "--dp", "8"});
  expect_input_error(r, {"--dtype", "fp8", "A100", "bf16"});
}

// Issue 11: software stacks. A PyTorch stack on a TPU is refused at --stack (or the file's key); an
// attention kernel the chip has no measurements of is refused at --attention, listing those it
// has; the stack the run uses is printed with the plan.
TEST_F(CliTest, StacksAreCheckedAgainstTheChip) {
  expect_input_error(run({"--model", "llama3-8b", "--cluster", "tpu-v5e", "--shape", "16x16",
                          "--dp", "256", "--zero", "3", "--stack", "fsdp", "--seq", "1024"}),
                     {"--stack", "fsdp does not run on TPUs", "maxtext"});
  write_file("scenario.json", R"({"model": "llama3-8b", "cluster": "tpu-v5e", "shape": "16x16",
                                  "dp": 256, "zero": 3, "seq": 1024, "stack": "megatron"})");
  expect_input_error(run({"scenario.json"}), {"scenario.json: /stack", "does not run on TPUs"});
  expect_input_error(run({"--model", "llama3-8b", "--cluster", "dgx-h100", "--nodes", "1",
                          "--dp", "8", "--seq", "1024", "--attention", "splash"}),
                     {"--attention", "splash", "cudnn", "flash2", "flash3"});
  const CommandResult ok = run({"--model", "llama3.2-1b", "--cluster", "dgx-a100", "--nodes", "1",
                                "--dp", "8", "--seq", "1024", "--stack", "fsdp"});
  ASSERT_EQ(ok.exit_code, 0) << ok.output;
  EXPECT_THAT(ok.output, HasSubstr("flash attention, recompute none; stack fsdp; eager kernels, "
                                   "per-tensor optimizer"));
  const CommandResult def = run({"--model", "llama3.2-1b", "--cluster", "dgx-h100", "--nodes",
                                 "1", "--dp", "8", "--seq", "1024"});
  ASSERT_EQ(def.exit_code, 0) << def.output;
  EXPECT_THAT(def.output, HasSubstr("cudnn attention, recompute none; stack megatron"));
}

// ---- bad scenario files ------------------------------------------------------------------------

TEST_F(CliTest, ScenarioUnknownKeyNamesFileAndPointer) {
  write_file("scenario.json", R"({"dp": 8, "bogus": 1})");
  const CommandResult r = run({"scenario.json"});
  expect_input_error(r, {"scenario.json", "/bogus", "unknown field"});
}

// The list of known fields in that message must be the full list, not only the keys the file
// happened to contain: a user who misspelt "dtype" needs to see "dtype" there.
TEST_F(CliTest, ScenarioUnknownKeyListsEveryKnownField) {
  write_file("scenario.json", R"({"dp": 8, "dtyp": "fp8"})");
  const CommandResult r = run({"scenario.json"});
  expect_input_error(r, {"scenario.json", "/dtyp", "unknown field", "model", "cluster", "nodes",
                         "dp", "mbs", "gbs", "seq", "dtype", "attention", "hardware_catalogue"});
}

TEST_F(CliTest, ScenarioWrongTypeNamesFieldAndExpectation) {
  write_file("scenario.json", R"({"dp": "eight"})");
  const CommandResult r = run({"scenario.json"});
  expect_input_error(r, {"scenario.json", "/dp", "integer", "eight"});
}

// Megatron-Core's recompute modules: a list of names, the entry at fault named by its pointer; a
// module the plan or model cannot take is blamed on the key.
TEST_F(CliTest, ScenarioRecomputeModulesNameTheEntryAtFault) {
  write_file("scenario.json", R"({"recompute": "selective", "recompute_modules": ["mlp", 3]})");
  expect_input_error(run({"scenario.json"}),
                     {"scenario.json", "/recompute_modules/1", "core_attn, mla_up_proj"});
  write_file("scenario.json", R"({"recompute": "selective", "recompute_modules": "mlp"})");
  expect_input_error(run({"scenario.json"}), {"scenario.json", "/recompute_modules", "array"});
  write_file("scenario.json",
             R"({"recompute": "selective", "recompute_modules": ["mla_up_proj"]})");
  expect_input_error(run({"scenario.json"}),
                     {"scenario.json", "/recompute_modules", "no multi-head latent attention"});
}

TEST_F(CliTest, ScenarioNotJsonNamesFileAndByteOffset) {
  write_file("scenario.json", "{\"dp\": 8,\n \"mbs\": }\n");
  const CommandResult r = run({"scenario.json"});
  expect_input_error(r, {"scenario.json", "not valid JSON"});
  EXPECT_TRUE(std::regex_search(r.output, std::regex(R"(scenario\.json: byte [0-9]+)"))) << r.output;
}

// --gpus and a scenario's "gpus": whole nodes or part of one node; refused otherwise, where the
// count came from; not with "nodes" in the same file.
TEST_F(CliTest, GpusTakePartOfANode) {
  const CommandResult two = run({"--no-trace", "--model", "gpt2-small", "--cluster", "dgx-h100",
                                 "--gpus", "2", "--tp", "2", "--seq", "1024"});
  ASSERT_EQ(two.exit_code, 0) << two.output;
  EXPECT_NE(two.output.find("1 node(s) x 2 NVIDIA H100"), std::string::npos) << two.output;
  // A count that is not above zero is refused by the flag itself, in meshsim's words.
  expect_input_error(run({"--no-trace", "--gpus", "0"}),
                     {"--gpus: expected a positive number, got 0"});
  expect_input_error(run({"--no-trace", "--model", "gpt2-small", "--gpus", "3"}),
                     {"--gpus: cannot resize \"dgx-h100\" to 3 GPUs: expected whole 8-GPU nodes",
                      "a divisor of 8"});
  write_file("two.json", R"({"model": "gpt2-small", "cluster": "dgx-h100", "gpus": 2,
                             "seq": 1024, "dp": 2})");
  const CommandResult file = run({"two.json", "--no-trace"});
  ASSERT_EQ(file.exit_code, 0) << file.output;
  EXPECT_NE(file.output.find("= 2 devices"), std::string::npos) << file.output;
  // A flag's size replaces the file's.
  const CommandResult node = run({"two.json", "--no-trace", "--nodes", "1", "--dp", "8"});
  ASSERT_EQ(node.exit_code, 0) << node.output;
  EXPECT_NE(node.output.find("= 8 devices"), std::string::npos) << node.output;
  write_file("both.json", R"({"model": "gpt2-small", "cluster": "dgx-h100", "gpus": 2,
                              "nodes": 1})");
  expect_input_error(run({"both.json", "--no-trace"}),
                     {"both.json: /gpus: a cluster is resized by one of gpus, nodes and shape"});
  write_file("three.json", R"({"model": "gpt2-small", "cluster": "dgx-h100", "gpus": 3})");
  expect_input_error(run({"three.json", "--no-trace"}),
                     {"three.json: /gpus: cannot resize \"dgx-h100\" to 3 GPUs"});
}

// Issue 15: a cluster size past the bound (or any size the cluster refuses) is reported where the
// size came from, a flag or a scenario file's /nodes or /shape, not against the cluster's file.
TEST_F(CliTest, ClusterSizeErrorsNameWhereTheSizeCameFrom) {
  expect_input_error(run({"--no-trace", "--nodes", "1000000"}),
                     {"--nodes: 1000000 nodes x 8 devices is more than 131072 devices"});
  write_file("scenario.json", R"({"nodes": 1000000})");
  expect_input_error(run({"scenario.json", "--no-trace"}),
                     {"scenario.json: /nodes: 1000000 nodes x 8 devices is more than 131072"});
  write_file("tpu.json", R"({"model": "llama3-8b", "cluster": "tpu-v5p", "shape": "3x3x3"})");
  expect_input_error(run({"tpu.json", "--no-trace"}),
                     {"tpu.json: /shape: a 3x3x3 slice has 27 chips"});
  expect_input_error(meshsim({"topology", "--cluster", "tpu-v5p", "--shape", "4294967296x2x2"}),
                     {"--shape: the torus 4294967296x2x2 x 1 slice(s) has more than 131072 chips"});
}

// Issue 10: an error the planner raises about a plan field names where the value came from. A
// scenario file's {"tp": 3} is the file and its pointer, not "--tp".
TEST_F(CliTest, PlanErrorOnAFileValueNamesFileAndPointer) {
  write_file("scenario.json", R"({"model": "llama3-8b", "cluster": "dgx-h100", "nodes": 1,
                                  "tp": 3, "dp": 1, "seq": 1024})");
  const CommandResult r = run({"scenario.json"});
  expect_input_error(r, {"scenario.json: /tp: tensor parallel 3 does not divide the 32 attention "
                         "heads of llama3-8b"});
  EXPECT_THAT(r.output, Not(HasSubstr("--tp")));
}

// Issue 13: the new plan keys (HSDP, MoE routing, recompute blocks) are located in the file.
TEST_F(CliTest, HsdpAndRoutingKeysAreLocatedInTheFile) {
  write_file("scenario.json", R"({"model": "llama3-8b", "cluster": "dgx-h100", "nodes": 1,
                                  "dp": 8, "zero": 3, "fsdp": 3, "seq": 1024, "gbs": 8})");
  expect_input_error(run({"scenario.json"}),
                     {"scenario.json: /fsdp: an HSDP shard group of 3 DP ranks must divide dp 8"});
  write_file("moe.json", R"({"model": "llama3-8b", "cluster": "dgx-h100", "nodes": 1,
                             "dp": 8, "moe_load_skew": 0.2, "seq": 1024, "gbs": 8})");
  expect_input_error(run({"moe.json"}),
                     {"moe.json: /moe_load_skew: expert routing needs a mixture-of-experts"});
}

// The same value given as a flag names the flag; a flag overrides the file, and so does its origin.
TEST_F(CliTest, PlanErrorOnAFlagValueNamesTheFlag) {
  write_file("scenario.json", R"({"model": "llama3-8b", "cluster": "dgx-h100", "nodes": 1,
                                  "tp": 8, "seq": 1024})");
  const CommandResult r = run({"scenario.json", "--tp", "3", "--dp", "1"});
  expect_input_error(r, {"--tp: tensor parallel 3 does not divide the 32 attention heads"});
  EXPECT_THAT(r.output, Not(HasSubstr("scenario.json")));
}

// A boolean plan flag takes --sp, --sp=true, --sp=false or --no-sp; any other value is bad input
// (--sp=false had been accepted and ignored: the run kept sequence parallelism).
TEST_F(CliTest, BooleanPlanFlagsTakeTrueOrFalse) {
  write_file("scenario.json", R"({"model": "llama3-8b", "cluster": "dgx-h100", "nodes": 1,
                                  "tp": 8, "sp": true, "seq": 1024, "gbs": 8})");
  for (const char* off : {"--sp=false", "--no-sp"}) {
    const CommandResult r = run({"scenario.json", off, "--json", "r.json"});
    ASSERT_EQ(r.exit_code, 0) << off << r.output;
    EXPECT_EQ(read_json("r.json").at("inputs").at("sp"), false) << off;
  }
  const CommandResult on = run({"scenario.json", "--sp=true", "--json", "r.json"});
  ASSERT_EQ(on.exit_code, 0) << on.output;
  EXPECT_EQ(read_json("r.json").at("inputs").at("sp"), true);
  for (const char* bad : {"--sp=yes", "--overlap-tp=1"}) {
    const CommandResult r = run({"scenario.json", bad});
    expect_input_error(r, {std::string(bad).substr(0, std::string(bad).find('=')), "true",
                           "false"});
  }
}

// A file's value that only fails together with another field: the error is on the field the
// library blames (pp), located in the file; the stated uneven split then fixes it.
TEST_F(CliTest, PipelineErrorsNameTheFileField) {
  write_file("scenario.json", R"({"model": "llama3.2-1b", "cluster": "dgx-h100", "nodes": 3,
                                  "pp": 3, "dp": 8, "seq": 1024})");
  expect_input_error(run({"scenario.json"}),
                     {"scenario.json: /pp: pipeline parallel 3 does not divide the 16 layers",
                      "stage_layers"});
  write_file("bad.json", R"({"model": "llama3.2-1b", "cluster": "dgx-h100", "nodes": 3,
                             "pp": 3, "dp": 8, "seq": 1024, "stage_layers": [4, 6, 7]})");
  expect_input_error(run({"bad.json"}), {"bad.json: /stage_layers: the stages hold 17 layers"});
}

// A value nobody wrote (the neutral default) is named by the flag that changes it.
TEST_F(CliTest, PlanErrorOnADefaultNamesTheFlag) {
  write_file("scenario.json", R"({"model": "gpt2-small", "cluster": "dgx-h100", "nodes": 1,
                                  "dp": 8, "gbs": 8})");
  const CommandResult r = run({"scenario.json"});  // seq 4096 > GPT-2's 1024 positions
  expect_input_error(r, {"--seq: 4096 tokens, but gpt2-small has learned positions for at most "
                         "1024 tokens"});
}

TEST_F(CliTest, ZeroStageOutOfRangeNamesFileOrFlag) {
  write_file("scenario.json", R"({"dp": 8, "zero": 5})");
  expect_input_error(run({"scenario.json"}), {"scenario.json: /zero", "0, 1, 2 or 3", "5"});
  expect_input_error(run({"--zero", "4"}), {"--zero", "0, 1, 2 or 3", "4"});
}

TEST_F(CliTest, UnknownChoiceInAFileListsTheChoices) {
  write_file("scenario.json", R"({"schedule": "1F1B"})");
  expect_input_error(run({"scenario.json"}),
                     {"scenario.json: /schedule", "\"1F1B\"", "gpipe, 1f1b, interleaved, zb"});
  expect_input_error(run({"--recompute", "some"}), {"--recompute", "none", "selective", "full"});
}

// A forced collective algorithm that does not apply is located at --algo by the edge.
TEST_F(CliTest, AlgorithmThatDoesNotApplyNamesTheFlag) {
  const CommandResult r = run({"--model", "llama3.2-1b", "--cluster", "dgx-h100", "--nodes", "2",
                               "--dp", "16", "--gbs", "16", "--seq", "1024", "--algo", "nvls"});
  expect_input_error(r, {"--algo: algorithm nvls does not apply"});
}

// Libraries below the edge throw typed errors on a field; they never name a flag
// (docs/style.md D.13).
TEST_F(CliTest, LibrariesNeverNameAFlag) {
  const std::regex flag(R"("--[a-z][a-z-]*")");
  for (const char* dir : {"workloads", "collectives"}) {
    for (const auto& entry : fs::recursive_directory_iterator(fs::path(MESHSIM_SOURCE_DIR) / dir)) {
      const std::string ext = entry.path().extension().string();
      if (ext != ".h" && ext != ".cc") {
        continue;
      }
      const std::string text = read_source(fs::relative(entry.path(), MESHSIM_SOURCE_DIR).string());
      std::smatch m;
      EXPECT_FALSE(std::regex_search(text, m, flag))
          << entry.path() << " names the flag " << m.str();
    }
  }
}

// ---- bad model files ---------------------------------------------------------------------------

TEST_F(CliTest, ModelFileWithNegativeLayersNamesFileAndField) {
  std::string model = read_source("workloads/models/gpt2-small.json");
  const std::string key = "\"num_layers\": 12";
  const size_t at = model.find(key);
  ASSERT_NE(at, std::string::npos) << "gpt2-small.json changed; update this test";
  model.replace(at, key.size(), "\"num_layers\": -3");
  write_file("tiny-model.json", model);
  const CommandResult r = run({"--model", "tiny-model.json"});
  expect_input_error(r, {"tiny-model.json", "/num_layers", "positive", "-3"});
}

TEST_F(CliTest, HuggingFaceBertConfigIsRejectedClearly) {
  write_file("config.json", R"({
    "architectures": ["BertForMaskedLM"], "model_type": "bert", "hidden_size": 768,
    "num_hidden_layers": 12, "num_attention_heads": 12, "intermediate_size": 3072,
    "vocab_size": 30522, "max_position_embeddings": 512})");
  const CommandResult r = run({"--model", "config.json"});
  expect_input_error(r, {"config.json", "model_type", "bert", "llama"});
}

// ---- successful runs ---------------------------------------------------------------------------

TEST_F(CliTest, RunWritesAConsistentJsonReport) {
  const CommandResult r = run({"--model", "llama3.2-1b", "--cluster", "dgx-h100", "--dp", "8",
                               "--mbs", "1", "--gbs", "64", "--seq", "4096", "--json", "out.json"});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  expect_no_crash(r);
  const nlohmann::json j = read_json("out.json");
  for (const char* key : {"step_time_s", "tokens_per_s", "tokens_per_s_per_device", "mfu",
                          "compute_s", "exposed_comm_s", "bubble_fraction", "peak_memory_bytes",
                          "oom", "inputs"}) {
    ASSERT_TRUE(j.contains(key)) << "missing " << key << " in " << j.dump(2);
  }
  EXPECT_EQ(j["inputs"]["model"], "llama3.2-1b");
  EXPECT_EQ(j["inputs"]["dp"], 8);
  EXPECT_EQ(j["inputs"]["cluster"], "dgx-h100");
  EXPECT_EQ(j["inputs"]["gbs"], 64);
  EXPECT_EQ(j["inputs"]["seq"], 4096);
  EXPECT_EQ(j["oom"], false);

  const double step = j["step_time_s"].get<double>();
  const double tps = j["tokens_per_s"].get<double>();
  const double tps_dev = j["tokens_per_s_per_device"].get<double>();
  const double mfu = j["mfu"].get<double>();
  const double compute = j["compute_s"].get<double>();
  const double exposed = j["exposed_comm_s"].get<double>();
  const double bubble = j["bubble_fraction"].get<double>();
  EXPECT_GT(step, 0.0);
  EXPECT_GT(tps, 0.0);
  EXPECT_GT(tps_dev, 0.0);
  EXPECT_GT(compute, 0.0);
  EXPECT_LE(compute, step);
  // The last gradient all-reduce cannot hide behind compute: the optimizer step waits for it.
  EXPECT_GT(exposed, 0.0);
  EXPECT_LE(exposed, step);
  EXPECT_GE(bubble, 0.0);
  EXPECT_LT(bubble, 1.0);
  EXPECT_GT(mfu, 0.0);
  EXPECT_LT(mfu, 1.0);
  EXPECT_TRUE(near_relative(tps, 64.0 * 4096.0 / step, 1e-9));
  EXPECT_TRUE(near_relative(tps_dev * 8.0, tps, 1e-12));
  EXPECT_GT(j["peak_memory_bytes"].get<int64_t>(), 0);
  if (j.contains("memory_capacity_bytes")) {
    EXPECT_LE(j["peak_memory_bytes"].get<int64_t>(), j["memory_capacity_bytes"].get<int64_t>());
  }
  EXPECT_FALSE(fs::exists(path("meshsim-trace.pftrace"))) << "--no-trace wrote a trace";
}

// An uneven split written as --stage-layers 10,11,11 (docs/cli.md); the ledger of each stage then
// starts with the weights of its own layers (stage 0 of llama3.2-1b: the embedding and 4 layers).
TEST_F(CliTest, StageLayersTakeACommaSeparatedList) {
  const CommandResult r = run({"--model", "llama3.2-1b", "--cluster", "dgx-h100", "--nodes", "3",
                               "--pp", "3", "--dp", "8", "--gbs", "48", "--seq", "1024",
                               "--stage-layers", "4,6,6", "--json", "out.json"});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const nlohmann::json j = read_json("out.json");
  EXPECT_EQ(j["inputs"]["stage_layers"], nlohmann::json::array({4, 6, 6}));
  ASSERT_EQ(j["stages"].size(), 3u);
  // llama3.2-1b: 60,821,504 parameters per layer, 262,668,288 in the (tied) embedding, bf16.
  const int64_t stage0_weights = 2 * (4 * 60'821'504LL + 262'668'288LL);
  EXPECT_EQ(j["stages"][0]["peak_memory_breakdown_bytes"]["weights"].get<int64_t>(),
            stage0_weights);
}

TEST_F(CliTest, NoArgumentsRunsTheDefaultScenarioAndWritesATrace) {
  const CommandResult r = meshsim({});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  expect_no_crash(r);
  EXPECT_THAT(r.output, HasSubstr("step time"));
  EXPECT_THAT(r.output, HasSubstr("MFU"));
  // The default trace is native Perfetto: a Trace message, whose every field is a length-
  // delimited TracePacket (field 1, wire type 2: tag byte 0x0A). Its structure is checked by the
  // decoder tests in tests/traces.
  ASSERT_TRUE(fs::exists(path("meshsim-trace.pftrace"))) << r.output;
  const std::string trace = read_file("meshsim-trace.pftrace");
  ASSERT_GT(trace.size(), 1000u);
  EXPECT_EQ(static_cast<unsigned char>(trace[0]), 0x0Au);
  EXPECT_THAT(r.output, HasSubstr("the first rank of each pipeline stage"));
}

TEST_F(CliTest, TraceFormatFollowsTheExtension) {
  const CommandResult r = meshsim({"--trace", "t.txt"});
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_THAT(r.output, HasSubstr("--trace"));
  EXPECT_THAT(r.output, HasSubstr(".pftrace"));
  const CommandResult bad = meshsim({"--trace", "t.json", "--trace-ranks", "9999"});
  EXPECT_EQ(bad.exit_code, 2) << bad.output;
  EXPECT_THAT(bad.output, HasSubstr("--trace-ranks"));
}

TEST_F(CliTest, TwoRunsGiveIdenticalTracesAndReports) {
  const CommandResult a = meshsim({"run", "--trace", "t1.json", "--json", "r1.json"});
  const CommandResult b = meshsim({"run", "--trace", "t2.json", "--json", "r2.json"});
  ASSERT_EQ(a.exit_code, 0) << a.output;
  ASSERT_EQ(b.exit_code, 0) << b.output;
  const std::string t1 = read_file("t1.json");
  const std::string t2 = read_file("t2.json");
  EXPECT_FALSE(t1.empty());
  EXPECT_TRUE(t1 == t2) << "traces differ (" << t1.size() << " vs " << t2.size() << " bytes)";
  EXPECT_EQ(read_file("r1.json"), read_file("r2.json"));
  // The trace holds events. Read from the text, not parsed: the sanitizer build compiles this
  // file at -O0, where parsing the default step's trace took most of this test's 40 s; the trace
  // tests (tests/traces) parse what the Chrome sink writes.
  EXPECT_NE(t1.find("\"traceEvents\":[\n{\"ph\""), std::string::npos) << t1.substr(0, 200);
}

// ---- out of memory -----------------------------------------------------------------------------

// Llama-3-70B replicated on every H100 under pure DP: 16 bytes per parameter (bf16 weights and
// gradients, fp32 master weights and Adam moments) is 1.13 TB per GPU, against 80 GB.
TEST_F(CliTest, SeventyBillionUnderPureDataParallelIsOutOfMemory) {
  const CommandResult r =
      run({"--model", "llama3-70b", "--cluster", "dgx-h100", "--nodes", "1", "--dp", "8", "--mbs",
           "1", "--gbs", "8", "--seq", "4096", "--json", "oom.json"});
  EXPECT_EQ(r.exit_code, 3) << r.output;
  EXPECT_THAT(r.output, HasSubstr("OUT OF MEMORY"));
  expect_no_crash(r);
  const nlohmann::json j = read_json("oom.json");
  ASSERT_TRUE(j.contains("oom"));
  EXPECT_EQ(j["oom"], true);
  ASSERT_TRUE(j.contains("peak_memory_bytes"));
  ASSERT_TRUE(j.contains("peak_memory_breakdown_bytes"));
  const int64_t peak = j["peak_memory_bytes"].get<int64_t>();
  EXPECT_GE(peak, int64_t{16} * 70'553'706'496);
  if (j.contains("memory_capacity_bytes")) {
    EXPECT_GT(peak, j["memory_capacity_bytes"].get<int64_t>());
  }
  int64_t sum = 0;
  for (const auto& [category, bytes] : j["peak_memory_breakdown_bytes"].items()) {
    EXPECT_GE(bytes.get<int64_t>(), 0) << category;
    sum += bytes.get<int64_t>();
  }
  EXPECT_EQ(sum, peak) << j["peak_memory_breakdown_bytes"].dump(2);
}

// ---- calc and --version ------------------------------------------------------------------------

TEST_F(CliTest, CalcPrintsGpt2SmallTotal) {
  const CommandResult r = meshsim({"calc", "--model", "gpt2-small"});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(std::regex_search(r.output, std::regex(R"(\n\s*total\s+124,439,808\n)"))) << r.output;
  expect_no_crash(r);
}

TEST_F(CliTest, CalcPrintsLlama3_70bTotal) {
  const CommandResult r = meshsim({"calc", "--model", "llama3-70b"});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(std::regex_search(r.output, std::regex(R"(\n\s*total\s+70,553,706,496\n)")))
      << r.output;
  expect_no_crash(r);
}

TEST_F(CliTest, VersionExitsZero) {
  const CommandResult r = meshsim({"--version"});
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("meshsim"));
  expect_no_crash(r);
}

}  // namespace

// ---- meshsim topology and meshsim collective --------------------------------------------------

namespace meshsim {
namespace {

TEST_F(CliTest, TopologySummarizesTheNetwork) {
  const CommandResult r = meshsim({"topology", "--cluster", "dgx-h100", "--nodes", "4"});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("32 x h100-sxm"));
  EXPECT_THAT(r.output, HasSubstr("bisection"));
  EXPECT_THAT(r.output, HasSubstr("diameter"));
  EXPECT_THAT(r.output, HasSubstr("nvlink"));
  const CommandResult t = meshsim({"topology", "--cluster", "tpu-v5p", "--shape", "4x4x8"});
  ASSERT_EQ(t.exit_code, 0) << t.output;
  EXPECT_THAT(t.output, HasSubstr("4x4x8"));
}

TEST_F(CliTest, CollectiveTableAndJsonFollowNcclTests) {
  const CommandResult r =
      meshsim({"collective", "--cluster", "dgx-h100", "--op", "allreduce", "--group", "0-7",
               "--sizes", "1MiB:64MiB", "--factor", "4", "--json", "rows.json"});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("busbw(GB/s)"));
  const nlohmann::json rows = read_json("rows.json");
  ASSERT_EQ(rows.size(), 4u);  // 1, 4, 16, 64 MiB
  double last_busbw = 0;
  for (const auto& row : rows) {
    const double bytes = row["bytes"].get<double>();
    const double t = row["time_s"].get<double>();
    ASSERT_GT(t, 0.0);
    // nccl-tests: algbw = bytes / time in GB/s (1e9), busbw = algbw * 2(p-1)/p for all-reduce.
    EXPECT_NEAR(row["algbw_gbps"].get<double>(), bytes / t / 1e9, 1e-9 * bytes / t);
    EXPECT_NEAR(row["busbw_gbps"].get<double>(), row["algbw_gbps"].get<double>() * 2 * 7 / 8,
                1e-6);
    EXPECT_GE(row["busbw_gbps"].get<double>(), last_busbw);  // larger messages amortize latency
    last_busbw = row["busbw_gbps"].get<double>();
  }
}

TEST_F(CliTest, CollectiveBadInputNamesTheFlag) {
  const CommandResult g = meshsim({"collective", "--group", "0-99"});
  EXPECT_EQ(g.exit_code, 2) << g.output;
  EXPECT_THAT(g.output, HasSubstr("--group"));
  EXPECT_THAT(g.output, HasSubstr("devices 0..7"));
  const CommandResult s = meshsim({"collective", "--sizes", "8GiB:1KiB"});
  EXPECT_EQ(s.exit_code, 2) << s.output;
  EXPECT_THAT(s.output, HasSubstr("--sizes"));
  const CommandResult a = meshsim({"collective", "--algo", "telepathy"});
  EXPECT_EQ(a.exit_code, 2) << a.output;
  EXPECT_THAT(a.output, HasSubstr("--algo"));
  const CommandResult o = meshsim({"collective", "--op", "allsum"});
  EXPECT_EQ(o.exit_code, 2) << o.output;
  EXPECT_THAT(o.output, HasSubstr("--op"));
  const CommandResult n = meshsim({"collective", "--algo", "nvls", "--cluster", "dgx-h100",
                                   "--nodes", "2", "--group", "all"});
  EXPECT_EQ(n.exit_code, 2) << n.output;  // NVLS needs one NVSwitch domain
  EXPECT_THAT(n.output, HasSubstr("--algo"));
}

TEST_F(CliTest, BothBackendsAgreeOnAnUncontendedCollective) {
  const CommandResult a = meshsim({"collective", "--group", "0-7", "--sizes", "256MiB:256MiB",
                                   "--algo", "ring", "--json", "a.json"});
  const CommandResult b = meshsim({"collective", "--group", "0-7", "--sizes", "256MiB:256MiB",
                                   "--algo", "ring", "--backend", "simgrid", "--json", "b.json"});
  ASSERT_EQ(a.exit_code, 0) << a.output;
  ASSERT_EQ(b.exit_code, 0) << b.output;
  const double ta = read_json("a.json")[0]["time_s"].get<double>();
  const double tb = read_json("b.json")[0]["time_s"].get<double>();
  EXPECT_NEAR(tb, ta, 0.05 * ta);
}

}  // namespace
}  // namespace meshsim
