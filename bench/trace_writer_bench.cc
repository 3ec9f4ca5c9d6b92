// Throughput of the trace writers: how many op slices per second one core turns into a file.
//
// The workload looks like a training step seen from the trace: 64 ranks running one program of
// 48 ops (36 matmul/elementwise kernels with shapes and labels, 8 collectives, 4 send/recvs on
// two communication streams). Records are generated up front (outside the timing) in the order
// the engine delivers them: step by step, each op on every rank, so the 64 members of a
// collective arrive back to back and form one flow. The writers are fed by hand
// (TraceFeed::kManual) and write into a stream that only counts bytes, so the figure is the
// writer's own cost: building the content, encoding, buffering.
//
//   build/bench/bench_trace_writer --benchmark_filter=Perfetto
#include <benchmark/benchmark.h>
#include <fmt/format.h>

#include <ostream>
#include <streambuf>
#include <vector>

#include "meshsim/sim/simulation.h"
#include "counting_buf.h"
#include "meshsim/traces/trace_writer.h"
#include "test_models.h"

namespace meshsim::traces {
namespace {

constexpr uint32_t kRanks = 64;
constexpr int kOps = 48;

using bench::CountingBuf;

Op make_op(int i) {
  const int layer = i / 6;
  if (i % 12 == 5) {
    Op op = testing::collective_op(fmt::format("layer {} tp all-reduce", layer), 16 << 20, 0, 1);
    op.labels.layer = layer;
    return op;
  }
  if (i % 12 == 11) {
    Op op = testing::peer_op(fmt::format("layer {} pp send", layer), true, 8 << 20, 0, 2);
    op.labels.microbatch = layer % 4;
    return op;
  }
  Op op = testing::compute_op(fmt::format("layer {} fwd op {}", layer, i % 6), 1.0e6);
  auto& w = std::get<ComputeWork>(op.work);
  w.bytes = Bytes::of(48 << 20);
  if (i % 2 == 0) {
    w.shape = MatmulShape{4096, 8192, 8192, 1};
  } else {
    w.op_class = OpClass::kElementwise;
  }
  op.labels = OpLabels{layer, layer % 4, layer / 2, {}};
  return op;
}

struct Workload {
  testing::PsComputeModel compute;
  testing::PsCommModel comm;
  Simulation sim{compute, comm};
  std::vector<OpRecord> records;

  explicit Workload(size_t n) {
    Program p;
    for (int i = 0; i < kOps; ++i) {
      p.add(make_op(i));
    }
    const auto prog = sim.add_program(std::move(p));
    std::vector<RankId> all;
    for (uint32_t r = 0; r < kRanks; ++r) {
      all.emplace_back(r);
    }
    const GroupId world = sim.add_group(all);
    for (uint32_t r = 0; r < kRanks; ++r) {
      sim.add_rank(prog, {world}, {RankId((r + 1) % kRanks)});
    }
    generate(n);
  }

  // Step s runs op s % kOps on every rank; per (rank, stream) the ops run back to back.
  void generate(size_t n) {
    std::vector<int64_t> cursor(kRanks * 4, 0);
    records.reserve(n);
    for (uint64_t step = 0; records.size() < n; ++step) {
      const auto op = OpId(static_cast<uint32_t>(step % kOps));
      const Op& o = sim.program_of(RankId(0)).op(op);
      const bool is_comm = o.kind() != OpKind::kCompute;
      for (uint32_t r = 0; r < kRanks && records.size() < n; ++r) {
        int64_t& t = cursor[r * 4 + o.stream];
        const int64_t start = t + (is_comm ? 50'000 : 0);
        const int64_t end = start + 1'000'003 + 1000 * (r % 7);
        t = end;
        const SimTime ready = SimTime::from_ps(t - (end - start));
        records.push_back(OpRecord{RankId(r), op, o.stream, ready, SimTime::from_ps(start),
                                   SimTime::from_ps(end), is_comm ? step + 1 : 0, ready});
      }
    }
  }
};

void run_writer(benchmark::State& state, TraceFormat format) {
  const auto n = static_cast<size_t>(state.range(0));
  Workload w(n);
  int64_t bytes = 0;
  for (auto _ : state) {
    CountingBuf buf;
    std::ostream out(&buf);
    TraceWriter writer(format, w.sim, out, TraceOptions{}, TraceFeed::kManual);
    for (const OpRecord& r : w.records) {
      writer.record_op(r);
    }
    writer.finish();
    bytes = buf.bytes();
    benchmark::DoNotOptimize(bytes);
  }
  state.SetItemsProcessed(state.iterations() * static_cast<int64_t>(n));
  state.counters["bytes_per_slice"] =
      benchmark::Counter(static_cast<double>(bytes) / static_cast<double>(n));
}

void BM_PerfettoTraceWriter(benchmark::State& state) { run_writer(state, TraceFormat::kPerfetto); }
void BM_ChromeTraceWriter(benchmark::State& state) { run_writer(state, TraceFormat::kChromeJson); }

BENCHMARK(BM_PerfettoTraceWriter)->Arg(1 << 20)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_ChromeTraceWriter)->Arg(1 << 20)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace meshsim::traces

BENCHMARK_MAIN();
