// ZB-V by greedy list scheduling at unit costs; the rule and its sources are in pipeline.h.
#include "pipeline_v.h"

#include <algorithm>
#include <array>
#include <deque>
#include <optional>
#include <utility>

#include "meshsim/sim/error.h"

namespace meshsim::workloads::detail {
namespace {

constexpr int64_t kNotRun = -1;

// End times (in unit steps) of every rank's F and B passes, by (chunk, rank, microbatch).
class EndTimes {
 public:
  EndTimes(int64_t stages, int64_t microbatches)
      : p_(stages), m_(microbatches), f_(static_cast<size_t>(2 * p_ * m_), kNotRun),
        b_(f_) {}
  int64_t& forward(int64_t chunk, int64_t rank, int64_t mb) { return f_[at(chunk, rank, mb)]; }
  int64_t& backward(int64_t chunk, int64_t rank, int64_t mb) { return b_[at(chunk, rank, mb)]; }
  // Whether the pass has finished by step `t`.
  bool forward_by(int64_t chunk, int64_t rank, int64_t mb, int64_t t) {
    return done(forward(chunk, rank, mb), t);
  }
  bool backward_by(int64_t chunk, int64_t rank, int64_t mb, int64_t t) {
    return done(backward(chunk, rank, mb), t);
  }

 private:
  static bool done(int64_t end, int64_t t) { return end != kNotRun && end <= t; }
  size_t at(int64_t chunk, int64_t rank, int64_t mb) const {
    return static_cast<size_t>((chunk * p_ + rank) * m_ + mb);
  }
  int64_t p_;
  int64_t m_;
  std::vector<int64_t> f_;
  std::vector<int64_t> b_;
};

struct RankState {
  std::array<int64_t, 2> forwards{};   // F's run, per chunk (the next F's microbatch)
  std::array<int64_t, 2> backwards{};  // B's run, per chunk
  int64_t held = 0;                    // chunk passes whose F has run and whose W has not
  std::deque<std::pair<int32_t, int32_t>> pending_w;  // (chunk, microbatch) after their B
};

PipelinePass pass(PassKind kind, int64_t chunk, int64_t mb) {
  return PipelinePass{kind, static_cast<int32_t>(mb), static_cast<int32_t>(chunk)};
}

// The better of two candidates: the older microbatch, chunk 1 on a tie.
std::optional<PipelinePass> better(std::optional<PipelinePass> a, std::optional<PipelinePass> b) {
  if (!a || !b) {
    return a ? a : b;
  }
  if (a->microbatch != b->microbatch) {
    return a->microbatch < b->microbatch ? a : b;
  }
  return a->chunk > b->chunk ? a : b;
}

class Greedy {
 public:
  Greedy(int64_t stages, int64_t microbatches)
      : p_(stages), m_(microbatches), end_(stages, microbatches),
        ranks_(static_cast<size_t>(stages)), orders_(static_cast<size_t>(stages)) {}

  std::vector<std::vector<PipelinePass>> run() {
    const int64_t total = 6 * m_ * p_;
    int64_t placed = 0;
    for (int64_t t = 0; placed < total; ++t) {
      int64_t now = 0;
      for (int64_t s = 0; s < p_; ++s) {
        if (const std::optional<PipelinePass> next = choose(s, t)) {
          place(s, *next, t);
          ++now;
        }
      }
      SIM_CHECK(now > 0, "the ZB-V construction stalls at step {} (pp {}, {} microbatches)", t, p_,
                m_);
      placed += now;
    }
    return std::move(orders_);
  }

 private:
  // B(chunk 1) follows its own F and the B of the next virtual stage (rank s-1); B(chunk 0)
  // follows the B of virtual stage s+1: chunk 0 of rank s+1, or chunk 1 of this rank at the turn.
  std::optional<PipelinePass> ready_backward(int64_t s, int64_t chunk, int64_t t) {
    const int64_t mb = ranks_[static_cast<size_t>(s)].backwards[static_cast<size_t>(chunk)];
    if (mb >= m_) {
      return std::nullopt;
    }
    const bool ready = chunk == 1 ? end_.forward_by(1, s, mb, t) &&
                                        (s == 0 || end_.backward_by(1, s - 1, mb, t))
                       : s + 1 == p_ ? end_.backward_by(1, s, mb, t)
                                     : end_.backward_by(0, s + 1, mb, t);
    return ready ? std::optional(pass(PassKind::kBackwardInput, chunk, mb)) : std::nullopt;
  }

  // F(chunk 0) follows F(chunk 0) of rank s-1; F(chunk 1) follows F(chunk 1) of rank s+1, or
  // F(chunk 0) of this rank at the turn. Chunk 0 admits at most 2(p-s)-1 microbatches ahead of
  // chunk 1.
  std::optional<PipelinePass> ready_forward(int64_t s, int64_t chunk, int64_t t) {
    const RankState& r = ranks_[static_cast<size_t>(s)];
    const int64_t mb = r.forwards[static_cast<size_t>(chunk)];
    if (mb >= m_) {
      return std::nullopt;
    }
    bool ready = false;
    if (chunk == 0) {
      ready = (s == 0 || end_.forward_by(0, s - 1, mb, t)) &&
              r.forwards[0] - r.forwards[1] < 2 * (p_ - s) - 1;
    } else {
      ready = s + 1 == p_ ? end_.forward_by(0, s, mb, t) : end_.forward_by(1, s + 1, mb, t);
    }
    return ready ? std::optional(pass(PassKind::kForward, chunk, mb)) : std::nullopt;
  }

  std::optional<PipelinePass> choose(int64_t s, int64_t t) {
    if (auto b = better(ready_backward(s, 1, t), ready_backward(s, 0, t))) {
      return b;
    }
    const RankState& r = ranks_[static_cast<size_t>(s)];
    if (r.held < 2 * p_) {
      if (auto f = better(ready_forward(s, 1, t), ready_forward(s, 0, t))) {
        return f;
      }
    }
    if (!r.pending_w.empty()) {
      return PipelinePass{PassKind::kBackwardWeight, r.pending_w.front().second,
                          r.pending_w.front().first};
    }
    return std::nullopt;
  }

  void place(int64_t s, const PipelinePass& p, int64_t t) {
    RankState& r = ranks_[static_cast<size_t>(s)];
    const auto chunk = static_cast<size_t>(p.chunk);
    switch (p.kind) {
      case PassKind::kForward:
        end_.forward(p.chunk, s, p.microbatch) = t + 1;
        ++r.forwards[chunk];
        ++r.held;
        break;
      case PassKind::kBackwardInput:
        end_.backward(p.chunk, s, p.microbatch) = t + 1;
        ++r.backwards[chunk];
        r.pending_w.emplace_back(p.chunk, p.microbatch);
        break;
      case PassKind::kBackwardWeight:
        r.pending_w.pop_front();
        --r.held;
        break;
      case PassKind::kBackward:
        SIM_CHECK(false, "ZB-V splits every backward");
    }
    orders_[static_cast<size_t>(s)].push_back(p);
  }

  int64_t p_;
  int64_t m_;
  EndTimes end_;
  std::vector<RankState> ranks_;
  std::vector<std::vector<PipelinePass>> orders_;
};

}  // namespace

std::vector<std::vector<PipelinePass>> zero_bubble_v_orders(int64_t stages, int64_t microbatches) {
  SIM_CHECK(stages >= 2 && microbatches >= 1, "ZB-V needs pp >= 2 and a microbatch, got {} and {}",
            stages, microbatches);
  return Greedy(stages, microbatches).run();
}

}  // namespace meshsim::workloads::detail
