// Software stacks: the same model on the same chips trains at different speeds under
// Megatron-Core with Transformer Engine, PyTorch FSDP (eager or compiled) and MaxText/XLA. A stack
// fixes what the framework really runs:
//  * the kernel set: fused memory-bound kernels (TE, XLA, torch.compile) or PyTorch eager's one
//    kernel per tensor operation;
//  * the attention kernel, by the accelerator the framework runs on (Transformer Engine picks
//    cuDNN's fused attention on Hopper and later and FlashAttention-2 on Ampere);
//  * the optimizer's kernels;
//  * the FP8 recipe of FP8 runs: which GEMMs run in FP8 and the cast, amax and transpose kernels
//    it adds (Fp8Recipe);
//  * the per-step work outside the layers (StepWork): the global gradient norm for clipping.
//    (fp16 loss scaling's unscale-and-check pass is the precision's, not the stack's: every fp16
//    run has it.)
// Each profile names what it is based on (framework sources or documentation at a version);
// stack_profile.h has the profiles. This header holds the vocabulary the plan (parallel.h) uses.
#pragma once

#include <cstdint>
#include <string_view>

#include "meshsim/sim/enum_names.h"
#include "meshsim/sim/units.h"

namespace meshsim::workloads {

enum class Stack : uint8_t {
  kMegatron,
  kMegatron2021,
  kMegatron2022,
  kMegatron2023,
  kDeepSpeedZero3_2021,
  kMegatronDeepSpeed2022,
  kFsdp,
  kLlmFoundry2023,
  kFsdpCompile,
  kMaxText,
  kPaxml,
  // Megatron-Core's kernel set without the capability checks of stack_rules.h: for plans the user
  // knows a framework runs that meshsim's tables refuse.
  kCustom
};
constexpr auto enum_names(Stack) {
  return std::to_array<EnumName<Stack>>({{Stack::kMegatron, "megatron"},
                                         {Stack::kMegatron2021, "megatron-2021"},
                                         {Stack::kMegatron2022, "megatron-2022"},
                                         {Stack::kMegatron2023, "megatron-2023"},
                                         {Stack::kDeepSpeedZero3_2021, "deepspeed-zero3-2021"},
                                         {Stack::kMegatronDeepSpeed2022, "megatron-deepspeed-2022"},
                                         {Stack::kFsdp, "fsdp"},
                                         {Stack::kLlmFoundry2023, "llm-foundry-2023"},
                                         {Stack::kFsdpCompile, "fsdp-compile"},
                                         {Stack::kMaxText, "maxtext"},
                                         {Stack::kPaxml, "paxml"},
                                         {Stack::kCustom, "custom"}});
}

// What frameworks key their kernel choices on.
enum class DeviceFamily : uint8_t { kAmpere, kHopper, kBlackwell, kTpu };
constexpr auto enum_names(DeviceFamily) {
  return std::to_array<EnumName<DeviceFamily>>({{DeviceFamily::kAmpere, "ampere"},
                                                {DeviceFamily::kHopper, "hopper"},
                                                {DeviceFamily::kBlackwell, "blackwell"},
                                                {DeviceFamily::kTpu, "tpu"}});
}

// How an FP8 run scales its tensors (Transformer Engine's recipes; torchao's float8 tensorwise is
// current scaling). The linear layers' GEMMs (forward, data and weight gradients) run in FP8;
// attention, the embedding and the LM head stay in bf16.
//  kDelayed:  the scale comes from an amax history; amax is computed inside the cast kernels.
//  kCurrent:  the scale comes from the tensor itself: an amax pass reads it before each cast.
//  kRowwise:  torchao's float8 rowwise recipe: a scale per row of each GEMM operand, so the two
//             layouts cannot come from one pass (layer_items.h fp8_cast). Its GEMMs are costed at
//             the chip's FP8 rate: no measurement of the row-scaled kernels was found.
enum class Fp8Scaling : uint8_t { kDelayed, kCurrent, kRowwise };
constexpr auto enum_names(Fp8Scaling) {
  return std::to_array<EnumName<Fp8Scaling>>({{Fp8Scaling::kDelayed, "delayed"},
                                              {Fp8Scaling::kCurrent, "current"},
                                              {Fp8Scaling::kRowwise, "rowwise"}});
}

// Per-step work outside the layers.
// When FSDP / ZeRO-3 issues the next (lower) layer's parameter all-gather in the backward, on its
// gather stream (PyTorch FSDP's BackwardPrefetch; both issue it before the current layer's
// reduce-scatter, torch/distributed/fsdp/_runtime_utils.py _post_backward_reshard):
//  kPre:   as the current layer's gradient computation starts, overlapping it (torch's default
//          BACKWARD_PRE; DeepSpeed's prefetch; FSDP2's one-layer prefetch).
//  kPost:  after it, so the lower layer's backward waits for the gather (BACKWARD_POST: MosaicML
//          Composer's default, composer FSDPConfig.backward_prefetch = 'BACKWARD_POST').
enum class BackwardPrefetch : uint8_t { kPre, kPost };

// How a stack's host thread issues the step's work (the engine's host model, sim/simulation.h:
// each op costs the host its Op::host, and an op starts no earlier than the host issued it):
//  kEager:     PyTorch eager: every kernel is issued from Python, through nn.Modules, the
//              dispatcher and autograd (its backward from autograd's engine), then launched.
//  kCompiled:  torch.compile: generated wrapper code launches each kernel; no Python op per
//              kernel, the launch itself remains.
//  kXla:       one XLA executable per step: the runtime issues its kernels without the host
//              doing per-kernel work the device could wait for.
enum class HostIssue : uint8_t { kEager, kCompiled, kXla };
constexpr auto enum_names(HostIssue) {
  return std::to_array<EnumName<HostIssue>>({{HostIssue::kEager, "eager"},
                                             {HostIssue::kCompiled, "compiled"},
                                             {HostIssue::kXla, "xla"}});
}

// CUDA graphs (ParallelPlan::cuda_graphs): kernels captured once and replayed by one
// cudaGraphLaunch each, so the host no longer issues them one by one.
//  kNone:    every kernel issued by the host (the stack's HostDispatch).
//  kLayers:  each transformer layer's forward and backward of each microbatch is one graph
//            (Megatron-Core's --enable-cuda-graph: Transformer Engine's make_graphed_callables per
//            TransformerLayer, with the layer's TP/SP/CP/EP communication captured in it);
//            pipeline, data-parallel and optimizer work stays outside, issued as before.
//  kStep:    the whole step is one graph (Megatron-Core's --cuda-graph-scope full_iteration, as
//            NVIDIA's large-scale GPT-3 runs use): one launch, and no host synchronisation inside
//            it (a capture cannot read values on the host: the gradient norm and loss checks run
//            on the device).
enum class CudaGraphs : uint8_t { kNone, kLayers, kStep };
constexpr auto enum_names(CudaGraphs) {
  return std::to_array<EnumName<CudaGraphs>>(
      {{CudaGraphs::kNone, "none"}, {CudaGraphs::kLayers, "layers"}, {CudaGraphs::kStep, "step"}});
}

enum class P2pSync : uint8_t { kNone, kWhenBatched, kAlways };
// Which pipeline stages load each microbatch through a host-synchronising broadcast: none, every
// stage (Megatron-LM's forward_step calls get_batch on each), or only the first and the last
// (DeepSpeed's pipeline engine runs LoadMicroBatch there alone).
enum class BatchSync : uint8_t { kNone, kEveryStage, kFirstAndLastStages };

// What the host spends on each op, by where the op is issued, and where it waits for the device.
// The times come from component measurements (stack.cc names them); zero everywhere is a host that
// never holds the device back.
struct HostDispatch {
  HostIssue issue = HostIssue::kEager;
  Duration forward_kernel;   // a kernel of the forward (and of a recompute's re-run forward)
  Duration backward_kernel;  // a kernel of the backward (autograd's engine)
  Duration gemm_call;        // a GEMM's library call on top of its kernel's (cuBLAS heuristics)
  Duration optimizer_kernel; // a kernel of the optimizer step
  Duration graph_launch;     // one cudaGraphLaunch (ParallelPlan::cuda_graphs)
  // Megatron's pipeline: torch.cuda.synchronize() after each batched send/receive
  // (p2p_communication.py): kWhenBatched where the schedule batches them (Megatron-Core: not
  // with the interleaved schedule's overlapped p2p), kAlways (Megatron-LM 2021). Modelled for the
  // non-interleaved schedules (stage_program.cc says why).
  P2pSync sync_after_p2p = P2pSync::kNone;
  // Megatron-LM 2021's get_batch: the broadcast of the batch's sizes ends in .cpu() (mpu/data.py),
  // a wait for the compute stream at the start of every microbatch's forward, on the stages that
  // load the batch.
  BatchSync sync_per_microbatch = BatchSync::kNone;
  // Megatron reads what the optimizer's checks compute on the host before the optimizer runs:
  // the global gradient norm (clip_grads.py, total_norm.item()) and fp16's inf/nan flag.
  bool sync_host_reads = false;
};

struct StepWork {
  // Gradient clipping by global norm: a pass that reads every local gradient (the norm's
  // all-reduce of one value is latency and is not modelled).
  bool grad_norm = false;
};

}  // namespace meshsim::workloads
