#include "meshsim/traces/import.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <string>

#include "import_test_util.h"

namespace meshsim::traces {
namespace {

using namespace testing;  // NOLINT: the importer tests' helpers

TEST(ClassifyKernel, FollowsTheDocumentedRules) {
  const std::map<std::string, OpClass> examples = {
      {"ncclDevKernel_AllReduce_Sum_bf16_RING_LL", OpClass::kCommunication},
      {"all-reduce-start.3", OpClass::kCommunication},
      {"reduce-scatter.1", OpClass::kCommunication},  // not embedding's "scatter"
      {"c10d::allreduce_", OpClass::kCommunication},
      {"aten::cross_entropy_loss", OpClass::kLoss},
      {"autograd::engine::evaluate_function: NllLossBackward0", OpClass::kLoss},
      {"aten::_log_softmax", OpClass::kLoss},  // not attention's "softmax"
      {"flash_fwd_kernel", OpClass::kAttention},
      {"fmha_cutlassF_bf16_aligned_64x64_rf_sm80", OpClass::kAttention},  // not "cutlass"
      {"aten::_scaled_dot_product_efficient_attention", OpClass::kAttention},
      {"aten::_softmax", OpClass::kAttention},
      {"autograd::engine::evaluate_function: SoftmaxBackward0", OpClass::kAttention},
      {"sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n", OpClass::kMatmul},
      {"nvjet_tst_128x256_64x4_1x2_h_bz_coopA_NNT", OpClass::kMatmul},
      {"Cijk_Alik_Bljk_BBS_BH_MT128x128x64", OpClass::kMatmul},
      {"aten::addmm", OpClass::kMatmul},
      {"aten::mm", OpClass::kMatmul},
      {"aten::linear", OpClass::kMatmul},
      {"AddmmBackward0", OpClass::kMatmul},
      {"autograd::engine::evaluate_function: MmBackward0", OpClass::kMatmul},
      {"autograd::engine::evaluate_function: SplitWithSizesBackward0", OpClass::kCopy},
      {"dot.4", OpClass::kMatmul},
      {"convolution fusion", OpClass::kMatmul},
      {"aten::_foreach_addcdiv_", OpClass::kOptimizer},
      {"multi_tensor_apply_kernel", OpClass::kOptimizer},
      {"Optimizer.step#AdamW.step", OpClass::kOptimizer},
      {"aten::embedding", OpClass::kEmbedding},
      {"EmbeddingBackward0", OpClass::kEmbedding},
      {"indexSelectLargeIndex", OpClass::kEmbedding},
      {"aten::native_layer_norm", OpClass::kNorm},
      {"aten::rsqrt", OpClass::kNorm},
      {"loop_rsqrt_fusion", OpClass::kNorm},
      {"rmsnorm", OpClass::kNorm},
      {"Memcpy DtoD (Device -> Device)", OpClass::kCopy},
      {"aten::copy_", OpClass::kCopy},
      {"aten::t", OpClass::kCopy},
      {"TBackward0", OpClass::kCopy},
      {"autograd::engine::evaluate_function: ReshapeAliasBackward0", OpClass::kCopy},
      {"dynamic-update-slice.2", OpClass::kCopy},
      {"data formatting", OpClass::kCopy},
      {"aten::add_", OpClass::kElementwise},
      {"SiluBackward0", OpClass::kElementwise},
      {"loop_multiply_fusion", OpClass::kElementwise},
      {"input_reduce_fusion", OpClass::kElementwise},
      {"vectorized_elementwise_kernel", OpClass::kElementwise},
      {"loop fusion", OpClass::kElementwise},
  };
  for (const auto& [name, expected] : examples) {
    EXPECT_EQ(match_kernel_class("pytorch", name), expected) << name;
    EXPECT_EQ(classify_kernel("jax", name), expected) << name;
  }
}

TEST(ClassifyKernel, WordsMatchWholeTokensAndUnknownNamesAreReported) {
  // "mm" is a word rule: aten::mm is a matmul, "comm" and "summary" are not.
  EXPECT_EQ(match_kernel_class("pytorch", "comm_setup"), std::nullopt);
  EXPECT_EQ(match_kernel_class("pytorch", "summary"), std::nullopt);
  EXPECT_EQ(match_kernel_class("jax", "fusion.123"), std::nullopt);  // kind unknown: ask args
  EXPECT_EQ(match_kernel_class("jax", "my_custom_kernel"), std::nullopt);
  EXPECT_EQ(classify_kernel("jax", "my_custom_kernel"), OpClass::kElementwise);
}

// The smoke run of validation/reference_trainer/train_torch.py (val-tiny: 2 layers, d_model 128,
// batch 2 x seq 64, torch 1.13 CPU, legacy profiler), trimmed to top-level operators and their
// children and gzipped (see fixtures/torch_cpu_smoke.manifest.json). The per-class totals are the
// importer's, pinned; they were checked against an independent computation (Python, same
// nesting rule): the top-level operators inside each ProfilerStep range number 621 and 627 and
// sum to 27043 us and 18968 us, and those inside the Optimizer.step/zero_grad ranges to 3295 us
// and 3471 us.
// The committed smoke trace (fixtures/README.md): val-tiny, 2 x 64 tokens, 2 steps, as the reference
// trainer writes it with torch 1.13's legacy profiler. The totals were checked independently of
// the importer (a Python pass over the same JSON): the classes sum to the top-level operators'
// durations (15463 and 13319 us), matmul equals the summed aten::linear and
// "evaluate_function: MmBackward0" operators (1846 + 4195 and 1937 + 3242 us), and no operator is
// unclassified (SplitWithSizesBackward0, 32 and 33 us, is a copy). Each step runs 39
// GEMMs with recorded shapes: per layer 4 projections and 2 attention GEMMs forward, twice that
// backward, and the LM head's 3.
TEST(ImportTrace, PyTorchCpuSmokeTraceFromTheReferenceTrainer) {
  const std::string path = kFixtures + "/torch_cpu_smoke.trace.json.gz";
  const MeasuredTrace t = import_trace(path);
  EXPECT_EQ(t.source, path);
  EXPECT_EQ(t.framework, "pytorch");
  EXPECT_EQ(t.op_source, "host");
  ASSERT_EQ(t.steps.size(), 2u);
  EXPECT_EQ(t.steps[0].ops.size(), 536u);
  EXPECT_EQ(t.steps[1].ops.size(), 536u);
  EXPECT_EQ(t.steps[0].start, SimTime::zero());
  EXPECT_EQ(t.steps[0].duration, us(19501));
  EXPECT_EQ(t.steps[1].start, SimTime::zero() + us(19525));
  EXPECT_EQ(t.steps[1].duration, us(16575));
  EXPECT_EQ(t.steps[0].host_events, 3118);
  expect_totals(time_by_class(t.steps[0]), {{OpClass::kMatmul, 6041},
                                            {OpClass::kAttention, 2237},
                                            {OpClass::kElementwise, 1667},
                                            {OpClass::kNorm, 1292},
                                            {OpClass::kEmbedding, 118},
                                            {OpClass::kLoss, 357},
                                            {OpClass::kOptimizer, 2250},
                                            {OpClass::kCopy, 1501}});
  expect_totals(time_by_class(t.steps[1]), {{OpClass::kMatmul, 5179},
                                            {OpClass::kAttention, 2401},
                                            {OpClass::kElementwise, 1076},
                                            {OpClass::kNorm, 1267},
                                            {OpClass::kEmbedding, 231},
                                            {OpClass::kLoss, 358},
                                            {OpClass::kOptimizer, 2016},
                                            {OpClass::kCopy, 791}});
  for (const MeasuredStep& step : t.steps) {
    ASSERT_EQ(step.gemms.size(), 39u);
    int attention = 0;
    for (const MeasuredGemm& g : step.gemms) {
      attention += g.op_class == OpClass::kAttention ? 1 : 0;
      EXPECT_EQ(g.shape.batch == 1, g.op_class == OpClass::kMatmul) << g.name;
    }
    EXPECT_EQ(attention, 2 * (2 + 4));  // QK^T and PV forward, four GEMMs backward, per layer
  }
  for (const MeasuredStep& step : t.steps) {
    EXPECT_EQ(unclassified_time(step), Duration::zero());
    // Top-level operators of one thread never overlap, and all lie inside the step.
    Duration sum;
    for (size_t i = 0; i < step.ops.size(); ++i) {
      const MeasuredOp& op = step.ops[i];
      sum += op.duration;
      EXPECT_EQ(op.device, 0);
      EXPECT_GE(op.start, step.start);
      EXPECT_LE(op.start + op.duration, step.start + step.duration);
      if (i > 0) {
        EXPECT_LE(step.ops[i - 1].start + step.ops[i - 1].duration, op.start) << op.name;
      }
    }
    EXPECT_LE(sum, step.duration);
  }
}

// Hand-written Kineto GPU trace (fixtures/torch_gpu_mini.trace.json). Kernels go to the step
// whose ProfilerStep range holds their launch (cudaLaunchKernel, by correlation id).
//   step 1 (host range [1000, 1400] us; the last kernel ends at 1402):
//     mul kernel, launched inside "rmsnorm"                         norm         10
//     sm90_xmma_gemm (aten::mm)                                      matmul       40
//     flash_fwd_kernel inside "attention"                           attention    30
//     mul kernel from MulBackward0, whose forward aten::mul (same
//       Sequence number 5) ran inside "rmsnorm"                     norm         12
//     nvjet gemm from MmBackward0 (forward had no annotation)       matmul       50
//     ncclDevKernel_AllReduce, stream 20                            communication 80
//     multi_tensor_apply_kernel inside Optimizer.step               optimizer     6
//     Memcpy DtoD inside Optimizer.step (context beats "copy")      optimizer     4
//     my_custom_kernel, stream 8: no rule                           elementwise   3 (unclassified)
//   step 2 (range [1400, 1800]):
//     indexSelectLargeIndex inside "embedding"                      embedding    10
//     cunn_SoftMaxForward<..LogSoftMaxForwardEpilogue> in "loss"     loss         10
//     ampere gemm without a launch (assigned by its own start 1500)  matmul       20
//   The gpu_user_annotation copy of ProfilerStep#1 is not a step; flow and instant events are
//   ignored.
TEST(ImportTrace, PyTorchGpuKernelsByLaunchAndContext) {
  const MeasuredTrace t = import_trace(kFixtures + "/torch_gpu_mini.trace.json");
  EXPECT_EQ(t.framework, "pytorch");
  EXPECT_EQ(t.op_source, "device");
  ASSERT_EQ(t.steps.size(), 2u);
  EXPECT_EQ(t.steps[0].ops.size(), 9u);
  EXPECT_EQ(t.steps[0].start, SimTime::zero());
  EXPECT_EQ(t.steps[0].duration, us(402));
  expect_totals(time_by_class(t.steps[0]), {{OpClass::kNorm, 22},
                                            {OpClass::kMatmul, 90},
                                            {OpClass::kAttention, 30},
                                            {OpClass::kCommunication, 80},
                                            {OpClass::kOptimizer, 10},
                                            {OpClass::kElementwise, 3}});
  EXPECT_EQ(unclassified_time(t.steps[0]), us(3));
  EXPECT_EQ(t.steps[1].ops.size(), 3u);
  EXPECT_EQ(t.steps[1].start, SimTime::zero() + us(400));
  EXPECT_EQ(t.steps[1].duration, us(400));
  expect_totals(time_by_class(t.steps[1]),
                {{OpClass::kEmbedding, 10}, {OpClass::kLoss, 10}, {OpClass::kMatmul, 20}});
  bool saw_nccl = false;
  for (const MeasuredOp& op : t.steps[0].ops) {
    EXPECT_EQ(op.device, 0);
    if (op.op_class == OpClass::kCommunication) {
      EXPECT_EQ(op.stream, 20);
      saw_nccl = true;
    }
  }
  EXPECT_TRUE(saw_nccl);
}

// Hand-written JAX GPU trace (fixtures/jax_gpu_mini.trace.json): two GPUs, steps from
// StepTraceAnnotation ranges (args.step_num) on /host:CPU at [100, 600) and [700, 1100] us; the
// trace origin is the jit_init kernel at 50 us (before the first step: dropped).
//   step 0, GPU 0 (Stream #13 and #14; the "XLA Ops" copy of fusion.1 is not counted twice):
//     input_rsqrt_reduce_fusion                                      norm         12.5
//     sm90_xmma_gemm                                                 matmul       80.25
//     loop_multiply_fusion, tf_op .../transpose(jvp(attention))/mul  attention     5
//     cudnn ..._sdpa_... kernel                                      attention    40
//     fusion_12: long_name kind=kOutput                              matmul        3
//     ncclDevKernel_AllReduce (tf_op in "optimizer": comm wins)      communication 100
//     wrapped_convert                                                elementwise   2
//     MemcpyD2D on Stream #14                                        copy          4
//     some_unknown_kernel                                            elementwise   1.5
//     (unclassified) loop_add_fusion, tf_op .../optimizer/add                       optimizer     6
//   step 0, GPU 1: ncclDevKernel_AllReduce                           communication 99
//   step 1 (GPU 0): gemm 50 (matmul), input_reduce_fusion 20 (elementwise) ending at 1110 us, so
//   the step lasts 410 us; loop_add_fusion at 1150 us starts after the last range: dropped.
TEST(ImportTrace, JaxGpuStreamsStepAnnotationsAndNameScopes) {
  const MeasuredTrace t = import_trace(kFixtures + "/jax_gpu_mini.trace.json");
  EXPECT_EQ(t.framework, "jax");
  EXPECT_EQ(t.op_source, "device");
  ASSERT_EQ(t.steps.size(), 2u);
  const MeasuredStep& s0 = t.steps[0];
  EXPECT_EQ(s0.ops.size(), 11u);
  EXPECT_EQ(s0.start, SimTime::zero() + us(50));
  EXPECT_EQ(s0.duration, us(500));
  expect_totals(time_by_class(s0, 0), {{OpClass::kNorm, 12.5},
                                       {OpClass::kMatmul, 83.25},
                                       {OpClass::kAttention, 45},
                                       {OpClass::kCommunication, 100},
                                       {OpClass::kElementwise, 3.5},
                                       {OpClass::kCopy, 4},
                                       {OpClass::kOptimizer, 6}});
  expect_totals(time_by_class(s0, 1), {{OpClass::kCommunication, 99}});
  EXPECT_EQ(by(time_by_class(s0), OpClass::kCommunication), us(199));
  EXPECT_EQ(unclassified_time(s0), us(1.5));
  for (const MeasuredOp& op : s0.ops) {
    EXPECT_EQ(op.stream, op.name == "MemcpyD2D" ? 14 : 13) << op.name;
  }
  const MeasuredStep& s1 = t.steps[1];
  EXPECT_EQ(s1.start, SimTime::zero() + us(650));
  EXPECT_EQ(s1.duration, us(410));
  expect_totals(time_by_class(s1), {{OpClass::kMatmul, 50}, {OpClass::kElementwise, 20}});
}

// Hand-written JAX TPU trace (fixtures/jax_tpu_mini.trace.json): no step annotations, so the
// "Steps" line gives the steps ([0, 100) and [100, 200) us); ops come from the "XLA Ops" line,
// classified by name, then hlo_category, then long_name:
//   step 0: fusion.5 "convolution fusion" 40 matmul; fusion.6 "loop fusion" 10 elementwise;
//           all-reduce.1 30 communication; fusion.7 with tf_op .../rmsnorm/mul 5 norm;
//           copy.2 5 copy; custom-call.9 2 elementwise (unclassified)
//   step 1: convolution.3 60 matmul; fusion.8 with long_name kind=kLoop (tuple shape) 10
//           elementwise
TEST(ImportTrace, JaxTpuStepsLineAndXlaOps) {
  const MeasuredTrace t = import_trace(kFixtures + "/jax_tpu_mini.trace.json");
  EXPECT_EQ(t.framework, "jax");
  ASSERT_EQ(t.steps.size(), 2u);
  EXPECT_EQ(t.steps[0].ops.size(), 6u);
  EXPECT_EQ(t.steps[0].duration, us(100));
  expect_totals(time_by_class(t.steps[0]), {{OpClass::kMatmul, 40},
                                            {OpClass::kElementwise, 12},
                                            {OpClass::kCommunication, 30},
                                            {OpClass::kNorm, 5},
                                            {OpClass::kCopy, 5}});
  EXPECT_EQ(unclassified_time(t.steps[0]), us(2));
  expect_totals(time_by_class(t.steps[1]), {{OpClass::kMatmul, 60}, {OpClass::kElementwise, 10}});
}

// JAX on the CPU backend: XLA thunks on host threads. The step is the PjitFunction(train_step)
// dispatch (no annotation, no device). "while.1" is a control thunk: its body thunks are the ops;
// a thunk nested in a non-control thunk is not counted again.
//   dot.2 20 matmul; fusion.3 (kind=kLoop) 5 elementwise, containing fusion.4 (nested: skipped);
//   all-reduce.5 10 communication.
TEST(ImportTrace, JaxCpuThunksTopLevelOnly) {
  const std::string text = R"json({"traceEvents": [
    {"ph": "M", "pid": 1, "name": "process_name", "args": {"name": "/host:CPU"}},
    {"ph": "X", "pid": 1, "tid": 5, "name": "PjitFunction(train_step)", "ts": 0, "dur": 100},
    {"ph": "X", "pid": 1, "tid": 6, "name": "while.1", "ts": 10, "dur": 40,
     "args": {"hlo_op": "while.1", "hlo_module": "jit_train_step"}},
    {"ph": "X", "pid": 1, "tid": 6, "name": "dot.2", "ts": 12, "dur": 20,
     "args": {"hlo_op": "dot.2"}},
    {"ph": "X", "pid": 1, "tid": 6, "name": "fusion.3", "ts": 33, "dur": 5,
     "args": {"hlo_op": "fusion.3",
              "long_name": "%fusion.3 = f32[4]{0} fusion(f32[4]{0} %a), kind=kLoop"}},
    {"ph": "X", "pid": 1, "tid": 6, "name": "fusion.4", "ts": 34, "dur": 2,
     "args": {"hlo_op": "fusion.4"}},
    {"ph": "X", "pid": 1, "tid": 6, "name": "all-reduce.5", "ts": 60, "dur": 10,
     "args": {"hlo_op": "all-reduce.5"}},
    {"ph": "X", "pid": 1, "tid": 6, "name": "fusion.9", "ts": 150, "dur": 10,
     "args": {"hlo_op": "fusion.9"}}
  ]})json";
  const MeasuredTrace t = import_trace_text(text, "cpu.json");
  EXPECT_EQ(t.framework, "jax");
  EXPECT_EQ(t.op_source, "host");
  ASSERT_EQ(t.steps.size(), 1u);
  EXPECT_EQ(t.steps[0].ops.size(), 3u);
  expect_totals(
      time_by_class(t.steps[0]),
      {{OpClass::kMatmul, 20}, {OpClass::kElementwise, 5}, {OpClass::kCommunication, 10}});
}

