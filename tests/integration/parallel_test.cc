// The parallel planner end to end through the engine: pipeline memory in the ledger, overlap,
// rank layout, representative versus full simulation, and invalid plans.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <memory>
#include <optional>

#include "meshsim/scenario/comm_setup.h"

#include <set>

#include "meshsim/collectives/ring_model.h"
#include "meshsim/sim/analysis.h"
#include "meshsim/sim/error.h"
#include "meshsim/sim/simulation.h"
#include "meshsim/topology/cluster.h"
#include "meshsim/topology/compute_model.h"
#include "meshsim/workloads/plan_loader.h"
#include "meshsim/workloads/step.h"

namespace meshsim {
namespace {

using workloads::ParallelPlan;
using workloads::SimulationMode;

struct Outcome {
  RunResult run;
  std::vector<RankBreakdown> breakdown;
  workloads::StepPlan plan;
  Timeline timeline;
};

// Simulates `plan` on DGX H100 nodes with the ring model (NVLink inside a node, NICs across), or,
// with `network`, on the shared network model as `meshsim run` wires it (scenario::CommSetup).
// `interference`: whether compute that overlaps a collective runs on the SMs it leaves (the
// chip's comm_units); tests of the schedule alone turn it off.
Outcome simulate(const std::string& model, const ParallelPlan& p, SimulationMode mode,
                 const std::optional<scenario::CommOptions>& network = std::nullopt,
                 const topology::FabricOverrides& fabric = {}, bool interference = true) {
  const auto catalogue = topology::Catalogue::builtin();
  topology::ClusterSpec cluster = topology::load_cluster("dgx-h100", catalogue);
  if (!interference) {
    cluster.chip.efficiency.comm_units.reset();
  }
  const int64_t nodes = std::max<int64_t>(1, p.world() / 8);
  cluster = topology::override_fabric(topology::resize_nodes(cluster, nodes), fabric);
  Outcome out;
  out.plan = workloads::plan_step(workloads::load_model(model), p, mode);
  topology::RooflineComputeModel compute(cluster.chip);
  const collectives::LinkParams up{cluster.intra_node_bandwidth(), cluster.intra_node_latency()};
  const collectives::LinkParams net{cluster.inter_node_bandwidth(), cluster.inter_node_latency()};
  collectives::RingAlphaBetaModel ring([up, net](RankId a, RankId b) {
    return a.value() / 8 == b.value() / 8 ? up : net;
  });
  IsolatedCommModel isolated = ring.comm_model();
  std::unique_ptr<scenario::CommSetup> setup;
  if (network) {
    setup = std::make_unique<scenario::CommSetup>(cluster, out.plan, *network);
  }
  Simulation sim(compute, setup ? static_cast<CommModel&>(setup->model()) : isolated);
  workloads::load_plan(sim, out.plan);
  Timeline tl;
  sim.record_into(tl);
  out.run = sim.run();
  out.breakdown = analyze(tl, sim, out.run.end);
  // Issue 16: the engine's online breakdown equals the analysis of the recorded timeline.
  for (size_t i = 0; i < out.breakdown.size(); ++i) {
    EXPECT_EQ(out.run.ranks[i].breakdown, out.breakdown[i]) << "rank " << i;
  }
  out.timeline = std::move(tl);
  return out;
}

ParallelPlan small_plan() {
  ParallelPlan p;
  p.tp = 2;
  p.pp = 2;
  p.dp = 2;
  p.mbs = 1;
  p.gbs = 8;
  p.seq = 1024;
  return p;
}

// 1F1B holds at most PP - s microbatches of activations on stage s: the ledger's peak on each
// stage is exactly that many microbatches of the stage's layers (plus the stage's extras).
TEST(Pipeline, OneFOneBActivationsInTheLedger) {
  ParallelPlan p;
  p.pp = 4;
  p.dp = 2;
  p.gbs = 16;  // 8 microbatches per pipeline
  p.seq = 1024;
  p.schedule = workloads::PipelineSchedule::kOneFOneB;
  const Outcome o = simulate("llama3.2-1b", p, SimulationMode::kRepresentative);
  const auto model = workloads::load_model("llama3.2-1b");
  const Bytes per_layer = workloads::layer_activations(model, p).total();
  for (size_t i = 0; i < o.plan.ranks.size(); ++i) {
    const int64_t s = o.plan.ranks[i].stage;
    // The embedding lives on stage 0, the head on the last.
    const auto outside = workloads::outside_layer_activations(model, p, s == 0, s == 3);
    const int64_t in_flight = 4 - s;
    Bytes expected = per_layer * (4 * in_flight);  // 16 layers / 4 stages
    if (s == 0) {
      expected += outside.embedding_dropout_mask * in_flight;
    }
    if (s == 3) {
      expected += outside.final_norm_input + outside.lm_head_input + outside.logits;
    }
    const Bytes held =
        o.run.ranks[i].memory.at_peak[static_cast<size_t>(MemoryCategory::kActivations)];
    EXPECT_EQ(held, expected) << "stage " << s << " held " << held.count() << " expected "
                              << expected.count() << " per layer " << per_layer.count();
  }
}

// ZB-V end to end on a real model: the V's programs run without deadlock, stage 0 computes both
// the embedding and the loss, every stage sends as many messages as its peers receive, and with
// 8 microbatches on 4 stages the step is shorter than 1F1B's (whose bubble is (p-1)/(m+p-1) =
// 27% at equal costs, against ZB-V's 6% bound; the model's LM head, 2.2 layers' worth of
// forward, on stage 0 besides 4 layers and the embedding, does not undo that).
TEST(Pipeline, ZeroBubbleVRunsEndToEnd) {
  ParallelPlan p;
  p.pp = 4;
  p.dp = 2;
  p.gbs = 16;  // 8 microbatches per pipeline
  p.seq = 1024;
  p.vpp = 2;
  p.schedule = workloads::PipelineSchedule::kZeroBubbleV;
  const Outcome v = simulate("llama3.2-1b", p, SimulationMode::kRepresentative);
  ParallelPlan base = p;
  base.vpp = 1;
  base.schedule = workloads::PipelineSchedule::kOneFOneB;
  const Outcome f = simulate("llama3.2-1b", base, SimulationMode::kRepresentative);
  base.schedule = workloads::PipelineSchedule::kZeroBubble;
  const Outcome z = simulate("llama3.2-1b", base, SimulationMode::kRepresentative);
  fmt::print("llama3.2-1b pp 4 m 8: 1f1b {} us, zb {} us, zbv {} us\n", f.run.end.ps() / 1000000,
             z.run.end.ps() / 1000000, v.run.end.ps() / 1000000);
  EXPECT_LT(v.run.end, f.run.end);
  size_t sends = 0;
  size_t recvs = 0;
  // The simulation took the programs: plan them again to read them.
  const workloads::StepPlan plan = workloads::plan_step(workloads::load_model("llama3.2-1b"), p,
                                                        SimulationMode::kRepresentative);
  ASSERT_EQ(plan.programs.size(), 4u);
  for (size_t s = 0; s < plan.programs.size(); ++s) {
    const Program& prog = plan.programs[s];
    bool embedding = false;
    bool head = false;
    for (size_t i = 0; i < prog.size(); ++i) {
      const Op& op = prog.op(OpId(static_cast<uint32_t>(i)));
      embedding = embedding || op.name == "fwd.embedding";
      head = head || (op.name.starts_with("fwd.") && op.name.ends_with("lm_head"));
      if (std::holds_alternative<PeerWork>(op.work)) {
        (op.is_send ? sends : recvs) += 1;
      }
    }
    EXPECT_EQ(embedding, s == 0) << "stage " << s;
    EXPECT_EQ(head, s == 0) << "stage " << s;
  }
  // 2 pp - 2 boundaries between ranks (the turn is local), each crossed by an activation and a
  // gradient per microbatch.
  EXPECT_EQ(sends, static_cast<size_t>((2 * 4 - 2) * 2 * 8));
  EXPECT_EQ(recvs, sends);
}

// Switching gradient-reduction overlap off adds exactly the communication that overlap hid (with
// interference off: overlapped compute then runs at full speed).
TEST(Overlap, TurningItOffAddsTheHiddenCommunication) {
  ParallelPlan on;
  on.dp = 8;
  on.gbs = 32;
  on.seq = 2048;
  on.grad_bucket = MB(80);  // the same buckets either way (Megatron's rule: one without overlap)
  ParallelPlan off = on;
  off.overlap.grad_reduce = false;
  const Outcome a = simulate("llama3.2-1b", on, SimulationMode::kFull, std::nullopt, {}, false);
  const Outcome b = simulate("llama3.2-1b", off, SimulationMode::kFull, std::nullopt, {}, false);
  const RankBreakdown& ra = a.breakdown[0];
  const RankBreakdown& rb = b.breakdown[0];
  const Duration hidden = ra.comm - ra.exposed_comm;
  EXPECT_GT(hidden, Duration::zero());
  EXPECT_EQ(rb.comm, ra.comm);  // the same buckets, the same collectives
  EXPECT_EQ(rb.exposed_comm, rb.comm);  // nothing overlaps them any more
  EXPECT_EQ((b.run.end - a.run.end).ps(), hidden.ps());
}

// Megatron-Core builds one DDP per model chunk: a chunk's gradients are reduced as its last
// backward ends, while the other chunks' backwards still run. Interleaved 1F1B, PP 2 x VPP 2 x
// DP 2: on every rank the chunks' reductions but the last hide behind the remaining backward,
// so the exposed data-parallel time is at most the last reduction's.
TEST(Overlap, EachChunksGradientsReduceBehindTheRemainingBackward) {
  ParallelPlan p;
  p.pp = 2;
  p.vpp = 2;
  p.schedule = workloads::PipelineSchedule::kInterleaved;
  p.dp = 2;
  p.gbs = 8;
  p.seq = 1024;
  // A bucket larger than a chunk's gradients: without a DDP per chunk, the first chunk's would
  // wait in the open bucket for the second's.
  p.grad_bucket = GB(1);
  const Outcome o = simulate("llama3.2-1b", p, SimulationMode::kFull, std::nullopt, {}, false);
  // The simulation took the programs over: the same plan again, to read them.
  const workloads::StepPlan step =
      workloads::plan_step(workloads::load_model("llama3.2-1b"), p, SimulationMode::kFull);
  for (size_t r = 0; r < step.ranks.size(); ++r) {
    const Program& prog = step.programs.at(step.ranks[r].program.index());
    // The step's last backward pass starts with its gradient's receive (no rank holds the last
    // virtual stage's chunk last: PP 2 x VPP 2); its last kernel ends the backward. The
    // reductions issued before that pass are the other chunk's.
    std::vector<size_t> reduces;
    size_t last_pass = 0;
    size_t last_kernel = 0;
    for (size_t i = 0; i < prog.size(); ++i) {
      const Op& op = prog.op(OpId(static_cast<uint32_t>(i)));
      if (op.kind() == OpKind::kCompute && op.name.starts_with("bwd.")) {
        last_kernel = i;
      }
      if (op.name.ends_with(".recv_gradient")) {
        last_pass = i;
      }
      if (op.name.find("grad_bucket") != std::string::npos) {
        reduces.push_back(i);
      }
    }
    ASSERT_GE(reduces.size(), 2u) << "rank " << r;
    ASSERT_LT(reduces.front(), last_pass) << "rank " << r << ": a chunk reduces before the end";
    // The other chunk's reductions end before the last backward kernel does (hidden); only the
    // last pass's can be exposed.
    SimTime last_end;
    Duration tail;
    std::vector<SimTime> early_ends;
    for (const OpRecord& rec : o.timeline.ops) {
      if (rec.rank.index() != r) {
        continue;
      }
      if (rec.op.index() == last_kernel) {
        last_end = rec.end;
      }
      if (std::find(reduces.begin(), reduces.end(), rec.op.index()) != reduces.end()) {
        if (rec.op.index() < last_pass) {
          early_ends.push_back(rec.end);
        } else {
          tail += rec.end - rec.start;
        }
      }
    }
    ASSERT_FALSE(early_ends.empty());
    for (const SimTime end : early_ends) {
      EXPECT_LE(end, last_end) << "rank " << r;
    }
    const Duration exposed_dp =
        o.run.ranks[r].breakdown.exposed_in(workloads::category_of(workloads::CommKind::kData));
    EXPECT_LE(exposed_dp, tail) << "rank " << r;
  }
}

// TP 8 x PP 4 x DP 64 on 2048 GPUs: every TP group is one node, every DP group spans 64 nodes.
TEST(Layout, TensorGroupsInsideNodesDataGroupsAcrossThem) {
  ParallelPlan p;
  p.tp = 8;
  p.pp = 4;
  p.dp = 64;
  const workloads::RankLayout layout(p);
  for (int64_t r = 0; r < 2048; ++r) {
    std::set<int64_t> tp_nodes;
    for (const int64_t m : layout.group_along(r, workloads::Axis::kTensor)) {
      tp_nodes.insert(m / 8);
    }
    ASSERT_EQ(tp_nodes.size(), 1u) << r;
    std::set<int64_t> dp_nodes;
    for (const int64_t m : layout.group_along(r, workloads::Axis::kData)) {
      dp_nodes.insert(m / 8);
    }
    ASSERT_EQ(dp_nodes.size(), 64u) << r;
    const auto pp = layout.group_along(r, workloads::Axis::kPipeline);
    ASSERT_EQ(pp.size(), 4u);
  }
}

// Representative mode (one simulated rank per class) plans fewer ranks than full simulation and
// ends the step at the same time: exactly, or within 1 ns on SimGrid, whose clock is in double
// seconds.
void expect_representative_equals_full(
    const std::string& model, const ParallelPlan& p,
    const std::optional<scenario::CommOptions>& network = std::nullopt,
    const topology::FabricOverrides& fabric = {}) {
  const Outcome rep = simulate(model, p, SimulationMode::kRepresentative, network, fabric);
  const Outcome full = simulate(model, p, SimulationMode::kFull, network, fabric);
  EXPECT_LT(rep.plan.ranks.size(), full.plan.ranks.size());
  if (network && network->backend == collectives::NetworkBackend::kSimGrid) {
    EXPECT_NEAR(rep.run.end.seconds(), full.run.end.seconds(), 1e-9);
  } else {
    EXPECT_EQ(rep.run.end, full.run.end);
  }
}

// Symmetric inputs: simulating one representative per (stage, CP index) gives the same step as
// simulating every rank.
TEST(Symmetry, RepresentativeEqualsFullSimulation) {
  for (auto schedule : {workloads::PipelineSchedule::kOneFOneB,
                        workloads::PipelineSchedule::kInterleaved,
                        workloads::PipelineSchedule::kZeroBubble,
                        workloads::PipelineSchedule::kZeroBubbleV}) {
    ParallelPlan p = small_plan();
    p.schedule = schedule;
    p.vpp = schedule == workloads::PipelineSchedule::kInterleaved ||
                    schedule == workloads::PipelineSchedule::kZeroBubbleV
                ? 2
                : 1;
    p.sp = true;
    p.zero = workloads::ZeroStage::kOptimizerStates;
    SCOPED_TRACE(to_string(schedule));
    expect_representative_equals_full("llama3.2-1b", p);
  }
}

// Issue 12: the same on the shared network, where collectives and sends contend for NICs, NVLink
// and spines: the images of the simulated groups and ranks (representative mode) load the links
// exactly as the ranks themselves do (full mode), on a non-blocking and a 4:1 fabric, with both
// network models.
TEST(Symmetry, RepresentativeEqualsFullOnTheSharedNetwork) {
  ParallelPlan p;
  p.tp = 2;
  p.pp = 2;
  p.dp = 4;
  p.sp = true;
  p.zero = workloads::ZeroStage::kOptimizerStates;
  p.schedule = workloads::PipelineSchedule::kInterleaved;
  p.vpp = 2;
  p.mbs = 1;
  p.gbs = 16;
  p.seq = 1024;
  topology::FabricOverrides thin;
  thin.oversubscription = 4.0;
  using collectives::NetworkBackend;
  for (const NetworkBackend backend : {NetworkBackend::kAnalytical, NetworkBackend::kSimGrid}) {
    for (const auto& fabric : {topology::FabricOverrides{}, thin}) {
      SCOPED_TRACE(fmt::format("{} network, oversubscription {}", to_string(backend),
                               fabric.oversubscription.value_or(1.0)));
      scenario::CommOptions o;
      o.backend = backend;
      expect_representative_equals_full("llama3.2-1b", p, o, fabric);
    }
  }
}

// The flex dispatcher's two hops (issue 13): the rail groups across nodes and the EP ranks of a
// node, on the shared network, load the links in representative mode as in full mode.
TEST(Symmetry, FlexDispatcherRepresentativeEqualsFull) {
  ParallelPlan p;
  p.tp = 2;
  p.sp = true;
  p.dp = 8;
  p.ep = 8;
  p.gbs = 8;
  p.seq = 1024;
  p.moe_dispatcher = workloads::MoeDispatcher::kFlex;
  p.node_ranks = 8;
  expect_representative_equals_full("mixtral-8x7b", p, scenario::CommOptions{});
}

TEST(Symmetry, ContextParallelRingRepresentativeEqualsFull) {
  ParallelPlan p;
  p.tp = 2;
  p.cp = 2;
  p.dp = 2;
  p.gbs = 4;
  p.seq = 2048;
  expect_representative_equals_full("llama3.2-1b", p);
}

// The library's error names the plan field and what was expected, never a flag: "tp: ...".
std::string plan_error(const std::string& model, const ParallelPlan& p) {
  try {
    workloads::plan_step(workloads::load_model(model), p);
  } catch (const workloads::PlanError& e) {
    EXPECT_EQ(e.message().find("--"), std::string::npos) << e.what();
    return e.what();
  }
  return "<no error>";
}

TEST(InvalidPlans, ClearErrors) {
  ParallelPlan p;
  p.tp = 3;
  p.dp = 1;
  p.seq = 1024;
  EXPECT_NE(plan_error("llama3-8b", p).find("tp: tensor parallel 3 does not divide the 32 "
                                            "attention heads"),
            std::string::npos);
  p = ParallelPlan{};
  p.pp = 3;
  p.seq = 1024;
  EXPECT_NE(plan_error("llama3-8b", p).find("pp: pipeline parallel 3 does not divide the 32 "
                                            "layers"),
            std::string::npos);
  p.stage_layers = {10, 11, 11};  // an uneven split, stated: accepted
  EXPECT_EQ(plan_error("llama3-8b", p), "<no error>");
  p.stage_layers = {10, 11, 12};
  EXPECT_NE(plan_error("llama3-8b", p).find("stage_layers: the stages hold 33 layers"),
            std::string::npos);
  p = ParallelPlan{};
  p.dp = 2;
  p.ep = 2;
  p.gbs = 2;
  p.seq = 1024;
  EXPECT_NE(plan_error("llama3-8b", p).find("ep: expert parallelism needs a "
                                            "mixture-of-experts model"),
            std::string::npos);
  EXPECT_EQ(plan_error("mixtral-8x7b", p), "<no error>");
  // fp16 mixed precision is a training precision since its loss scaling is modelled (issue 11).
  p.set_training_dtype(Dtype::kFp16);
  EXPECT_EQ(plan_error("mixtral-8x7b", p), "<no error>");
}

TEST(InvalidPlans, UnevenStagesSimulate) {
  ParallelPlan p;
  p.pp = 3;
  p.gbs = 6;
  p.seq = 1024;
  p.stage_layers = {4, 6, 6};
  const Outcome o = simulate("llama3.2-1b", p, SimulationMode::kFull);
  EXPECT_GT(o.run.end, SimTime::zero());
}

}  // namespace
}  // namespace meshsim
