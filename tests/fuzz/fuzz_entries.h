// The loaders the fuzz targets drive (issue 15), shared by the libFuzzer targets (fuzz_target.cc,
// built by the `fuzz` preset) and the regression test that replays their findings in every build
// (fuzz_regression_test.cc).
//
// Each entry takes an input's bytes, runs the loader on them and then what meshsim does next with
// what it loaded (accounting for a model, the network for a small cluster and collectives timed on
// it, kernel costs for a chip, the cluster a scenario names with its fabric knobs applied, the
// planned step for a manifest, per-class times and the timeline for a trace). An input is
// either accepted, or refused with an input error: InputError (bad input, located), or
// InfeasibleError, LimitError included (well-formed but impossible or beyond meshsim's 64-bit
// representation). Anything else escapes the entry: an internal error, another exception, a crash
// or a sanitizer report is a finding.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace meshsim::fuzz {

struct Outcome {
  bool accepted = false;
  std::string error;  // the message of the input error when refused
};

// The targets, one per input format: model, hf_config, cluster, chips, scenario, manifest,
// profile, pytorch_trace, jax_trace, kineto_trace (one rank of a multi-GPU trace, streamed),
// sweep_spec, failure_table, published_runs, nccl_tests_log, chakra_trace (model and hf_config
// share a loader, as do the two traces; they differ in seeds and dictionary).
const std::vector<std::string>& target_names();

// Runs `data` through the named target. Throws std::invalid_argument for an unknown name.
Outcome run_target(std::string_view target, std::string_view data);

}  // namespace meshsim::fuzz
