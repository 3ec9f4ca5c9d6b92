// The engine on full simulations (issue 16): every rank of a step simulated, no trace, timed from
// the scenario to the report (scenario::simulate_step: planning, network set-up, the run, the
// analysis; not process start-up).
//
//   BM_DefaultStepFull      the default scenario (Llama-3-70B, 2048 H100s) with every rank
//                           (targets: <= 0.5 s and <= 150 MiB)
//   BM_Llama405bMetaPlan/N  Llama-3-405B with Meta's 16K-GPU layout (TP 8, PP 16 with 7 + 14 x 8
//                           + 7 layers, 1F1B, 16 microbatches per pipeline, sequence 8192) on N
//                           GPUs, DP = N / 128: weak scaling from 2048 to 65,536 GPUs (targets:
//                           16K in <= 5 s and <= 1 GiB; growth no worse than N log N)
//   BM_DefaultStepStraggler the default step with one rank 1.5x slower (full simulation plus the
//                           fault-free representative run the report compares with)
// Counters: events/s (items_per_second), simulated ranks, and the process's peak RSS so far in
// MiB (getrusage: monotonic, so the scaling series runs in ascending size and a row's figure is
// its own peak only when it exceeds every earlier row's). Time is process CPU time
// (MeasureProcessCPUTime), the figure to trust on a shared machine.
#include <benchmark/benchmark.h>
#include <sys/resource.h>

#include "meshsim/scenario/scenario.h"
#include "meshsim/scenario/step.h"

namespace meshsim {
namespace {

double peak_rss_mib() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_maxrss) / 1024.0;  // KiB on Linux
}

void run_full(benchmark::State& state, const scenario::Scenario& s) {
  scenario::StepOptions outputs;
  outputs.full_simulation = true;
  uint64_t events = 0;
  int64_t ranks = 0;
  for (auto _ : state) {
    const scenario::StepReport r = scenario::simulate_step(s, outputs);
    events += r.events;
    ranks = r.simulated_ranks;
    benchmark::DoNotOptimize(r.step_time);
  }
  state.SetItemsProcessed(static_cast<int64_t>(events));
  state.counters["ranks"] = static_cast<double>(ranks);
  state.counters["peak_rss_MiB"] = peak_rss_mib();
}

void BM_DefaultStepFull(benchmark::State& state) { run_full(state, scenario::default_scenario()); }
BENCHMARK(BM_DefaultStepFull)->Unit(benchmark::kMillisecond)->MeasureProcessCPUTime();

scenario::Scenario llama405b(int64_t gpus) {
  scenario::Scenario s;
  s.model = "llama3-405b";
  s.cluster = "dgx-h100";
  s.nodes = gpus / 8;
  s.plan.tp = 8;
  s.plan.pp = 16;
  s.plan.dp = gpus / 128;
  s.plan.schedule = workloads::PipelineSchedule::kOneFOneB;
  s.plan.stage_layers = {7, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 7};
  s.plan.mbs = 1;
  s.plan.seq = 8192;
  s.plan.gbs = 16 * s.plan.dp;
  s.plan.origins.set(workloads::PlanField::kGbs, Origin::flag("--gbs"));
  scenario::complete(s);
  return s;
}

void BM_Llama405bMetaPlan(benchmark::State& state) { run_full(state, llama405b(state.range(0))); }
BENCHMARK(BM_Llama405bMetaPlan)
    ->RangeMultiplier(2)
    ->Range(2048, 65536)
    ->Iterations(1)
    ->Unit(benchmark::kSecond)
    ->MeasureProcessCPUTime();

void BM_DefaultStepStraggler(benchmark::State& state) {
  scenario::Scenario s = scenario::default_scenario();
  s.faults.compute.slow_ranks = {{RankId(517), 1.5}};
  s.faults.slow_rank_origins = {Origin::flag("--slow-rank")};
  scenario::StepOptions outputs;
  for (auto _ : state) {
    const scenario::StepReport r = scenario::simulate_step(s, outputs);
    benchmark::DoNotOptimize(r.step_time);
  }
}
BENCHMARK(BM_DefaultStepStraggler)->Unit(benchmark::kMillisecond)->MeasureProcessCPUTime();

}  // namespace
}  // namespace meshsim

BENCHMARK_MAIN();
