// A multi-GB profiler trace through `meshsim validate`'s pipeline: the streaming reader
// (traces/kineto.h), the steps (traces/rank_steps.h) and the replay of every step
// (validation/trace_replay.h), with the wall time, the text rate and the process's peak resident
// memory (getrusage's ru_maxrss) as counters. The target (issue 39): a 2 GB trace in under 60 s
// and 1 GiB.
//
// The trace is synthetic and written once to $TMPDIR (MESHSIM_BENCH_TRACE_MB megabytes of JSON,
// default 2048; kept between runs): Kineto's layout and event mix of an eager transformer step
// (per layer op: an nn.Module annotation, an aten::linear around an aten::addmm with its "Input
// Dims", a cudaLaunchKernel, the GEMM kernel with Kineto's kernel args, an elementwise operator
// and kernel; an NCCL all-reduce with its metadata every 64 ops; ProfilerStep ranges of 40,000
// ops), about 300 bytes an event.
//
//   build/bench/bench_kineto_read --benchmark_min_time=1x
#include <benchmark/benchmark.h>
#include <fmt/format.h>
#include <sys/resource.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>

#include "meshsim/sim/comm_model.h"
#include "meshsim/topology/chip.h"
#include "meshsim/traces/kineto.h"
#include "meshsim/traces/rank_steps.h"
#include "meshsim/validation/trace_replay.h"

namespace {

namespace fs = std::filesystem;

int64_t target_bytes() {
  const char* mb = std::getenv("MESHSIM_BENCH_TRACE_MB");
  return (mb != nullptr ? std::atoll(mb) : 2048) * 1'000'000;
}

// Writes the synthetic trace (see the file comment) of about `bytes` bytes.
void write_trace(const fs::path& path, int64_t bytes) {
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) {
    throw std::runtime_error("cannot write " + path.string());
  }
  fmt::print(f,
             "{{\"schemaVersion\":1,\"deviceProperties\":[{{\"id\":0,\"name\":\"NVIDIA H100 80GB "
             "HBM3\",\"totalGlobalMem\":85000000000,\"numSms\":132}}],\"distributedInfo\":{{"
             "\"backend\":\"nccl\",\"rank\":0,\"world_size\":8}},\"record_shapes\":1,"
             "\"traceEvents\":[\n");
  int64_t written = 0;
  int64_t corr = 1;
  double host = 0;
  double device = 100;
  int64_t op = 0;
  int64_t step = 0;
  bool first = true;
  const auto event = [&](const std::string& text) {
    written += static_cast<int64_t>(text.size()) + 2;
    fmt::print(f, "{}{}", first ? "" : ",\n", text);
    first = false;
  };
  // A cudaLaunchKernel call on the host for the operator `ext`, correlated with its kernel.
  const auto launch_kernel = [&](double ts, std::string_view dur, int64_t ext,
                                 int64_t correlation) {
    event(
        fmt::format("{{\"ph\":\"X\",\"cat\":\"cuda_runtime\",\"name\":\"cudaLaunchKernel\","
                    "\"pid\":10,\"tid\":10,\"ts\":{:.3f},\"dur\":{},\"args\":{{\"External "
                    "id\":{},\"cbid\":211,\"correlation\":{}}}}}",
                    ts, dur, ext, correlation));
  };
  while (written < bytes) {
    if (op % 40'000 == 0) {
      event(fmt::format("{{\"ph\":\"X\",\"cat\":\"user_annotation\",\"name\":\"ProfilerStep#{}\","
                        "\"pid\":10,\"tid\":10,\"ts\":{:.3f},\"dur\":{:.3f},\"args\":{{\"External "
                        "id\":{}}}}}",
                        step++, host, 40'000 * 9.0, corr++));
    }
    event(fmt::format("{{\"ph\":\"X\",\"cat\":\"user_annotation\",\"name\":\"nn.Module: "
                      "Linear_{}\",\"pid\":10,\"tid\":10,\"ts\":{:.3f},\"dur\":6,\"args\":{{"
                      "\"External id\":{}}}}}",
                      op % 32, host, corr++));
    event(fmt::format("{{\"ph\":\"X\",\"cat\":\"cpu_op\",\"name\":\"aten::linear\",\"pid\":10,"
                      "\"tid\":10,\"ts\":{:.3f},\"dur\":5,\"args\":{{\"External id\":{},"
                      "\"Record function id\":0,\"Sequence number\":{},\"Fwd thread id\":0,"
                      "\"Input Dims\":[[8,1024,4096],[4096,4096],[4096]],\"Input type\":["
                      "\"c10::BFloat16\",\"c10::BFloat16\",\"c10::BFloat16\"],\"Ev Idx\":{}}}}}",
                      host + 0.2, corr, op, corr));
    ++corr;
    event(fmt::format("{{\"ph\":\"X\",\"cat\":\"cpu_op\",\"name\":\"aten::addmm\",\"pid\":10,"
                      "\"tid\":10,\"ts\":{:.3f},\"dur\":4,\"args\":{{\"External id\":{},"
                      "\"Input Dims\":[[4096],[64,4096],[4096,4096],[],[]],\"Input type\":["
                      "\"c10::BFloat16\",\"c10::BFloat16\",\"c10::BFloat16\",\"Scalar\","
                      "\"Scalar\"]}}}}",
                      host + 0.5, corr));
    const int64_t ext = corr++;
    const bool nccl = op % 64 == 63;
    const int64_t launch = corr++;
    launch_kernel(host + 1, "3.1", ext, launch);
    event(fmt::format("{{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"{}\",\"pid\":0,\"tid\":7,"
                      "\"ts\":{:.3f},\"dur\":{:.3f},\"args\":{{\"External id\":{},\"queued\":0,"
                      "\"device\":0,\"context\":1,\"stream\":7,\"correlation\":{},\"registers "
                      "per thread\":168,\"shared memory\":232448,\"blocks per SM\":1,\"warps per "
                      "SM\":4,\"grid\":[16,32,1],\"block\":[128,1,1],\"est. achieved occupancy "
                      "%\":6}}}}",
                      "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x256x64_warpgroupsize"
                      "2x1x1_execute_segment_k_off_kernel__5x_cublas",
                      device, 2.0 + static_cast<double>(op % 7), ext, launch));
    device += 3.0 + static_cast<double>(op % 7);
    const int64_t ext2 = corr++;
    const int64_t launch2 = corr++;
    event(fmt::format("{{\"ph\":\"X\",\"cat\":\"cpu_op\",\"name\":\"aten::add_\",\"pid\":10,"
                      "\"tid\":10,\"ts\":{:.3f},\"dur\":2,\"args\":{{\"External id\":{},\"Input "
                      "Dims\":[[8,1024,64],[8,1024,64],[]],\"Input type\":[\"c10::BFloat16\","
                      "\"c10::BFloat16\",\"Scalar\"]}}}}",
                      host + 5, ext2));
    launch_kernel(host + 5.5, "2.5", ext2, launch2);
    event(fmt::format("{{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"void at::native::"
                      "vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<c10::"
                      "BFloat16>, at::detail::Array<char*, 3> >(int, at::native::CUDAFunctor_add<"
                      "c10::BFloat16>, at::detail::Array<char*, 3>)\",\"pid\":0,\"tid\":7,"
                      "\"ts\":{:.3f},\"dur\":1.5,\"args\":{{\"External id\":{},\"device\":0,"
                      "\"stream\":7,\"correlation\":{},\"grid\":[32768,1,1],\"block\":"
                      "[128,1,1]}}}}",
                      device, ext2, launch2));
    device += 2;
    if (nccl) {
      const int64_t launch3 = corr++;
      event(fmt::format("{{\"ph\":\"X\",\"cat\":\"cuda_runtime\",\"name\":\"cudaLaunchKernel\","
                        "\"pid\":10,\"tid\":10,\"ts\":{:.3f},\"dur\":4,\"args\":{{\"correlation\":"
                        "{}}}}}",
                        host + 8, launch3));
      event(fmt::format("{{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"ncclDevKernel_AllReduce_"
                        "Sum_bf16_RING_LL(ncclDevComm*, unsigned long, ncclWork*)\",\"pid\":0,"
                        "\"tid\":20,\"ts\":{:.3f},\"dur\":30,\"args\":{{\"device\":0,\"stream\":"
                        "20,\"correlation\":{},\"Collective name\":\"allreduce\",\"In msg nelems\":"
                        "16777216,\"Out msg nelems\":16777216,\"Group size\":8,\"dtype\":"
                        "\"BFloat16\",\"Process Group Name\":\"0\",\"Process Group Ranks\":\"[0, "
                        "1, 2, 3, 4, 5, 6, 7]\"}}}}",
                        device, launch3));
    }
    host += 9;
    ++op;
  }
  fmt::print(f, "\n],\"traceName\":\"bench\"}}\n");
  std::fclose(f);
}

fs::path trace_path() {
  const int64_t bytes = target_bytes();
  const fs::path path =
      fs::temp_directory_path() / fmt::format("meshsim-kineto-bench-{}MB.json", bytes / 1'000'000);
  std::error_code ec;
  if (!fs::exists(path, ec) || static_cast<int64_t>(fs::file_size(path, ec)) < bytes) {
    write_trace(path, bytes);
  }
  return path;
}

double max_rss_mib() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_maxrss) / 1024.0;  // KiB on Linux
}