// Kineto CPU trace: only top-level cpu_ops count; annotations and Python frames are transparent;
// a backward op takes the annotation of its forward op through the Sequence number.
//   aten::pow (rmsnorm, child aten::mul skipped) 10 norm; aten::linear inside a python_function
//   frame 30 matmul; PowBackward0 (seq 3, forward in rmsnorm) 8 norm; aten::add_ 2 elementwise.
TEST(ImportTrace, PyTorchKinetoCpuTopLevelOperators) {
  const std::string text = R"json({"schemaVersion": 1, "traceEvents": [
    {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#7", "pid": 9, "tid": 9,
     "ts": 0, "dur": 100},
    {"ph": "X", "cat": "user_annotation", "name": "rmsnorm", "pid": 9, "tid": 9,
     "ts": 1, "dur": 12},
    {"ph": "X", "cat": "cpu_op", "name": "aten::pow", "pid": 9, "tid": 9, "ts": 2, "dur": 10,
     "args": {"Sequence number": 3}},
    {"ph": "X", "cat": "cpu_op", "name": "aten::mul", "pid": 9, "tid": 9, "ts": 3, "dur": 5},
    {"ph": "X", "cat": "python_function", "name": "torch/nn/modules/linear.py(114): forward",
     "pid": 9, "tid": 9, "ts": 15, "dur": 32},
    {"ph": "X", "cat": "cpu_op", "name": "aten::linear", "pid": 9, "tid": 9, "ts": 16, "dur": 30},
    {"ph": "X", "cat": "cpu_op", "name": "aten::addmm", "pid": 9, "tid": 9, "ts": 17, "dur": 28},
    {"ph": "X", "cat": "cpu_op", "name": "autograd::engine::evaluate_function: PowBackward0",
     "pid": 9, "tid": 9, "ts": 50, "dur": 8, "args": {"Sequence number": 3, "Fwd thread id": 0}},
    {"ph": "X", "cat": "cpu_op", "name": "aten::add_", "pid": 9, "tid": 9, "ts": 60, "dur": 2}
  ]})json";
  const MeasuredTrace t = import_trace_text(text, "kineto_cpu.json");
  EXPECT_EQ(t.op_source, "host");
  ASSERT_EQ(t.steps.size(), 1u);
  EXPECT_EQ(t.steps[0].ops.size(), 4u);
  expect_totals(time_by_class(t.steps[0]),
                {{OpClass::kNorm, 18}, {OpClass::kMatmul, 30}, {OpClass::kElementwise, 2}});
}

