#include "meshsim/studies/plan_goodput.h"

#include <algorithm>
#include <numeric>

#include "meshsim/scenario/located.h"

namespace meshsim::studies {

GoodputModel goodput_model(const scenario::StepReport& r, const workloads::ParallelPlan& plan,
                           const CheckpointPolicy& policy, const FailureTable& table,
                           const ComponentCounts& counts, double tokens) {
  CheckpointSetup setup;
  setup.state = checkpoint_bytes(r.parameters, plan.state.weight, plan.state.optimizer);
  if (policy.node_bandwidth) {
    setup.node_bandwidth = policy.node_bandwidth;
    const int64_t nodes = std::max<int64_t>(counts.nodes, 1);
    setup.writers = checkpoint_writers(r.parameters, plan, counts.gpus / nodes, counts.nodes);
  }
  setup.devices = r.devices;
  setup.storage_bandwidth = policy.storage_bandwidth;
  setup.async = policy.async;
  setup.snapshot_bandwidth = policy.snapshot_bandwidth;
  setup.relaunch = policy.relaunch;
  GoodputModel m;
  m.work_s = tokens / r.tokens_per_s;
  m.categories = table.categories;
  m.rates = failure_rates(table, counts);
  m.costs = checkpoint_costs(setup);
  return m;
}

std::vector<PlanGoodput> rank_by_goodput(const scenario::Scenario& base,
                                         const CheckpointPolicy& policy, const FailureTable& table,
                                         double tokens, std::vector<PlanRow>& rows) {
  const ComponentCounts counts = scenario::located(
      base, [&] { return count_components(scenario::load_cluster(base)); });
  std::vector<PlanGoodput> goodput;
  for (const PlanRow& row : rows) {
    goodput.push_back(
        plan_goodput(goodput_model(row.report, row.plan, policy, table, counts, tokens)));
  }
  std::vector<size_t> order(rows.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t x, size_t y) { return goodput[x].days < goodput[y].days; });
  std::vector<PlanRow> ranked;
  std::vector<PlanGoodput> ranked_goodput;
  for (const size_t i : order) {
    ranked.push_back(std::move(rows[i]));
    ranked_goodput.push_back(goodput[i]);
  }
  rows = std::move(ranked);
  return ranked_goodput;
}

}  // namespace meshsim::studies
