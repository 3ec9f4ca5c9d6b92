// Software stacks (workloads/stack_profile.h) change what they should: the kernel set, the
// attention kernel by accelerator, the optimizer's kernels, the FP8 recipe's kernels and the
// per-step work; and the precisions they run: fp16's loss scaling, FP8's casts and bf16 LM head.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <limits>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "csv_rows.h"
#include "meshsim/sim/error.h"
#include "meshsim/workloads/model.h"
#include "meshsim/workloads/stack_profile.h"
#include "meshsim/workloads/step.h"
#include "meshsim/workloads/training_memory.h"

namespace meshsim::workloads {
namespace {

struct Kernel {
  std::string name;
  ComputeWork work;
};

std::vector<Kernel> kernels(const ParallelPlan& p, const ModelConfig& model) {
  const StepPlan plan = plan_step(model, p);
  std::vector<Kernel> out;
  const Program& prog = plan.programs.at(0);
  for (size_t i = 0; i < prog.size(); ++i) {
    const Op& op = prog.op(OpId(static_cast<uint32_t>(i)));
    if (const auto* w = std::get_if<ComputeWork>(&op.work)) {
      out.push_back({op.name, *w});
    }
  }
  return out;
}

std::vector<Kernel> kernels(const ParallelPlan& p) { return kernels(p, load_model("llama3.2-1b")); }

int count(const std::vector<Kernel>& ks, const std::string& part) {
  int n = 0;
  for (const Kernel& k : ks) {
    n += k.name.find(part) != std::string::npos ? 1 : 0;
  }
  return n;
}

const Kernel& find(const std::vector<Kernel>& ks, const std::string& name) {
  for (const Kernel& k : ks) {
    if (k.name == name) {
      return k;
    }
  }
  throw std::runtime_error("no kernel " + name);
}

ParallelPlan plan_with(Stack stack, DeviceFamily family, Dtype dtype = Dtype::kBf16) {
  ParallelPlan p;
  p.gbs = 1;  // one microbatch: each layer's kernels once
  p.mbs = 1;
  p.seq = 1024;
  p.set_training_dtype(dtype);
  apply_stack(p, stack_profile(stack, family), {});
  return p;
}

TEST(Stacks, ProfilesChooseTheFrameworksKernels) {
  const StackProfile mh = stack_profile(Stack::kMegatron, DeviceFamily::kHopper);
  EXPECT_EQ(mh.kernels, Kernels::kFused);
  EXPECT_EQ(mh.attention, AttentionKernel::kCudnn);  // TE prefers cuDNN on Hopper and later
  EXPECT_EQ(stack_profile(Stack::kMegatron, DeviceFamily::kAmpere).attention,
            AttentionKernel::kFlash);
  EXPECT_EQ(stack_profile(Stack::kMegatron, DeviceFamily::kBlackwell).attention,
            AttentionKernel::kCudnn);
  EXPECT_TRUE(mh.step.grad_norm);
  const StackProfile fsdp = stack_profile(Stack::kFsdp, DeviceFamily::kHopper);
  EXPECT_EQ(fsdp.kernels, Kernels::kEager);
  EXPECT_EQ(fsdp.attention, AttentionKernel::kFlash);
  EXPECT_EQ(fsdp.optimizer, OptimizerKernels::kPerTensor);
  // llm-foundry's 2023 benchmark stack: FSDP eager with FlashAttention's Triton port.
  const StackProfile foundry = stack_profile(Stack::kLlmFoundry2023, DeviceFamily::kAmpere);
  EXPECT_EQ(foundry.kernels, Kernels::kEager);
  EXPECT_EQ(foundry.optimizer, OptimizerKernels::kPerTensor);
  EXPECT_EQ(foundry.attention, AttentionKernel::kTriton);
  EXPECT_EQ(fused_attention(foundry.attention), AttentionImpl::kTriton);
  EXPECT_EQ(stack_profile(Stack::kFsdpCompile, DeviceFamily::kHopper).kernels, Kernels::kFused);
  EXPECT_EQ(stack_profile(Stack::kFsdpCompile, DeviceFamily::kHopper).fp8, Fp8Scaling::kCurrent);
  EXPECT_EQ(stack_profile(Stack::kMegatron2021, DeviceFamily::kAmpere).attention,
            AttentionKernel::kNaive);
  EXPECT_EQ(stack_profile(Stack::kMaxText, DeviceFamily::kTpu).attention, AttentionKernel::kSplash);
  EXPECT_EQ(stack_profile(Stack::kMaxText, DeviceFamily::kHopper).attention,
            AttentionKernel::kCudnn);
  for (const Stack s : enum_values<Stack>()) {
    EXPECT_FALSE(stack_profile(s, DeviceFamily::kHopper).basis.empty()) << to_string(s);
  }
  EXPECT_EQ(default_stack(DeviceFamily::kTpu), Stack::kMaxText);
  EXPECT_EQ(default_stack(DeviceFamily::kAmpere), Stack::kMegatron);
}

TEST(Stacks, PyTorchStacksDoNotRunOnTpus) {
  try {
    (void)stack_profile(Stack::kFsdp, DeviceFamily::kTpu);
    FAIL() << "expected a PlanError";
  } catch (const PlanError& e) {
    EXPECT_EQ(e.field(), PlanField::kStack);
  }
}

TEST(Stacks, ApplyKeepsWhatTheUserSet) {
  ParallelPlan p;
  p.attention = AttentionKernel::kFlash3;
  p.kernels = Kernels::kEager;
  StackOverrides given;
  given.attention = true;
  apply_stack(p, stack_profile(Stack::kMegatron, DeviceFamily::kHopper), given);
  EXPECT_EQ(p.attention, AttentionKernel::kFlash3);  // kept
  EXPECT_EQ(p.kernels, Kernels::kFused);             // the stack's
  EXPECT_EQ(p.stack, Stack::kMegatron);
  EXPECT_TRUE(p.step_work.grad_norm);
}

TEST(Stacks, TheKernelSetFollowsTheStack) {
  const auto megatron = kernels(plan_with(Stack::kMegatron, DeviceFamily::kHopper));
  const auto fsdp = kernels(plan_with(Stack::kFsdp, DeviceFamily::kHopper));
  EXPECT_GT(fsdp.size(), megatron.size());  // eager: one kernel per tensor op
  EXPECT_EQ(count(megatron, "fwd.L0.attn_norm"), 1);
  EXPECT_GT(count(fsdp, "fwd.L0.attn_norm"), 1);
  // The attention kernel carries its implementation for the cost model.
  const Kernel& att = find(megatron, "fwd.L0.attention");
  ASSERT_TRUE(att.work.attention);
  EXPECT_EQ(att.work.attention->impl, AttentionImpl::kCudnn);
  EXPECT_TRUE(att.work.attention->causal);
  EXPECT_EQ(att.work.attention->seq_q, 1024);
  EXPECT_EQ(att.work.attention->head_dim, 64);
  // The per-step work: the gradient norm before the optimizer; none without a stack.
  EXPECT_EQ(count(megatron, "grad_norm"), 1);
  ParallelPlan bare = plan_with(Stack::kMegatron, DeviceFamily::kHopper);
  bare.step_work = {};
  EXPECT_EQ(count(kernels(bare), "grad_norm"), 0);
  // Megatron-LM 2021's attention: two batched GEMMs around a fused softmax.
  const auto old = kernels(plan_with(Stack::kMegatron2021, DeviceFamily::kAmpere));
  EXPECT_EQ(count(old, "fwd.L0.attention.softmax"), 1);
  EXPECT_EQ(find(old, "fwd.L0.attention.scores").work.shape->m, 1024);
}

// Megatron-LM 2021 trained with dropout 0.1 (its defaults): a dropout kernel on the materialised
// probabilities each way (read them, write the dropped ones and a one-byte mask; backward: read
// the gradient and the mask, write the gradient), and the fused bias-dropout-add writes a mask
// per residual element. Without dropout, none of it.
TEST(Stacks, DropoutIsChargedWhereTheModelTrainsWithIt) {
  const ParallelPlan p = plan_with(Stack::kMegatron2021, DeviceFamily::kAmpere);
  ModelConfig m = load_model("llama3.2-1b");
  m.dropout = true;
  const auto with = kernels(p, m);
  const auto without = kernels(p);
  EXPECT_EQ(count(without, "dropout"), 0);
  const int64_t scores = 32 * 1024 * 1024;  // 32 heads x 1024 x 1024, one sequence
  EXPECT_EQ(find(with, "fwd.L0.attention.dropout").work.bytes.count(), (2 * 2 + 1) * scores);
  EXPECT_EQ(find(with, "bwd.L0.attention.bwd.dropout").work.bytes.count(), (2 * 2 + 1) * scores);
  const int64_t el = 1024 * 2048;  // the residual stream's elements
  EXPECT_EQ(find(with, "fwd.L0.residual_attn").work.bytes.count() -
                find(without, "fwd.L0.residual_attn").work.bytes.count(),
            el);
  EXPECT_EQ(find(with, "bwd.L0.residual.bwd").work.bytes.count() -
                find(without, "bwd.L0.residual.bwd").work.bytes.count(),
            2 * el);
}

// The input gradient of a column-parallel layer under TP: reduced beside its weight gradient
// (Megatron-Core's async all-reduce: the weight-gradient GEMM does not wait for it), or, in
// Megatron-LM 2021, after both GEMMs with the compute stream waiting for it.
TEST(Stacks, Megatron2021ReducesTheInputGradientAfterTheWeightGradient) {
  const auto op_ids = [](const Program& prog, const std::string& name) {
    for (size_t i = 0; i < prog.size(); ++i) {
      if (prog.op(OpId(static_cast<uint32_t>(i))).name == name) {
        return OpId(static_cast<uint32_t>(i));
      }
    }
    ADD_FAILURE() << name;
    return OpId(0);
  };
  const auto depends = [](const Program& prog, OpId after, OpId before) {
    const std::vector<OpId> pred = prog.predecessors(after);
    return std::find(pred.begin(), pred.end(), before) != pred.end();
  };
  for (const Stack stack : {Stack::kMegatron, Stack::kMegatron2021}) {
    ParallelPlan p = plan_with(stack, DeviceFamily::kAmpere);
    p.tp = 2;
    EXPECT_EQ(p.tp_backward_async, stack == Stack::kMegatron);
    const StepPlan plan = plan_step(load_model("llama3.2-1b"), p);
    const Program& prog = plan.programs.at(0);
    const OpId reduce = op_ids(prog, "bwd.L0.qkv.tp_allreduce");
    const OpId wgrad = op_ids(prog, "bwd.L0.qkv.wgrad");
    if (stack == Stack::kMegatron) {
      EXPECT_LT(reduce.value(), wgrad.value());
      EXPECT_FALSE(depends(prog, wgrad, reduce));
    } else {
      EXPECT_LT(wgrad.value(), reduce.value());
      EXPECT_TRUE(depends(prog, reduce, wgrad));
      // The next kernel on the compute stream waits for the reduction.
      const OpId next(reduce.value() + 1);
      ASSERT_EQ(prog.op(next).kind(), OpKind::kCompute) << prog.op(next).name;
      EXPECT_TRUE(depends(prog, next, reduce)) << prog.op(next).name;
    }
  }
}

// llm-foundry's flash path (the fsdp stack's FlashAttention): flash-attn's bert_padding gathers
// Q, K and V into the varlen layout and puts the output back around the kernel, and the backward
// undoes both: each a read and a write of the tensor (the zero fills a write). Llama 3.2 1B, one
// sequence of 1024: Q and the output 1024 x 2048, K and V 1024 x 512 (GQA), bf16. Megatron's TE
// attention and the 2023 stack's Triton port take the padded layout: no copies.
TEST(Stacks, LlmFoundrysFlashPathUnpadsAndPadsAroundTheKernel) {
  const ParallelPlan fsdp = plan_with(Stack::kFsdp, DeviceFamily::kHopper);
  EXPECT_TRUE(fsdp.attention_unpads);
  EXPECT_EQ(fsdp.attention, AttentionKernel::kFlash);
  const auto ks = kernels(fsdp);
  const int64_t q = 1024 * 2048 * 2;
  const int64_t kv = 1024 * 512 * 2;
  EXPECT_EQ(find(ks, "fwd.L0.attention.unpad_q").work.bytes.count(), 2 * q);
  EXPECT_EQ(find(ks, "fwd.L0.attention.unpad_k").work.bytes.count(), 2 * kv);
  EXPECT_EQ(find(ks, "fwd.L0.attention.pad_output.zeros").work.bytes.count(), q);
  EXPECT_EQ(find(ks, "fwd.L0.attention.pad_output.index_put").work.bytes.count(), 2 * q);
  EXPECT_EQ(find(ks, "bwd.L0.attention.bwd.pad_output.bwd").work.bytes.count(), 2 * q);
  EXPECT_EQ(find(ks, "bwd.L0.attention.bwd.unpad_v.bwd.zeros").work.bytes.count(), kv);
  EXPECT_EQ(find(ks, "bwd.L0.attention.bwd.unpad_v.bwd.scatter").work.bytes.count(), 2 * kv);
  // The kernel itself is the same FlashAttention-2 work as without the copies.
  ParallelPlan padded = fsdp;
  padded.attention_unpads = false;
  const auto plain = kernels(padded);
  EXPECT_EQ(count(plain, "unpad"), 0);
  EXPECT_EQ(find(ks, "fwd.L0.attention.varlen").work.flops,
            find(plain, "fwd.L0.attention.sdpa").work.flops);
  EXPECT_EQ(count(kernels(plan_with(Stack::kMegatron, DeviceFamily::kHopper)), "unpad"), 0);
  EXPECT_EQ(count(kernels(plan_with(Stack::kLlmFoundry2023, DeviceFamily::kHopper)), "unpad"), 0);
}

// "selective" is the framework's own: torchtitan's checkpointing by op, Megatron's of the
// attention core (variants_program_test.cc has what each re-runs).
TEST(Stacks, SelectiveRecomputeIsTorchtitansByOpOnItsStackOnly) {
  for (const Stack s : enum_values<Stack>()) {
    EXPECT_EQ(plan_with(s, DeviceFamily::kHopper).selective_by_op, s == Stack::kFsdpCompile)
        << to_string(s);
  }
}

// Megatron-LM's legacy flash branch runs outside the core_attn checkpoint; every other stack's
// selective recompute (Megatron-Core's) checkpoints the fused kernel.
TEST(Stacks, OnlyLegacyMegatronLeavesFusedAttentionOutOfItsCheckpoint) {
  for (const Stack s : enum_values<Stack>()) {
    EXPECT_EQ(plan_with(s, DeviceFamily::kHopper).fused_attention_checkpointed,
              s != Stack::kMegatron2023)
        << to_string(s);
  }
}

TEST(Stacks, Fp16RunsScaleTheirLoss) {
  EXPECT_EQ(count(kernels(plan_with(Stack::kMegatron, DeviceFamily::kHopper, Dtype::kFp16)),
                  "loss_scale"),
            1);
  EXPECT_EQ(count(kernels(plan_with(Stack::kMegatron, DeviceFamily::kHopper)), "loss_scale"), 0);
}

TEST(Stacks, Fp8RecipeCastsTheLinearLayersOnly) {
  const auto bf16 = kernels(plan_with(Stack::kMegatron, DeviceFamily::kHopper));
  const auto fp8 = kernels(plan_with(Stack::kMegatron, DeviceFamily::kHopper, Dtype::kFp8));
  EXPECT_EQ(count(bf16, "cast_transpose"), 0);
  // Delayed scaling with fused kernels: TE's norms write the QKV and MLP-up inputs in FP8, so
  // forward casts the attention output and the MLP-down inputs; backward casts all four
  // gradients; the weights once per step.
  EXPECT_EQ(count(fp8, "fwd.L0.") - count(bf16, "fwd.L0."), 2);
  EXPECT_EQ(count(fp8, "bwd.L0.") - count(bf16, "bwd.L0."), 4);
  EXPECT_EQ(count(fp8, "fp8.weights"), 1);
  EXPECT_EQ(count(fp8, ".amax"), 0);
  EXPECT_EQ(find(fp8, "fwd.L0.qkv").work.dtype, Dtype::kFp8);
  EXPECT_EQ(find(fp8, "fwd.lm_head").work.dtype, Dtype::kBf16);       // the LM head stays bf16
  EXPECT_EQ(find(fp8, "fwd.L0.attention").work.dtype, Dtype::kBf16);  // and attention
  const Kernel& cast = find(fp8, "fwd.L0.attn_out.input.cast_transpose");
  EXPECT_EQ(cast.work.op_class, OpClass::kQuantize);
  // Read bf16, write FP8 and its transpose: 4 bytes per element of the 1024 x 2048 input.
  EXPECT_EQ(cast.work.bytes.count(), 4 * 1024 * 2048);
  // Current scaling reads each tensor once more for its amax, and the norms no longer cast.
  ParallelPlan current = plan_with(Stack::kMegatron, DeviceFamily::kHopper, Dtype::kFp8);
  current.fp8_scaling = Fp8Scaling::kCurrent;
  const auto cs = kernels(current);
  EXPECT_EQ(count(cs, "fwd.L0.") - count(bf16, "fwd.L0."), 8);
  EXPECT_EQ(count(cs, "fwd.L0.attn_out.input.amax"), 1);
  // Row-wise scaling (torchao's roofline_utils.py): no amax pass, two casts per tensor, the first
  // writing FP8 rows and a bf16 transpose (read 2, write 1 + 2 bytes), the second casting that
  // (read 2, write 1): 8 bytes per element where the tensor-wise recipes move 4 or 6.
  ParallelPlan rowwise = current;
  rowwise.fp8_scaling = Fp8Scaling::kRowwise;
  const auto rw = kernels(rowwise);
  EXPECT_EQ(count(rw, ".amax"), 0);
  EXPECT_EQ(count(rw, "cast_transpose"), 0);
  EXPECT_EQ(count(rw, "fwd.L0.") - count(bf16, "fwd.L0."), 8);
  EXPECT_EQ(find(rw, "fwd.L0.attn_out.input.cast_rows").work.bytes.count(), 5 * 1024 * 2048);
  EXPECT_EQ(find(rw, "fwd.L0.attn_out.input.cast_columns").work.bytes.count(), 3 * 1024 * 2048);
  EXPECT_EQ(parse_enum<Fp8Scaling>("rowwise"), Fp8Scaling::kRowwise);
}

// Transformer Engine runs an FP8 linear layer's forward GEMM with fast accumulation and its dgrad
// and wgrad without (_2X_ACC_FPROP = False, _2X_ACC_DGRAD = _2X_ACC_WGRAD = True); torchao's
// float8 its output GEMM; XLA's choice is not assumed. 16-bit GEMMs (the LM head) are untouched.
TEST(Stacks, Fp8ForwardGemmsUseFastAccumulationWhereTheRecipeDoes) {
  const auto te = kernels(plan_with(Stack::kMegatron, DeviceFamily::kHopper, Dtype::kFp8));
  EXPECT_TRUE(find(te, "fwd.L0.qkv").work.fast_accumulation);
  EXPECT_TRUE(find(te, "fwd.L0.mlp_down").work.fast_accumulation);
  EXPECT_FALSE(find(te, "bwd.L0.qkv.dgrad").work.fast_accumulation);
  EXPECT_FALSE(find(te, "bwd.L0.qkv.wgrad").work.fast_accumulation);
  EXPECT_FALSE(find(te, "bwd.L0.mlp_down.dgrad").work.fast_accumulation);
  EXPECT_FALSE(find(te, "fwd.lm_head").work.fast_accumulation);  // bf16
  // Full recompute re-runs the forward GEMMs as the forward does.
  ParallelPlan remat = plan_with(Stack::kMegatron, DeviceFamily::kHopper, Dtype::kFp8);
  remat.recompute = Recompute::kFull;
  EXPECT_TRUE(find(kernels(remat), "recompute.L0.qkv").work.fast_accumulation);
  EXPECT_TRUE(find(kernels(plan_with(Stack::kFsdpCompile, DeviceFamily::kHopper, Dtype::kFp8)),
                   "fwd.L0.qkv")
                  .work.fast_accumulation);
  EXPECT_TRUE(find(kernels(plan_with(Stack::kFsdp, DeviceFamily::kHopper, Dtype::kFp8)),
                   "fwd.L0.qkv")
                  .work.fast_accumulation);
  EXPECT_FALSE(find(kernels(plan_with(Stack::kMaxText, DeviceFamily::kHopper, Dtype::kFp8)),
                    "fwd.L0.qkv")
                   .work.fast_accumulation);
  // Not in 16 bits, whatever the stack.
  EXPECT_FALSE(find(kernels(plan_with(Stack::kMegatron, DeviceFamily::kHopper)), "fwd.L0.qkv")
                   .work.fast_accumulation);
}

// The host's work per op (HostDispatch) follows the stack: eager PyTorch stacks charge the
// framework and a real layer's mean launch (GEMMs' library calls within it), torch.compile only
// the launch with GEMMs adding their library call, XLA nothing; the phase decides forward or
// backward costs.
TEST(Stacks, HostTimesFollowTheStacksIssue) {
  const auto host_of = [](Stack stack, const std::string& name) {
    const ParallelPlan p = plan_with(stack, stack == Stack::kMaxText ? DeviceFamily::kTpu
                                                                     : DeviceFamily::kHopper);
    const StepPlan plan = plan_step(load_model("llama3.2-1b"), p);
    const Program& prog = plan.programs.at(0);
    for (size_t i = 0; i < prog.size(); ++i) {
      const Op& op = prog.op(OpId(static_cast<uint32_t>(i)));
      if (op.name == name) {
        return op.host;
      }
    }
    ADD_FAILURE() << "no op " << name;
    return Duration::zero();
  };
  const Duration fwd_norm = host_of(Stack::kFsdp, "fwd.L0.attn_norm.pow");
  const Duration fwd_gemm = host_of(Stack::kFsdp, "fwd.L0.qkv");
  const Duration bwd_gemm = host_of(Stack::kFsdp, "bwd.L0.qkv.dgrad");
  EXPECT_GT(fwd_norm, Duration::zero());
  EXPECT_EQ(fwd_gemm - fwd_norm, stack_profile(Stack::kFsdp, DeviceFamily::kHopper).host.gemm_call);
  EXPECT_LT(bwd_gemm, fwd_gemm);  // autograd's engine, no Python module per kernel
  // torch.compile: the launch alone, less than eager's.
  const Duration compiled = host_of(Stack::kFsdpCompile, "fwd.L0.attn_norm");
  EXPECT_GT(compiled, Duration::zero());
  EXPECT_LT(compiled, fwd_norm);
  const Duration compiled_gemm_call =
      stack_profile(Stack::kFsdpCompile, DeviceFamily::kHopper).host.gemm_call;
  EXPECT_GT(compiled_gemm_call, Duration::zero());
  EXPECT_EQ(host_of(Stack::kFsdpCompile, "fwd.L0.qkv") - compiled, compiled_gemm_call);
  // XLA: one executable per step.
  EXPECT_EQ(host_of(Stack::kMaxText, "fwd.L0.qkv"), Duration::zero());
}

// Megatron-LM's legacy layer costs its host what host_dispatch.py measured of its replica: over one
// layer's ops (TP 2 without SP, dropout on, as measured), the host times less the GEMMs' library
// calls add up to the measured forward and backward plus a real layer's launch cost on a GPU
// (9.9 us, stack.cc: host_gpu.py's two layers on the H200 machine, 10.4 and 9.4 us) per kernel
// the real layer launches (15 forward, 34 backward, host_dispatch.py's count). A layer that issues
// more or fewer ops than the figure was spread over fails here.
TEST(Stacks, MegatronLegacyLayerCostsItsHostTheMeasuredLayer) {
  std::ifstream in(MESHSIM_SOURCE_DIR "/validation/microbench/host_dispatch.csv");
  std::stringstream text;
  text << in.rdbuf();
  double measured_fwd = 0;
  double measured_bwd = 0;
  for (const auto& row : testing::csv_rows(text.str(), "host_dispatch.csv")) {
    if (row.at("case") == "megatron_layer_forward") {
      measured_fwd = std::stod(row.at("us_per_op"));
    } else if (row.at("case") == "megatron_layer_backward") {
      measured_bwd = std::stod(row.at("us_per_op"));
    }
  }
  ASSERT_GT(measured_fwd, 0);
  ASSERT_GT(measured_bwd, 0);
  ParallelPlan p = plan_with(Stack::kMegatron2022, DeviceFamily::kAmpere);
  p.tp = 2;
  const StepPlan plan = plan_step(load_model("gpt2-small"), p);
  const HostDispatch& h = stack_profile(Stack::kMegatron2022, DeviceFamily::kAmpere).host;
  const Program& prog = plan.programs.at(0);
  double fwd_us = 0;
  double bwd_us = 0;
  for (size_t i = 0; i < prog.size(); ++i) {
    const Op& op = prog.op(OpId(static_cast<uint32_t>(i)));
    const auto* w = std::get_if<ComputeWork>(&op.work);
    if (w == nullptr) {
      continue;  // the TP all-reduces, not in the measurement
    }
    const bool gemm = w->op_class == OpClass::kMatmul && w->shape;  // as stage_program.cc charges
    const double us = (op.host - (gemm ? h.gemm_call : Duration::zero())).microseconds();
    if (op.name.starts_with("fwd.L3.")) {
      fwd_us += us;
    } else if (op.name.starts_with("bwd.L3.")) {
      bwd_us += us;
    }
  }
  constexpr double kLayerLaunchUs = (10.4 + 9.4) / 2;
  EXPECT_NEAR(fwd_us, measured_fwd + 15 * kLayerLaunchUs, 0.5);
  EXPECT_NEAR(bwd_us, measured_bwd + 34 * kLayerLaunchUs, 0.5);
}

// Megatron's host synchronisations: the gradient norm is read on the host before the optimizer
// (clip_grads.py), batched pipeline sends and receives end in torch.cuda.synchronize() with the
// last of each adjacent pair carrying it (1F1B's send_forward_recv_backward), and Megatron-LM
// 2021's get_batch waits for the compute stream every microbatch; FSDP has none of them.
TEST(Stacks, MegatronSynchronisesTheHostWhereItsCodeDoes) {
  const auto syncs = [](Stack stack, int64_t pp, int64_t vpp, size_t stage = 0) {
    ParallelPlan p = plan_with(stack, DeviceFamily::kAmpere);
    p.pp = pp;
    p.vpp = vpp;
    p.schedule = vpp > 1 ? PipelineSchedule::kInterleaved : PipelineSchedule::kOneFOneB;
    p.gbs = 4;
    const StepPlan plan = plan_step(load_model("llama3.2-1b"), p);
    std::vector<std::pair<std::string, HostSync>> out;
    const Program& prog = plan.programs.at(stage);
    for (size_t i = 0; i < prog.size(); ++i) {
      const Op& op = prog.op(OpId(static_cast<uint32_t>(i)));
      if (op.host_sync != HostSync::kNone) {
        out.emplace_back(op.name, op.host_sync);
      }
    }
    return out;
  };
  const auto names = [](const std::vector<std::pair<std::string, HostSync>>& v,
                        const std::string& part) {
    return std::count_if(v.begin(), v.end(), [&](const auto& s) {
      return s.first.find(part) != std::string::npos;
    });
  };
  const auto megatron = syncs(Stack::kMegatron, 2, 1);
  EXPECT_EQ(names(megatron, "grad_norm"), 1);
  // Stage 0 of 2 with 4 microbatches: its sends of activations and receives of gradients pair
  // up as the schedule batches them; each batch syncs once.
  EXPECT_GT(names(megatron, "recv_gradient") + names(megatron, "send_activation"), 0);
  for (const auto& [name, kind] : megatron) {
    EXPECT_EQ(kind, name.find("grad_norm") != std::string::npos ? HostSync::kWaitOp
                                                                : HostSync::kWaitDevice)
        << name;
  }
  EXPECT_EQ(names(megatron, "get_batch"), 0);
  // Interleaved: the overlapped p2p does not synchronise.
  EXPECT_EQ(names(syncs(Stack::kMegatron, 2, 2), "_activation"), 0);
  const auto old = syncs(Stack::kMegatron2021, 2, 1);
  EXPECT_EQ(names(old, "get_batch"), 4);  // one per microbatch
  EXPECT_EQ(names(syncs(Stack::kMegatron2021, 4, 1, 1), "get_batch"), 4);  // on every stage
  // DeepSpeed's pipeline engine loads microbatches on its first and last stages only.
  for (const size_t stage : {size_t{0}, size_t{1}, size_t{2}, size_t{3}}) {
    EXPECT_EQ(names(syncs(Stack::kMegatronDeepSpeed2022, 4, 1, stage), "get_batch"),
              stage == 0 || stage == 3 ? 4 : 0)
        << stage;
  }
  EXPECT_TRUE(syncs(Stack::kFsdp, 1, 1).empty());
}

// CUDA graphs: per layer, each layer's forward (or backward) of each microbatch costs the host
// one graph launch, paid by its first op, and its other ops nothing; data-parallel and pipeline
// ops and the optimizer are issued as before. Per step, one launch for the whole program and no
// host synchronisation inside it.
TEST(Stacks, CudaGraphsLaunchALayerOrTheStepInOneCall) {
  const auto program = [](CudaGraphs g) {
    ParallelPlan p = plan_with(Stack::kMegatron, DeviceFamily::kHopper);
    p.gbs = 2;  // two microbatches
    p.cuda_graphs = g;
    return plan_step(load_model("llama3.2-1b"), p);
  };
  const HostDispatch& h = stack_profile(Stack::kMegatron, DeviceFamily::kHopper).host;
  const StepPlan eager_plan = program(CudaGraphs::kNone);
  const StepPlan layers_plan = program(CudaGraphs::kLayers);
  const StepPlan step_plan = program(CudaGraphs::kStep);
  const Program& eager = eager_plan.programs.at(0);
  const Program& layers = layers_plan.programs.at(0);
  const Program& step = step_plan.programs.at(0);
  ASSERT_EQ(eager.size(), layers.size());
  ASSERT_EQ(eager.size(), step.size());
  int64_t fwd_l3_ops = 0;
  int64_t fwd_l3_launches = 0;
  int64_t step_launches = 0;
  int64_t step_syncs = 0;
  for (size_t i = 0; i < eager.size(); ++i) {
    const OpId id(static_cast<uint32_t>(i));
    const Op& e = eager.op(id);
    const Op& l = layers.op(id);
    if (e.name.starts_with("fwd.L3.")) {
      ++fwd_l3_ops;
      EXPECT_GT(e.host, Duration::zero()) << e.name;
      fwd_l3_launches += l.host > Duration::zero() ? 1 : 0;
      EXPECT_TRUE(l.host == Duration::zero() || l.host == h.graph_launch) << l.name;
    }
    if (e.name.starts_with("step.") || e.name.find("optimizer") != std::string::npos) {
      EXPECT_EQ(l.host, e.host) << e.name;  // outside the layers' graphs
    }
    step_launches += step.op(id).host > Duration::zero() ? 1 : 0;
    step_syncs += step.op(id).host_sync != HostSync::kNone ? 1 : 0;
  }
  EXPECT_GT(fwd_l3_ops, 2 * 10);   // many kernels per layer pass...
  EXPECT_EQ(fwd_l3_launches, 2);   // ...one launch per microbatch's pass
  EXPECT_EQ(step_launches, 1);
  EXPECT_EQ(step_syncs, 0);
  EXPECT_EQ(step.op(OpId(0)).host, h.graph_launch);
}

// The ops of rank 0's program whose names contain `part`.
std::vector<const Op*> ops_named(const Program& prog, const std::string& part) {
  std::vector<const Op*> out;
  for (size_t i = 0; i < prog.size(); ++i) {
    const Op& op = prog.op(OpId(static_cast<uint32_t>(i)));
    if (op.name.find(part) != std::string::npos) {
      out.push_back(&op);
    }
  }
  return out;
}

// Under SP a column-parallel layer's input all-gather moves its FP8 cast where the stack gathers
// that: Transformer Engine's LayerNormLinear (forward and its re-gather for the weight gradient)
// and torchao's Float8ColwiseParallel (tensorwise); per-row scales and 16-bit runs gather
// 16 bits, and row-parallel reductions stay 16-bit.
TEST(Stacks, Fp8SequenceParallelGathersMoveTheFp8Cast) {
  const ModelConfig m = load_model("llama3.2-1b");
  const auto bytes_of_op = [&](ParallelPlan p, const std::string& name) {
    p.tp = 2;
    p.sp = true;
    const StepPlan step = plan_step(m, p);
    const std::vector<const Op*> ops = ops_named(step.programs.at(0), name);
    EXPECT_FALSE(ops.empty()) << name;
    return ops.empty() ? Bytes::zero() : std::get<CollectiveWork>(ops.front()->work).bytes;
  };
  const ParallelPlan bf16 = plan_with(Stack::kMegatron, DeviceFamily::kHopper);
  const ParallelPlan te = plan_with(Stack::kMegatron, DeviceFamily::kHopper, Dtype::kFp8);
  const Bytes wide = bytes_of_op(bf16, "fwd.L0.qkv.tp_allgather");
  EXPECT_EQ(wide, Bytes::of(1024 * 2048 * 2));  // the whole sequence's 2048 widths in bf16
  EXPECT_EQ(bytes_of_op(te, "fwd.L0.qkv.tp_allgather"), wide / 2);
  EXPECT_EQ(bytes_of_op(te, "bwd.L0.qkv.tp_allgather_input"), wide / 2);
  EXPECT_EQ(bytes_of_op(te, "fwd.L0.attn_out.tp_reducescatter"), wide);
  ParallelPlan tensorwise = plan_with(Stack::kFsdpCompile, DeviceFamily::kHopper, Dtype::kFp8);
  EXPECT_EQ(bytes_of_op(tensorwise, "fwd.L0.qkv.tp_allgather"), wide / 2);
  ParallelPlan rowwise = tensorwise;
  rowwise.fp8_scaling = Fp8Scaling::kRowwise;
  EXPECT_EQ(bytes_of_op(rowwise, "fwd.L0.qkv.tp_allgather"), wide);
}

// Megatron-LM 2021's pipeline transfers (megatron/p2p_communication.py _communicate @ 6985e589:
// "reqs = torch.distributed.batch_isend_irecv(ops)", "req.wait()", "torch.cuda.synchronize()")
// hold the compute stream, and with TP and no SP each rank sends its 1/TP slice, which the
// receiver all-gathers over TP ("tensor_send_next = mpu.split_tensor_into_1d_equal_chunks(...)",
// "tensor_recv_prev = mpu.gather_split_1d_tensor(tensor_recv_prev)").
TEST(Stacks, Megatron2021PipelineTransfersBlockAndSendSlices) {
  ParallelPlan p = plan_with(Stack::kMegatron2021, DeviceFamily::kAmpere);
  EXPECT_FALSE(p.overlap.pipeline_p2p);
  EXPECT_TRUE(p.pipeline_scatter_gather);
  EXPECT_TRUE(plan_with(Stack::kMegatron, DeviceFamily::kAmpere).overlap.pipeline_p2p);
  p.tp = 2;
  p.pp = 2;
  p.gbs = 2;
  const StepPlan plan = plan_step(load_model("llama3.2-1b"), p);
  const Program& last = plan.programs.at(1);  // the second stage receives activations
  const std::vector<const Op*> recv = ops_named(last, "recv_activation");
  ASSERT_FALSE(recv.empty());
  const Bytes activation = Bytes::of(1024 * 2048 * 2);  // 1024 tokens of 2048 in 16 bits
  const auto* wire = std::get_if<PeerWork>(&recv.front()->work);
  ASSERT_NE(wire, nullptr);
  EXPECT_EQ(wire->bytes, activation / 2);
  const std::vector<const Op*> gathers = ops_named(last, "recv_activation.tp_gather");
  ASSERT_FALSE(gathers.empty());
  EXPECT_EQ(std::get<CollectiveWork>(gathers.front()->work).bytes, activation);
  // With SP the activation is split already: the full (1/TP) tensor, no gather.
  p.sp = true;
  const StepPlan split = plan_step(load_model("llama3.2-1b"), p);
  EXPECT_TRUE(ops_named(split.programs.at(1), "tp_gather").empty());
}

// Megatron-LM 2021: linear layers are F.linear under autograd, so from the second microbatch on
// torch's AccumulateGrad adds each weight gradient to .grad (accumulate_grad.h: "variable_grad +=
// new_grad"): one element-wise pass per layer and microbatch after the first, reading both
// gradients and writing the sum. Megatron-LM 2022 fuses it into the weight-gradient GEMM
// (megatron/arguments.py @ cfd2e21607: "--no-gradient-accumulation-fusion", action='store_false').
TEST(Stacks, Megatron2021AccumulatesGradientsOutsideTheGemm) {
  ParallelPlan p = plan_with(Stack::kMegatron2021, DeviceFamily::kAmpere);
  EXPECT_FALSE(p.wgrad_accumulation_fused);
  p.gbs = 3;  // three microbatches
  const ModelConfig m = load_model("llama3.2-1b");
  const auto ks = kernels(p, m);
  EXPECT_EQ(count(ks, "grad_accumulate"), 2 * m.num_layers);
  const int64_t layer_params = [&] {
    for (const Kernel& k : ks) {
      if (k.name.find("grad_accumulate") != std::string::npos) {
        return k.work.bytes.count() / 6;  // fp16 gradients: read two, write one
      }
    }
    return int64_t{0};
  }();
  EXPECT_GT(layer_params, 0);
  ParallelPlan later = plan_with(Stack::kMegatron2022, DeviceFamily::kAmpere);
  later.gbs = 3;
  EXPECT_EQ(count(kernels(later, m), "grad_accumulate"), 0);
  EXPECT_TRUE(later.tp_backward_async);  // "--no-async-tensor-model-parallel-allreduce"
  EXPECT_FALSE(later.overlap.pipeline_p2p);  // still batch_isend_irecv + synchronize
}

// Megatron-LM of 2021 to 2023 reduces the gradients after the backward by default (--DDP-impl
// local; the distributed optimizer gathers the weights after its step), and a user's
// --overlap-grad-reduce (--DDP-impl torch) stays; DeepSpeed's ZeRO-3, built on 2021's layers,
// reduces them during the backward through its own hooks; Megatron-Core overlaps both.
TEST(Stacks, LegacyMegatronReducesGradientsAfterTheBackwardByDefault) {
  const auto bound = [](Stack stack, StackOverrides given = {}) {
    ParallelPlan p;
    p.dp = 8;
    p.zero = stack == Stack::kMegatron2023 ? ZeroStage::kOptimizerStates : ZeroStage::kNone;
    apply_stack(p, stack_profile(stack, DeviceFamily::kAmpere), given);
    return p.overlap;
  };
  for (const Stack s : {Stack::kMegatron2021, Stack::kMegatron2022, Stack::kMegatron2023}) {
    EXPECT_FALSE(bound(s).grad_reduce) << to_string(s);
    EXPECT_FALSE(bound(s).param_gather) << to_string(s);
    StackOverrides torch_ddp;
    torch_ddp.overlap_grad_reduce = true;
    EXPECT_TRUE(bound(s, torch_ddp).grad_reduce) << to_string(s);
  }
  EXPECT_TRUE(bound(Stack::kDeepSpeedZero3_2021).grad_reduce);
  EXPECT_TRUE(bound(Stack::kMegatron).grad_reduce);
  EXPECT_TRUE(bound(Stack::kMegatron).param_gather);
  // Their buckets: the local DDP's one all-reduce of every gradient, PyTorch DDP's 25 MiB.
  ParallelPlan legacy;
  legacy.stack = Stack::kMegatron2022;
  legacy.overlap.grad_reduce = false;
  EXPECT_EQ(grad_bucket_bytes(legacy), Bytes::of(std::numeric_limits<int64_t>::max()));
  legacy.overlap.grad_reduce = true;
  EXPECT_EQ(grad_bucket_bytes(legacy), MiB(25));
}

// bf16 gradients accumulated and reduced in fp32 where the framework does: Megatron-LM forces
// --accumulate-allreduce-grads-in-fp32 on for bf16 (every release since 2021), NeMo keeps it,
// torchtitan's FSDP2 reduces in float32; fp16 Megatron keeps fp16 gradients, DeepSpeed's engines
// their own, and a value the user gave stays. The gradients take 4 bytes in memory and in the
// data-parallel reduce-scatters, and the buckets keep their parameter count.
TEST(Stacks, Bf16GradientsReducedInFp32WhereTheFrameworkDoes) {
  const auto bound = [](Stack stack, Dtype dtype, StackOverrides given = {},
                        bool user_value = false) {
    ParallelPlan p;
    p.dp = 8;
    p.mbs = 1;
    p.gbs = 8;
    p.seq = 1024;
    p.zero = ZeroStage::kOptimizerStates;
    p.set_training_dtype(dtype);
    p.grad_reduce_fp32 = user_value;
    apply_stack(p, stack_profile(stack, DeviceFamily::kHopper), given);
    return p;
  };
  for (const Stack s : {Stack::kMegatron, Stack::kMegatron2021, Stack::kMegatron2022,
                        Stack::kMegatron2023, Stack::kCustom}) {
    EXPECT_TRUE(bound(s, Dtype::kBf16).grad_reduce_fp32) << to_string(s);
    EXPECT_TRUE(bound(s, Dtype::kFp8).grad_reduce_fp32) << to_string(s);
    EXPECT_FALSE(bound(s, Dtype::kFp16).grad_reduce_fp32) << to_string(s);
  }
  EXPECT_TRUE(bound(Stack::kFsdpCompile, Dtype::kBf16).grad_reduce_fp32);
  // DeepSpeed's BF16_Optimizer keeps fp32 gradients through the same field (its fp16 does not).
  EXPECT_TRUE(bound(Stack::kMegatronDeepSpeed2022, Dtype::kBf16).grad_reduce_fp32);
  EXPECT_FALSE(bound(Stack::kMegatronDeepSpeed2022, Dtype::kFp16).grad_reduce_fp32);
  for (const Stack s : {Stack::kFsdp, Stack::kDeepSpeedZero3_2021, Stack::kLlmFoundry2023}) {
    EXPECT_FALSE(bound(s, Dtype::kBf16).grad_reduce_fp32) << to_string(s);
  }
  StackOverrides given;
  given.grad_reduce_fp32 = true;
  EXPECT_FALSE(bound(Stack::kMegatron, Dtype::kBf16, given, false).grad_reduce_fp32);
  EXPECT_TRUE(bound(Stack::kFsdp, Dtype::kBf16, given, true).grad_reduce_fp32);

  // Memory: Megatron's distributed optimizer keeps 2 + 4 + 12/d bytes a parameter for bf16
  // (docs/user-guide/features/dist_optimizer.md: "bf16 parameters, fp32 gradients ... 6 + 12/d"),
  // 2 + 2 + 12/d with 16-bit gradients.
  const ModelConfig m = load_model("llama3.2-1b");
  const ParallelPlan fp32 = bound(Stack::kMegatron, Dtype::kBf16);
  const ParallelPlan bf16 = bound(Stack::kMegatron, Dtype::kBf16, given, false);
  EXPECT_EQ(fp32.model_state().gradient, 4);
  EXPECT_EQ(bf16.model_state().gradient, 2);
  EXPECT_EQ(fp32.state.gradient, 2);  // the dtype's own state is untouched
  EXPECT_EQ(training_memory(m, fp32).gradients, training_memory(m, bf16).gradients * 2);
  EXPECT_EQ(training_memory(m, fp32).weights, training_memory(m, bf16).weights);
  // Traffic: the reduce-scatters move twice the bytes, in the same number of buckets; the
  // parameter all-gathers move the same bf16 weights.
  const auto moved = [&](const ParallelPlan& p, const std::string& name) {
    const StepPlan plan = plan_step(m, p);
    std::pair<Bytes, size_t> out{Bytes::zero(), 0};
    for (const Op* op : ops_named(plan.programs.at(0), name)) {
      out.first += std::get<CollectiveWork>(op->work).bytes;
      ++out.second;
    }
    return out;
  };
  const auto [fp32_rs, fp32_buckets] = moved(fp32, "reduce-scatter");
  const auto [bf16_rs, bf16_buckets] = moved(bf16, "reduce-scatter");
  EXPECT_GT(bf16_rs, Bytes::zero());
  EXPECT_EQ(fp32_rs, bf16_rs * 2);
  EXPECT_EQ(fp32_buckets, bf16_buckets);
  EXPECT_EQ(moved(fp32, "param_gather"), moved(bf16, "param_gather"));
}

// Megatron-LM's vocabulary-parallel cross entropy without --cross-entropy-loss-fusion is
// PyTorch ops over an fp32 copy of the logits: .float(), max, sub_, exp, sum, div_ forward (38
// bytes an element from 16-bit logits), the in-place scale and the cast back in the backward (14).
// Megatron-Core's fused loss compiles the same steps into three kernels forward (the fp32 copy
// with the max, 6; subtract, exponentiate and sum, 8; divide, 8) and one backward (scale in place
// and return the 16-bit gradient, 10); a one-pass loss (Transformer Engine's, Liger's, XLA's)
// reads the logits and writes their gradient once (4). The legacy stacks run the first,
// Megatron-Core's recipes the second, torchtitan the third, and a plan's own choice stays.
TEST(Stacks, CrossEntropyPassesFollowEachFrameworksImplementation) {
  const ModelConfig m = load_model("llama3.2-1b");
  const auto loss_bytes = [&](const ParallelPlan& p) {
    int64_t bytes = 0;
    size_t kernels_seen = 0;
    for (const Kernel& k : kernels(p, m)) {
      if (k.name.find("cross_entropy") != std::string::npos) {
        bytes += k.work.bytes.count();
        ++kernels_seen;
      }
    }
    return std::pair{bytes, kernels_seen};
  };
  const int64_t tv = 1024 * m.vocab_size;  // one microbatch of 1024 tokens, TP 1
  const ParallelPlan legacy = plan_with(Stack::kMegatron2022, DeviceFamily::kAmpere);
  EXPECT_FALSE(legacy.cross_entropy_fusion);
  EXPECT_EQ(loss_bytes(legacy), (std::pair<int64_t, size_t>{52 * tv, 8}));
  const ParallelPlan core = plan_with(Stack::kMegatron, DeviceFamily::kHopper);
  EXPECT_TRUE(core.cross_entropy_fusion);
  EXPECT_EQ(loss_bytes(core), (std::pair<int64_t, size_t>{32 * tv, 4}));
  const ParallelPlan compiled = plan_with(Stack::kFsdpCompile, DeviceFamily::kHopper);
  EXPECT_TRUE(compiled.cross_entropy_fusion);
  EXPECT_EQ(loss_bytes(compiled), (std::pair<int64_t, size_t>{4 * tv, 1}));
  ParallelPlan chosen;
  chosen.gbs = chosen.mbs = 1;
  chosen.seq = 1024;
  chosen.cross_entropy_fusion = false;
  StackOverrides given;
  given.cross_entropy_fusion = true;
  apply_stack(chosen, stack_profile(Stack::kMegatron, DeviceFamily::kHopper), given);
  EXPECT_FALSE(chosen.cross_entropy_fusion);
  EXPECT_EQ(loss_bytes(chosen).first, 52 * tv);
}

// Megatron-DeepSpeed on DeepSpeed v0.6.5: TrainSchedule's ReduceGrads follows the last backward
// and OptimizerStep all-gathers the weights, neither overlapped; bf16's BF16_Optimizer all-reduces
// its fp32 gradients whole (engine.py _bf16_reduce_grads) where fp16's ZeRO-1 reduce-scatters the
// 16-bit ones (stage_1_and_2.py average_tensor); the p2p is a blocking send of 1/TP slices.
TEST(Stacks, MegatronDeepSpeedReducesAfterTheBackwardAndBf16AllReducesFp32) {
  const ModelConfig m = load_model("llama3.2-1b");
  const auto bound = [](Dtype dtype, StackOverrides given = {}) {
    ParallelPlan p;
    p.dp = 4;
    p.gbs = 4;
    p.mbs = 1;
    p.seq = 1024;
    p.set_training_dtype(dtype);
    p.zero = ZeroStage::kOptimizerStates;
    apply_stack(p, stack_profile(Stack::kMegatronDeepSpeed2022, DeviceFamily::kAmpere), given);
    return p;
  };
  const ParallelPlan bf16 = bound(Dtype::kBf16);
  EXPECT_FALSE(bf16.overlap.grad_reduce);
  EXPECT_FALSE(bf16.overlap.param_gather);
  EXPECT_FALSE(bf16.overlap.pipeline_p2p);
  EXPECT_TRUE(bf16.pipeline_scatter_gather);
  EXPECT_EQ(bf16.host.sync_after_p2p, P2pSync::kNone);  // p2p.py: no torch.cuda.synchronize
  EXPECT_TRUE(bf16.optimizer_all_reduces_grads);
  EXPECT_EQ(bf16.model_state().gradient, 4);
  const ParallelPlan fp16 = bound(Dtype::kFp16);
  EXPECT_FALSE(fp16.optimizer_all_reduces_grads);
  EXPECT_EQ(fp16.model_state().gradient, 2);
  // What BF16_Optimizer keeps does not follow the ZeRO stage (the plan search changes the stage
  // of a plan bound before): bound at ZeRO 0, the gradients are fp32 all the same.
  ParallelPlan unsharded;
  unsharded.set_training_dtype(Dtype::kBf16);
  apply_stack(unsharded, stack_profile(Stack::kMegatronDeepSpeed2022, DeviceFamily::kAmpere), {});
  EXPECT_EQ(unsharded.model_state().gradient, 4);
  // What the user set explicitly stays (and the stack's rules refuse it, stack_rules_test.cc).
  StackOverrides given;
  given.overlap_grad_reduce = true;
  EXPECT_TRUE(bound(Dtype::kBf16, given).overlap.grad_reduce);
  // A 16-bit gradient reduction it has no path for is refused, not ignored.
  StackOverrides bf16_grads;
  bf16_grads.grad_reduce_fp32 = true;  // given, as false (the plan's default)
  try {
    (void)bound(Dtype::kBf16, bf16_grads);
    ADD_FAILURE() << "megatron-deepspeed-2022 accepted a 16-bit gradient reduction";
  } catch (const PlanError& e) {
    EXPECT_EQ(e.field(), PlanField::kGradReduceFp32);
    EXPECT_NE(std::string(e.what()).find("BF16_Optimizer"), std::string::npos) << e.what();
  }
  EXPECT_EQ(bound(Dtype::kFp16, bf16_grads).model_state().gradient, 2);

  const auto reductions = [&](const ParallelPlan& p, const std::string& kind) {
    const StepPlan plan = plan_step(m, p);
    Bytes total = Bytes::zero();
    for (const Op* op : ops_named(plan.programs.at(0), "grad_bucket")) {
      const auto& w = std::get<CollectiveWork>(op->work);
      if (op->name.find(kind) != std::string::npos) {
        total += w.bytes;
      }
    }
    return total;
  };
  const Bytes fp32_all_reduced = reductions(bf16, "all-reduce");
  const Bytes fp16_scattered = reductions(fp16, "reduce-scatter");
  EXPECT_GT(fp32_all_reduced, Bytes::zero());
  EXPECT_EQ(reductions(bf16, "reduce-scatter"), Bytes::zero());
  EXPECT_EQ(reductions(fp16, "all-reduce"), Bytes::zero());
  EXPECT_EQ(fp32_all_reduced, fp16_scattered * 2);  // the same gradients at 4 bytes, not 2
  // In buffers of 500M elements (MEMORY_OPT_ALLREDUCE_SIZE): Llama-3.2 1B's 1.24B gradients in
  // two, the first closing after 9 of its 16 layers of 61M, the second with the embedding.
  const StepPlan step = plan_step(m, bf16);
  EXPECT_EQ(ops_named(step.programs.at(0), "grad_bucket").size(), 2u);
}

// DeepSpeed ZeRO-3 (v0.3.13, stage3.py): fetch_sub_module gathers a submodule's parameters before
// its forward and release_sub_module frees them after ("params_to_release = [param for _, param
// in sub_module.named_parameters(recurse=False)]"), so a checkpointed layer is gathered for its
// recomputed forward and again for its backward; FSDP keeps one gather for both.
TEST(Stacks, DeepSpeedZero3GathersALayerAgainForItsBackward) {
  const ModelConfig m = load_model("llama3.2-1b");
  const auto gathers = [&](Stack stack) {
    ParallelPlan p = plan_with(stack, DeviceFamily::kAmpere);
    p.dp = 4;
    p.gbs = 4;
    p.zero = ZeroStage::kParameters;
    p.recompute = Recompute::kFull;
    const StepPlan plan = plan_step(m, p);
    const Program& prog = plan.programs.at(0);
    return std::make_pair(ops_named(prog, "fsdp_allgather").size(),
                          ops_named(prog, "fsdp_allgather_again").size());
  };
  const auto [ds_all, ds_again] = gathers(Stack::kDeepSpeedZero3_2021);
  const auto [fsdp_all, fsdp_again] = gathers(Stack::kFsdp);
  EXPECT_EQ(ds_again, static_cast<size_t>(m.num_layers));
  EXPECT_EQ(fsdp_again, 0u);
  EXPECT_EQ(ds_all, fsdp_all + ds_again);
  EXPECT_EQ(stack_profile(Stack::kDeepSpeedZero3_2021, DeviceFamily::kAmpere).attention,
            AttentionKernel::kNaive);  // Megatron-LM 2021's GPT
}

// ZeRO-1/2's weight gathers run bucket by bucket, the buckets of the gradient reduction
// (Megatron-Core's DDP buckets, max(40M, 1M x DP) parameters; param_and_grad_buffer.py): a
// bucket holds as many layers as fit, not one gather per layer.
TEST(Stacks, ZeroWeightGathersRunByTheGradientBuckets) {
  const ModelConfig m = load_model("llama3.2-1b");
  const auto gathers = [&](int64_t dp) {
    ParallelPlan p = plan_with(Stack::kMegatron, DeviceFamily::kHopper);
    p.dp = dp;
    p.gbs = dp;
    p.zero = ZeroStage::kOptimizerStates;
    validate_plan(m, p);
    return ops_named(plan_step(m, p).programs.at(0), "param_gather").size();
  };
  const size_t small = gathers(8);    // 40M-parameter buckets: about one layer each
  const size_t large = gathers(512);  // 512M: several layers each
  EXPECT_GE(small, static_cast<size_t>(m.num_layers));
  EXPECT_LT(large, static_cast<size_t>(m.num_layers) / 2);
  EXPECT_GT(large, 0u);
}

// --fp8-param-gather: the layers' weights all-gathered in FP8, one byte each (the embedding and
// head in 16 bits); only with FP8 training, ZeRO and Megatron-Core (validate_plan refuses the rest
// with the field named).
TEST(Stacks, Fp8ParamGatherMovesOneByteALayerParameter) {
  const ModelConfig m = load_model("llama3.2-1b");
  const auto gathered = [&](ZeroStage zero, bool fp8_gather, const std::string& name) {
    ParallelPlan p = plan_with(Stack::kMegatron, DeviceFamily::kHopper, Dtype::kFp8);
    p.dp = 4;
    p.gbs = 4;
    p.zero = zero;
    p.fp8_param_gather = fp8_gather;
    validate_plan(m, p);
    const StepPlan plan = plan_step(m, p);
    const Program& prog = plan.programs.at(0);
    int64_t bytes = 0;
    for (const Op* op : ops_named(prog, name)) {
      bytes += std::get<CollectiveWork>(op->work).bytes.count();
    }
    return bytes;
  };
  // ZeRO-3: every layer's gather halves.
  const int64_t z3 = gathered(ZeroStage::kParameters, false, "L3.fsdp_allgather");
  ASSERT_GT(z3, 0);
  EXPECT_EQ(gathered(ZeroStage::kParameters, true, "L3.fsdp_allgather") * 2, z3);
  // ZeRO-1: the distributed optimizer's gathers lose one byte per layer parameter only.
  const int64_t z1 = gathered(ZeroStage::kOptimizerStates, false, "param_gather");
  const int64_t z1_fp8 = gathered(ZeroStage::kOptimizerStates, true, "param_gather");
  // 16 bits outside the layers: the embedding (tied: the head is the embedding) and the final norm.
  const int64_t embedding = m.vocab_size * m.d_model + m.d_model;
  ASSERT_GT(z1, 0);
  EXPECT_EQ(z1 - z1_fp8, (z1 - 2 * embedding) / 2);

  const auto refused = [&](ParallelPlan p) {
    try {
      validate_plan(m, p);
    } catch (const PlanError& e) {
      return e.field() == PlanField::kFp8ParamGather;
    }
    return false;
  };
  ParallelPlan p = plan_with(Stack::kMegatron, DeviceFamily::kHopper, Dtype::kFp8);
  p.dp = 4;
  p.gbs = 4;
  p.zero = ZeroStage::kOptimizerStates;
  p.fp8_param_gather = true;
  EXPECT_FALSE(refused(p));
  p.set_training_dtype(Dtype::kBf16);
  EXPECT_TRUE(refused(p));  // no FP8 weights
  p.set_training_dtype(Dtype::kFp8);
  p.zero = ZeroStage::kNone;
  EXPECT_TRUE(refused(p));  // no distributed optimizer or FSDP
  p.zero = ZeroStage::kOptimizerStates;
  apply_stack(p, stack_profile(Stack::kFsdp, DeviceFamily::kHopper), {});
  EXPECT_TRUE(refused(p));  // not Megatron-Core's
}

// PaxML on GPU (DGX Cloud Benchmarking's paxml/configure.sh @ 35a9aec: "export ENABLE_TE=1",
// "export NVTE_FUSED_ATTN=1"): Transformer Engine's fused attention; on TPU the Pallas kernels.
TEST(Stacks, PaxmlRunsTransformerEnginesAttentionOnGpusAndPallasOnTpus) {
  EXPECT_EQ(stack_profile(Stack::kPaxml, DeviceFamily::kHopper).attention, AttentionKernel::kCudnn);
  EXPECT_EQ(stack_profile(Stack::kPaxml, DeviceFamily::kAmpere).attention, AttentionKernel::kFlash);
  EXPECT_EQ(stack_profile(Stack::kPaxml, DeviceFamily::kTpu).attention, AttentionKernel::kSplash);
  EXPECT_EQ(stack_profile(Stack::kPaxml, DeviceFamily::kHopper).kernels, Kernels::kFused);
}

// Megatron-LM's legacy layer issues the plain PyTorch kernels its code has around the fused ones
// (ParallelPlan::megatron_legacy_layer, read from megatron/model/transformer.py and
// megatron/mpu/layers.py @ cfd2e21607): the QKV bias add and the context's permute copy forward;
// the biases' gradient reductions, the Q/K/V gradients' concatenation, baddbmm's alpha
// multiplies, the delay kernels of the async TP all-reduce and the residual gradient's second
// accumulation backward. Megatron-Core with Transformer Engine issues none of them, and a model
// without biases has no bias kernels.
TEST(Stacks, MegatronLegacyLayerIssuesTheKernelsAroundItsFusedOnes) {
  const auto names = [](Stack stack, const std::string& model, int64_t tp) {
    ParallelPlan p = plan_with(stack, DeviceFamily::kAmpere);
    p.tp = tp;
    const StepPlan plan = plan_step(load_model(model), p);
    const Program& prog = plan.programs.at(0);
    std::map<std::string, ComputeWork> out;  // copies: the plan dies here
    for (size_t i = 0; i < prog.size(); ++i) {
      const Op& op = prog.op(OpId(static_cast<uint32_t>(i)));
      if (const auto* w = std::get_if<ComputeWork>(&op.work);
          w && op.name.find(".L3.") != std::string::npos) {
        out[op.name] = *w;
      }
    }
    return out;
  };
  const std::vector<std::string> glue = {"fwd.L3.qkv.bias",
                                         "fwd.L3.attention.out_copy",
                                         "bwd.L3.qkv.split.bwd",
                                         "bwd.L3.qkv.bias.grad",
                                         "bwd.L3.attn_out.bias.grad",
                                         "bwd.L3.fc1.bias.grad",
                                         "bwd.L3.fc2.bias.grad",
                                         "bwd.L3.attention.bwd.dq_alpha",
                                         "bwd.L3.attention.bwd.dk_alpha",
                                         "bwd.L3.qkv.delay",
                                         "bwd.L3.fc1.delay",
                                         "bwd.L3.residual_attn.bwd"};
  const auto legacy = names(Stack::kMegatron2022, "gpt2-small", 2);
  for (const std::string& n : glue) {
    EXPECT_TRUE(legacy.contains(n)) << n;
  }
  // GPT-2 small at TP 2, microbatch 1 of 1024 tokens, 16-bit: the concatenation reads and writes
  // the rank's Q, K and V gradients (3 x 384 wide), a bias gradient reads its output gradient.
  const int64_t t = 1024;
  EXPECT_EQ(legacy.at("bwd.L3.qkv.split.bwd").bytes.count(), 2 * 2 * t * 3 * 384);
  EXPECT_EQ(legacy.at("bwd.L3.fc1.bias.grad").bytes.count(), 2 * (t * 1536 + 1536));
  EXPECT_EQ(legacy.at("bwd.L3.attn_out.bias.grad").bytes.count(), 2 * (t * 768 + 768));
  // 15 kernels forward and 28 backward (stack.cc spreads the measured layer over them).
  const auto count = [&](const std::string& prefix) {
    return std::ranges::count_if(legacy,
                                 [&](const auto& kv) { return kv.first.starts_with(prefix); });
  };
  EXPECT_EQ(count("fwd.L3."), 15);
  EXPECT_EQ(count("bwd.L3."), 28);
  // The async TP all-reduce's delay kernel exists only with TP and the async all-reduce (2021's
  // all-reduce is blocking).
  EXPECT_FALSE(names(Stack::kMegatron2022, "gpt2-small", 1).contains("bwd.L3.qkv.delay"));
  EXPECT_FALSE(names(Stack::kMegatron2021, "gpt2-small", 2).contains("bwd.L3.qkv.delay"));
  EXPECT_TRUE(names(Stack::kMegatron2021, "gpt2-small", 2).contains("bwd.L3.qkv.split.bwd"));
  // Megatron-Core with Transformer Engine: none of them.
  const auto core = names(Stack::kMegatron, "gpt2-small", 2);
  for (const std::string& n : glue) {
    EXPECT_FALSE(core.contains(n)) << n;
  }
  // No biases, no bias kernels; the concatenation stays.
  const auto llama = names(Stack::kMegatron2023, "llama3.2-1b", 2);
  EXPECT_FALSE(llama.contains("fwd.L3.qkv.bias"));
  EXPECT_FALSE(llama.contains("bwd.L3.qkv.bias.grad"));
  EXPECT_TRUE(llama.contains("bwd.L3.qkv.split.bwd"));
}

// host_time_scale multiplies the host cost of every op the stack charges, and nothing else.
TEST(Stacks, HostTimeScaleMultipliesEveryOpsHostCost) {
  ParallelPlan p = plan_with(Stack::kMegatron2022, DeviceFamily::kAmpere);
  p.tp = 2;
  const StepPlan base_plan = plan_step(load_model("gpt2-small"), p);
  p.host_time_scale = 2.5;
  const StepPlan slow_plan = plan_step(load_model("gpt2-small"), p);
  const Program& base = base_plan.programs.at(0);
  const Program& slow = slow_plan.programs.at(0);
  ASSERT_EQ(base.size(), slow.size());
  int64_t charged = 0;
  for (size_t i = 0; i < base.size(); ++i) {
    const Op& a = base.op(OpId(static_cast<uint32_t>(i)));
    const Op& b = slow.op(OpId(static_cast<uint32_t>(i)));
    EXPECT_EQ(a.name, b.name);
    EXPECT_NEAR(b.host.microseconds(), 2.5 * a.host.microseconds(), 1e-3) << a.name;
    charged += a.host > Duration::zero() ? 1 : 0;
  }
  EXPECT_GT(charged, 100);
}

// The LayerNorm's backward as each stack's kernel runs it: apex's two-stage kernel reads the input
// and the output gradient twice (five passes) in Megatron-LM 2021 and the stacks on its GPT;
// Megatron-LM 2022 and 2023 take the persistent kernel (three passes) for the hidden sizes it
// lists, 1024 but not GPT-2 small's 768; Megatron-Core with Transformer Engine, three.
TEST(Stacks, LayerNormBackwardReadsWhatEachStacksKernelReads) {
  const auto norm_bwd_bytes = [](Stack stack, const std::string& model, int64_t d_model) {
    ModelConfig m = load_model(model);
    if (d_model > 0) {
      m.d_model = d_model;
      m.head_dim = d_model / m.num_heads;
      m.d_ff = 4 * d_model;
    }
    const StepPlan plan = plan_step(m, plan_with(stack, DeviceFamily::kAmpere));
    const Program& prog = plan.programs.at(0);
    for (size_t i = 0; i < prog.size(); ++i) {
      const Op& op = prog.op(OpId(static_cast<uint32_t>(i)));
      if (op.name == "bwd.L0.attn_norm.bwd") {
        return std::get<ComputeWork>(op.work).bytes.count();
      }
    }
    ADD_FAILURE() << "no bwd.L0.attn_norm.bwd";
    return int64_t{0};
  };
  const int64_t t = 1024;  // plan_with: one microbatch of 1,024 tokens, 16-bit
  const auto passes = [&](int64_t h, int64_t n) { return n * 2 * t * h + 2 * h; };
  EXPECT_EQ(norm_bwd_bytes(Stack::kMegatron2021, "gpt2-small", 0), passes(768, 5));
  EXPECT_EQ(norm_bwd_bytes(Stack::kMegatron2022, "gpt2-small", 0), passes(768, 5));
  EXPECT_EQ(norm_bwd_bytes(Stack::kMegatron2022, "gpt2-small", 1024), passes(1024, 3));
  EXPECT_EQ(norm_bwd_bytes(Stack::kMegatron2023, "gpt2-small", 1024), passes(1024, 3));
  EXPECT_EQ(norm_bwd_bytes(Stack::kMegatron2021, "gpt2-small", 1024), passes(1024, 5));
  EXPECT_EQ(norm_bwd_bytes(Stack::kMegatronDeepSpeed2022, "gpt2-small", 1024), passes(1024, 5));
  EXPECT_EQ(norm_bwd_bytes(Stack::kMegatron, "gpt2-small", 0), passes(768, 3));
}

}  // namespace
}  // namespace meshsim::workloads
