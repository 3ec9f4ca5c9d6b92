// Pipeline-parallel schedules as a pure planner (docs/style.md A.4): for each pipeline rank, the
// order in which it runs its forward and backward passes in one training step, and where each
// pass's activations come from and go to. No engine, no clock, no costs: the step planner turns
// these orders into programs (a compute op per pass, a send/receive per stage boundary).
//
// Vocabulary. `stages` = PP ranks, `m` = microbatches per step per pipeline, `v` = model chunks
// (virtual stages) per rank. The model's layers are cut into p*v virtual stages; virtual stage
// `chunk * p + stage` lives on rank `stage` (Megatron-LM's interleaving, Narayanan et al. 2021,
// Sec. 2.2), so a microbatch visits ranks 0..p-1 with chunk 0, then 0..p-1 with chunk 1, ...
// zbv places its v = 2 chunks in a V instead: chunk 0 of rank s is virtual stage s, chunk 1 is
// virtual stage 2p-1-s, so a microbatch goes down ranks 0..p-1 and back up p-1..0, and rank 0
// holds both the embedding and the loss. A pass is one (kind, microbatch, chunk). Stage s below
// is 0-based.
//
// The orders, exactly (source in brackets):
//  * gpipe [Huang et al. 2019, GPipe, Fig. 2c; torchgpipe]: F(0..m-1), then B(m-1..0): the
//    backward runs the microbatches in reverse, so the last stage starts the backward of the
//    microbatch whose forward it has just finished.
//  * 1f1b [PipeDream-Flush, Narayanan et al. 2021; Megatron-LM
//    forward_backward_pipelining_without_interleaving]: w = min(p - s - 1, m) warm-up forwards
//    F(0..w-1); then for i in 0..m-w-1 the steady pair F(w + i), B(i); then the cool-down
//    B(m-w..m-1).
//  * interleaved [Megatron-LM forward_backward_pipelining_with_interleaving, with its default
//    microbatch_group_size_per_vp_stage = p]: the rank runs m*v "virtual microbatches" k. Forward
//    k is microbatch (k / (p*v)) * p + k % p of chunk (k % (p*v)) / p (microbatches in groups of
//    p, each group through chunk 0, then chunk 1, ...); backward k is the same microbatch of
//    chunk v - 1 - (k % (p*v)) / p. Warm-up w = min((p - s - 1) * 2 + (v - 1) * p, m*v) forwards
//    0..w-1 (when the formula reaches m*v every pass is warm-up: all forwards, then all
//    backwards); then for i in 0..m*v-w-1 the pair forward w + i, backward i; then backwards
//    m*v-w..m*v-1. Needs m % p == 0 (Megatron's rule) and v >= 2.
//  * zb [ZB-H1, Qi et al. 2023, "Zero Bubble Pipeline Parallelism", Sec. 2.1 / Fig. 3 top;
//    sail-sg/zero-bubble-pipeline-parallelism, zb-h1-quick-start: "delay W by rank"]: the
//    backward is split into B (input gradient, sent upstream) and W (weight gradient, local).
//    1F1B's order with every B split and its W deferred, W's taken FIFO: w = min(p - s - 1, m)
//    warm-up F(0..w-1); for i in 0..m-w-1: F(w + i), B(i), and then the oldest pending W if
//    i >= s; in the cool-down each B(j) (j = m-w..m-1) is followed by the oldest pending W; the
//    W's still pending (s of them when m >= p) close the step. So stage s lets s W's wait, which
//    shortens the critical path by a W per stage. With uniform stages and m >= p the bubble is
//    (p-1)(T_F + T_B - T_W) against 1F1B's (p-1)(T_F + T_B + T_W): a third of it when
//    T_F = T_B = T_W, with 1F1B's peak of F-but-not-B microbatches. (With m < p the deferred W's
//    trail at the end; still shorter than 1F1B.)
//  * zbv [ZB-V: Qi et al., "Zero Bubble Pipeline Parallelism", ICLR 2024 (arXiv 2401.10241),
//    Sec. 6; the V-shaped placement of Qi et al. 2024, "Pipeline Parallelism with Controllable
//    Memory" (arXiv 2405.15362); sail-sg/zero-bubble-pipeline-parallelism, scheduler/zbv.py at
//    39f2c18]: two chunks per rank in a V (above), backward split into B and W as zb. Not the
//    repository's heuristic (which tries four W-filling variants and re-runs with per-rank
//    bubble targets), but the same idea as a deterministic greedy list schedule: every pass costs
//    one unit, messages are free, and at each unit step every rank starts the first ready pass
//    among (1) a B, (2) an F, only while the rank holds fewer than 2p chunk passes whose W has not
//    run (the paper's cap, zbv.py's max_mem = 2p f_mem: 1F1B's peak of p whole-stage
//    microbatches), (3) its oldest pending W. Among B's, and among F's, the older microbatch
//    first, chunk 1 on a tie. A pass is ready when its input has been computed by the end of the
//    previous step: F(c0) after F(c0) of rank s-1; F(c1) after F(c1) of rank s+1, or at the turn
//    (s = p-1) after its own F(c0); B(c1) after its F(c1) and B(c1) of rank s-1 (rank 0: the
//    loss); B(c0) after B(c0) of rank s+1, or at the turn after its own B(c1). Warm-up (the
//    paper's: rank s fills until the V's return leg reaches it): F(c0) is also held back while
//    the rank has run 2(p-s)-1 more F(c0) than F(c1). The per-rank orders the greedy produces are
//    the schedule; the engine then runs them at the real costs. At unit costs the step is at
//    least 6m + p - 1 units (each rank runs 6m passes; rank p-1 cannot start before p-1 F(c0)
//    upstream), i.e. a bubble of (p-1)/(6m+p-1) with T_F = T_B = T_W, against ZB-H1's
//    (p-1)/(3m+p-1) and 1F1B's (p-1)/(m+p-1) (the repository's table calls ZB-V's bubble 0,
//    not counting that warm-up). The greedy reaches the bound for p <= 4 and m >= p, and stays
//    within (p-1)/2 units of it for p <= 32, m in [2p, 4p]; each rank holds at most
//    2 min(m, p) chunk passes. Valid for any m >= 1 (fewer than p microbatches leave bubbles).
// Every order holds each (microbatch, chunk) forward once and its backward (or its B and W)
// once, a backward after its forward and a W after its B.
//
// Messages between ranks. Forward outputs go to forward_destination, backward (input) gradients
// to forward_source. Per ordered pair of ranks and per direction (activations, gradients), the
// order in which one rank sends equals the order in which the other receives, for every
// schedule here: sends and receives tagged by direction match correctly in program order.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "meshsim/sim/enum_names.h"
#include "meshsim/workloads/plan_field.h"