TEST(ImportTrace, MalformedInputNamesTheFileAndTheLocation) {
  struct Case {
    std::string name;
    std::string text;
    std::string location;
  };
  const std::vector<Case> cases = {
      {"not_json.json", "hello, trace", "byte 1"},
      {"missing_events.json", R"({"displayTimeUnit": "ns"})", "/traceEvents"},
      {"events_not_array.json", R"({"traceEvents": {"ph": "X"}})", "/traceEvents"},
      {"scalar.json", "42", "/"},
      {"event_not_object.json", R"({"traceEvents": [{"ph": "M", "name": "x"}, 7]})",
       "/traceEvents/1"},
      {"no_phase.json", R"({"traceEvents": [{"name": "x", "ts": 1, "dur": 1}]})",
       "/traceEvents/0/ph"},
      {"no_ts.json",
       R"({"traceEvents": [{"ph": "X", "name": "a", "ts": 1, "dur": 1},
                           {"ph": "X", "name": "b", "dur": 3}]})",
       "/traceEvents/1/ts"},
      {"no_dur.json", R"({"traceEvents": [{"ph": "X", "name": "ProfilerStep#1", "ts": 1}]})",
       "/traceEvents/0/dur"},
      {"text_ts.json", R"({"traceEvents": [{"ph": "X", "name": "a", "ts": "soon", "dur": 1}]})",
       "/traceEvents/0/ts"},
      {"negative_dur.json", R"({"traceEvents": [{"ph": "X", "name": "a", "ts": 1, "dur": -2}]})",
       "/traceEvents/0/dur"},
      {"legacy_no_ts.json", R"([{"ph": "X", "name": "aten::mm", "dur": 2}])", "/0/ts"},
      {"no_steps.json",
       R"({"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "ts": 1, "dur": 2}]})",
       "/traceEvents"},
      {"unknown_framework.json",
       R"({"traceEvents": [{"ph": "X", "name": "a", "ts": 1, "dur": 2}]})", "/traceEvents"},
      {"jax_no_steps.json",
       R"({"traceEvents": [{"ph": "M", "pid": 1, "name": "process_name",
                           "args": {"name": "/device:GPU:0"}}]})",
       "/traceEvents"},
  };
  for (const Case& c : cases) {
    const std::string path = write_temp(c.name, c.text);
    const InputError e = input_error([&] { import_trace(path); });
    EXPECT_EQ(e.source(), path) << c.name;
    EXPECT_EQ(e.location(), c.location) << c.name << ": " << e.what();
    EXPECT_FALSE(e.message().empty()) << c.name;
  }
}

