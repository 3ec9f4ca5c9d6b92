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

// Length of the intersection of two merged (sorted, disjoint) span lists: a two-pointer sweep.
Duration overlap_merged(const Spans& a, const Spans& b) {
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
  return covered;
}
}  // namespace

Duration union_length(Spans spans) {
  merge(spans);
  return total(spans);
}

Duration difference_length(Spans a, Spans b) {
  merge(a);
  merge(b);
  return total(a) - overlap_merged(a, b);
}

std::vector<RankBreakdown> analyze(const Timeline& timeline, const Simulation& sim,
                                   SimTime step_end) {
  const size_t n = sim.num_ranks();
  std::vector<Spans> compute(n);
  std::vector<Spans> comm(n);
  std::vector<std::vector<Spans>> comm_by(n);  // [rank][category]
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
      if (const std::optional<OpCategory> category = op.labels.category) {
        std::vector<Spans>& by = comm_by[r.rank.index()];
        by.resize(std::max(by.size(), category->index() + 1));
        by[category->index()].emplace_back(r.start, r.end);
      }
      b.by_class[static_cast<size_t>(OpClass::kCommunication)] += d;
    }
  }
  // Each rank's span lists are merged once; every quantity comes from those merged lists.
  for (size_t i = 0; i < n; ++i) {
    RankBreakdown& b = out[i];
    merge(compute[i]);
    merge(comm[i]);
    b.compute = total(compute[i]);
    b.comm = total(comm[i]);
    b.exposed_comm = b.comm - overlap_merged(comm[i], compute[i]);
    b.exposed_by_category.resize(comm_by[i].size());
    for (size_t c = 0; c < comm_by[i].size(); ++c) {
      Spans& cat = comm_by[i][c];
      if (!cat.empty()) {
        merge(cat);
        b.exposed_by_category[c] = total(cat) - overlap_merged(cat, compute[i]);
      }
    }
    // |compute ∪ comm| = |compute| + |comm| - |compute ∩ comm| = compute + exposed_comm.
    b.idle = step_end.since_start() - (b.compute + b.exposed_comm);
  }
  return out;
}

}  // namespace meshsim
