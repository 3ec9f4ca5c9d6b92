#include "meshsim/sim/comm_model.h"

#include <algorithm>
#include <functional>

#include "meshsim/sim/error.h"

namespace meshsim {

CommPlan CommModel::plan_collective(CollectiveKind kind, Bytes bytes,
                                    std::span<const RankId> group) {
  SIM_CHECK(!group.empty(), "a collective planned over no rank");
  remembered_.push_back(Remembered{kind, bytes, {group.begin(), group.end()}, {}, {}});
  return CommPlan{static_cast<uint32_t>(remembered_.size() - 1)};
}

CommPlan CommModel::plan_p2p(RankId src, RankId dst, Bytes bytes) {
  remembered_.push_back(Remembered{CollectiveKind::kAllReduce, bytes, {}, src, dst});
  return CommPlan{static_cast<uint32_t>(remembered_.size() - 1)};
}

TransferId CommModel::start_planned(SimTime now, CommPlan plan) {
  SIM_CHECK(plan.id < remembered_.size(), "unknown communication plan {}", plan.id);
  const Remembered& r = remembered_[plan.id];
  return r.group.empty() ? start_p2p(now, r.src, r.dst, r.bytes)
                         : start_collective(now, r.kind, r.bytes, r.group);
}

IsolatedCommModel::IsolatedCommModel(CollectiveTime collective, P2pTime p2p)
    : collective_(std::move(collective)), p2p_(std::move(p2p)) {}

TransferId IsolatedCommModel::push(SimTime now, Duration d) {
  SIM_CHECK(d >= Duration::zero(), "negative communication time {} ps", d.ps());
  SIM_CHECK(now >= clock_, "communication started at {} ps, before {} ps", now.ps(), clock_.ps());
  clock_ = now;
  const uint32_t id = next_id_++;
  ends_.push_back(End{now + d, id});
  std::push_heap(ends_.begin(), ends_.end(), std::greater<>());
  return TransferId(id);
}

TransferId IsolatedCommModel::start_collective(SimTime now, CollectiveKind kind, Bytes bytes,
                                               std::span<const RankId> group) {
  return push(now, collective_(kind, bytes, group));
}

TransferId IsolatedCommModel::start_p2p(SimTime now, RankId src, RankId dst, Bytes bytes) {
  return push(now, p2p_(src, dst, bytes));
}

CommAdvance IsolatedCommModel::advance(SimTime limit) {
  SIM_CHECK(limit >= clock_, "advance to {} ps, before {} ps", limit.ps(), clock_.ps());
  CommAdvance out;
  if (ends_.empty() || ends_.front().time > limit) {
    SIM_CHECK(limit < SimTime::max(), "advance without a limit and nothing in flight");
    clock_ = limit;
    out.time = limit;
    return out;
  }
  clock_ = ends_.front().time;
  out.time = clock_;
  while (!ends_.empty() && ends_.front().time == clock_) {
    std::pop_heap(ends_.begin(), ends_.end(), std::greater<>());
    out.finished.emplace_back(ends_.back().id);
    ends_.pop_back();
  }
  return out;
}

}  // namespace meshsim
