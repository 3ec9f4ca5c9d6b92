// Goodput of a simulated step over a whole run (goodput.h), and `meshsim plan --rank-by goodput`:
// the searched plans re-ranked by their expected days to train under failures, where checkpoints
// differ by plan: with a per-node storage bandwidth, the replicated state is written by one DP
// replica's nodes and the sharded state by all (CheckpointWriters), so a plan with sharded state
// can win over a slightly faster step whose checkpoint funnels through few nodes.
#pragma once

#include <optional>
#include <vector>

#include "meshsim/scenario/scenario.h"
#include "meshsim/scenario/step_report.h"
#include "meshsim/sim/units.h"
#include "meshsim/studies/failures.h"
#include "meshsim/studies/goodput.h"
#include "meshsim/studies/plan_table.h"
#include "meshsim/workloads/parallel.h"

namespace meshsim::studies {

// How a run checkpoints and restarts, as the user gave it (the edge reads its flags into it).
struct CheckpointPolicy {
  BytesPerSec storage_bandwidth;              // aggregate write and read
  std::optional<BytesPerSec> node_bandwidth;  // each node's; absent: only the aggregate binds
  bool async = false;                         // snapshot to host memory, write behind it
  BytesPerSec snapshot_bandwidth;             // per device, device -> host (async only)
  Duration relaunch;                          // after an interruption, besides the load
};

// The goodput model of a simulated step `r` of `plan` training `tokens`: its checkpoint (the
// writers of `plan` when the policy bounds each node), the table's failure rates for the
// cluster's `counts`. GoodputError (checkpoint_costs) on a non-positive bandwidth.
GoodputModel goodput_model(const scenario::StepReport& r, const workloads::ParallelPlan& plan,
                           const CheckpointPolicy& policy, const FailureTable& table,
                           const ComponentCounts& counts, double tokens);

// Re-ranks `rows` (stably) by expected days to train at each plan's optimal checkpoint interval,
// on the cluster of `base`; returns each row's goodput in the new order. Errors located where
// `base`'s values came from (the cluster's loader), GoodputError as goodput_model.
std::vector<PlanGoodput> rank_by_goodput(const scenario::Scenario& base,
                                         const CheckpointPolicy& policy, const FailureTable& table,
                                         double tokens, std::vector<PlanRow>& rows);

}  // namespace meshsim::studies
