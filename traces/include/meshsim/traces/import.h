// Measured traces in: PyTorch and JAX profiler traces -> steps of classified ops.
//
// import_trace() reads a Chrome/Perfetto JSON trace as the profilers write it, plain or gzipped
// (detected by the gzip magic bytes, not the file name), and returns its training steps, each with
// the ops that ran in it and the op class of each (the same OpClass meshsim's programs use), so
// that measured and simulated time can be compared class by class.
//
// Inputs (the framework is detected from the content):
//  * PyTorch, Kineto (torch >= 1.8 with Kineto: torch.profiler.profile(...).export_chrome_trace):
//    an object with "traceEvents"; cats cpu_op, user_annotation, kernel, gpu_memcpy, cuda_runtime.
//  * PyTorch, legacy (torch.autograd.profiler.profile(use_kineto=False), e.g. Debian's CPU-only
//    torch 1.13): a bare JSON array of "X" events, pid "CPU functions", no "cat".
//  * JAX (jax.profiler.trace(dir, create_perfetto_trace=True) -> perfetto_trace.json.gz, or the
//    xprof *.trace.json.gz): process_name metadata "/host:CPU", "/device:GPU:0", "/device:TPU:0";
//    device threads "Stream #N(...)" (GPU kernels) or "XLA Ops" / "XLA Modules" / "Steps" (TPU).
//
// Timestamps: ts and dur are microseconds (doubles) in the file; they become picoseconds relative
// to the earliest complete event of the trace (SimTime 0), rounded to the nearest picosecond.
// Traces whose ts count from the epoch (~1e15 us) keep about 0.25 us of resolution (double).
//
// Steps (segmentation):
//  * PyTorch: each "ProfilerStep#N" range (torch.profiler's schedule steps, or a
//    record_function("ProfilerStep#N") around each step) on the host is a step; the GPU-side
//    copies of those ranges (cat gpu_user_annotation) are ignored.
//  * JAX, in order of preference: (1) host ranges with an args.step_num
//    (jax.profiler.StepTraceAnnotation("train", step_num=i)); (2) the "Steps" line of the first
//    device (TPU); (3) "XLA Modules" events of the first device whose name contains "train_step";
//    (4) host events whose name contains "train_step" (PjitFunction(train_step), jit_train_step).
//  * Device ops are assigned by their start: step i owns those that start in
//    [start_i, start_{i+1}); the last step those that start within its range. (PyTorch GPU
//    kernels go by the time of their launch, see below.) Host operators belong to a step only if
//    they start within its range: host work between steps (the profiler's own bookkeeping) is no
//    step's. A step's duration runs from its start to the later of its range's end and its last
//    op's end, so asynchronous device work that outlives the host range is counted.
//  * No step found is an InputError.
//
// Which events are ops:
//  * Device events when there are any: PyTorch cat "kernel", "gpu_memcpy", "gpu_memset" (device =
//    args.device or pid, stream = args.stream or tid; each is assigned to the step in which the
//    host launched it, matched by args.correlation with a cuda_runtime/cuda_driver event, or by its
//    own start when no launch is found); JAX: the events of "Stream #N" threads of "/device:GPU:k"
//    processes (stream = N, device = k), or, on devices without stream threads (TPU), the "XLA Ops"
//    thread.
//  * Otherwise host operators, top level only: an operator nested inside another operator on the
//    same thread is not an op of its own (its time is already in its parent's), so nothing is
//    counted twice. PyTorch operators are cat cpu_op/operator events (legacy traces: every event
//    whose name contains "::", e.g. aten::mm, autograd::engine::evaluate_function: MmBackward0);
//    user annotations (cat user_annotation, python_function, and legacy names without "::", e.g.
//    "attention", "Optimizer.step#AdamW.step") are transparent: their children may be top-level
//    ops. JAX on CPU: XLA thunks on "/host:..." threads (events with args hlo_op, hlo_module or
//    long_name), top level only.
//
// Shapes: PyTorch traces profiled with record_shapes=True carry each operator's "Input Dims";
// the importer reads the GEMM shapes from them (MeasuredGemm). Malformed dims on a GEMM operator
// are an InputError naming the event.
//
// Op classes (classify_kernel and the context rules):
//  1. A name that matches the communication rule is communication, wherever it runs.
//  2. Context: an op inside an annotation whose name matches a rule takes that class: PyTorch
//     record_function ranges ("attention", "rmsnorm", "embedding", "loss",
//     "Optimizer.step#AdamW.step"), including, through the autograd "Sequence number", the
//     backward ops of forward ops that ran inside one (Kineto traces only); JAX: the innermost
//     jax.named_scope in args.tf_op, args.name_scope or args.op_name that is one of attention,
//     dot_product_attention, rmsnorm, layernorm, embedding, embed, loss, cross_entropy,
//     optimizer, adamw ("jit(train_step)/transpose(jvp(attention))/mul": attention). PyTorch GPU
//     kernels take the context of the host event that launched them.
//  3. Otherwise the first rule that matches the name (then, for JAX, args.hlo_op,
//     args.hlo_category and the opcode and fusion kind in args.long_name), checked in this order:
//       communication  nccl, rccl, all-reduce/all_reduce/allreduce, all-gather, reduce-scatter,
//                      all-to-all, collective-permute, c10d::, send/recv
//                      (ncclDevKernel_AllReduce_Sum_bf16_RING_LL, all-reduce-start.3)
//       loss           cross_entropy, nll_loss, log_softmax (aten::cross_entropy_loss,
//                      NllLossBackward0, cunn_SoftMaxForward<..LogSoftMaxForwardEpilogue>)
//       attention      flash, fmha, scaled_dot_product, sdpa, attention, softmax
//                      (flash_fwd_kernel, fmha_cutlassF_bf16, aten::_softmax; in a Llama step the
//                      only softmax is attention's, the loss's is log_softmax)
//       matmul         gemm, cutlass, cublas, xmma, nvjet, cijk_, matmul, dot_general, %dot,
//                      convolution, output fusion / kind=kOutput (a dot with its epilogue), and the
//                      words mm, bmm, addmm, baddbmm, linear, dot, einsum
//                      (sm90_xmma_gemm_bf16bf16, aten::addmm, MmBackward0, dot.4,
//                      "convolution fusion")
//       optimizer      adam, optimizer, foreach, multi_tensor_apply, sgd, lamb
//                      (aten::_foreach_addcdiv_, multi_tensor_apply_kernel<AdamFunctor>)
//       embedding      embedding, index_select, indexselect, gather, scatter
//                      (aten::embedding, EmbeddingBackward0, indexSelectLargeIndex, gather.2)
//       norm           layer_norm, layernorm, rms_norm, rmsnorm, batch_norm, group_norm, rsqrt
//                      (aten::native_layer_norm, RsqrtBackward0, loop_rsqrt_fusion)
//       copy           memcpy, memset, copy, transpose, permute, contiguous, clone, concatenate,
//                      dynamic-update-slice, data formatting, and the words to, t, view, reshape,
//                      expand, slice, select, cat, split, split_with_sizes (SplitWithSizesBackward0),
//                      chunk, as_strided, unsafe_view, reshapealias,
//                      squeeze, unsqueeze, detach, flatten (Memcpy DtoD, aten::copy_, copy.3,
//                      TBackward0, ReshapeAliasBackward0)
//       elementwise    elementwise, loop fusion / kind=kLoop / loop_..._fusion, input fusion /
//                      kind=kInput / input_..._fusion, reduce, and the words add, sub, mul, div,
//                      silu, gelu, relu, sigmoid, tanh, exp, log, pow, neg, sqrt, mean, sum, fill,
//                      zero, where, clamp, masked_fill, addcmul, addcdiv, ... (aten::add_,
//                      SiluBackward0, loop_multiply_fusion, vectorized_elementwise_kernel)
//     Matching is case-insensitive. "Substrings" match anywhere in the name; "words" match a
//     whole token (the name split at anything but letters, digits and '_', and again at '_',
//     with leading/trailing '_' dropped), so "mm" matches aten::mm but not "comm". An autograd
//     node name "XBackward0" is also read as the word "x" (AddmmBackward0 -> addmm).
//  4. Anything else is counted as elementwise and marked unclassified (MeasuredOp::classified
//     false); unclassified_time() reports how much time that is, so a rule gap shows.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "meshsim/sim/ids.h"
#include "meshsim/sim/program.h"
#include "meshsim/sim/timeline.h"
#include "meshsim/sim/units.h"

