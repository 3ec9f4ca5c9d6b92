// Chakra traces and a step (studies/chakra_run.h): a scenario's step written as traces and read
// back simulates in exactly the step time of the full simulation; import -> simulate -> export
// -> import gives the same step time and the same bytes; a real trace of Chakra's own tests
// simulates within the bounds its measured times set; programs that wait on each other forever
// are the input's error.
#include "meshsim/studies/chakra_run.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "meshsim/scenario/scenario.h"
#include "meshsim/scenario/step.h"
#include "meshsim/sim/error.h"
#include "scenario_from_json.h"
#include "temp_file.h"

namespace meshsim::studies {

using namespace meshsim::scenario;  // the step these studies run
namespace {

namespace fs = std::filesystem;

Scenario scenario(bool overlap_tp = false) {
  // Tensor, pipeline and data parallelism on 8 GPUs: all-reduces and all-gathers, pipeline sends
  // and receives, several streams; with TP overlap, gathers on the copy engines too.
  return testing::scenario_from_json({{"model", "llama3.2-1b"},
                                      {"cluster", "dgx-h100"},
                                      {"nodes", 1},
                                      {"tp", 2},
                                      {"pp", 2},
                                      {"dp", 2},
                                      {"mbs", 1},
                                      {"gbs", 8},
                                      {"seq", 1024},
                                      {"zero", 1},
                                      {"sp", overlap_tp},
                                      {"overlap_tp", overlap_tp}});
}

std::string read(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), {}};
}

// A trace's records after its GlobalMetadata (the whole text of a JSON file).
std::string nodes(const std::string& bytes) {
  if (bytes.empty() || bytes.front() == '{') {
    return bytes;
  }
  size_t pos = 0;
  uint64_t length = 0;
  for (int shift = 0;; shift += 7) {
    const auto b = static_cast<uint8_t>(bytes.at(pos++));
    length |= static_cast<uint64_t>(b & 0x7f) << shift;
    if ((b & 0x80) == 0) {
      break;
    }
  }
  return bytes.substr(pos + length);
}

class ChakraRunTp : public ::testing::TestWithParam<bool> {};
INSTANTIATE_TEST_SUITE_P(OverlapTp, ChakraRunTp, ::testing::Bool());

TEST_P(ChakraRunTp, ExportedStepSimulatesInTheFullSimulationsStepTime) {
  const Scenario s = scenario(GetParam());
  StepOptions full;
  full.full_simulation = true;
  const StepReport step = simulate_step(s, full);
  ASSERT_TRUE(step.simulated);
  const LoadedScenario l = load_and_check(s);
  const fs::path dir = scratch::temp_dir() / (GetParam() ? "chakra-step-tp" : "chakra-step");
  export_step(s, l, dir.string());
  traces::ChakraWorkload w = traces::read_chakra_workload(dir.string());
  ASSERT_EQ(w.programs.size(), 8u);
  EXPECT_GT(w.collectives, 0);
  EXPECT_GT(w.p2p, 0);
  EXPECT_EQ(w.measured, 0);  // meshsim's kernels are rebuilt and costed, not replayed
  // The host's part travels too: every op's issue cost, and Megatron's synchronisations (the
  // gradient norm read before the optimizer).
  int64_t host_timed = 0;
  int64_t host_syncs = 0;
  for (size_t i = 0; i < w.programs[0].size(); ++i) {
    const Op& op = w.programs[0].op(OpId(static_cast<uint32_t>(i)));
    host_timed += op.host > Duration::zero() ? 1 : 0;
    host_syncs += op.host_sync != HostSync::kNone ? 1 : 0;
  }
  EXPECT_GT(host_timed, 0);
  EXPECT_GT(host_syncs, 0);
  // Megatron-Core's fused loss is element-wise kernels reported as the loss (on the last stage's
  // ranks): their rate travels with them.
  int64_t loss_at_elementwise_rate = 0;
  for (const Program& prog : w.programs) {
    for (size_t i = 0; i < prog.size(); ++i) {
      const auto* c = std::get_if<ComputeWork>(&prog.op(OpId(static_cast<uint32_t>(i))).work);
      loss_at_elementwise_rate +=
          c != nullptr && c->op_class == OpClass::kLoss && c->rate_class == OpClass::kElementwise;
    }
  }
  EXPECT_GT(loss_at_elementwise_rate, 0);
  // Export the import again before simulating it (the programs move into the engine).
  const fs::path again = scratch::temp_dir() / (GetParam() ? "chakra-again-tp" : "chakra-again");
  export_workload(w, l.cluster, again.string());
  const WorkloadReport r = simulate_workload(std::move(w), l.cluster, full.comm);
  EXPECT_EQ(r.step_time, step.step_time);
  // import -> simulate -> export -> import: the same nodes (the GlobalMetadata says where the
  // trace came from), the same groups, the same step time.
  for (const char* f : {"rank.0.et", "rank.5.et", "comm_group.json"}) {
    EXPECT_TRUE(nodes(read(dir / f)) == nodes(read(again / f))) << f << " differs";
  }
  EXPECT_EQ(simulate_workload(traces::read_chakra_workload(again.string()), l.cluster, full.comm)
                .step_time,
            step.step_time);
}

