#include "meshsim/workloads/pipeline.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <deque>
#include <limits>
#include <utility>

#include "meshsim/sim/error.h"
#include "pipeline_v.h"

namespace meshsim::workloads {
namespace {

constexpr int64_t kInt32Max = std::numeric_limits<int32_t>::max();

void require(bool ok, PlanField field, const std::string& message) {
  if (!ok) {
    throw PlanError(field, message);
  }
}

void check_stage(const PipelineConfig& c, int64_t stage) {
  SIM_CHECK(stage >= 0 && stage < c.stages, "pipeline stage {} out of range [0, {})", stage,
            c.stages);
}

PipelinePass make_pass(PassKind kind, int64_t microbatch, int64_t chunk) {
  return PipelinePass{kind, static_cast<int32_t>(microbatch), static_cast<int32_t>(chunk)};
}

// Forward passes F(0..m-1), then backward passes in reverse, B(m-1..0) (GPipe Fig. 2c).
std::vector<PipelinePass> gpipe_order(int64_t m) {
  std::vector<PipelinePass> order;
  order.reserve(static_cast<size_t>(2 * m));
  for (int64_t i = 0; i < m; ++i) {
    order.push_back(make_pass(PassKind::kForward, i, 0));
  }
  for (int64_t i = m - 1; i >= 0; --i) {
    order.push_back(make_pass(PassKind::kBackward, i, 0));
  }
  return order;
}

// Forwards that stage s runs before its first backward in 1F1B and ZB-H1.
int64_t one_f_one_b_warmup(const PipelineConfig& c, int64_t stage) {
  return std::min(c.stages - stage - 1, c.microbatches);
}

// PipeDream-Flush as Megatron-LM runs it: warm-up forwards, steady (F, B) pairs, cool-down B's.
std::vector<PipelinePass> one_f_one_b_order(const PipelineConfig& c, int64_t stage) {
  const int64_t m = c.microbatches;
  const int64_t warmup = one_f_one_b_warmup(c, stage);
  std::vector<PipelinePass> order;
  order.reserve(static_cast<size_t>(2 * m));
  for (int64_t i = 0; i < warmup; ++i) {
    order.push_back(make_pass(PassKind::kForward, i, 0));
  }
  for (int64_t i = 0; i < m - warmup; ++i) {
    order.push_back(make_pass(PassKind::kForward, warmup + i, 0));
    order.push_back(make_pass(PassKind::kBackward, i, 0));
  }
  for (int64_t i = m - warmup; i < m; ++i) {
    order.push_back(make_pass(PassKind::kBackward, i, 0));
  }
  return order;
}

// ZB-H1: 1F1B with B and W split; stage s defers its W's by s steady iterations (FIFO).
std::vector<PipelinePass> zero_bubble_order(const PipelineConfig& c, int64_t stage) {
  const int64_t m = c.microbatches;
  const int64_t warmup = one_f_one_b_warmup(c, stage);
  std::vector<PipelinePass> order;
  order.reserve(static_cast<size_t>(3 * m));
  std::deque<int64_t> pending_w;
  auto backward_input = [&](int64_t mb) {
    order.push_back(make_pass(PassKind::kBackwardInput, mb, 0));
    pending_w.push_back(mb);
  };
  auto oldest_w = [&] {
    order.push_back(make_pass(PassKind::kBackwardWeight, pending_w.front(), 0));
    pending_w.pop_front();
  };
  for (int64_t i = 0; i < warmup; ++i) {
    order.push_back(make_pass(PassKind::kForward, i, 0));
  }
  for (int64_t i = 0; i < m - warmup; ++i) {
    order.push_back(make_pass(PassKind::kForward, warmup + i, 0));
    backward_input(i);
    if (i >= stage) {
      oldest_w();
    }
  }
  for (int64_t i = m - warmup; i < m; ++i) {
    backward_input(i);
    oldest_w();
  }
  while (!pending_w.empty()) {
    oldest_w();
  }
  return order;
}

// Megatron's warm-up count for interleaved 1F1B, capped at the m*v virtual microbatches.
int64_t interleaved_warmup(const PipelineConfig& c, int64_t stage) {
  const int64_t total = c.microbatches * c.virtual_stages;
  const int64_t formula = (c.stages - stage - 1) * 2 + (c.virtual_stages - 1) * c.stages;
  return std::min(formula, total);
}

// Megatron's schedule table: virtual microbatch k -> (microbatch, chunk). Microbatches go in
// groups of p; a group runs through chunk 0, then chunk 1, ...; backwards visit chunks reversed.
PipelinePass interleaved_pass(const PipelineConfig& c, int64_t k, bool forward) {
  const int64_t p = c.stages;
  const int64_t v = c.virtual_stages;
  const int64_t group = k / (p * v);
  const int64_t in_group = k % (p * v);
  const int64_t microbatch = group * p + in_group % p;
  const int64_t chunk = in_group / p;
  return forward ? make_pass(PassKind::kForward, microbatch, chunk)
                 : make_pass(PassKind::kBackward, microbatch, v - 1 - chunk);
}

std::vector<PipelinePass> interleaved_order(const PipelineConfig& c, int64_t stage) {
  const int64_t total = c.microbatches * c.virtual_stages;
  const int64_t warmup = interleaved_warmup(c, stage);
  std::vector<PipelinePass> order;
  order.reserve(static_cast<size_t>(2 * total));
  for (int64_t k = 0; k < warmup; ++k) {
    order.push_back(interleaved_pass(c, k, true));
  }
  for (int64_t k = 0; k < total - warmup; ++k) {
    order.push_back(interleaved_pass(c, warmup + k, true));
    order.push_back(interleaved_pass(c, k, false));
  }
  for (int64_t k = total - warmup; k < total; ++k) {
    order.push_back(interleaved_pass(c, k, false));
  }
  return order;
}

void validate_sizes(const PipelineConfig& c) {
  require(c.stages >= 1, PlanField::kPp,
          fmt::format("expected a positive number of pipeline stages, got {}", c.stages));
  require(c.microbatches >= 1 && c.microbatches <= kInt32Max, PlanField::kGbs,
          fmt::format("expected between 1 and {} microbatches per pipeline (global batch / (dp x "
                      "mbs)), got {}",
                      kInt32Max, c.microbatches));
  require(c.virtual_stages >= 1 && c.virtual_stages <= kInt32Max, PlanField::kVpp,
          fmt::format("expected a positive number of virtual stages per rank, got {}",
                      c.virtual_stages));
}

void validate_interleaved(const PipelineConfig& c) {
  require(c.virtual_stages >= 2, PlanField::kVpp,
          fmt::format("the interleaved schedule needs at least 2 model chunks per rank, got vpp "
                      "{} (with one chunk use the 1f1b schedule)",
                      c.virtual_stages));
  require(c.stages >= 2, PlanField::kPp,
          fmt::format("the interleaved schedule needs at least 2 pipeline stages, got pp {}",
                      c.stages));
  // The nearest multiples of pp (none below pp itself), as microbatches and as global batches.
  const int64_t below = (c.microbatches / c.stages) * c.stages;
  const int64_t above = below + c.stages;
  const std::string suggestion =
      below > 0 ? fmt::format("{} or {} microbatches (a global batch of {} or {} x dp x mbs)",
                              below, above, below, above)
                : fmt::format("{} microbatches (a global batch of {} x dp x mbs)", above, above);
  require(c.microbatches % c.stages == 0, PlanField::kGbs,
          fmt::format("the interleaved schedule runs microbatches in groups of pp (Megatron-LM's "
                      "rule): {} microbatches per pipeline is not a multiple of pp {}; use e.g. {}",
                      c.microbatches, c.stages, suggestion));
}

void validate_zero_bubble_v(const PipelineConfig& c) {
  require(c.stages >= 2, PlanField::kPp,
          fmt::format("the zbv schedule folds the model into a V over at least 2 pipeline stages, "
                      "got pp {}",
                      c.stages));
  require(c.virtual_stages == 2, PlanField::kVpp,
          fmt::format("the zbv schedule runs exactly 2 model chunks per rank (a V), got vpp {}; "
                      "set vpp 2",
                      c.virtual_stages));
}

// Chunk passes whose F has run and whose W (or whole backward) has not, at most, along `order`.
int64_t held_until_weights(const std::vector<PipelinePass>& order) {
  int64_t now = 0;
  int64_t peak = 0;
  for (const PipelinePass& p : order) {
    now += p.kind == PassKind::kForward                                             ? 1
           : p.kind == PassKind::kBackwardWeight || p.kind == PassKind::kBackward ? -1
                                                                                   : 0;
    peak = std::max(peak, now);
  }
  return peak;
}

}  // namespace

void validate(const PipelineConfig& c) {
  validate_sizes(c);
  if (c.schedule == PipelineSchedule::kInterleaved) {
    validate_interleaved(c);
    return;
  }
  if (c.schedule == PipelineSchedule::kZeroBubbleV) {
    validate_zero_bubble_v(c);
    return;
  }
  require(c.virtual_stages == 1, PlanField::kSchedule,
          fmt::format("the {} schedule runs one model chunk per rank, but vpp {} asks for {}; "
                      "model chunks need the interleaved schedule, or zbv for 2 (or vpp 1)",
                      to_string(c.schedule), c.virtual_stages, c.virtual_stages));
}

std::vector<PipelinePass> pipeline_order(const PipelineConfig& c, int64_t stage) {
  validate(c);
  check_stage(c, stage);
  switch (c.schedule) {
    case PipelineSchedule::kGpipe:
      return gpipe_order(c.microbatches);
    case PipelineSchedule::kOneFOneB:
      return one_f_one_b_order(c, stage);
    case PipelineSchedule::kInterleaved:
      return interleaved_order(c, stage);
    case PipelineSchedule::kZeroBubble:
      return zero_bubble_order(c, stage);
    case PipelineSchedule::kZeroBubbleV:
      return std::move(
          detail::zero_bubble_v_orders(c.stages, c.microbatches)[static_cast<size_t>(stage)]);
  }
  SIM_CHECK(false, "unknown pipeline schedule {}", static_cast<int>(c.schedule));
  return {};
}

std::vector<std::vector<PipelinePass>> pipeline_orders(const PipelineConfig& c) {
  validate(c);
  if (c.schedule == PipelineSchedule::kZeroBubbleV) {
    return detail::zero_bubble_v_orders(c.stages, c.microbatches);
  }
  std::vector<std::vector<PipelinePass>> out;
  out.reserve(static_cast<size_t>(c.stages));
  for (int64_t s = 0; s < c.stages; ++s) {
    out.push_back(pipeline_order(c, s));
  }
  return out;
}

int64_t virtual_stage(const PipelineConfig& c, int64_t stage, int64_t chunk) {
  check_stage(c, stage);
  SIM_CHECK(chunk >= 0 && chunk < c.virtual_stages, "model chunk {} out of range [0, {})", chunk,
            c.virtual_stages);
  if (c.schedule == PipelineSchedule::kZeroBubbleV && chunk == 1) {
    return 2 * c.stages - 1 - stage;
  }
  return chunk * c.stages + stage;
}

PipelinePeer virtual_stage_home(const PipelineConfig& c, int64_t vs) {
  SIM_CHECK(vs >= 0 && vs < c.stages * c.virtual_stages, "virtual stage {} out of range [0, {})",
            vs, c.stages * c.virtual_stages);
  const int64_t chunk = vs / c.stages;
  const int64_t stage = c.schedule == PipelineSchedule::kZeroBubbleV && chunk == 1
                            ? 2 * c.stages - 1 - vs
                            : vs % c.stages;
  return PipelinePeer{stage, static_cast<int32_t>(chunk)};
}

int64_t max_in_flight(const PipelineConfig& c, int64_t stage) {
  validate(c);
  check_stage(c, stage);
  switch (c.schedule) {
    case PipelineSchedule::kGpipe:
      return c.microbatches;
    case PipelineSchedule::kOneFOneB:
    case PipelineSchedule::kZeroBubble:
      return std::min(c.microbatches, c.stages - stage);
    case PipelineSchedule::kInterleaved: {
      const int64_t total = c.microbatches * c.virtual_stages;
      return std::min(interleaved_warmup(c, stage) + 1, total);
    }
    case PipelineSchedule::kZeroBubbleV:
      return held_until_weights(pipeline_order(c, stage));
  }
  SIM_CHECK(false, "unknown pipeline schedule {}", static_cast<int>(c.schedule));
  return 0;
}

std::vector<int64_t> max_in_flight_per_stage(const PipelineConfig& c) {
  validate(c);
  std::vector<int64_t> out;
  out.reserve(static_cast<size_t>(c.stages));
  if (c.schedule == PipelineSchedule::kZeroBubbleV) {
    for (const std::vector<PipelinePass>& order : pipeline_orders(c)) {
      out.push_back(held_until_weights(order));
    }
    return out;
  }
  for (int64_t s = 0; s < c.stages; ++s) {
    out.push_back(max_in_flight(c, s));
  }
  return out;
}

std::optional<PipelinePeer> forward_source(const PipelineConfig& c, int64_t stage, int32_t chunk) {
  const int64_t vs = virtual_stage(c, stage, chunk);
  if (vs == 0) {
    return std::nullopt;
  }
  return virtual_stage_home(c, vs - 1);
}

std::optional<PipelinePeer> forward_destination(const PipelineConfig& c, int64_t stage,
                                                int32_t chunk) {
  const int64_t vs = virtual_stage(c, stage, chunk);
  if (vs + 1 == c.stages * c.virtual_stages) {
    return std::nullopt;
  }
  return virtual_stage_home(c, vs + 1);
}

}  // namespace meshsim::workloads
