// Writing the trace of all 2048 ranks of the default step (issue: >= 1 M slices/s).
//
// The default scenario (Llama-3-70B, 2048 H100s, TP8 SP / PP4 interleaved x5 / DP64 ZeRO-1) is
// simulated once with every rank, and the engine's records are kept in the order it emitted them.
// The benchmark then replays those records into a TraceWriter (Perfetto format, manual feed)
// writing to a byte-counting stream: what it times is the writer on the real default step, not
// the engine and not the disk. items_per_second = slices written per second.
#include <benchmark/benchmark.h>

#include <memory>
#include <streambuf>
#include <variant>

#include "counting_buf.h"
#include "meshsim/sim/simulation.h"
#include "meshsim/scenario/comm_setup.h"
#include "meshsim/scenario/scenario.h"
#include "meshsim/topology/compute_model.h"
#include "meshsim/traces/trace_writer.h"
#include "meshsim/workloads/plan_loader.h"
#include "meshsim/workloads/step.h"

namespace meshsim {
namespace {

using Record = std::variant<OpRecord, MemoryRecord>;

// The default step, fully simulated, with its records in emission order.
struct DefaultStep {
  topology::ClusterSpec cluster;
  workloads::StepPlan plan;
  topology::RooflineComputeModel compute;
  scenario::CommSetup comm;
  Simulation sim;
  std::vector<Record> records;
  int64_t slices = 0;

  explicit DefaultStep(const scenario::Scenario& s)
      : cluster(scenario::load_cluster(s)),
        plan(workloads::plan_step(workloads::load_model(s.model), s.plan,
                                  workloads::SimulationMode::kFull)),
        compute(cluster.chip),
        comm(cluster, plan, scenario::CommOptions{}),
        sim(compute, comm.model()) {
    workloads::load_plan(sim, plan);
    sim.on_op_end([this](const OpRecord& r) {
      records.emplace_back(r);
      ++slices;
    });
    sim.on_memory([this](const MemoryRecord& r) { records.emplace_back(r); });
    sim.run();
  }
};

void BM_DefaultStepAllRanksPerfetto(benchmark::State& state) {
  // Built once.
  static const auto step = std::make_unique<DefaultStep>(scenario::default_scenario());
  int64_t bytes = 0;
  for (auto _ : state) {
    bench::CountingBuf buf;
    std::ostream out(&buf);
    traces::TraceOptions options;
    options.placement = traces::node_placement(8, 2047);
    traces::TraceWriter writer(traces::TraceFormat::kPerfetto, step->sim, out, options,
                               traces::TraceFeed::kManual);
    for (const Record& r : step->records) {
      if (const auto* op = std::get_if<OpRecord>(&r)) {
        writer.record_op(*op);
      } else {
        writer.record_memory(std::get<MemoryRecord>(r));
      }
    }
    writer.finish();
    bytes = buf.bytes();
  }
  state.SetItemsProcessed(state.iterations() * step->slices);
  state.counters["slices"] = static_cast<double>(step->slices);
  state.counters["GB"] = static_cast<double>(bytes) * 1e-9;
}

BENCHMARK(BM_DefaultStepAllRanksPerfetto)->Unit(benchmark::kSecond)->Iterations(1);

}  // namespace
}  // namespace meshsim

BENCHMARK_MAIN();
