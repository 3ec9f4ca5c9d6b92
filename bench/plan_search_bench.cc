// The plan search on the default problem (issues 14 and 40): Llama-3-70B on 2048 H100s, sequence
// 8192, global batch 512 sequences. docs/plan-search.md has the figures and how they were taken.
//  * BM_ConsiderDefaultProblem: enumerate every plan, check it, bound its memory and its step time
//    on 2 threads (one simulation at the end): items_per_second = plans considered per second.
//  * BM_SearchDefaultProblemTop20: the whole search as `meshsim plan --top 20` runs it (the default
//    cap of 4 x top, stopping once no plan left is estimated to enter, 2 threads): seconds per
//    search (target: under 10 s on the project's 2-core machine).
//  * BM_SuggestionsAtLongSequence: the search an out-of-memory `meshsim --seq 131072` runs for its
//    suggestions (the best 3, at most 3 simulations of plans that fit and 6 in all): seconds
//    (target: under 10 s, under 1 GiB).
#include <benchmark/benchmark.h>

#include "meshsim/studies/plan_search.h"

namespace meshsim {
namespace {

void BM_ConsiderDefaultProblem(benchmark::State& state) {
  const scenario::Scenario base = scenario::default_scenario();
  studies::SearchOptions o;
  o.top = 1;
  o.max_simulations = 1;
  o.jobs = 2;
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
  o.max_simulations = studies::kDefaultSimulationsPerTop * o.top;
  o.jobs = 2;
  for (auto _ : state) {
    const studies::SearchResult r = studies::search_plans(base, o);
    state.counters["simulated"] = static_cast<double>(r.simulated);
    state.counters["proven"] = r.exact ? 1 : 0;
    state.counters["best_step_s"] = r.top.front().report.step_time.seconds();
  }
}

void BM_SuggestionsAtLongSequence(benchmark::State& state) {
  scenario::Scenario base = scenario::default_scenario();
  base.plan.seq = 131072;
  studies::SearchOptions o;
  o.top = 3;
  o.max_simulations = 3;
  o.max_all_simulations = 6;
  o.jobs = 2;
  for (auto _ : state) {
    const studies::SearchResult r = studies::search_plans(base, o);
    state.counters["simulated"] = static_cast<double>(r.simulated);
    state.counters["best_step_s"] = r.top.empty() ? 0 : r.top.front().report.step_time.seconds();
  }
}

BENCHMARK(BM_ConsiderDefaultProblem)->Unit(benchmark::kSecond)->Iterations(1);
BENCHMARK(BM_SearchDefaultProblemTop20)->Unit(benchmark::kSecond)->Iterations(1);
BENCHMARK(BM_SuggestionsAtLongSequence)->Unit(benchmark::kSecond)->Iterations(1);

}  // namespace
}  // namespace meshsim

BENCHMARK_MAIN();