void BM_ValidatePipeline(benchmark::State& state) {
  const fs::path path = trace_path();
  const auto size = static_cast<double>(fs::file_size(path));
  const meshsim::topology::Chip chip = meshsim::topology::Catalogue::builtin().chip("h100-sxm");
  int64_t steps = 0;
  int64_t events = 0;
  for (auto _ : state) {
    const meshsim::traces::RankTrace t = meshsim::traces::read_kineto(path.string());
    const meshsim::traces::RankSteps s = meshsim::traces::find_steps(t);
    for (const meshsim::traces::RankStep& step : s.steps) {
      meshsim::IsolatedCommModel comm(
          [](meshsim::CollectiveKind, meshsim::Bytes, std::span<const meshsim::RankId>) {
            return meshsim::Microseconds(30);
          },
          [](meshsim::RankId, meshsim::RankId, meshsim::Bytes) { return meshsim::Duration{}; });
      benchmark::DoNotOptimize(meshsim::validation::replay_step(t, step, 0, 8, chip, comm));
    }
    steps = static_cast<int64_t>(s.steps.size());
    events = t.events_seen;
  }
  state.counters["trace_MB"] = size / 1e6;
  state.counters["events"] = static_cast<double>(events);
  state.counters["steps"] = static_cast<double>(steps);
  state.counters["max_rss_MiB"] = max_rss_mib();
  state.SetBytesProcessed(static_cast<int64_t>(size) * state.iterations());
}
BENCHMARK(BM_ValidatePipeline)->Unit(benchmark::kSecond)->Iterations(1);

}  // namespace

BENCHMARK_MAIN();