// The same step on another cluster: the rebuilt kernels are costed by its chip. An H200 has the
// H100's peak rates and a faster HBM (4.8 against 3.35 TB/s): every memory-bound kernel is
// faster, no GEMM slower.
TEST(ChakraRun, ExportedStepRunsOnAnotherCluster) {
  const Scenario s = scenario();
  const LoadedScenario l = load_and_check(s);
  const fs::path dir = scratch::temp_dir() / "chakra-other";
  export_step(s, l, dir.string());
  const topology::ClusterSpec h200 = topology::load_cluster("h200", topology::Catalogue::builtin());
  const WorkloadReport on_h100 =
      simulate_workload(traces::read_chakra_workload(dir.string()), l.cluster, {});
  const WorkloadReport on_h200 =
      simulate_workload(traces::read_chakra_workload(dir.string()), h200, {});
  EXPECT_LT(on_h200.step_time, on_h100.step_time);
  EXPECT_GT(on_h200.step_time / on_h100.step_time, 0.7);
  // An A100 has no measurements of the cuDNN attention the H100 step runs: refused, not costed.
  const topology::ClusterSpec a100 =
      topology::load_cluster("dgx-a100", topology::Catalogue::builtin());
  try {
    simulate_workload(traces::read_chakra_workload(dir.string()), a100, {});
    ADD_FAILURE() << "no error";
  } catch (const InputError& e) {
    EXPECT_THAT(e.what(), ::testing::HasSubstr("cudnn attention"));
  }
}

// Chakra's feeder-test trace (one rank of a PyTorch run, measured times): its 2,448 host
// operators run one after the other on the host stream, so the step lasts at least their sum, and
// at most every node's time in series.
TEST(ChakraRun, RealTraceSimulatesWithinItsMeasuredBounds) {
  traces::ChakraWorkload w =
      traces::read_chakra_workload(std::string(MESHSIM_SOURCE_DIR) +
                                   "/tests/traces/fixtures/chakra-feeder");
  Duration host;
  Duration all;
  for (uint32_t i = 0; i < w.programs[0].size(); ++i) {
    const Op& op = w.programs[0].op(OpId(i));
    if (const auto* c = std::get_if<ComputeWork>(&op.work)) {
      all += *c->measured;
      host += op.stream == w.programs[0].op(OpId(0)).stream ? *c->measured : Duration::zero();
    }
  }
  const topology::ClusterSpec h100 =
      topology::load_cluster("dgx-h100", topology::Catalogue::builtin());
  const WorkloadReport r = simulate_workload(std::move(w), h100, {});
  EXPECT_GE(r.step_time, host);
  EXPECT_LE(r.step_time, all + Milliseconds(10));  // + the 7 collectives (one rank: no time)
}

TEST(ChakraRun, ProgramsThatWaitForeverAreTheInputsError) {
  // Two groups of both ranks; each rank issues their collectives in the opposite order, the
  // second depending on the first: neither can start.
  traces::ChakraWorkload w;
  w.source = "deadlock";
  w.groups = {{RankId(0), RankId(1)}, {RankId(0), RankId(1)}};
  w.group_names = {"a", "b"};
  for (uint16_t r = 0; r < 2; ++r) {
    // Rank 0 runs group a's collective, then b's; rank 1 b's, then a's.
    Program p;
    OpId prev;
    for (uint16_t k = 0; k < 2; ++k) {
      Op op;
      op.name = k == 0 ? "first" : "second";
      op.stream = static_cast<uint8_t>(1 + k);
      op.work = CollectiveWork{CollectiveKind::kAllReduce, Bytes::of(8),
                               static_cast<uint16_t>(r == 0 ? k : 1 - k)};
      const OpId id = p.add(op);
      if (k == 1) {
        p.add_dependency(prev, id);
      }
      prev = id;
    }
    w.programs.push_back(std::move(p));
    w.group_slots.push_back({GroupId(0), GroupId(1)});
    w.peer_slots.push_back({});
  }
  const topology::ClusterSpec h100 =
      topology::load_cluster("dgx-h100", topology::Catalogue::builtin());
  try {
    simulate_workload(std::move(w), h100, {});
    ADD_FAILURE() << "no error";
  } catch (const InputError& e) {
    EXPECT_THAT(e.what(), ::testing::HasSubstr("deadlock: the ranks' programs wait on each other forever"));
  }
}

}  // namespace
}  // namespace meshsim::studies
