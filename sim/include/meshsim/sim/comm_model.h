// Communication is a shared resource the engine advances (docs/architecture.md), through this seam.
//
// The engine starts a collective (when every member of its group has reached it) or a send/recv
// (when both sides have), and gets a handle. It never asks how long it takes: it advances the
// model in time, to the earliest of its own next event and the model's next completion, and
// learns which communications completed then. Between a start and its completion the model may
// re-share its network among everything in flight as often as it likes (collectives/: every
// link re-shared max-min fairly whenever a transfer starts or ends).
// Contract:
//  * times never go back: `now` of a start and `limit` of an advance are >= the last time the
//    model reported or was given;
//  * advance(limit) returns the time it reached (<= limit) and the transfers completed exactly
//    then, in id order; with nothing completed, it has reached `limit`. SimTime::max() as the
//    limit is allowed only while something is in flight;
//  * a transfer id is the model's until it reports it finished; it may be reused after.
// IsolatedCommModel adapts a function of durations (test doubles, single-device runs, fixed
// cost models) to the seam: its transfers share nothing.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "meshsim/sim/ids.h"
#include "meshsim/sim/program.h"
#include "meshsim/sim/units.h"

namespace meshsim {

// A communication planned once and started many times (CommModel::plan_collective, plan_p2p).
struct CommPlan {
  uint32_t id = 0;
};

struct CommAdvance {
  SimTime time;
  std::vector<TransferId> finished;
};

class CommModel {
 public:
  virtual ~CommModel() = default;
  // A collective over `group` (global ranks in group order) starts at `now`.
  virtual TransferId start_collective(SimTime now, CollectiveKind kind, Bytes bytes,
                                      std::span<const RankId> group) = 0;
  // `bytes` start moving from `src` to `dst` (global ranks) at `now`.
  virtual TransferId start_p2p(SimTime now, RankId src, RankId dst, Bytes bytes) = 0;
  virtual CommAdvance advance(SimTime limit) = 0;
  // Transfers started and not yet reported finished.
  virtual size_t in_flight() const = 0;

  // For a caller that starts the same communication many times (the engine: a group's
  // collectives, a channel's sends): a plan stands for its arguments for the model's lifetime,
  // and start_planned(now, plan) is start_collective or start_p2p with them. These defaults
  // remember the arguments; a model that looks its costs up per start (NetworkCommModel)
  // overrides them to look up once. A model overrides all three or none: plan ids are its own.
  virtual CommPlan plan_collective(CollectiveKind kind, Bytes bytes,
                                   std::span<const RankId> group);
  virtual CommPlan plan_p2p(RankId src, RankId dst, Bytes bytes);
  virtual TransferId start_planned(SimTime now, CommPlan plan);

 private:
  struct Remembered {
    CollectiveKind kind = CollectiveKind::kAllReduce;
    Bytes bytes;
    std::vector<RankId> group;  // empty for a send
    RankId src;
    RankId dst;
  };
  std::vector<Remembered> remembered_;
};

class IsolatedCommModel final : public CommModel {
 public:
  using CollectiveTime = std::function<Duration(CollectiveKind, Bytes, std::span<const RankId>)>;
  using P2pTime = std::function<Duration(RankId, RankId, Bytes)>;
  IsolatedCommModel(CollectiveTime collective, P2pTime p2p);

  TransferId start_collective(SimTime now, CollectiveKind kind, Bytes bytes,
                              std::span<const RankId> group) override;
  TransferId start_p2p(SimTime now, RankId src, RankId dst, Bytes bytes) override;
  CommAdvance advance(SimTime limit) override;
  size_t in_flight() const override { return ends_.size(); }

 private:
  struct End {
    SimTime time;
    uint32_t id = 0;
    bool operator>(const End& o) const { return time != o.time ? time > o.time : id > o.id; }
  };
  CollectiveTime collective_;
  P2pTime p2p_;
  std::vector<End> ends_;  // a min-heap on (time, id)
  uint32_t next_id_ = 0;
  SimTime clock_;

  TransferId push(SimTime now, Duration d);
};

}  // namespace meshsim
