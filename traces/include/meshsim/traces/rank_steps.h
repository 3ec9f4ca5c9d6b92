// A rank's Kineto trace (kineto.h) as training steps: the device work of each step, each kernel
// linked to the host call that launched it and the operator that called that, classified; and
// where the step's time went, measured the same way meshsim's simulated timelines are measured.
//
// Links (Kineto's own): a kernel, copy or set carries the "correlation" of the runtime call that
// launched it (cudaLaunchKernel, cudaLaunchKernelExC, cudaMemcpyAsync, ...) and the "External id"
// of the innermost operator (cpu_op) around that call.
//
// Steps:
//  * "ProfilerStep#N" ranges (torch.profiler's schedule, or record_function around each step):
//    a device op belongs to the range in which its launch started (device ops with no launch in
//    the trace: the range their own start falls in); host calls to the range they start in.
//  * Device work launched before the trace began belongs to no step: an op with no launch in the
//    trace whose correlation id precedes every runtime call's (CUPTI numbers the calls in
//    order, so its call came before the profiler's window: the backlog of a GPU that runs behind
//    its host, or of a software pipeline that overlaps steps).
//  * Otherwise repeated structure: the device ops, in order of start, are cut at each occurrence
//    of an anchor kernel name, chosen as the name occurring most often such that every piece
//    between two consecutive occurrences holds the same multiset of kernel names (one training
//    step repeats its kernels exactly; a layer's kernels do not, since the step's first and last
//    layers sit beside the embedding, the loss and the optimizer). Ops before the first and after
//    the last occurrence belong to no step. With no such name: an InputError.
//
// Times are picoseconds relative to the rank's origin: the earliest kept event of its trace.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "meshsim/sim/program.h"
#include "meshsim/sim/units.h"
#include "meshsim/traces/kineto.h"

