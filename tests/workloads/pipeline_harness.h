// The engine harness of the pipeline schedule tests (pipeline_test.cc, pipeline_v_test.cc): every
// pass gets a fixed time (F = 1000 ps per microbatch, split evenly over the vpp chunks; B = 2F;
// zb and zbv: B_input = F, W = F), sends and receives run on their own streams, one per channel,
// with zero transfer time, and each stage's bubble = (step time - busy compute time) / step time
// is measured in integer picoseconds, so that the closed forms hold exactly.
#pragma once

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "../sim/test_models.h"
#include "meshsim/sim/analysis.h"
#include "meshsim/sim/error.h"
#include "meshsim/sim/simulation.h"
#include "meshsim/workloads/pipeline.h"

namespace meshsim::workloads::pipeline_harness {

using S = PipelineSchedule;

inline PipelineConfig config(S schedule, int64_t pp, int64_t m, int64_t vpp = 1) {
  return PipelineConfig{schedule, pp, m, vpp};
}

inline bool is_backward(PassKind k) {
  return k == PassKind::kBackward || k == PassKind::kBackwardInput;
}

// "F3 B0 W0", chunks as "F3.1" when vpp > 1 (zb's B_input prints as B).
inline std::string format_order(const std::vector<PipelinePass>& order, bool chunks) {
  std::string out;
  for (const PipelinePass& p : order) {
    const char letter = p.kind == PassKind::kForward          ? 'F'
                        : p.kind == PassKind::kBackwardWeight ? 'W'
                                                              : 'B';
    out += out.empty() ? "" : " ";
    out += chunks ? fmt::format("{}{}.{}", letter, p.microbatch, p.chunk)
                  : fmt::format("{}{}", letter, p.microbatch);
  }
  return out;
}

inline std::string order_string(const PipelineConfig& c, int64_t stage) {
  return format_order(pipeline_order(c, stage), c.virtual_stages > 1);
}

// Most (microbatch, chunk) passes held at once along the order: each from its forward until the
// first of its passes that `releases` it. The passes are followed by identity, apart from the
// library's own count (max_in_flight), which the tests compare with this one.
inline int64_t counted_held(const std::vector<PipelinePass>& order, bool (*releases)(PassKind)) {
  std::set<std::pair<int32_t, int32_t>> held;
  size_t peak = 0;
  for (const PipelinePass& p : order) {
    if (p.kind == PassKind::kForward) {
      held.insert({p.microbatch, p.chunk});
    } else if (releases(p.kind)) {
      held.erase({p.microbatch, p.chunk});
    }
    peak = std::max(peak, held.size());
  }
  return static_cast<int64_t>(peak);
}

// Most forwards whose backward (zb: B) has not run yet, counted along the order.
inline int64_t counted_in_flight(const std::vector<PipelinePass>& order) {
  return counted_held(order, is_backward);
}

// Most forwards whose weight gradients (W, or the whole backward) have not run yet.
inline int64_t counted_until_weights(const std::vector<PipelinePass>& order) {
  return counted_held(
      order, [](PassKind k) { return k == PassKind::kBackward || k == PassKind::kBackwardWeight; });
}

// ---- the engine harness ----------------------------------------------------------------------

constexpr int64_t kForwardPs = 1000;
constexpr uint16_t kPrevSlot = 0;
constexpr uint16_t kNextSlot = 1;
constexpr uint16_t kActivationTag = 0;
constexpr uint16_t kGradientTag = 1;
// One stream per channel: zbv's return leg (chunk 1) gets the four after kSendGradient, so that a
// send to one neighbour never queues behind one to the other.
enum Stream : uint8_t { kCompute, kRecvActivation, kRecvGradient, kSendActivation, kSendGradient };
constexpr uint8_t kReturnLeg = 4;

// Uneven stages: `layers[s]` layers per chunk of stage s at kLayerPs a layer's forward (empty:
// every chunk F / vpp).
constexpr int64_t kLayerPs = 100;
inline int64_t pass_ps(const PipelineConfig& c, PassKind kind, int64_t stage,
                       const std::vector<int64_t>& layers) {
  const int64_t f = layers.empty() ? kForwardPs / c.virtual_stages
                                   : kLayerPs * layers[static_cast<size_t>(stage)];
  return kind == PassKind::kBackward ? 2 * f : f;
}

// Activation memory in MiB: a forward allocates `alloc` at its start; the backward (zb, zbv: B)
// frees `backward_free` at its end and W frees the rest at its end.
struct MemoryUnits {
  int64_t alloc = 1;
  int64_t backward_free = 1;
};

inline Op pass_op(const PipelineConfig& c, const PipelinePass& p, int64_t stage, MemoryUnits mem,
                  const std::vector<int64_t>& layers) {
  Op op = testing::compute_op(fmt::format("{}{}.{}", to_string(p.kind), p.microbatch, p.chunk),
                              static_cast<double>(pass_ps(c, p.kind, stage, layers)), kCompute);
  op.labels.microbatch = p.microbatch;
  op.labels.stage = static_cast<int32_t>(stage);
  if (p.kind == PassKind::kForward) {
    op.memory.push_back({MemoryCategory::kActivations, MiB(static_cast<double>(mem.alloc)), false});
  } else if (is_backward(p.kind)) {
    op.memory.push_back(
        {MemoryCategory::kActivations, MiB(-static_cast<double>(mem.backward_free)), true});
  } else if (mem.alloc > mem.backward_free) {
    op.memory.push_back({MemoryCategory::kActivations,
                         MiB(-static_cast<double>(mem.alloc - mem.backward_free)), true});
  }
  return op;
}

inline Op message_op(bool send, bool activation, uint16_t slot, bool return_leg) {
  Op op = testing::peer_op(send ? "send" : "recv", send, 0, slot);
  op.stream = activation ? (send ? kSendActivation : kRecvActivation)
                         : (send ? kSendGradient : kRecvGradient);
  op.stream = static_cast<uint8_t>(op.stream + (return_leg ? kReturnLeg : 0));
  std::get<PeerWork>(op.work).tag = activation ? kActivationTag : kGradientTag;
  return op;
}

// One rank's program: per pass, the receive it waits for, the compute op, the send it feeds. The
// peer's slot is found from its rank (with 2 stages both neighbours are the same rank); a peer on
// the same rank (zbv's turn) needs no message.
inline Program stage_program(const PipelineConfig& c, int64_t stage, MemoryUnits mem,
                             const std::vector<int64_t>& layers) {
  Program prog;
  auto slot = [&](const PipelinePeer& peer) {
    return peer.stage == (stage + 1) % c.stages ? kNextSlot : kPrevSlot;
  };
  for (const PipelinePass& p : pipeline_order(c, stage)) {
    const bool forward = p.kind == PassKind::kForward;
    const bool return_leg = c.schedule == S::kZeroBubbleV && p.chunk == 1;
    std::optional<PipelinePeer> from;
    std::optional<PipelinePeer> to;
    if (forward || is_backward(p.kind)) {
      const auto src = forward_source(c, stage, p.chunk);
      const auto dst = forward_destination(c, stage, p.chunk);
      from = forward ? src : dst;
      to = forward ? dst : src;
    }
    std::optional<OpId> recv;
    if (from && from->stage != stage) {
      recv = prog.add(message_op(false, forward, slot(*from), return_leg));
    }
    const OpId compute = prog.add(pass_op(c, p, stage, mem, layers));
    if (recv) {
      prog.add_dependency(*recv, compute);
    }
    if (to && to->stage != stage) {
      prog.add_dependency(compute, prog.add(message_op(true, forward, slot(*to), return_leg)));
    }
  }
  return prog;
}

struct PipelineRun {
  RunResult result;
  std::vector<RankBreakdown> breakdown;
};

inline PipelineRun simulate(const PipelineConfig& c, MemoryUnits mem = {},
                            const std::vector<int64_t>& layers = {}) {
  testing::PsSimulation sim;  // zero-byte messages take zero time
  Timeline timeline;
  sim.record_into(timeline);
  for (int64_t s = 0; s < c.stages; ++s) {
    const ProgramIndex prog = sim.add_program(stage_program(c, s, mem, layers));
    const auto prev = static_cast<uint32_t>((s + c.stages - 1) % c.stages);
    const auto next = static_cast<uint32_t>((s + 1) % c.stages);
    sim.add_rank(prog, {}, {RankId(prev), RankId(next)});
  }
  PipelineRun run{sim.run(), {}};
  run.breakdown = analyze(timeline, sim, run.result.end);
  // Issue 16: the engine's online breakdown equals the analysis of the recorded timeline.
  for (size_t i = 0; i < run.breakdown.size(); ++i) {
    EXPECT_EQ(run.result.ranks[i].breakdown, run.breakdown[i]) << "stage " << i;
  }
  return run;
}

inline int64_t step_ps(const PipelineRun& r) { return r.result.end.ps(); }
inline int64_t busy_ps(const PipelineRun& r, int64_t stage) {
  return r.breakdown[static_cast<size_t>(stage)].compute.ps();
}
inline double bubble(const PipelineRun& r, int64_t stage) {
  return static_cast<double>(step_ps(r) - busy_ps(r, stage)) / static_cast<double>(step_ps(r));
}

// Every stage idles exactly num/den of the step (checked as integers: no rounding).
inline void expect_bubble(const PipelineRun& r, const PipelineConfig& c, int64_t num,
                          int64_t den) {
  for (int64_t s = 0; s < c.stages; ++s) {
    EXPECT_EQ((step_ps(r) - busy_ps(r, s)) * den, step_ps(r) * num)
        << to_string(c.schedule) << " pp " << c.stages << " m " << c.microbatches << " vpp "
        << c.virtual_stages << " stage " << s << ": step " << step_ps(r) << " ps, busy "
        << busy_ps(r, s) << " ps, expected bubble " << num << "/" << den;
  }
}

// The step of `c` computed directly, without the engine: every stage runs its order one pass
// at a time, a pass starting when the stage is free and its input is there (a forward after the
// previous virtual stage's forward of its microbatch, a backward or B after the next one's, a W
// after nothing but its stage), messages free. A longest-path recurrence over the same orders the
// engine executes.
inline int64_t list_schedule_ps(const PipelineConfig& c, const std::vector<int64_t>& layers) {
  using Key = std::tuple<int64_t, bool, int32_t, int32_t>;  // stage, forward, microbatch, chunk
  std::map<Key, int64_t> end;
  std::vector<size_t> next(static_cast<size_t>(c.stages), 0);
  std::vector<int64_t> stage_free(static_cast<size_t>(c.stages), 0);
  std::vector<std::vector<PipelinePass>> orders;
  for (int64_t s = 0; s < c.stages; ++s) {
    orders.push_back(pipeline_order(c, s));
  }
  for (bool progress = true; progress;) {
    progress = false;
    for (int64_t s = 0; s < c.stages; ++s) {
      const std::vector<PipelinePass>& order = orders[static_cast<size_t>(s)];
      for (size_t& i = next[static_cast<size_t>(s)]; i < order.size(); ++i) {
        const PipelinePass& p = order[i];
        const bool fwd = p.kind == PassKind::kForward;
        const bool weights = p.kind == PassKind::kBackwardWeight;
        const auto peer = fwd ? forward_source(c, s, p.chunk) : forward_destination(c, s, p.chunk);
        int64_t ready = 0;
        if (peer && !weights) {
          const auto it = end.find({peer->stage, fwd, p.microbatch, peer->chunk});
          if (it == end.end()) {
            break;  // its input is not computed yet
          }
          ready = it->second;
        }
        int64_t& t = stage_free[static_cast<size_t>(s)];
        t = std::max(t, ready) + pass_ps(c, p.kind, s, layers);
        if (!weights) {
          end[{s, fwd, p.microbatch, p.chunk}] = t;
        }
        progress = true;
      }
    }
  }
  return *std::max_element(stage_free.begin(), stage_free.end());
}

}  // namespace meshsim::workloads::pipeline_harness
