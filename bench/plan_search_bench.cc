// The plan search on the default problem (issue 14): Llama-3-70B on 2048 H100s, sequence 8192,
// global batch 512 sequences.
//  * BM_ConsiderDefaultProblem: enumerate every plan, check it, bound its memory and its step time
//    (one simulation at the end): items_per_second = plans considered per second (target >= 2,000
//    on 2 cores).
//  * BM_SearchDefaultProblemTop20: the whole search as `meshsim plan` runs it (top 20, at most 40
//    simulations, 2 threads): seconds per search (target: under 10 s).
#include <benchmark/benchmark.h>

#include "meshsim/studies/plan_search.h"

namespace meshsim {
namespace {

void BM_ConsiderDefaultProblem(benchmark::State& state) {
  const scenario::Scenario base = scenario::default_scenario();
  studies::SearchOptions o;
  o.top = 1;
  o.max_simulations = 1;
  int64_t considered = 0;
  for (auto _ : state) {
    const studies::SearchResult r = studies::search_plans(base, o);
    considered += r.considered;
    state.counters["considered"] = static_cast<double>(r.considered);
    state.counters["bounded"] = static_cast<double>(r.considered - r.pruned_memory);
  }
  state.SetItemsProcessed(considered);
}

void BM_SearchDefaultProblemTop20(benchmark::State& state) {
  const scenario::Scenario base = scenario::default_scenario();
  studies::SearchOptions o;
  o.top = 20;
  o.max_simulations = 40;
  o.jobs = 2;
  for (auto _ : state) {
    const studies::SearchResult r = studies::search_plans(base, o);
    state.counters["simulated"] = static_cast<double>(r.simulated);
    state.counters["best_step_s"] = r.top.front().report.step_time.seconds();
  }
}

BENCHMARK(BM_ConsiderDefaultProblem)->Unit(benchmark::kSecond)->Iterations(1);
BENCHMARK(BM_SearchDefaultProblemTop20)->Unit(benchmark::kSecond)->Iterations(1);

}  // namespace
}  // namespace meshsim

BENCHMARK_MAIN();
