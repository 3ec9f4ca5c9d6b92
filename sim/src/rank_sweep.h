// Private to the engine: a rank's breakdown (breakdown.h) computed online, as a sweep over the
// instants its ops start and end.
//
// The engine's clock never goes back and every op starts and ends at the engine's current time, so
// counting the ops in progress per kind between consecutive instants gives the union lengths
// exactly: between two instants, time is compute if a compute op runs, communication if a
// communication op runs, exposed if communication runs and no compute does (and per category
// likewise). The figures equal analyze()'s over a recorded timeline to the picosecond (tested),
// in O(1) per op start or end (O(categories) while communication is exposed) and without
// recording anything.
#pragma once

#include <algorithm>
#include <array>
#include <bit>
#include <cstdint>
#include <vector>

#include "meshsim/sim/breakdown.h"
#include "program_info.h"

namespace meshsim::detail {

class RankSweep {
 public:
  void on_start(SimTime now, const OpMeta& m) {
    advance(now);
    if (m.kind == OpKind::kCompute) {
      ++compute_active_;
      return;
    }
    ++comm_active_;
    if (m.category != kNoCategory) {
      if (categories_ <= m.category) {
        categories_ = static_cast<uint16_t>(m.category + 1u);
        if (categories_ > kInline) {
          more_active_.resize(categories_ - kInline, 0);
          more_exposed_.resize(categories_ - kInline);
        }
      }
      if (++active(m.category) == 1 && m.category < kInline) {
        inline_active_ |= static_cast<uint8_t>(1u << m.category);
      }
    }
  }

  void on_end(SimTime now, const OpMeta& m, Duration length, Flops flops) {
    advance(now);
    by_class_[m.op_class] += length;
    if (m.kind == OpKind::kCompute) {
      --compute_active_;
      flops_ += flops;
      return;
    }
    --comm_active_;
    if (m.category != kNoCategory) {
      if (--active(m.category) == 0 && m.category < kInline) {
        inline_active_ &= static_cast<uint8_t>(~(1u << m.category));
      }
    }
  }

  // The breakdown of a step that ends at `step_end` (after the rank's last op).
  RankBreakdown result(SimTime step_end) const {
    RankBreakdown b;
    b.compute = compute_;
    b.comm = comm_;
    b.exposed_comm = exposed_comm_;
    b.idle = step_end.since_start() - (compute_ + exposed_comm_);
    b.by_class = by_class_;
    b.flops = flops_;
    b.exposed_by_category.resize(categories_);
    for (uint16_t c = 0; c < categories_; ++c) {
      b.exposed_by_category[c] = c < kInline ? exposed_[c] : more_exposed_[c - kInline];
    }
    return b;
  }

 private:
  void advance(SimTime now) {
    const Duration dt = now - last_;
    last_ = now;
    if (dt <= Duration::zero()) {
      return;
    }
    if (compute_active_ > 0) {
      compute_ += dt;
    }
    if (comm_active_ == 0) {
      return;
    }
    comm_ += dt;
    if (compute_active_ > 0) {
      return;
    }
    exposed_comm_ += dt;
    for (unsigned bits = inline_active_; bits != 0; bits &= bits - 1) {
      exposed_[static_cast<size_t>(std::countr_zero(bits))] += dt;
    }
    for (size_t c = 0; c < more_active_.size(); ++c) {
      if (more_active_[c] > 0) {
        more_exposed_[c] += dt;
      }
    }
  }

  // What every start and end touches first (one cache line), then the rest.
  SimTime last_;
  uint32_t compute_active_ = 0;
  uint32_t comm_active_ = 0;
  Duration compute_;
  Duration comm_;
  Duration exposed_comm_;
  Flops flops_;
  std::array<Duration, kNumOpClasses> by_class_{};
  // Communication ops in progress and exposed time per category: the first kInline inline (no
  // pointer to chase per event), any further ones in the vectors.
  static constexpr uint16_t kInline = 8;
  uint16_t categories_ = 0;  // 1 + the largest category seen
  uint8_t inline_active_ = 0;  // bit c: active_[c] > 0
  std::array<uint32_t, kInline> active_{};
  std::array<Duration, kInline> exposed_{};
  std::vector<uint32_t> more_active_;
  std::vector<Duration> more_exposed_;

  uint32_t& active(uint16_t c) { return c < kInline ? active_[c] : more_active_[c - kInline]; }
};

}  // namespace meshsim::detail