namespace meshsim::workloads {

using meshsim::to_string;

enum class PipelineSchedule { kGpipe, kOneFOneB, kInterleaved, kZeroBubble, kZeroBubbleV };
constexpr auto enum_names(PipelineSchedule) {
  return std::to_array<EnumName<PipelineSchedule>>({{PipelineSchedule::kGpipe, "gpipe"},
                                                    {PipelineSchedule::kOneFOneB, "1f1b"},
                                                    {PipelineSchedule::kInterleaved, "interleaved"},
                                                    {PipelineSchedule::kZeroBubble, "zb"},
                                                    {PipelineSchedule::kZeroBubbleV, "zbv"}});
}

// Whether the schedule splits the backward into B and W (zb, zbv).
constexpr bool splits_backward(PipelineSchedule s) {
  return s == PipelineSchedule::kZeroBubble || s == PipelineSchedule::kZeroBubbleV;
}

enum class PassKind {
  kForward,
  kBackward,        // input and weight gradients together (gpipe, 1f1b, interleaved)
  kBackwardInput,   // zb's and zbv's B: the input gradient, on the critical path
  kBackwardWeight,  // zb's and zbv's W: the weight gradient, deferred to fill bubbles
};
constexpr auto enum_names(PassKind) {
  return std::to_array<EnumName<PassKind>>({{PassKind::kForward, "F"},
                                            {PassKind::kBackward, "B"},
                                            {PassKind::kBackwardInput, "B_input"},
                                            {PassKind::kBackwardWeight, "W"}});
}

struct PipelinePass {
  PassKind kind = PassKind::kForward;
  int32_t microbatch = 0;  // 0..microbatches-1
  int32_t chunk = 0;       // model chunk (virtual stage) on this rank, 0..virtual_stages-1
  bool operator==(const PipelinePass&) const = default;
};

struct PipelineConfig {
  PipelineSchedule schedule = PipelineSchedule::kOneFOneB;
  int64_t stages = 1;          // pipeline-parallel ranks (the plan's pp)
  int64_t microbatches = 1;    // per step per pipeline (gbs / (dp * mbs))
  int64_t virtual_stages = 1;  // model chunks per rank (vpp)
};

// Throws PlanError on the plan field at fault (pp, vpp, schedule, or gbs for the microbatches)
// when the combination is invalid: sizes must be positive (microbatches and virtual_stages at
// most INT32_MAX); vpp > 1 only with interleaved and zbv; interleaved needs vpp >= 2, pp >= 2 and
// microbatches % pp == 0; zbv needs pp >= 2 and vpp == 2.
void validate(const PipelineConfig& config);

// The order in which pipeline rank `stage` (0 <= stage < stages, else InternalError) runs its
// passes in one step. Validates `config` (InputError). Cost: O(microbatches * virtual_stages).
std::vector<PipelinePass> pipeline_order(const PipelineConfig& config, int64_t stage);
// Every rank's order, stage by stage: pipeline_order of each, with a schedule that is built for
// all ranks at once (zbv's list schedule) built once instead of once per rank.
std::vector<std::vector<PipelinePass>> pipeline_orders(const PipelineConfig& config);

// The virtual stage (0 .. stages*vpp-1) that chunk `chunk` of rank `stage` is:
// chunk * stages + stage; zbv: stage for chunk 0, 2 * stages - 1 - stage for chunk 1.
int64_t virtual_stage(const PipelineConfig& config, int64_t stage, int64_t chunk);

// The most forward passes whose activations rank `stage` holds at once under the schedule: passes
// whose forward has started and whose backward (zb: whose B) has not finished. For vpp = 1 these
// are microbatches: gpipe m; 1f1b and zb min(m, stages - stage). Interleaved counts
// (microbatch, chunk) passes, each holding 1/vpp of the rank's activations per microbatch:
// Megatron's warm-up + 1, i.e. min((p - s - 1) * 2 + (v - 1) * p + 1, m*v), or m*v when every
// pass is warm-up (on rank 0: p*v + p - 1 chunk passes = p * (1 + (p-1)/(p*v)) microbatches'
// worth, Korthikanti et al. 2022). zb additionally keeps, after each B until its W, what W needs
// (layer inputs and output gradients); up to `stage` microbatches wait for their W. zbv counts
// chunk passes whose F has started and whose W has not finished (what W keeps included, as the
// construction's cap does), the most along the rank's order: 2 min(m, p) on every rank, i.e. p
// whole-stage microbatches when m >= p, 1F1B's first stage.
int64_t max_in_flight(const PipelineConfig& config, int64_t stage);
// max_in_flight of every rank, stage by stage (zbv's schedule built once).
std::vector<int64_t> max_in_flight_per_stage(const PipelineConfig& config);

// A chunk of a rank: where a virtual stage lives.
struct PipelinePeer {
  int64_t stage = 0;
  int32_t chunk = 0;
  bool operator==(const PipelinePeer&) const = default;
};

// The rank and chunk holding virtual stage `vs` (0 <= vs < stages*vpp, else InternalError): the
// inverse of virtual_stage.
PipelinePeer virtual_stage_home(const PipelineConfig& config, int64_t vs);

// Where a chunk's forward input comes from and its output goes to: the neighbouring virtual
// stage, or nullopt at the ends of the pipeline (virtual stage 0 reads the data; the last one
// computes the loss). Backward passes run the other way: a backward receives its output gradient
// from forward_destination and sends its input gradient to forward_source. The peer's stage is
// stage - 1 (resp. stage + 1) modulo `stages` for gpipe, 1f1b, zb and interleaved (whose chunk
// boundary wraps from rank p-1 to rank 0). zbv's chunk 1 runs the other way, its source on rank
// stage + 1 and its destination on stage - 1, and at the V's turn the peer is the same rank
// (chunk 0 of rank p-1 feeds its chunk 1): no message then.
std::optional<PipelinePeer> forward_source(const PipelineConfig& config, int64_t stage,
                                           int32_t chunk);
std::optional<PipelinePeer> forward_destination(const PipelineConfig& config, int64_t stage,
                                                int32_t chunk);

}  // namespace meshsim::workloads