namespace meshsim::traces {

struct DeviceOp {
  uint32_t event = 0;  // index into RankTrace::events
  OpClass op_class = OpClass::kElementwise;
  bool classified = true;  // false: no rule of import.h matched (counted as elementwise)
  bool communication = false;  // an NCCL/RCCL kernel
  bool p2p = false;            // point-to-point: SendRecv, send, recv
  SimTime start;
  Duration duration;
  int64_t stream = 0;
  int32_t device = 0;
  std::optional<uint32_t> launch;      // its runtime call
  std::optional<SimTime> launch_start;  // that call's start and duration
  Duration launch_duration;
  std::optional<uint32_t> op;          // the innermost operator around that call
  std::optional<uint32_t> collective;  // index into RankTrace::collectives
  SimTime end() const { return start + duration; }
};

// A runtime call during which the host waited for the device: cudaDeviceSynchronize,
// cudaStreamSynchronize, cudaEventSynchronize, a synchronous cudaMemcpy (and their hip twins).
struct HostSync {
  uint32_t event = 0;
  SimTime start;
  Duration duration;
};

struct RankStep {
  int64_t number = 0;  // N of ProfilerStep#N, or the ordinal of a detected step
  SimTime host_start;  // the step's range on the host (ProfilerStep), or its detected bounds
  SimTime host_end;
  // t0 of the step: its first device op's start. (Not its first launch: a host that runs ahead
  // of its GPU launches a step's kernels while the device still runs the step before.)
  SimTime start;
  // The end of the device work launched before the step (earlier steps', and work launched
  // before the trace began); start when none ends later.
  SimTime queued_until;
  std::vector<DeviceOp> ops;     // by (start, device, stream, event)
  std::vector<HostSync> syncs;   // by start
  SimTime end() const;           // the last device op's end (start when it has none)
  // Where the step's measured time begins: its first device op, or the end of the work queued
  // ahead of it if later. When steps overlap on the device (a host ahead of its GPU; a software
  // pipeline copying the next batch while this one trains), a step's first ops start while the
  // step before still runs and the span from them would count that step's tail twice; from the
  // end of the earlier work, consecutive steps tile the timeline and the duration is the period.
  SimTime measured_start() const { return std::max(start, queued_until); }
  Duration duration() const { return end() - measured_start(); }
};

struct RankSteps {
  std::string method;  // "ProfilerStep#N ranges" or "repeated structure (anchor kernel ...)"
  std::vector<RankStep> steps;
  int64_t unlinked_ops = 0;  // device ops with no launch found in the trace (in a step)
  int64_t empty_steps = 0;   // steps found with no device work (left out of `steps`)
  int64_t before_trace_ops = 0;  // device ops launched before the trace began (in no step)
  // Steps left out because all their device work ends before the work queued ahead of them
  // does: the trace stopped recording the device before the step ran (its last step, typically).
  int64_t unfinished_steps = 0;
};

// Splits `trace` into steps (see above). InputError(trace.source, "/traceEvents", ...) when it has
// no device work, or neither ProfilerStep ranges nor a repeating structure.
RankSteps find_steps(const RankTrace& trace);

// The class of a device op: communication by its name (nccl, rccl, ...) first, then the class of
// the innermost user annotation around its launch whose name matches a rule (import.h rule 2),
// then the kernel's name, then its operator's name (import.h rule 3).
OpClass classify_device_op(const RankTrace& trace, const DeviceOp& op, bool* classified);

// A span of a timeline for the breakdown below: measured device ops, or the simulated ones.
struct Span {
  SimTime start;
  SimTime end;
  OpClass op_class = OpClass::kElementwise;
  bool communication = false;
  bool p2p = false;
  std::optional<SimTime> launched;  // when the host had issued it (its launch call returned)
};

// Where a step's time went, on one rank (breakdown.h's definitions, applied to any timeline):
//   step          from the step's start t0 to its last span's end
//   by_class      summed span durations per op class (a sum, not a union)
//   compute       union of non-communication spans
//   comm          union of communication spans
//   exposed_comm  comm minus compute: communication no compute hides
//   overlap       comm minus exposed_comm: communication hidden under compute
//   idle          step minus (compute union comm)
//   exposed_p2p   union of point-to-point spans minus compute: on GPUs a receive waits inside
//                 its kernel for the sending stage, so a pipeline's waits show up here
//   bubble        idle + exposed_p2p: the time a pipeline stage has no work
//   host_gap      GPU idle while the host was launching: each idle gap (no span on any stream)
//                 whose closing spans were all launched after the gap began, counted whole (the
//                 GPU had nothing queued)
struct StepBreakdown {
  Duration step;
  std::array<Duration, kNumOpClasses> by_class{};
  Duration compute;
  Duration comm;
  Duration exposed_comm;
  Duration overlap;
  Duration idle;
  Duration exposed_p2p;
  Duration bubble;
  Duration host_gap;
};
StepBreakdown breakdown(std::vector<Span> spans, SimTime t0);

// The measured step's spans, relative to its own start (t0 = 0).
std::vector<Span> measured_spans(const RankStep& step);

// Host-side costs of launching, from the trace's links (all steps of the rank): per device op,
// the time from its operator's start to its launch call's start (the framework's dispatch), the
// launch call's duration, the time from one launch call's start to the next on the same thread
// with no synchronization between them (the host's pace of issuing: its per-op dispatch cost),
// and, where the device was idle when the launch call returned, the time from the call's end to
// the kernel's start (the launch latency floor). Each launch call counts once (a CUDA graph launch
// runs many kernels). Medians over the samples, with their counts; nullopt with no sample.
struct HostDispatch {
  std::optional<Duration> op_to_launch;
  int64_t op_to_launch_samples = 0;
  std::optional<Duration> launch_call;
  int64_t launch_call_samples = 0;
  std::optional<Duration> launch_interval;
  int64_t launch_interval_samples = 0;
  std::optional<Duration> launch_latency;
  int64_t launch_latency_samples = 0;
};
HostDispatch host_dispatch(const RankTrace& trace, const RankSteps& steps);

}  // namespace meshsim::traces
