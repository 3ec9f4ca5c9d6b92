// The replay of measured ranks (validation/trace_replay.h) and the calibration from it
// (validation/calibrate.h, calibrate_traces), on synthetic Kineto traces with known answers.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <memory>

#include "kineto_builder.h"
#include "meshsim/sim/comm_model.h"
#include "meshsim/topology/compute_model.h"
#include "meshsim/traces/kineto.h"
#include "meshsim/traces/rank_steps.h"
#include "meshsim/validation/calibrate.h"
#include "meshsim/validation/trace_replay.h"

namespace meshsim::validation {
namespace {

using testing::KinetoBuilder;

Duration us(double v) { return Microseconds(v); }

const topology::Chip& h100() {
  static const topology::Chip chip = topology::Catalogue::builtin().chip("h100-sxm");
  return chip;
}

// Collectives take `collective` on an otherwise empty network; sends are not used.
std::unique_ptr<CommModel> fixed_comm(Duration collective) {
  return std::make_unique<IsolatedCommModel>(
      [collective](CollectiveKind, Bytes, std::span<const RankId>) { return collective; },
      [](RankId, RankId, Bytes) { return Duration::zero(); });
}

struct Loaded {
  traces::RankTrace trace;
  traces::RankSteps steps;
};
Loaded load(const KinetoBuilder& b) {
  Loaded l{traces::read_kineto_bytes(b.text(), "rank.json"), {}};
  l.steps = traces::find_steps(l.trace);
  return l;
}

// Every kernel kept as measured, each starting when its stream, its launch, a kernel of another
// stream or the host's synchronization let it: the replay reproduces the measured timeline.
TEST(TraceReplay, AFullyMeasuredStepReplaysExactly) {
  KinetoBuilder b;
  b.step(1, 0, 1000);
  b.kernel("elementwise_kernel", 2, 50, 7, 0, 2);
  b.kernel("elementwise_kernel", 52, 50, 7, 5, 2);
  b.kernel("ncclDevKernel_AllReduce_Sum_bf16_RING_LL", 102, 100, 20, 10, 2);  // waits for the 2nd
  b.runtime("cudaStreamSynchronize", 20, 183);                              // returns at 203
  b.kernel("elementwise_kernel", 212, 10, 7, 210, 2);
  const Loaded l = load(b);
  ASSERT_EQ(l.steps.steps.size(), 1u);
  const auto comm = fixed_comm(Duration::zero());
  const Replay r = replay_step(l.trace, l.steps.steps[0], 0, 1, h100(), *comm);
  ASSERT_EQ(r.ops.size(), 4u);
  EXPECT_EQ(r.ops[0].why, Unmodelled::kNoOperator);
  EXPECT_EQ(r.ops[2].why, Unmodelled::kNoMetadata);
  EXPECT_EQ(r.inferred_dependencies, 1);
  EXPECT_EQ(r.measured_step, us(220));
  EXPECT_EQ(r.simulated_step, us(220));
  for (size_t i = 0; i < r.ops.size(); ++i) {
    EXPECT_EQ(r.ops[i].simulated_start, SimTime::zero() + (l.steps.steps[0].ops[i].start -
                                                           l.steps.steps[0].start))
        << i;
    EXPECT_EQ(r.ops[i].simulated, r.ops[i].measured) << i;
  }
  EXPECT_EQ(r.simulated.exposed_comm, r.measured.exposed_comm);
  EXPECT_EQ(r.simulated.host_gap, r.measured.host_gap);
  EXPECT_EQ(r.measured.host_gap, us(212 - 202));  // the last kernel, launched after the sync
}

// A GEMM with its shape and an all-reduce with its metadata, costed by meshsim and overlapping by
// exactly what the models say.
TEST(TraceReplay, GemmAndAllReduceAreCostedAndOverlapExactly) {
  KinetoBuilder b(0, 2);
  b.step(1, 0, 100);
  b.op("aten::mm", 0, 0.9, {{4096, 8192}, {8192, 2048}}, {"c10::BFloat16", "c10::BFloat16"});
  b.kernel("sm90_xmma_gemm_bf16bf16_bf16f32", 2, 200, 7, 0, 0.5);
  b.kernel("ncclDevKernel_AllReduce_Sum_bf16_RING_LL", 2, 700, 20, 1, 1,
           KinetoBuilder::all_reduce(1 << 24, {0, 1}));
  b.op("aten::add", 3, 1, {{1024, 1024}, {1024, 1024}}, {"float", "float"});
  b.kernel("vectorized_elementwise_kernel", 202, 30, 7, 3.2, 0.5);
  const Loaded l = load(b);
  const auto comm = fixed_comm(us(123));
  const Replay r = replay_step(l.trace, l.steps.steps[0], 0, 2, h100(), *comm);
  ASSERT_EQ(r.ops.size(), 3u);
  const topology::RooflineComputeModel model(h100());
  // The GEMM: 2 m k n FLOPs, its three matrices in bf16.
  EXPECT_EQ(r.ops[0].cost, ReplayCost::kGemm);
  EXPECT_DOUBLE_EQ(r.ops[0].compute.flops.count(), 2.0 * 4096 * 8192 * 2048);
  EXPECT_EQ(r.ops[0].compute.bytes,
            Bytes::of((4096 * 8192 + 8192 * 2048 + 4096 * 2048) * 2));
  const Duration gemm = model.compute_time(RankId(0), r.ops[0].compute);
  EXPECT_EQ(r.ops[0].simulated, gemm);
  // The all-reduce: 2^24 bf16 elements over ranks 0 and 1.
  EXPECT_EQ(r.ops[1].cost, ReplayCost::kCollective);
  ASSERT_TRUE(r.ops[1].collective.has_value());
  EXPECT_EQ(r.ops[1].collective->kind, CollectiveKind::kAllReduce);
  EXPECT_EQ(r.ops[1].collective->bytes, Bytes::of(int64_t{1} << 25));
  EXPECT_EQ(r.ops[1].group, (std::vector<RankId>{RankId(0), RankId(1)}));
  EXPECT_EQ(r.ops[1].simulated, us(123));
  // The add: read both inputs, write one of their size, in fp32.
  EXPECT_EQ(r.ops[2].cost, ReplayCost::kMemory);
  EXPECT_EQ(r.ops[2].compute.bytes, Bytes::of(3 * 1024 * 1024 * 4));
  // Both start at t0: the all-reduce hides under the GEMM (or what of it sticks out is exposed).
  EXPECT_EQ(r.ops[0].simulated_start, SimTime::zero());
  EXPECT_EQ(r.ops[1].simulated_start, SimTime::zero());
  EXPECT_EQ(r.simulated.overlap, std::min(gemm, us(123)));
  EXPECT_EQ(r.simulated.exposed_comm,
            us(123) > gemm ? us(123) - gemm : Duration::zero());
  const std::vector<KernelRow> rows = kernel_rows(l.trace, {&r});
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[0].name, "ncclDevKernel_AllReduce_Sum_bf16_RING_LL");  // 700 us against 123
}

// A send/receive kept as measured waits for a peer the replay does not have: it starts no earlier
// than it did (the peer's measured clock), so the rank's wait on its neighbour is kept even where
// its own work ran faster in the simulation; where its own work runs longer, the transfer starts
// after it and keeps its whole measured duration.
TEST(TraceReplay, ATransferKeptAsMeasuredWaitsForItsPeersClock) {
  for (const bool slower : {false, true}) {
    KinetoBuilder b(0, 2);
    b.step(1, 0, 2000);
    // 256^3 in bf16 takes microseconds on an H100; 64K x 8K x 8K takes milliseconds.
    const int64_t m = slower ? 65536 : 256;
    const int64_t k = slower ? 8192 : 256;
    b.op("aten::mm", 0, 0.9, {{m, k}, {k, k}}, {"c10::BFloat16", "c10::BFloat16"});
    b.kernel("sm90_xmma_gemm_bf16bf16_bf16f32", 2, 400, 7, 0, 0.5);
    b.kernel("ncclDevKernel_SendRecv", 402, 100, 7, 1, 0.5);
    const Loaded l = load(b);
    const auto comm = fixed_comm(Duration::zero());
    const Replay r = replay_step(l.trace, l.steps.steps[0], 0, 2, h100(), *comm);
    ASSERT_EQ(r.ops.size(), 2u);
    EXPECT_EQ(r.ops[1].why, Unmodelled::kPointToPoint);
    EXPECT_EQ(r.anchored_transfers, 1);
    const SimTime gemm_end = r.ops[0].simulated_start + r.ops[0].simulated;
    EXPECT_EQ(slower, gemm_end > SimTime::zero() + us(400)) << gemm_end.seconds();
    EXPECT_EQ(r.ops[1].simulated_start, std::max(gemm_end, SimTime::zero() + us(400)));
    EXPECT_EQ(r.ops[1].simulated, us(100));
    if (!slower) {
      EXPECT_EQ(r.simulated_step, r.measured_step);  // the peer's clock, kept
    }
  }
}

// The work queued before a step (here the previous step's long kernel on stream 7, which a sync
// of this step waits for) is not replayed but kept at its measured end: the sync is released
// there, and both timelines start the step's clock there (RankStep::measured_start), not at the
// step's first op on another stream.
TEST(TraceReplay, AStepStartsWhereTheWorkQueuedBeforeItEnds) {
  KinetoBuilder b;
  b.step(1, 0, 100);
  b.kernel("elementwise_kernel", 10, 490, 7, 5, 2);  // runs until 500
  b.step(2, 100, 500);
  b.kernel("elementwise_kernel", 120, 10, 9, 115, 2);  // beside it, on stream 9
  b.runtime("cudaStreamSynchronize", 140, 360);        // returns at 500
  b.kernel("elementwise_kernel", 505, 50, 7, 503, 2);
  const Loaded l = load(b);
  ASSERT_EQ(l.steps.steps.size(), 2u);
  const traces::RankStep& step = l.steps.steps[1];
  EXPECT_EQ(step.measured_start(), SimTime::zero() + us(500));
  const auto comm = fixed_comm(Duration::zero());
  const Replay r = replay_step(l.trace, step, 0, 1, h100(), *comm);
  ASSERT_EQ(r.ops.size(), 2u);
  EXPECT_EQ(r.measured_step, us(55));
  EXPECT_EQ(r.simulated_step, us(55));
  EXPECT_EQ(r.ops[1].simulated_start, SimTime::zero() + us(505 - 120));
}

TEST(TraceReplay, SaysWhyAKernelKeepsItsMeasuredTime) {
  KinetoBuilder b(0, 4);
  b.step(1, 0, 100);
  b.op("aten::mm", 0, 2);  // no shapes
  b.kernel("ampere_sgemm_128x64_nn", 10, 5, 7, 1, 0.5);
  b.op("aten::_foreach_add_", 3, 2,
       nlohmann::json::array({nlohmann::json::array(), nlohmann::json::array()}),
       {"TensorList", "Scalar"});
  b.kernel("multi_tensor_apply_kernel<AdamFunctor>", 20, 5, 7, 4, 0.5);
  b.kernel("ncclDevKernel_SendRecv", 30, 5, 20, 6, 0.5);
  b.kernel("ncclDevKernel_AllReduce_Sum_bf16_RING_LL", 40, 5, 20, 7, 0.5,
           KinetoBuilder::all_reduce(1024, {1, 2}));  // a group without this rank
  const Loaded l = load(b);
  const std::vector<ReplayOp> ops = cost_ops(l.trace, l.steps.steps[0], 0, 4, h100());
  ASSERT_EQ(ops.size(), 4u);
  EXPECT_EQ(ops[0].why, Unmodelled::kNoShapes);
  EXPECT_EQ(ops[1].why, Unmodelled::kClass);
  EXPECT_EQ(ops[2].why, Unmodelled::kPointToPoint);
  EXPECT_EQ(ops[3].why, Unmodelled::kNoGroup);
  for (const ReplayOp& op : ops) {
    EXPECT_EQ(op.cost, ReplayCost::kMeasured);
    EXPECT_EQ(op.compute.measured, op.measured);
  }
}

// Traces written from the model at known efficiencies: the fit finds them again, held out too.
TEST(TraceCalibration, RecoversKnownEfficienciesFromSyntheticRanks) {
  topology::Chip truth = h100();
  truth.efficiency.matmul = 0.55;
  truth.efficiency.memory_by_class[static_cast<size_t>(OpClass::kElementwise)] = 0.7;
  truth.efficiency.launch_overhead = us(3);
  const topology::RooflineComputeModel model(truth);
  std::vector<Loaded> ranks;
  for (int64_t rank = 0; rank < 2; ++rank) {
    KinetoBuilder b(rank, 2);
    double t = 0;
    for (int step = 0; step < 2; ++step) {
      b.step(step, t, 200);
      double host = t;
      double device = t + 50;  // the host runs ahead: kernels follow each other on the stream
      for (int i = 0; i < 12; ++i) {
        const int64_t m = 512 << (i % 4);
        const int64_t k = 1024 << ((i + rank) % 3);
        const int64_t n = 4096;
        const int64_t e = int64_t{1} << (16 + (i + step) % 8);
        ComputeWork gemm;
        gemm.op_class = OpClass::kMatmul;
        gemm.dtype = Dtype::kBf16;
        gemm.flops = Flops::of(2.0 * static_cast<double>(m * k) * static_cast<double>(n));
        gemm.bytes = Bytes::of((m * k + k * n + m * n) * 2);
        gemm.shape = MatmulShape{m, k, n, 1};
        ComputeWork add;
        add.op_class = OpClass::kElementwise;
        add.dtype = Dtype::kBf16;
        add.bytes = Bytes::of(3 * e * 2);
        for (const auto& [name, work, dims] :
             {std::tuple{"aten::mm", gemm, nlohmann::json{{m, k}, {k, n}}},
              std::tuple{"aten::add", add, nlohmann::json{{e}, {e}}}}) {
          const double dur = model.compute_time(RankId(0), work).microseconds();
          b.op(name, host, 3, dims, {"c10::BFloat16", "c10::BFloat16"});
          b.kernel(std::string(name) == "aten::mm" ? "sm90_xmma_gemm_bf16bf16" : "add_kernel",
                   device, dur, 7, host + 1, 1);
          host += 4;
          device += dur;
        }
      }
      t = device + 100;
    }
    ranks.push_back(load(b));
  }
  std::vector<TraceCase> cases;
  for (int64_t rank = 0; rank < 2; ++rank) {
    for (const traces::RankStep& s : ranks[static_cast<size_t>(rank)].steps.steps) {
      cases.push_back({&ranks[static_cast<size_t>(rank)].trace, &s, rank});
    }
  }
  ASSERT_EQ(cases.size(), 4u);
  const TraceCalibration c =
      calibrate_traces(h100(), cases, 2, [] { return fixed_comm(Duration::zero()); });
  EXPECT_NEAR(c.after.matmul, 0.55, 0.55 * 0.01);
  EXPECT_NEAR(*c.after.memory_by_class[static_cast<size_t>(OpClass::kElementwise)], 0.7, 0.007);
  EXPECT_NEAR(c.after.launch_overhead.microseconds(), 3, 0.05);
  EXPECT_EQ(c.held_out_by, "rank");
  ASSERT_TRUE(c.max_abs_held_out_error.has_value());
  EXPECT_LT(*c.max_abs_held_out_error, 0.01);
  for (const TraceCalibrationCase& k : c.cases) {
    EXPECT_GT(std::fabs(k.error_before), 0.05);  // the catalogue's values are not the truth
    EXPECT_LT(std::fabs(k.error_after), 0.01);
  }
  std::map<std::string, bool> pinned;
  for (const FittedParameter& p : c.parameters) {
    pinned[p.name] = p.pinned;
  }
  EXPECT_TRUE(pinned.at("matmul"));
  EXPECT_TRUE(pinned.at("memory/elementwise"));
  EXPECT_TRUE(pinned.at("launch_overhead"));
  EXPECT_FALSE(pinned.at("memory/norm"));  // no norm kernel in the traces: the catalogue's value
  EXPECT_EQ(*c.after.memory_by_class[static_cast<size_t>(OpClass::kNorm)],
            *h100().efficiency.memory_by_class[static_cast<size_t>(OpClass::kNorm)]);
}

TEST(TraceCalibration, RefusesTracesWithNothingToFit) {
  KinetoBuilder b;
  b.step(1, 0, 100);
  b.kernel("elementwise_kernel", 2, 50, 7, 0, 2);  // no operator: nothing costed
  const Loaded l = load(b);
  EXPECT_THROW((void)calibrate_traces(h100(), {{&l.trace, &l.steps.steps[0], 0}}, 1,
                                      [] { return fixed_comm(Duration::zero()); }),
               InputError);
}

}  // namespace
}  // namespace meshsim::validation
