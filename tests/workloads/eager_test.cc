// Kernels::kEager and the training precision (workloads/parallel.h, workloads/src/layer_ops.h),
// through the public planner: the programs plan_step builds.
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "meshsim/sim/error.h"
#include "meshsim/workloads/accounting.h"
#include "meshsim/workloads/model.h"
#include "meshsim/workloads/step.h"

namespace meshsim::workloads {
namespace {

struct Kernel {
  std::string name;
  ComputeWork work;
};

// The compute kernels of stage `stage`'s program, in program order.
std::vector<Kernel> kernels(const ModelConfig& m, const ParallelPlan& p, int64_t stage = 0) {
  const StepPlan plan = plan_step(m, p);
  std::vector<Kernel> out;
  const Program& prog = plan.programs.at(static_cast<size_t>(stage));
  for (size_t i = 0; i < prog.size(); ++i) {
    const Op& op = prog.op(OpId(static_cast<uint32_t>(i)));
    if (const auto* w = std::get_if<ComputeWork>(&op.work)) {
      out.push_back({op.name, *w});
    }
  }
  return out;
}

ParallelPlan single(int64_t mbs, int64_t seq, Kernels k, Dtype dtype = Dtype::kFp32) {
  ParallelPlan p;
  p.mbs = mbs;
  p.gbs = mbs;
  p.seq = seq;
  p.set_training_dtype(dtype);
  p.kernels = k;
  p.attention = AttentionKernel::kNaive;
  return p;
}

// The GEMMs of a program as (class, m, k, n, batch) -> count.
std::map<std::tuple<OpClass, int64_t, int64_t, int64_t, int64_t>, int> gemms(
    const std::vector<Kernel>& ks, bool matmul_only) {
  std::map<std::tuple<OpClass, int64_t, int64_t, int64_t, int64_t>, int> out;
  for (const Kernel& k : ks) {
    const auto& s = k.work.shape;
    if (s && (!matmul_only || k.work.op_class == OpClass::kMatmul)) {
      ++out[{k.work.op_class, s->m, s->k, s->n, s->batch}];
    }
  }
  return out;
}

int count_suffix(const std::vector<Kernel>& ks, const std::string& suffix) {
  int n = 0;
  for (const Kernel& k : ks) {
    n += k.name.ends_with(suffix) ? 1 : 0;
  }
  return n;
}

const Kernel& find(const std::vector<Kernel>& ks, const std::string& name) {
  for (const Kernel& k : ks) {
    if (k.name == name) {
      return k;
    }
  }
  ADD_FAILURE() << "no kernel " << name;
  static const Kernel none;
  return none;
}

// The optimizer's kernels: their bytes, their number, and the tensors they step (".step" kernels,
// one per tensor in the per-tensor AdamW).
struct OptimizerTally {
  int64_t bytes = 0;
  int ops = 0;
  int tensors = 0;
};
OptimizerTally optimizer_tally(const std::vector<Kernel>& ks) {
  OptimizerTally t;
  for (const Kernel& k : ks) {
    if (k.work.op_class == OpClass::kOptimizer) {
      t.bytes += k.work.bytes.count();
      ++t.ops;
      t.tensors += k.name.ends_with(".step") ? 1 : 0;
    }
  }
  return t;
}

const ModelConfig& val10m() {
  static const ModelConfig m = load_model(MESHSIM_SOURCE_DIR "/validation/models/val-10m.json");
  return m;
}

TEST(EagerKernels, SameProjectionGemmsAsFused) {
  // Eager mode changes the memory-bound kernels, not the projections: QKV, output, MLP and LM
  // head GEMMs (forward, data and weight gradients) are the same in number and shape.
  const auto fused = gemms(kernels(val10m(), single(2, 256, Kernels::kFused)), true);
  const auto eager = gemms(kernels(val10m(), single(2, 256, Kernels::kEager)), true);
  EXPECT_EQ(fused, eager);
  // 8 layers x 4 projections x 3 GEMMs + the LM head's 3.
  int total = 0;
  for (const auto& [key, n] : eager) {
    total += n;
  }
  EXPECT_EQ(total, 8 * 4 * 3 + 3);
}

TEST(EagerKernels, NaiveAttentionRunsFourBatchedGemmsForwardAndBackward) {
  // val-10m: 8 heads of 32, 4 KV heads. Per layer: QK^T and PV forward, two GEMMs for each
  // backward, each batched over b x heads = 16.
  const auto ks = kernels(val10m(), single(2, 256, Kernels::kEager));
  const auto att = gemms(ks, false);
  EXPECT_EQ((att.at({OpClass::kAttention, 256, 32, 256, 16})), 8 * 2);  // QK^T and dP = dO V^T
  EXPECT_EQ((att.at({OpClass::kAttention, 256, 256, 32, 16})), 8 * 4);  // PV, dV, dQ, dK
  // GQA: K and V are repeated to the query heads (a copy and an index_select each), and their
  // gradients summed back.
  EXPECT_EQ(count_suffix(ks, ".repeat_k.index_select"), 8);
  EXPECT_EQ(count_suffix(ks, ".repeat_v.index_select_backward"), 8);
}

TEST(EagerKernels, RmsNormIsSixOperatorsForwardAndFourteenBackward) {
  const ParallelPlan p = single(2, 256, Kernels::kEager);
  const auto ks = kernels(val10m(), p);
  int fwd = 0;
  int bwd = 0;
  for (const Kernel& k : ks) {
    if (k.name.find("attn_norm.") != std::string::npos && k.work.op_class == OpClass::kNorm) {
      (k.name.find(".bwd.") != std::string::npos || k.name.find("norm.bwd") != std::string::npos
           ? bwd
           : fwd) += 1;
    }
  }
  EXPECT_EQ(fwd, 8 * 6);   // pow, mean, add_eps, rsqrt, mul_rsqrt, mul_weight (fp32: no casts)
  EXPECT_EQ(bwd, 8 * 14);  // autograd's kernels for those six
  // pow reads and writes the fp32 hidden states once: 2 x T x h x 4 bytes.
  const Kernel& pow = find(ks, "fwd.L0.attn_norm.pow");
  EXPECT_EQ(pow.work.bytes, Bytes::of(2 * 512 * 256 * 4));
  EXPECT_FALSE(pow.work.shape.has_value());  // vector units
}

TEST(EagerKernels, Bf16ActivationsAddCastsAroundFp32Internals) {
  const auto ks = kernels(val10m(), single(2, 256, Kernels::kEager, Dtype::kBf16));
  const Kernel& cast = find(ks, "fwd.L0.attn_norm.to_fp32");
  EXPECT_EQ(cast.work.bytes, Bytes::of(512 * 256 * (2 + 4)));
  const Kernel& softmax = find(ks, "fwd.L0.attention.softmax");
  EXPECT_EQ(softmax.work.bytes, Bytes::of(3 * 16 * 256 * 256 * 4));  // fp32 scores: 2 reads, 1 write
}

TEST(EagerKernels, LossIsLogSoftmaxAndNllOverTheFullLogits) {
  const auto ks = kernels(val10m(), single(2, 256, Kernels::kEager));
  const int64_t tv = 512 * 8192;
  EXPECT_EQ(find(ks, "fwd.loss.log_softmax").work.bytes, Bytes::of(3 * tv * 4));
  EXPECT_EQ(find(ks, "bwd.loss.bwd.nll_loss_backward").work.bytes, Bytes::of(tv * 4 + 2 * 512 * 4));
}

TEST(EagerKernels, PerTensorAdamWTouchesEachParameterEightyEightBytes) {
  // fp32 AdamW, one tensor at a time: the nine updates move 88 bytes per parameter, and each
  // tensor adds a step increment and a host read (16 bytes each). The tensors cover every
  // parameter exactly once.
  ParallelPlan p = single(2, 256, Kernels::kEager);
  p.optimizer_kernels = OptimizerKernels::kPerTensor;
  const OptimizerTally t = optimizer_tally(kernels(val10m(), p));
  // Embedding, LM head, final norm, and per layer two norms and four weights.
  EXPECT_EQ(t.tensors, 3 + 8 * 6);
  EXPECT_EQ(t.ops, t.tensors * 11);
  EXPECT_EQ(t.bytes, 88 * total_parameters(val10m()) + 32 * t.tensors);
}

TEST(EagerKernels, ForEachAdamWIsNinePassesOverAllParameters) {
  ParallelPlan p = single(2, 256, Kernels::kEager, Dtype::kBf16);
  p.optimizer_kernels = OptimizerKernels::kForEach;
  const OptimizerTally t = optimizer_tally(kernels(val10m(), p));
  // Nine updates (88 B/param with fp32 gradients; the two that read the gradient read 2 bytes
  // instead of 4: 84) and the cast of the fp32 master weights back to bf16 (4 + 2).
  EXPECT_EQ(t.ops, 10);
  EXPECT_EQ(t.bytes, (84 + 6) * total_parameters(val10m()));
}

TEST(EagerKernels, ParameterTensorsCoverBiasesLearnedPositionsAndTensorParallelShards) {
  // GPT-2 small: biases everywhere, LayerNorm (weight and bias), learned positions, tied head;
  // TP 2 splits the matrices. The per-tensor optimizer's bytes still count each local parameter
  // once: sum over tensors of 88 x size.
  const ModelConfig gpt2 = load_model("gpt2-small");
  ParallelPlan p = single(1, 128, Kernels::kEager);
  p.tp = 2;
  p.optimizer_kernels = OptimizerKernels::kPerTensor;
  const OptimizerTally t = optimizer_tally(kernels(gpt2, p));
  const int64_t local = partition_stage(gpt2, p, 0).params.total();
  EXPECT_EQ(t.bytes, 88 * local + 32 * t.tensors);
}

TEST(TrainingDtype, Fp32DoublesActivationBytesAndKeepsSixteenBytesOfState) {
  ParallelPlan bf16;
  bf16.set_training_dtype(Dtype::kBf16);
  EXPECT_EQ(bf16.activation_bytes, 2);
  EXPECT_EQ(bf16.state.weight + bf16.state.gradient + bf16.state.optimizer, 16);
  ParallelPlan fp32;
  fp32.set_training_dtype(Dtype::kFp32);
  EXPECT_EQ(fp32.activation_bytes, 4);
  EXPECT_EQ(fp32.state.weight, 4);
  EXPECT_EQ(fp32.state.optimizer, 8);
  EXPECT_EQ(fp32.matmul_dtype, Dtype::kFp32);
  // The residual add moves three activations: twice the bytes in fp32.
  const auto a = kernels(val10m(), single(2, 256, Kernels::kFused, Dtype::kBf16));
  const auto b = kernels(val10m(), single(2, 256, Kernels::kFused, Dtype::kFp32));
  EXPECT_EQ(find(b, "fwd.L0.residual_attn").work.bytes.count(),
            2 * find(a, "fwd.L0.residual_attn").work.bytes.count());
}

TEST(EagerKernels, ContextParallelismIsRefused) {
  ParallelPlan p = single(1, 256, Kernels::kEager);
  p.cp = 2;
  p.dp = 1;
  try {
    (void)plan_step(val10m(), p);
    ADD_FAILURE() << "expected a PlanError";
  } catch (const PlanError& e) {
    EXPECT_EQ(e.field(), PlanField::kKernels);
    EXPECT_NE(std::string(e.what()).find("context parallelism"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace meshsim::workloads