TEST(ImportTrace, TruncatedFilesAreInputErrors) {
  // A JSON trace cut in half: a syntax error at the end of the text.
  const std::string json = read_file(kFixtures + "/jax_tpu_mini.trace.json");
  const std::string half = json.substr(0, json.size() / 2);
  const std::string path = write_temp("truncated.json", half);
  const InputError e = input_error([&] { import_trace(path); });
  EXPECT_EQ(e.source(), path);
  EXPECT_TRUE(e.location().starts_with("byte ")) << e.what();
  EXPECT_NE(e.message().find("truncated"), std::string::npos) << e.what();

  // A gzip stream cut short.
  const std::string gz = read_file(kFixtures + "/torch_cpu_smoke.trace.json.gz");
  const std::string gz_path = write_temp("truncated.json.gz", gz.substr(0, gz.size() / 2));
  const InputError g = input_error([&] { import_trace(gz_path); });
  EXPECT_EQ(g.source(), gz_path);
  EXPECT_EQ(g.location(), fmt::format("byte {}", gz.size() / 2)) << g.what();

  // Corrupt compressed data after a valid gzip header.
  std::string corrupt = gz;
  for (size_t i = 20; i < 60 && i < corrupt.size(); ++i) {
    corrupt[i] = static_cast<char>(~corrupt[i]);
  }
  const std::string corrupt_path = write_temp("corrupt.json.gz", corrupt);
  const InputError c = input_error([&] { import_trace(corrupt_path); });
  EXPECT_TRUE(c.location().starts_with("byte ")) << c.what();

  const InputError missing = input_error([] { import_trace("/nonexistent/trace.json"); });
  EXPECT_EQ(missing.source(), "/nonexistent/trace.json");
  EXPECT_EQ(missing.location(), "");
}

}  // namespace
}  // namespace meshsim::traces

