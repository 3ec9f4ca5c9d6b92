// The nccl-tests log parser (traces/nccl_tests.h) on real logs of several nccl-tests versions
// (validation/collectives/logs/, README.md there for their sources) and on small synthetic ones
// written from nccl-tests' printing code for the formats no public log shows.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "meshsim/sim/error.h"
#include "meshsim/traces/nccl_tests.h"

namespace meshsim::traces {
namespace {

using ::testing::HasSubstr;

const std::string kLogs = std::string(MESHSIM_SOURCE_DIR) + "/validation/collectives/logs/";

std::string input_error(std::string_view text) {
  try {
    parse_nccl_tests_log(text, "t.log");
  } catch (const InputError& e) {
    return e.what();
  }
  ADD_FAILURE() << "no InputError";
  return "";
}

// nccl-tests v2.0-v2.11 (microsoft/superbenchmark's fixtures): "#   Rank  0 Pid ..." device lines,
// an "error" column, no root column, an NCCL INFO line inside the table.
TEST(NcclTestsLog, OldFormatAllReduce) {
  const NcclTestsLog log = read_nccl_tests_log(kLogs + "superbench-a100-nccl_allreduce.log");
  ASSERT_EQ(log.runs.size(), 1u);
  const NcclTestsRun& run = log.runs[0];
  EXPECT_FALSE(run.test.has_value());  // these versions do not name the test
  EXPECT_FALSE(run.tests_version.has_value());
  EXPECT_FALSE(log.nccl_version.has_value());
  ASSERT_EQ(run.devices.size(), 8u);
  EXPECT_EQ(run.devices[7].rank, 7);
  EXPECT_EQ(run.devices[7].host, "localhost");
  EXPECT_EQ(run.devices[7].name, "A100-SXM4-40GB");
  EXPECT_EQ(run.hosts(), std::vector<std::string>{"localhost"});
  ASSERT_EQ(run.rows.size(), 34u);  // 0 B (twice), then 4 B to 8 GiB
  const NcclTestsRow& last = run.rows.back();
  EXPECT_EQ(last.bytes, int64_t{8589934592});
  EXPECT_EQ(last.count, int64_t{2147483648});
  EXPECT_EQ(last.type, "float");
  EXPECT_DOUBLE_EQ(last.out_of_place.time_us, 63896);
  EXPECT_DOUBLE_EQ(last.out_of_place.busbw_gbps, 235.26);
  EXPECT_DOUBLE_EQ(last.in_place.time_us, 63959);
  EXPECT_DOUBLE_EQ(last.in_place.algbw_gbps, 134.30);
  EXPECT_EQ(run.out_of_bounds, 0);
  EXPECT_DOUBLE_EQ(*run.avg_busbw_gbps, 68.4048);
}

// all_gather printed no redop column, alltoall a blank one: read from the right, both parse.
TEST(NcclTestsLog, OldFormatBlankAndMissingTextColumns) {
  const NcclTestsLog gather = read_nccl_tests_log(kLogs + "superbench-a100-nccl_allgather.log");
  ASSERT_EQ(gather.runs.size(), 1u);
  EXPECT_EQ(gather.runs[0].rows.back().bytes, int64_t{8589934592});
  EXPECT_DOUBLE_EQ(gather.runs[0].rows.back().out_of_place.time_us, 33646);
  const NcclTestsLog a2a = read_nccl_tests_log(kLogs + "superbench-a100-nccl_alltoall.log");
  const NcclTestsRow& last = a2a.runs[0].rows.back();
  EXPECT_EQ(last.type, "float");
  EXPECT_DOUBLE_EQ(last.out_of_place.busbw_gbps, 224.31);
  EXPECT_DOUBLE_EQ(last.in_place.time_us, 33234);
}

// nccl-tests v2.13+ as NVIDIA's DGX Cloud benchmarking prints it: Group in the device lines, the
// PCI address as nccl-tests v2.16.7 on prints it, "#wrong", a root column, extra header fields.
TEST(NcclTestsLog, DgxCloudAllReduce) {
  const NcclTestsLog log = read_nccl_tests_log(kLogs + "dgxc-dgx-h100-all_reduce.log");
  ASSERT_EQ(log.runs.size(), 1u);
  const NcclTestsRun& run = log.runs[0];
  ASSERT_EQ(run.devices.size(), 8u);
  EXPECT_EQ(run.devices[0].name, "NVIDIA H100 80GB HBM3");
  EXPECT_EQ(run.devices[0].host, "pool0-01806");
  ASSERT_EQ(run.rows.size(), 32u);  // 8 B to 16 GiB
  EXPECT_EQ(run.rows[9].bytes, 4096);
  EXPECT_DOUBLE_EQ(run.rows[9].out_of_place.time_us, 23.59);  // the hiccup of sweeps.json
  EXPECT_DOUBLE_EQ(run.rows[9].in_place.time_us, 16.46);
  EXPECT_DOUBLE_EQ(run.rows.back().out_of_place.time_us, 62648);  // "62648": %7.0f past 10 ms
  EXPECT_EQ(run.rows.back().line, 47);
  EXPECT_FALSE(run.cpu_time);
}

// nccl-tests v2.18.3 (Sigma2's Olivia documentation): the version line with NCCL's code, the
// test's name, two hosts, int8 rows, "Collective test concluded".
TEST(NcclTestsLog, VersionedTwoHostLog) {
  const NcclTestsLog log = read_nccl_tests_log(kLogs + "sigma2-olivia-gh200-all_reduce.log");
  ASSERT_EQ(log.runs.size(), 1u);
  const NcclTestsRun& run = log.runs[0];
  EXPECT_EQ(run.tests_version, "2.18.3");
  EXPECT_EQ(run.nccl_version, "2.30.4");  // nccl-library=23004
  EXPECT_EQ(run.program, "all_reduce_perf");
  EXPECT_EQ(run.test, NcclTest::kAllReduce);
  EXPECT_EQ(run.devices.size(), 8u);
  EXPECT_EQ(run.hosts(), (std::vector<std::string>{"gpu-1-1", "gpu-1-2"}));
  ASSERT_EQ(run.rows.size(), 28u);  // 1 B to 128 MiB
  EXPECT_EQ(run.rows[0].type, "int8");
  EXPECT_DOUBLE_EQ(run.rows[15].in_place.time_us, 123.30);
}

// nccl-tests v2.19.2 on with per-iteration statistics (-N) and timestamps, as util.cu's
// writeResultHeader and writeBenchmarkLineBody / writePerIterReport print them; a run whose NCCL
// acknowledged NCCL_ALGO, and mpirun --tag-output prefixes.
TEST(NcclTestsLog, PerIterationColumnsTimestampsAndNcclLines) {
  const std::string text =
      "[1,0]<stdout>:# nccl-tests version 2.19.6 nccl-headers=22903 nccl-library=22903\n"
      "[1,0]<stdout>:# Collective test starting: reduce_scatter_perf\n"
      "[1,0]<stdout>:# nThread 1 nGpus 1 minBytes 1048576 maxBytes 2097152 step: 2(factor)\n"
      "host-a:11:11 [0] NCCL INFO NCCL version 2.29.3+cuda12.9\n"
      "host-a:11:11 [0] NCCL INFO NCCL_ALGO set by environment to Ring\n"
      "[1,0]<stdout>:#  Rank  0 Group  0 Pid     11 on     host-a device  0 [0000:19:00] NVIDIA "
      "H100 80GB HBM3\n"
      "[1,0]<stdout>:#  Rank  1 Group  0 Pid     12 on     host-b device  0 [0000:19:00] NVIDIA "
      "H100 80GB HBM3\n"
      "#       size  count  type  redop  root  time  algbw  busbw  #wrong  i_min  i_max  i_p99  "
      "i_cv%  time  algbw  busbw  #wrong  i_min  i_max  i_p99  i_cv% timestamp\n"
      "#        (B)  (elements)  (us)  (GB/s)  (GB/s)  (us)  (us)  (us)  (%)  (us)  (GB/s)  "
      "(GB/s)  (us)  (us)  (us)  (%) %Y-%m-%d %H:%M:%S\n"
      "     1048576  131072  float  sum  -1  45.10  23.25  11.63  0  44.0  47.0  46.9  1.20  "
      "44.80  23.41  11.70  0  43.9  46.2  46.0  1.10  2026-07-09 10:00:01\n"
      "     2097152  262144  float  sum  -1  60.20  34.84  17.42  0  59.0  62.0  61.9  1.00  "
      "60.00  34.95  17.48  0  59.1  61.0  60.8  0.90  2026-07-09 10:00:02\n"
      "# Out of bounds values : 0 OK\n"
      "# Avg bus bandwidth    : 14.5575 \n"
      "# Collective test concluded: reduce_scatter_perf\n";
  const NcclTestsLog log = parse_nccl_tests_log(text, "t.log");
  ASSERT_EQ(log.runs.size(), 1u);
  const NcclTestsRun& run = log.runs[0];
  EXPECT_EQ(run.test, NcclTest::kReduceScatter);
  EXPECT_EQ(run.nccl_version, "2.29.3");
  EXPECT_EQ(log.nccl_version, "2.29.3");
  EXPECT_EQ(log.nccl_algo, "Ring");
  EXPECT_EQ(run.hosts().size(), 2u);
  ASSERT_EQ(run.rows.size(), 2u);
  EXPECT_DOUBLE_EQ(run.rows[1].out_of_place.time_us, 60.20);
  EXPECT_DOUBLE_EQ(run.rows[1].in_place.busbw_gbps, 17.48);
}

// Two tests in one log (a script running them in turn): two runs; cputime is recorded.
TEST(NcclTestsLog, SeveralTestsAndCpuTime) {
  const std::string table =
      "#  size  count  type  redop  root  cputime  algbw  busbw  #wrong  cputime  algbw  busbw  "
      "#wrong\n"
      "  1024  256  float  sum  -1  20.0  0.05  0.09  0  20.0  0.05  0.09  0\n";
  const std::string text = "# Collective test starting: all_gather_perf\n# nThread 1\n" + table +
                           "# Collective test starting: alltoall_perf\n# nThread 1\n" + table;
  const NcclTestsLog log = parse_nccl_tests_log(text, "t.log");
  ASSERT_EQ(log.runs.size(), 2u);
  EXPECT_EQ(log.runs[0].test, NcclTest::kAllGather);
  EXPECT_EQ(log.runs[1].test, NcclTest::kAllToAll);
  EXPECT_TRUE(log.runs[1].cpu_time);
  EXPECT_EQ(log.runs[1].rows[0].line, 8);
}

TEST(NcclTestsLog, BadInputsNameTheLineAndWhatWasExpected) {
  const std::string header = "#  size count type redop root time algbw busbw #wrong time algbw "
                             "busbw #wrong\n";
  EXPECT_THAT(input_error(header + "  8  2  float  sum  -1  13.67  0.00\n"),
              AllOf(HasSubstr("t.log: line 2"), HasSubstr("a row of 7 fields"),
                    HasSubstr("expected 10 to 13")));
  EXPECT_THAT(input_error(header + "  8  2  float  sum  -1  nan  0.0 0.0 0 1.0 0.0 0.0 0\n"),
              AllOf(HasSubstr("line 2"), HasSubstr("time \"nan\"")));
  EXPECT_THAT(input_error(header + "  99999999999999999999  2  float  sum  -1  1  0 0 0 1 0 0 0\n"),
              AllOf(HasSubstr("line 2"), HasSubstr("size")));
  EXPECT_THAT(input_error("NCCL INFO nothing here\n"), HasSubstr("no nccl-tests measurements"));
  EXPECT_THAT(input_error("#  size count type time algbw\n"),
              AllOf(HasSubstr("line 1"), HasSubstr("column header")));
  EXPECT_THAT(input_error("# Collective test starting: all_gather_perf\n# Collective test "
                          "concluded: alltoall_perf\n"),
              AllOf(HasSubstr("line 2"), HasSubstr("concludes as")));
  EXPECT_THAT(input_error("x NCCL version 2.18.5+cuda12\ny NCCL version 2.19.3+cuda12\n"),
              AllOf(HasSubstr("line 2"), HasSubstr("one log, one NCCL")));
  EXPECT_THAT(input_error("# nccl-tests version 2.17.6 nccl-headers=1 nccl-library=7\n"),
              HasSubstr("nccl-library=7"));
  EXPECT_THAT(input_error("#  Rank  3 Group 0 Pid 1 on h device 0 [0000:19:00] H100\n"),
              HasSubstr("rank 3 where rank 0 was expected"));
}

TEST(NcclTestsLog, VersionCodesAndTestNames) {
  EXPECT_EQ(nccl_version_of_code(21805), "2.18.5");
  EXPECT_EQ(nccl_version_of_code(23004), "2.30.4");
  EXPECT_EQ(nccl_version_of_code(2805), "2.8.5");  // before 2.9: X*1000 + Y*100 + Z
  EXPECT_FALSE(nccl_version_of_code(7).has_value());
  EXPECT_EQ(nccl_test_named_in("all_reduce_perf"), NcclTest::kAllReduce);
  EXPECT_EQ(nccl_test_named_in("nccl_reducescatter.log"), NcclTest::kReduceScatter);
  EXPECT_EQ(nccl_test_named_in("1_2_LOG_all_gather_env1.txt"), NcclTest::kAllGather);
  EXPECT_EQ(nccl_test_named_in("reduce_perf"), NcclTest::kReduce);
  EXPECT_EQ(nccl_test_named_in("sendrecv_perf"), NcclTest::kSendRecv);
  EXPECT_FALSE(nccl_test_named_in("all_reduce_then_all_gather.log").has_value());
  EXPECT_FALSE(nccl_test_named_in("results.txt").has_value());
}

}  // namespace
}  // namespace meshsim::traces
