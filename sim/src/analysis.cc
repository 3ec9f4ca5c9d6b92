#include "meshsim/sim/analysis.h"

#include <algorithm>

namespace meshsim {
namespace {

using Spans = std::vector<std::pair<SimTime, SimTime>>;

// Sorts and merges overlapping or touching spans in place.
void merge(Spans& s) {
  std::sort(s.begin(), s.end());
  size_t out = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i].second <= s[i].first) {
      continue;
    }
    if (out > 0 && s[i].first <= s[out - 1].second) {
      s[out - 1].second = std::max(s[out - 1].second, s[i].second);
    } else {
      s[out++] = s[i];
    }
  }
  s.resize(out);
}

Duration total(const Spans& merged) {
  Duration d;
  for (const auto& [a, b] : merged) {
    d += b - a;
  }
  return d;
}

}  // namespace

Duration union_length(Spans spans) {
  merge(spans);
  return total(spans);
}

Duration difference_length(Spans a, Spans b) {
  merge(a);
  merge(b);
  // Two-pointer sweep: subtract the overlap of each span of `a` with the spans of `b`.
  Duration covered;
  size_t j = 0;
  for (const auto& [s, e] : a) {
    while (j < b.size() && b[j].second <= s) {
      ++j;
    }
    for (size_t k = j; k < b.size() && b[k].first < e; ++k) {
      const SimTime lo = std::max(s, b[k].first);
      const SimTime hi = std::min(e, b[k].second);
      if (hi > lo) {
        covered += hi - lo;
      }
    }
  }
  return total(a) - covered;
}

std::vector<RankBreakdown> analyze(const Timeline& timeline, const Simulation& sim,
                                   SimTime step_end) {
  const size_t n = sim.num_ranks();
  std::vector<Spans> compute(n);
  std::vector<Spans> comm(n);
  std::vector<std::array<Spans, kNumCategories>> comm_by(n);
  std::vector<RankBreakdown> out(n);
  for (const OpRecord& r : timeline.ops) {
    const Op& op = sim.program_of(r.rank).op(r.op);
    RankBreakdown& b = out[r.rank.index()];
    const Duration d = r.end - r.start;
    if (const auto* c = std::get_if<ComputeWork>(&op.work)) {
      compute[r.rank.index()].emplace_back(r.start, r.end);
      b.by_class[static_cast<size_t>(c->op_class)] += d;
      b.flops += c->flops;
    } else {
      comm[r.rank.index()].emplace_back(r.start, r.end);
      const size_t cat = std::min<size_t>(op.labels.category.value_or(0), kNumCategories - 1);
      comm_by[r.rank.index()][cat].emplace_back(r.start, r.end);
      b.by_class[static_cast<size_t>(OpClass::kCommunication)] += d;
    }
  }
  for (size_t i = 0; i < n; ++i) {
    RankBreakdown& b = out[i];
    b.compute = union_length(compute[i]);
    b.comm = union_length(comm[i]);
    b.exposed_comm = difference_length(comm[i], compute[i]);
    for (size_t c = 0; c < kNumCategories; ++c) {
      if (!comm_by[i][c].empty()) {
        b.exposed_by_category[c] = difference_length(std::move(comm_by[i][c]), compute[i]);
      }
    }
    Spans all = compute[i];
    all.insert(all.end(), comm[i].begin(), comm[i].end());
    b.idle = step_end.since_start() - union_length(std::move(all));
  }
  return out;
}

}  // namespace meshsim
