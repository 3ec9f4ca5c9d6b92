// Which ranks a trace shows: the parser behind `--trace-ranks`.
//
// Grammar (items are separated by commas, spaces around items are ignored; the selection is the
// union of its items):
//   all            every rank
//   N              one rank                    e.g. 64
//   A-B            ranks A..B inclusive        e.g. 0-7
//   stage:S        every rank of pipeline stage S (S may be a range A-B)
//   node:N         every rank on node N (N may be a range A-B)
// Errors are InputError("--trace-ranks", "<the offending item>", what was wrong and what was
// expected), e.g. `--trace-ranks: "7-0": the range is reversed (expected low-high, e.g. 0-7)`.
// Ranks are the ranks of the run (0 .. ranks-1): simulated ranks when the caller passes those.
#pragma once

#include <cstdint>
#include <functional>
#include <string_view>
#include <vector>

#include "meshsim/sim/ids.h"

namespace meshsim::traces {

using RankPredicate = std::function<bool(RankId)>;

// Maps needed by `stage:` and `node:` items; an item whose map is missing is an InputError.
struct RankLayout {
  std::function<int64_t(int64_t rank)> stage_of;
  std::function<int64_t(int64_t rank)> node_of;
};

class RankSelection {
 public:
  // Every one of `ranks` ranks.
  static RankSelection all(int64_t ranks);
  // Exactly the listed ranks, each in 0..ranks-1 (SIM_CHECK).
  static RankSelection of(int64_t ranks, const std::vector<int64_t>& selected);

  bool contains(RankId rank) const;
  bool is_all() const;
  int64_t size() const;                // number of selected ranks
  std::vector<int64_t> ranks() const;  // the selected ranks, ascending
  // A predicate for TraceOptions::include_rank (it holds a copy of the selection).
  RankPredicate predicate() const;

 private:
  explicit RankSelection(int64_t ranks) : member_(static_cast<size_t>(ranks), false) {}
  friend RankSelection parse_rank_selection(std::string_view, int64_t, const RankLayout&);
  std::vector<bool> member_;
};

// Parses a --trace-ranks value for a run of `ranks` ranks (> 0).
RankSelection parse_rank_selection(std::string_view spec, int64_t ranks,
                                   const RankLayout& layout = {});

}  // namespace meshsim::traces