namespace meshsim::traces {

struct MeasuredOp {
  std::string name;
  OpClass op_class = OpClass::kElementwise;
  SimTime start;
  Duration duration;
  int64_t device = 0;      // GPU/TPU ordinal; 0 for host operators
  int64_t stream = 0;      // CUDA stream, "Stream #N", or the host thread id
  bool classified = true;  // false: no rule matched (counted as elementwise)
  // Host operators: the profiler events recorded inside this op, itself included (each costs the
  // profiler a roughly fixed time that lands inside the op's duration). 0 for device ops.
  int64_t events = 0;
};

// The ATen GEMM operators meshsim costs from their shapes, and where their two matrix operands
// sit in the operator's inputs (addmm and baddbmm take the added tensor first; _scaled_mm's
// scales follow its operands): what the Kineto reader keeps the dims of (kineto.h), the replay
// costs (validation/trace_replay.h) and the PyTorch importer measures (MeasuredGemm).
struct GemmOperator {
  std::string_view name;
  size_t lhs;    // the input that is the left operand; the right one is the next input
  bool batched;  // operands [batch, rows, cols] (bmm, baddbmm); [rows, cols] otherwise
  bool fp8;      // FP8 operands with their scales (torch._scaled_mm)
};
inline constexpr std::array<GemmOperator, 5> kGemmOperators{{{"aten::mm", 0, false, false},
                                                             {"aten::addmm", 1, false, false},
                                                             {"aten::bmm", 0, true, false},
                                                             {"aten::baddbmm", 1, true, false},
                                                             {"aten::_scaled_mm", 0, false, true}}};

// The GEMM operator called `name`, or nullptr.
constexpr const GemmOperator* gemm_operator(std::string_view name) {
  for (const GemmOperator& g : kGemmOperators) {
    if (name == g.name) {
      return &g;
    }
  }
  return nullptr;
}

// A GEMM whose shape the trace records, with the time it took. PyTorch: the innermost GEMM
// operators of 16 or 32 bits (aten::mm, aten::addmm, aten::bmm, aten::baddbmm: kGemmOperators
// but the FP8 one, as a MeasuredGemm holds no dtype) with their "Input Dims" (the
// profiler's record_shapes): on the host their own duration, on GPUs the summed durations of the
// kernels they launched. Its class is the op class of the range it ran in (matmul outside any, so
// attention's batched GEMMs are attention). The shape is [m, k] x [k, n], `batch` times.
struct MeasuredGemm {
  std::string name;
  OpClass op_class = OpClass::kMatmul;
  MatmulShape shape;
  SimTime start;
  Duration duration;
  int64_t events = 0;  // host operators: profiler events recorded inside it (itself included)
};

struct MeasuredStep {
  SimTime start;
  Duration duration;
  std::vector<MeasuredOp> ops;  // sorted by (start, device, stream)
  std::vector<MeasuredGemm> gemms;  // sorted by start; empty when the trace records no shapes
  int64_t host_events = 0;          // profiler events recorded on the host within the step
};

struct MeasuredTrace {
  std::string source;     // the path read
  std::string framework;  // "pytorch" or "jax"
  std::string op_source;  // "device" (kernels on devices) or "host" (operators on CPU threads)
  std::vector<MeasuredStep> steps;  // in time order
};

// Bounds on what import_trace reads: no trace, however large, endless or deep, makes the importer
// read, inflate or hold more than this. The parsed document takes 15 to 20 times a profiler
// trace's JSON text in memory, and up to 35 times for text made of empty objects ([{},{},...]):
// 128 MiB of those exhausted 4 GiB, so the default text limit is 64 MiB (at most ~2.3 GiB).
struct ImportLimits {
  int64_t max_file_bytes = int64_t{64} << 20;  // the file as stored (gzipped or not)
  int64_t max_text_bytes = int64_t{64} << 20;  // the JSON text, after inflating
  int max_depth = 128;                          // nesting levels (JsonLimits::max_depth)
};

// Reads a trace file (plain or gzipped JSON). Throws InputError(path, location, message) on a
// missing or unreadable file ("" location), a corrupt or truncated gzip stream ("byte N" of the
// compressed file), text that is not JSON or is truncated ("byte N"), a missing or wrong-typed
// "traceEvents" ("/traceEvents"; "/" when the document is neither an object nor an array), an
// event that is not an object or has no "ph" ("/traceEvents/123", ".../ph"), a complete event
// without a name, without a numeric ts or dur, or with a negative dur ("/traceEvents/123/ts"),
// an unknown framework or no steps ("/traceEvents"). Legacy PyTorch traces (a bare array) have
// locations without the "/traceEvents" prefix ("/123/ts"). Beyond `limits`: InputSizeError for a
// file or inflated text past its size limit (the message states it), InputError "byte N" for
// nesting past the depth limit; events whose end (ts + dur) lies more than 2^63 ps (106 days)
// after the first event's start, GEMM dims past the bounds of gemm_shape_limits, and a step whose
// ops add up to more than int64 picoseconds are InputErrors naming the event or the step.
MeasuredTrace import_trace(const std::string& path, const ImportLimits& limits = {});

// The same on the file's bytes already in memory (plain or gzipped); `source` names it in errors
// and in the result.
MeasuredTrace import_trace_bytes(std::string_view bytes, const std::string& source,
                                 const ImportLimits& limits = {});

// The same on JSON text already in memory.
MeasuredTrace import_trace_text(std::string_view text, const std::string& source,
                                const ImportLimits& limits = {});

// Bounds on a GEMM shape read from a trace ("Input Dims"): each extent at most 2^31 - 1, and the
// elements of each operand and of the result (batch x rows x columns) at most 2^48 (512 TB in
// bf16), so that every count derived from the shape fits in 64 bits.
inline constexpr int64_t kMaxGemmExtent = (int64_t{1} << 31) - 1;
inline constexpr int64_t kMaxGemmElements = int64_t{1} << 48;

// The class of rule 3 above, or nullopt when no rule matches. `framework` is "pytorch" or "jax";
// the rules are shared, the argument is there so that a framework-specific rule can be added
// without changing callers.
std::optional<OpClass> match_kernel_class(std::string_view framework, std::string_view name);

// match_kernel_class, with elementwise for a name no rule matches.
OpClass classify_kernel(std::string_view framework, std::string_view name);

// Summed op durations per class (indexed by OpClass), over all devices and streams: a sum, not
// the union of overlapping intervals, so it can exceed the step's duration when streams overlap.
std::array<Duration, kNumOpClasses> time_by_class(const MeasuredStep& step);
// The same, for the ops of one device.
std::array<Duration, kNumOpClasses> time_by_class(const MeasuredStep& step, int64_t device);

// Summed durations of the ops no rule classified (included in elementwise above).
Duration unclassified_time(const MeasuredStep& step);

// A measured step in meshsim's own terms (sim/program.h, sim/timeline.h): a Program with one
// compute op per measured op (its name and class; no FLOPs or bytes, which the trace does not
// give) on one stream per (device, stream) of the trace, numbered in order of first use (streams
// past the 256th share the last), and a Timeline with each op's record for rank `rank`: measured
// start and end, relative to the step's start, in order of end as the engine emits them. An op
// that would overlap the previous one on its stream starts when that one ends. Trace writers take
// them as they take a simulated rank's (TraceFeed::kManual): a measured step opens in Perfetto
// beside a simulated one.
struct MeasuredTimeline {
  Program program;
  Timeline timeline;
};
MeasuredTimeline to_timeline(const MeasuredStep& step, RankId rank);

}  // namespace meshsim::traces
