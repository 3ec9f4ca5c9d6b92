// A measured multi-GPU step replayed through meshsim (`meshsim validate TRACES`): what a rank's
// profiler trace (traces/kineto.h, traces/rank_steps.h) says it ran, costed by meshsim's models
// where the trace says enough to cost it, and simulated by the engine, so that measured and
// simulated time compare op by op, class by class and step by step.
//
// The model comes from the trace itself:
//  * GEMM kernels: the shape of the aten::mm / addmm / bmm / baddbmm operator that launched them
//    (record_shapes' "Input Dims"; C = [m, k] x [k, n], batch times), their dtype from its "Input
//    type" (fp32 GEMMs on tensor cores run as tf32: kernel names with "tf32", CUTLASS's
//    "tensorop_s1688gemm"), costed by the chip's GEMM model.
//    The first matmul kernel of the operator carries the GEMM; others it launches keep their time.
//  * Memory-bound kernels (elementwise, norm, copy, loss, quantize): the bytes of their operator's
//    tensors, when the operator launched this one kernel: the inputs read plus one output the size
//    of the largest input (copies: the source read and the destination written, twice the largest;
//    fills: the largest written), costed by the roofline's memory term for their class.
//  * Copies and sets: their args.bytes, over the host link (HtoD, DtoH; where the chip has its
//    rates) or HBM (DtoD: read and written; memset: written).
//  * NCCL collectives with their metadata (kineto.h, KinetoCollective): kind from the collective's
//    name, bytes in nccl-tests' convention (all-reduce, reduce-scatter, all-to-all, broadcast:
//    input elements; all-gather: output elements; times the dtype's size), the group's global
//    ranks from "Process Group Ranks" (or distributedInfo's pg_config), on the cluster's network
//    through the collectives' model (the caller's CommModel).
//  * Anything else keeps its measured duration (ComputeWork::measured), and says why (Unmodelled):
//    kernels of operators without shapes, of classes meshsim does not cost from a tensor list
//    (attention, optimizer, embedding: their bytes are not the inputs' sizes), point-to-point
//    transfers (the peer's timing is in their duration), collectives without metadata.
//
// The schedule comes from the trace too:
//  * each CUDA stream of the rank is a stream of the program, its kernels in their measured order;
//  * the host: each launch call is an op of a host stream, lasting from the previous host event to
//    the end of the call (the framework's own work in between included), and the kernel depends
//    on it; a synchronizing call (traces::HostSync) waits for the last kernel launched before it
//    that ended during it, then lasts what the call took after the device finished. A host
//    that runs ahead of the device (launches before the step's first kernel) is ready at t0.
//    When the engine gets its own host model (a per-op host dispatch cost of the stack), the host
//    stream's ops are what it replaces: the hook is build_host_chain in src/trace_replay.cc;
//  * cross-stream waits (cudaStreamWaitEvent, which older traces do not tie to an event): a kernel
//    that started more than kWaitSlack after it was ready on its own stream (its predecessor ended
//    and its launch returned) waited for something; if a kernel of another stream of the device
//    ended within kWaitSlack before it started, the replay makes it wait for that kernel.
//  * each rank is replayed alone: a collective starts when this rank reaches it, costed over its
//    whole group on the network (representative: the peers are taken to arrive together); the
//    traffic of other groups does not load the links. A transfer kept as measured (a send or
//    receive, a collective without metadata) waits for peers the replay does not have: it starts
//    no earlier than it did in the measurement (an anchor op of a "peers" stream ends there), so
//    a pipeline rank's waits on its neighbours come from their measured clock, not from this
//    rank's simulated one. Where this rank's own work runs longer than measured, the transfer
//    starts later and keeps its whole measured duration.
//  * the work queued before the step (RankStep::queued_until: earlier steps' device work) is not
//    replayed; an anchor op of its own stream ends at its measured end, and a synchronizing call
//    that waited for none of the step's ops but ended after it waits for it.
//
// Step time, both sides: from the step's start (its first device op's start, or the end of the
// work queued before it if later: RankStep::measured_start) to its last device op's end. On a rank
// whose step ends waiting on its peers, the step time is largely theirs (measured); this rank's
// own model error shows in its compute and per-class rows.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "meshsim/sim/comm_model.h"
#include "meshsim/sim/program.h"
#include "meshsim/sim/timeline.h"
#include "meshsim/sim/units.h"
#include "meshsim/topology/chip.h"
#include "meshsim/traces/kineto.h"
#include "meshsim/traces/rank_steps.h"

