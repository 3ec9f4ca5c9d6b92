// The stage builder's typed roles: zero-bubble's W pass runs exactly the weight-gradient GEMMs its
// B pass leaves out, and TP overlap splits exactly the GEMMs paired with a TP collective.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>

#include "meshsim/workloads/step.h"

namespace meshsim::workloads {
namespace {

ParallelPlan small(PipelineSchedule schedule) {
  ParallelPlan p;
  p.tp = 2;
  p.sp = true;
  p.pp = 2;
  p.gbs = 4;
  p.seq = 1024;
  p.schedule = schedule;
  return p;
}

// Compute ops by the pass prefix of their name ("fwd.", "bwd.", "wgrad.").
std::map<std::string, std::vector<const Op*>> compute_by_pass(const Program& prog) {
  std::map<std::string, std::vector<const Op*>> out;
  for (size_t i = 0; i < prog.size(); ++i) {
    const Op& op = prog.op(OpId(static_cast<uint32_t>(i)));
    if (std::holds_alternative<ComputeWork>(op.work)) {
      out[op.name.substr(0, op.name.find('.') + 1)].push_back(&op);
    }
  }
  return out;
}

// Issue 10: the B pass of the last stage ran the LM head's whole backward, weight gradient included,
// and its W pass ran that weight gradient again.
TEST(StageProgram, ZeroBubbleMovesEveryWeightGradientToW) {
  const ModelConfig m = load_model("llama3.2-1b");
  const StepPlan zb = plan_step(m, small(PipelineSchedule::kZeroBubble));
  const StepPlan f1b = plan_step(m, small(PipelineSchedule::kOneFOneB));
  for (size_t s = 0; s < 2; ++s) {
    auto z = compute_by_pass(zb.programs[s]);
    auto o = compute_by_pass(f1b.programs[s]);
    size_t wgrads_1f1b = 0;
    for (const Op* op : o["bwd."]) {
      wgrads_1f1b += op->name.ends_with(".wgrad") ? 1u : 0u;
    }
    ASSERT_GT(wgrads_1f1b, 0u);
    for (const Op* op : z["bwd."]) {
      EXPECT_FALSE(op->name.ends_with(".wgrad")) << op->name;
    }
    for (const Op* op : z["wgrad."]) {
      EXPECT_TRUE(op->name.ends_with(".wgrad")) << op->name;
      EXPECT_EQ(std::get<ComputeWork>(op->work).op_class, OpClass::kMatmul) << op->name;
    }
    EXPECT_EQ(z["wgrad."].size(), wgrads_1f1b);
    EXPECT_EQ(z["bwd."].size() + z["wgrad."].size(), o["bwd."].size());
  }
}

// With SP each layer's forward has two gathers before column-parallel GEMMs (QKV, MLP up) and two
// reduce-scatters after row-parallel ones (output projection, MLP down): overlap splits those four
// GEMMs into four pieces each (per microbatch), and nothing else.
TEST(StageProgram, TpOverlapSplitsThePairedGemmsOnly) {
  const ModelConfig m = load_model("llama3.2-1b");
  ParallelPlan p = small(PipelineSchedule::kOneFOneB);
  p.overlap.tensor_parallel = true;
  const StepPlan plan = plan_step(m, p);
  std::map<std::string, int> pieces;
  const Program& prog = plan.programs[0];
  for (size_t i = 0; i < prog.size(); ++i) {
    const std::string& name = prog.op(OpId(static_cast<uint32_t>(i))).name;
    if (name.starts_with("fwd.L0.") && name.ends_with("]")) {
      pieces[name.substr(7, name.find('[') - 7)] += 1;
    }
  }
  const int n = 4 * static_cast<int>(p.microbatches());
  const std::map<std::string, int> expected = {
      {"qkv", n},      {"qkv.tp_allgather", n}, {"attn_out", n}, {"attn_out.tp_reducescatter", n},
      {"mlp_up", n},   {"mlp.tp_allgather", n}, {"mlp_down", n}, {"mlp.tp_reducescatter", n}};
  EXPECT_EQ(pieces, expected);
}

// A gathered GEMM's pieces pipeline as Transformer Engine's ring-exchange overlap does: all four
// gathers follow the kernel that made their input (the norm), one after another on the TP
// stream, and GEMM piece i waits for gather i alone, so gather i + 1 runs beside it.
TEST(StageProgram, TpOverlapGathersPipelineUnderTheGemmPieces) {
  const ModelConfig m = load_model("llama3.2-1b");
  ParallelPlan p = small(PipelineSchedule::kOneFOneB);
  p.overlap.tensor_parallel = true;
  const StepPlan plan = plan_step(m, p);
  const Program& prog = plan.programs[0];
  std::map<std::string, OpId> by_name;
  for (size_t i = 0; i < prog.size(); ++i) {
    const OpId id(static_cast<uint32_t>(i));
    by_name.try_emplace(prog.op(id).name, id);  // the first microbatch's
  }
  const auto preds = [&](const std::string& name) {
    const std::vector<OpId> v = prog.predecessors(by_name.at(name));
    return std::set<OpId>(v.begin(), v.end());
  };
  const OpId norm = by_name.at("fwd.L0.attn_norm");
  for (int i = 0; i < 4; ++i) {
    const std::string gather = fmt::format("fwd.L0.qkv.tp_allgather[{}]", i);
    const std::string gemm = fmt::format("fwd.L0.qkv[{}]", i);
    ASSERT_TRUE(by_name.contains(gather) && by_name.contains(gemm)) << i;
    EXPECT_TRUE(preds(gather).contains(norm)) << gather;  // not after the GEMM pieces
    EXPECT_TRUE(preds(gemm).contains(by_name.at(gather))) << gemm;
    for (int j = i + 1; j < 4; ++j) {
      EXPECT_FALSE(preds(gemm).contains(by_name.at(fmt::format("fwd.L0.qkv.tp_allgather[{}]", j))))
          << gemm << " waits for a later piece";
    }
    EXPECT_LT(by_name.at(gather), by_name.at("fwd.L0.qkv[0]")) << "issued before the first piece";
  }
}

}  // namespace
}  // namespace meshsim::workloads
