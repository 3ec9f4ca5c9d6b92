#include "meshsim/traces/rank_selection.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <climits>
#include <memory>
#include <optional>
#include <string>

#include "meshsim/sim/error.h"
#include "meshsim/sim/text.h"

namespace meshsim::traces {
namespace {

constexpr std::string_view kFlag = "--trace-ranks";
constexpr std::string_view kExpected =
    R"(expected "all", a rank N, a range A-B, stage:S or node:N, comma-separated, e.g. "0-7,64")";

[[noreturn]] void fail(std::string_view where, const std::string& message) {
  throw InputError(std::string(kFlag), fmt::format("\"{}\"", where), message);
}

// A non-negative whole number made of digits only (no sign, no spaces).
std::optional<int64_t> parse_rank_number(std::string_view s) {
  if (s.empty() || s.find_first_not_of("0123456789") != std::string_view::npos) {
    return std::nullopt;
  }
  int64_t v = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size()) {
    return std::nullopt;
  }
  return v;
}

struct Range {
  int64_t lo = 0;
  int64_t hi = 0;
};

// "N" or "A-B"; `what` names the unit in messages ("rank", "stage", "node").
Range parse_range(std::string_view text, std::string_view item, std::string_view what) {
  const size_t dash = text.find('-');
  if (dash == std::string_view::npos) {
    const auto n = parse_rank_number(text);
    if (!n) {
      fail(item, fmt::format("'{}' is not a {} number ({})", text, what, kExpected));
    }
    return {*n, *n};
  }
  const auto lo = parse_rank_number(trim(text.substr(0, dash)));
  const auto hi = parse_rank_number(trim(text.substr(dash + 1)));
  if (!lo || !hi) {
    fail(item, fmt::format("'{}' is not a {} range (expected A-B with whole numbers, e.g. 0-7)",
                           text, what));
  }
  if (*lo > *hi) {
    fail(item, "the range is reversed (expected low-high, e.g. 0-7)");
  }
  return {*lo, *hi};
}

std::string range_text(Range r) {
  return r.lo == r.hi ? fmt::format("{}", r.lo) : fmt::format("{}-{}", r.lo, r.hi);
}

void select_ranks(std::vector<bool>& member, Range r, std::string_view item) {
  const auto ranks = static_cast<int64_t>(member.size());
  if (r.hi >= ranks) {
    fail(item, fmt::format("rank {} is out of range (the run has {} ranks: 0-{})", r.hi, ranks,
                           ranks - 1));
  }
  for (int64_t i = r.lo; i <= r.hi; ++i) {
    member[static_cast<size_t>(i)] = true;
  }
}

// Selects every rank whose `map` value lies in `r`.
void select_by(std::vector<bool>& member, const std::function<int64_t(int64_t)>& map, Range r,
               std::string_view item, std::string_view what) {
  if (!map) {
    fail(item, fmt::format("{}: selections are not available here (the {} of each rank is "
                           "unknown); select ranks by number instead, e.g. 0-7",
                           what, what));
  }
  bool any = false;
  int64_t min_seen = INT64_MAX;
  int64_t max_seen = INT64_MIN;
  for (size_t i = 0; i < member.size(); ++i) {
    const int64_t v = map(static_cast<int64_t>(i));
    min_seen = std::min(min_seen, v);
    max_seen = std::max(max_seen, v);
    if (v >= r.lo && v <= r.hi) {
      member[i] = true;
      any = true;
    }
  }
  if (!any) {
    fail(item, fmt::format("no rank is in {} {} (this run has {}s {}-{})", what, range_text(r),
                           what, min_seen, max_seen));
  }
}

void select_item(std::vector<bool>& member, std::string_view item, const RankLayout& layout) {
  if (item == "all") {
    member.assign(member.size(), true);
    return;
  }
  const size_t colon = item.find(':');
  if (colon == std::string_view::npos) {
    select_ranks(member, parse_range(item, item, "rank"), item);
    return;
  }
  const std::string_view key = trim(item.substr(0, colon));
  const std::string_view value = trim(item.substr(colon + 1));
  if (key == "stage") {
    select_by(member, layout.stage_of, parse_range(value, item, "stage"), item, "stage");
  } else if (key == "node") {
    select_by(member, layout.node_of, parse_range(value, item, "node"), item, "node");
  } else {
    fail(item, fmt::format("unknown selector '{}:' ({})", key, kExpected));
  }
}

}  // namespace

RankSelection RankSelection::all(int64_t ranks) {
  SIM_CHECK(ranks > 0, "a selection over {} ranks", ranks);
  RankSelection s(ranks);
  s.member_.assign(s.member_.size(), true);
  return s;
}

RankSelection RankSelection::of(int64_t ranks, const std::vector<int64_t>& selected) {
  SIM_CHECK(ranks > 0, "a selection over {} ranks", ranks);
  RankSelection s(ranks);
  for (const int64_t r : selected) {
    SIM_CHECK(r >= 0 && r < ranks, "rank {} outside 0..{}", r, ranks - 1);
    s.member_[static_cast<size_t>(r)] = true;
  }
  return s;
}

bool RankSelection::contains(RankId rank) const {
  return rank.index() < member_.size() && member_[rank.index()];
}

bool RankSelection::is_all() const {
  return std::find(member_.begin(), member_.end(), false) == member_.end();
}

int64_t RankSelection::size() const {
  return static_cast<int64_t>(std::count(member_.begin(), member_.end(), true));
}

std::vector<int64_t> RankSelection::ranks() const {
  std::vector<int64_t> out;
  for (size_t i = 0; i < member_.size(); ++i) {
    if (member_[i]) {
      out.push_back(static_cast<int64_t>(i));
    }
  }
  return out;
}

RankPredicate RankSelection::predicate() const {
  // shared_ptr: std::function copies its target, and every copy of the predicate (the writers
  // keep one each) can share one immutable membership table.
  auto shared = std::make_shared<const std::vector<bool>>(member_);
  return [shared](RankId r) { return r.index() < shared->size() && (*shared)[r.index()]; };
}

RankSelection parse_rank_selection(std::string_view spec, int64_t ranks, const RankLayout& layout) {
  SIM_CHECK(ranks > 0, "parse_rank_selection over {} ranks", ranks);
  if (trim(spec).empty()) {
    throw InputError(std::string(kFlag), "", fmt::format("the selection is empty ({})", kExpected));
  }
  RankSelection s(ranks);
  size_t begin = 0;
  for (int index = 1;; ++index) {
    const size_t comma = spec.find(',', begin);
    const std::string_view item = trim(
        spec.substr(begin, comma == std::string_view::npos ? spec.size() - begin : comma - begin));
    if (item.empty()) {
      fail(spec, fmt::format("item {} is empty ({})", index, kExpected));
    }
    select_item(s.member_, item, layout);
    if (comma == std::string_view::npos) {
      break;
    }
    begin = comma + 1;
  }
  return s;
}

}  // namespace meshsim::traces