namespace meshsim::validation {

// Tolerance of the cross-stream wait inference above: 10 us. Kineto's older traces round times to
// whole microseconds, and a kernel released by cudaStreamWaitEvent starts a few microseconds after
// the event's kernel ends; 10 us covers both without tying kernels that merely follow each other.
inline constexpr Duration kWaitSlack = Duration::from_ps(10'000'000);

// How the replay costs a measured device op.
enum class ReplayCost : uint8_t { kGemm, kMemory, kCopy, kCollective, kMeasured };
constexpr auto enum_names(ReplayCost) {
  return std::to_array<EnumName<ReplayCost>>({{ReplayCost::kGemm, "gemm"},
                                              {ReplayCost::kMemory, "memory"},
                                              {ReplayCost::kCopy, "copy"},
                                              {ReplayCost::kCollective, "collective"},
                                              {ReplayCost::kMeasured, "measured"}});
}

// Why an op keeps its measured time.
enum class Unmodelled : uint8_t {
  kNone,
  kNoShapes,         // its operator has no "Input Dims" (profile with record_shapes=True)
  kNoOperator,       // no operator found around its launch
  kSharedOperator,   // its operator launched several kernels: its bytes cannot be split
  kClass,            // a class meshsim does not cost from the operator's tensors
  kPointToPoint,     // a send or receive: the peer's timing is part of it
  kNoMetadata,       // a collective without its metadata (PyTorch < 2.0, or a non-NCCL backend)
  kUnknownCollective,  // a collective name meshsim has no kind for ("barrier", ...)
  kNoGroup,          // its group's ranks are not in the trace, or the rank is not among them
  kNoHostLink,       // a host copy on a chip without host-link rates
};
constexpr auto enum_names(Unmodelled) {
  using U = Unmodelled;
  return std::to_array<EnumName<U>>({{U::kNone, "modelled"},
                                     {U::kNoShapes, "no-shapes"},
                                     {U::kNoOperator, "no-operator"},
                                     {U::kSharedOperator, "shared-operator"},
                                     {U::kClass, "class-not-modelled"},
                                     {U::kPointToPoint, "point-to-point"},
                                     {U::kNoMetadata, "no-collective-metadata"},
                                     {U::kUnknownCollective, "unknown-collective"},
                                     {U::kNoGroup, "group-unknown"},
                                     {U::kNoHostLink, "no-host-link"}});
}

struct ReplayOp {
  uint32_t index = 0;  // into RankStep::ops
  uint32_t event = 0;  // into RankTrace::events
  ReplayCost cost = ReplayCost::kMeasured;
  Unmodelled why = Unmodelled::kNone;
  ComputeWork compute;  // everything but collectives (measured = its measured time when kMeasured)
  std::optional<CollectiveWork> collective;
  std::vector<RankId> group;  // a collective's global ranks
  Duration measured;
  // After the run.
  SimTime simulated_start;
  Duration simulated;
};

struct Replay {
  int64_t rank = 0;      // the global rank replayed
  int64_t step = 0;      // RankStep::number
  std::vector<ReplayOp> ops;  // one per device op of the step, in its order
  Duration measured_step;
  Duration simulated_step;
  traces::StepBreakdown measured;
  traces::StepBreakdown simulated;
  int64_t host_ops = 0;               // ops of the host stream
  int64_t inferred_dependencies = 0;  // cross-stream waits inferred (see above)
  int64_t anchored_transfers = 0;     // transfers kept as measured, held to their peers' clock
  // With keep_timelines, for traces: the simulated rank's (one rank: RankId 0) program, its
  // simulated records and the same ops' measured spans (relative to the step's start: host ops
  // at the measured chain, device ops where they ran); the global ranks of its group slots.
  Program program;
  Timeline timeline;
  Timeline measured_timeline;
  std::vector<std::vector<RankId>> groups;
  std::vector<std::string> stream_names;  // by stream index: "stream 7", ..., "host"
  // Device ops' measured time by how they were costed (indexed by ReplayCost).
  std::array<Duration, 5> measured_by_cost{};
  Duration modelled_measured() const;  // measured time of the ops not kMeasured
};

// Costs the step's ops (as above) without simulating: `chip` for the host link, `world` the
// global ranks a collective's group may name (a group outside [0, world) is kNoGroup).
std::vector<ReplayOp> cost_ops(const traces::RankTrace& trace, const traces::RankStep& step,
                               int64_t global_rank, int64_t world, const topology::Chip& chip);

// Replays the step of the rank with global rank `global_rank` (< world) on `chip` (its compute
// model, at its efficiency) with `comm` for its collectives (global ranks are devices in order).
// A `comm` model is used by one replay (it keeps state). With `keep_timelines` the Replay keeps
// its program (ops named after their kernels) and both timelines, for write_replay_trace;
// without, they stay empty (a step of 10^5 kernels holds tens of MB of them).
Replay replay_step(const traces::RankTrace& trace, const traces::RankStep& step,
                   int64_t global_rank, int64_t world, const topology::Chip& chip, CommModel& comm,
                   bool keep_timelines = false);

// One rank's replayed steps, summarized.
struct RankSummary {
  int64_t rank = 0;
  size_t steps = 0;
  Duration measured_step;   // median over the steps (the lower middle of an even count)
  Duration simulated_step;  // median over the steps
  double step_error = 0;    // simulated_step / measured_step - 1
  double worst_step_error = 0;  // the largest |error| of one step, signed
  // Means over the steps (by_class: sums over the steps).
  traces::StepBreakdown measured;
  traces::StepBreakdown simulated;
  std::array<Duration, 5> measured_by_cost{};  // summed, indexed by ReplayCost
  std::array<Duration, 10> measured_by_reason{};  // summed, indexed by Unmodelled
  Duration device_time;  // summed measured time of every device op
  int64_t host_ops = 0;
  int64_t inferred_dependencies = 0;
  int64_t anchored_transfers = 0;
};
// One rank's steps summarized as they are replayed (a multi-GB trace's replays are not kept).
class RankSummarizer {
 public:
  void add(const Replay& r);
  // At least one step added.
  RankSummary summary() const;

