// The fuzzers' findings (issue 15), replayed in every build through the harness the fuzz targets
// use (fuzz_entries.h): each committed input under regressions/<target>/ once crashed, hung,
// overflowed or leaked an internal error, and must now be accepted or refused with an input error
// whose message says what the table below expects. The file names say the bug.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>

#include "fuzz_entries.h"

namespace meshsim::fuzz {
namespace {

namespace fs = std::filesystem;

struct Expectation {
  const char* target;
  const char* file;
  const char* message;  // a substring of the input error; "" when the input must be accepted
};

// issue 15: one row per committed finding.
constexpr Expectation kExpected[] = {
    // Sizes with no upper bound: negative parameter counts (exit 0), wrapped integers.
    {"model", "issue15-d_model-8e9-negative-parameter-counts.json",
     "/d_model: 8192000000 is above the limit of 2^20"},
    {"model", "issue15-d_ff-2to64-wraps-negative.json", "/d_ff: expected an integer below 2^63"},
    {"model", "issue15-layer-parameters-past-2to40.json",
     "parameters per layer; expected at most 2^40"},
    {"hf_config", "issue15-gpt2-4x-n_embd-wraps.json", "/n_embd: 4611686018427387904 is above"},
    {"hf_config", "issue15-experts-2to32.json", "/num_local_experts: 4294967296 is above"},
    {"manifest", "issue15-seq-2to62.json", "/seq_len: 4611686018427387904 is above the limit"},
    {"scenario", "issue15-gbs-2to64-wraps.json", "/gbs: expected an integer below 2^63"},
    // Products that wrapped: to zero devices, and a torus that divided by zero (SIGFPE).
    {"cluster", "issue15-devices-product-wraps-to-zero.json", "/nodes: 4294967296 nodes x"},
    {"cluster", "issue15-torus-extents-wrap-sigfpe.json", "/scale_up/shape/0: the torus"},
    // Rates that printed "inf", durations past int64 picoseconds.
    {"cluster", "issue15-infinite-nic-bandwidth.json", "above the limit of 1 EB/s"},
    {"chips", "issue15-infinite-peak.json", "above the limit of 1 ZFLOP/s"},
    {"chips", "issue15-launch-overhead-1e300s.json", "longer than int64 picoseconds can hold"},
    {"manifest", "issue15-step-time-1e300s.json", "/step_times_s/0: expected a positive duration"},
    // 1e400: nlohmann's out_of_range, uncaught (exit 1); now located.
    {"model", "issue15-1e400-out-of-range-exit-1.json", "byte 368: the number 1e400 is beyond"},
    {"profile", "issue15-1e400.json", "the number 1e400 is beyond the range of a double"},
    {"jax_trace", "issue15-ts-1e400.json", "the number 1e400 is beyond the range of a double"},
    // Deep nesting: copies and dumps recursed off the stack (SIGSEGV).
    {"model", "issue15-nesting-2000-levels.json", "byte 137: nested deeper than 128 levels"},
    {"profile", "issue15-nested-before-copy.json", "nested deeper than 128 levels"},
    {"scenario", "issue15-stage-layers-nested-2000.json", "nested deeper than 128 levels"},
    {"jax_trace", "issue15-event-not-object-deep.json",
     "/traceEvents/0: expected an event object, got an array"},
    // Traces: an inflated gzip without a cap, ends past 2^63 ps, dims that wrapped, and
    // nlohmann's type_error on a metadata name that is not a string (exit 1).
    {"pytorch_trace", "issue15-gzip-bomb.json.gz", "inflates to more than the 16 MiB limit"},
    {"pytorch_trace", "issue15-ts-plus-dur-overflows.json", "/1/dur: the event ends more than"},
    {"pytorch_trace", "issue15-gemm-dims-past-2to31.json", "dimensions of at most 2^31 - 1"},
    {"pytorch_trace", "issue15-metadata-name-not-a-string.json", ""},
    // Main's newer inputs (merged after issue 15's campaign): a sweep's point count that wrapped
    // to zero, a failure table whose Monte Carlo would never end, a slow rank that wrapped to 0.
    {"sweep_spec", "issue15-points-2to64-wrap-to-zero.json", "/axes: 256 cp x 256 dp"},
    {"failure_table", "issue15-1e300-interruptions-endless-monte-carlo.json",
     "the Monte Carlo draws at most"},
    {"scenario", "issue15-slow-rank-2to32-wraps-to-0.json",
     "/faults/slow_ranks/0/rank: rank 4294967296 is past"},
    // Published runs (validate-published): degrees whose product wrapped to zero (SIGFPE), more
    // heads than the hidden size (a GEMM of k = 0, an internal error), a slice size past
    // std::stoll (an internal error). Each is now that run's reason.
    {"published_runs", "degrees-product-wraps-sigfpe.json",
     "h-run: the stated tp 1000 is more than the 32 devices"},
    {"published_runs", "heads-past-hidden-gemm-k-0.json", "h-run: meshsim refuses the scenario"},
    {"published_runs", "slice-chips-past-stoll.json",
     "h-run: the TPU slice size \"99999999999999999999 chips\" is not a chip count"},
    // A stated device count of 0: part of a node divided by it (UBSan: division by zero).
    {"published_runs", "device-count-0-divides-by-zero.json",
     "h-run: the device count 0 is not a count of devices"},
    // A GPT's hidden size of 2^32 + 1: the tied/untied parameter counts were taken before the
    // model's limits were checked (UBSan: signed overflow in the parameter count).
    {"published_runs", "hidden-2to32-parameter-count-overflows.json",
     "/d_model: 4294967297 is above the limit of 2^20"},
    // A hidden size of 2^63 - 1 with the MLP size unstated: the default ratio x hidden overflowed.
    {"published_runs", "hidden-2to63-ffn-default-overflows.json",
     "h-run: the hidden size 9223372036854775807 is past what meshsim counts"},
    // A collective sweep forcing NVLS on two nodes of a fabric without IB SHARP: the planner's
    // refusal escaped predict_collective uncaught (SIGABRT); now an input error naming the sweep.
    {"nccl_tests_log", "nvls-sweep-across-nodes-uncaught-comm-error.json",
     "algorithm nvls does not apply to all-reduce over 8 ranks"},
    // An explicit graph's link from "gpu-1": std::from_chars read device -1, which reached the
    // network builder as vertex 2^32 - 1 (an internal error); now an unknown vertex.
    {"cluster", "graph-device-gpu-minus-1-internal-error.json",
     "/links/2/a: unknown vertex \"gpu-1\""},
};

std::string read(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

const Expectation* expectation(const std::string& target, const std::string& file) {
  for (const Expectation& e : kExpected) {
    if (target == e.target && file == e.file) {
      return &e;
    }
  }
  return nullptr;
}

TEST(FuzzRegressions, EveryFindingIsRefusedAsExpected) {
  int replayed = 0;
  for (const std::string& target : target_names()) {
    const fs::path dir = fs::path(MESHSIM_FUZZ_REGRESSIONS) / target;
    if (!fs::exists(dir)) {
      continue;
    }
    for (const fs::directory_entry& entry : fs::directory_iterator(dir)) {
      const std::string file = entry.path().filename().string();
      if (file == ".gitkeep") {
        continue;
      }
      SCOPED_TRACE(target + "/" + file);
      const Expectation* want = expectation(target, file);
      const Outcome got = run_target(target, read(entry.path()));
      ++replayed;
      if (want == nullptr) {
        ADD_FAILURE() << "a finding without a row in kExpected; it gives: "
                      << (got.accepted ? "accepted" : got.error);
        continue;
      }
      if (std::string(want->message).empty()) {
        EXPECT_TRUE(got.accepted) << got.error;
      } else {
        EXPECT_FALSE(got.accepted);
        EXPECT_THAT(got.error, ::testing::HasSubstr(want->message));
      }
    }
  }
  EXPECT_EQ(replayed, static_cast<int>(std::size(kExpected)));
}

}  // namespace
}  // namespace meshsim::fuzz
