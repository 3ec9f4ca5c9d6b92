// nccl-tests logs in: the sweeps that NVIDIA/nccl-tests' benchmarks (all_reduce_perf,
// all_gather_perf, reduce_scatter_perf, alltoall_perf, sendrecv_perf, broadcast_perf, reduce_perf)
// print on stdout.
//
// What a log holds, as nccl-tests prints it (src/common.cu up to v2.17.2, src/util.cu from v2.17.3
// on; github.com/NVIDIA/nccl-tests):
//   # nccl-tests version 2.17.6 nccl-headers=22602 nccl-library=22602     (v2.17.4 on)
//   # Collective test starting: all_reduce_perf                            (v2.16.7 on)
//   # nThread 1 nGpus 1 minBytes 8 maxBytes 8589934592 step: 2(factor) warmup iters: 5 ...
//   # Using devices
//   #  Rank  0 Group  0 Pid 1006102 on pool0-01806 device  0 [0000:19:00] NVIDIA H100 80GB HBM3
//                 (v2.13 on; v2.0-v2.11: "#   Rank  0 Pid 112372 on localhost device  0 [0x00] ...")
//   #       size   count   type   redop   root   time  algbw  busbw #wrong   time  algbw  busbw #wrong
//            8       2  float     sum     -1  13.67   0.00   0.00      0  13.03   0.00   0.00      0
//   # Out of bounds values : 0 OK
//   # Avg bus bandwidth    : 159.151
//   # Collective test concluded: all_reduce_perf                           (v2.17.3 on)
// The column header names the columns of the rows that follow; it differs between versions and
// benchmarks: v2.0-v2.11 call the last column of each half "error" (the largest deviation, or
// N/A), v2.13 on "#wrong" (a count); "root" appears for rooted collectives before v2.13 and for
// every benchmark after; all_gather before v2.13 has no "redop" column and alltoall prints it
// blank; `-C 1` reports "cputime" instead of "time"; v2.19.2 on may add per-iteration statistics
// (i_min, i_max, i_p99, i_cv%) after each half, and a timestamp. The parser reads a row from the
// right with the header's layout (the measured columns are always printed), and from the left for
// size and count, so blank text columns do no harm.
//
// Also read from the lines NCCL itself prints around them (NCCL_DEBUG=VERSION or INFO):
//   "NCCL version 2.18.5+cuda12.2"                         the NCCL release that ran;
//   "NCCL INFO NCCL_ALGO set by environment to NVLS"       an algorithm forced by the environment
//   "NCCL INFO NCCL_PROTO set by environment to Simple"    (the same for the protocol).
// Any other line is skipped (NCCL INFO and WARN lines, MPI's messages, shell prompts); `mpirun
// --tag-output` prefixes ("[1,0]<stdout>:") are removed first. A line whose first field is an
// integer inside a table must be a row: one that is not is an InputError naming the line.
//
// One log may hold several tests one after the other (a script that runs them in turn): each
// "# nThread" line starts a new run.
//
// Bounds: at most kMaxNcclTestsLogBytes of text, kMaxNcclTestsRows rows and kMaxNcclTestsDevices
// device lines; sizes within int64; times and bandwidths finite and non-negative.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "meshsim/sim/enum_names.h"

namespace meshsim::traces {

// The benchmarks of nccl-tests whose measurements meshsim reads, by their program name without
// "_perf".
enum class NcclTest : uint8_t {
  kAllReduce,
  kAllGather,
  kReduceScatter,
  kAllToAll,
  kSendRecv,
  kBroadcast,
  kReduce
};
constexpr auto enum_names(NcclTest) {
  using T = NcclTest;
  return std::to_array<EnumName<T>>({{T::kAllReduce, "all_reduce"},
                                     {T::kAllGather, "all_gather"},
                                     {T::kReduceScatter, "reduce_scatter"},
                                     {T::kAllToAll, "alltoall"},
                                     {T::kSendRecv, "sendrecv"},
                                     {T::kBroadcast, "broadcast"},
                                     {T::kReduce, "reduce"},
                                     {T::kAllReduce, "allreduce"},
                                     {T::kAllGather, "allgather"},
                                     {T::kReduceScatter, "reducescatter"}});
}

// The test a program or file name names ("all_reduce_perf", "nccl_allgather.log",
// "1_2_LOG_all_gather_env1.txt"); nullopt when it names none or several.
std::optional<NcclTest> nccl_test_named_in(std::string_view name);

// 64 MiB of text: a row is ~120 bytes, so half a million rows; real logs are kilobytes (a sweep of
// every size from 8 B to 16 GiB is 32 rows).
inline constexpr int64_t kMaxNcclTestsLogBytes = int64_t{64} << 20;
inline constexpr int64_t kMaxNcclTestsRows = int64_t{1} << 20;
inline constexpr int64_t kMaxNcclTestsDevices = int64_t{1} << 17;

// One half of a row: the operation out of place or in place.
struct NcclTestsTiming {
  double time_us = 0;     // average time of one operation (or its host time with `-C 1`)
  double algbw_gbps = 0;  // bytes / time, GB/s = 1e9 B/s
  double busbw_gbps = 0;  // algbw x the test's bus factor
};

struct NcclTestsRow {
  int64_t line = 0;   // 1-based line in the log
  int64_t bytes = 0;  // the "size" column
  int64_t count = 0;  // elements
  std::string type;   // "float", "bfloat16", "int8", ...
  NcclTestsTiming out_of_place;
  NcclTestsTiming in_place;
};

struct NcclTestsDevice {
  int64_t rank = 0;
  std::string host;
  std::string name;  // "NVIDIA H100 80GB HBM3"
};

// One test as one program run printed it.
struct NcclTestsRun {
  int64_t line = 0;                 // the line that started it
  std::optional<NcclTest> test;     // from "# Collective test starting/concluded: <program>"
  std::string program;              // "all_reduce_perf" when printed
  std::optional<std::string> tests_version;  // "2.17.6" (nccl-tests v2.17.4 on)
  std::optional<std::string> nccl_version;   // "2.26.2", from nccl-library=22602
  std::vector<NcclTestsDevice> devices;      // "# Using devices", in the order printed
  bool cpu_time = false;                     // the "cputime" column (nccl-tests -C 1)
  std::vector<NcclTestsRow> rows;
  std::optional<int64_t> out_of_bounds;  // "# Out of bounds values : N"
  std::optional<double> avg_busbw_gbps;  // "# Avg bus bandwidth : X"

  // Distinct hosts of the devices, in order of first appearance.
  std::vector<std::string> hosts() const;
};

struct NcclTestsLog {
  std::string source;
  std::vector<NcclTestsRun> runs;
  std::optional<std::string> nccl_version;  // "2.18.5", from an "NCCL version" line
  std::optional<std::string> nccl_algo;     // NCCL_ALGO as NCCL acknowledged it
  std::optional<std::string> nccl_proto;    // NCCL_PROTO as NCCL acknowledged it
};

// Parses a log's text; `source` names it in errors (InputError(source, "line N", ...)). A log
// without any row of measurements is an InputError.
NcclTestsLog parse_nccl_tests_log(std::string_view text, const std::string& source);

// Reads (at most kMaxNcclTestsLogBytes) and parses the log at `path`.
NcclTestsLog read_nccl_tests_log(const std::string& path);

// NCCL's version code as nccl.h defines NCCL_VERSION_CODE ("2.18.5" from 21805; codes below
// 10000 are releases before 2.9: 2805 is 2.8.5); nullopt for a code that is neither.
std::optional<std::string> nccl_version_of_code(int64_t code);

}  // namespace meshsim::traces