 private:
  RankSummary s_;
  std::vector<Duration> measured_;
  std::vector<Duration> simulated_;
  std::vector<traces::StepBreakdown> measured_breakdowns_;
  std::vector<traces::StepBreakdown> simulated_breakdowns_;
};
// `replays` are one rank's steps (at least one).
RankSummary summarize(const std::vector<Replay>& replays);

// A kernel group of the per-op comparison: every op with the same name and costed shape.
struct KernelRow {
  std::string name;
  ReplayCost cost = ReplayCost::kMeasured;
  OpClass op_class = OpClass::kElementwise;
  std::string shape;  // "2048x4096x1024 bf16", "12.6 MB", "all-reduce 64 MiB over 8"
  int64_t count = 0;
  Duration measured;
  Duration simulated;
};
// The modelled ops of replays of one trace's steps, grouped as they are added.
class KernelRows {
 public:
  explicit KernelRows(const traces::RankTrace& trace) : trace_(trace) {}
  void add(const Replay& r);
  // The groups, the largest absolute differences first.
  std::vector<KernelRow> rows() const;

 private:
  const traces::RankTrace& trace_;
  std::map<std::vector<int64_t>, KernelRow> groups_;
};
// Every modelled op of `replays` (replays of `trace`'s steps) grouped, the largest absolute
// differences first.
std::vector<KernelRow> kernel_rows(const traces::RankTrace& trace,
                                   const std::vector<const Replay*>& replays);

// The trace's world size and this rank's global rank: distributedInfo where it says, else
// `fallback_rank` (the file's position among the traces given) in a world of `fallback_world`.
struct RankIdentity {
  int64_t rank = 0;
  int64_t world = 1;
  bool from_trace = false;
};
RankIdentity rank_identity(const traces::RankTrace& trace, int64_t fallback_rank,
                           int64_t fallback_world);

// The catalogue chip that the trace's first device is (deviceProperties' name and memory:
// "NVIDIA A100-SXM4-80GB" -> a100-80gb, an A100 with less than 60 GB -> a100-40gb, H100 SXM/HBM3
// -> h100-sxm, H200 -> h200, B200 -> b200), or nullopt with the reason in `why`.
std::optional<std::string> catalogue_chip(const traces::RankTrace& trace, std::string& why);

}  // namespace meshsim::validation
