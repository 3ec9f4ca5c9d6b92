// The meshsim command. Exit codes: 0 success, 2 bad input (the message names the file or flag, the
// field and what was expected), 3 the configuration does not fit in memory, 1 internal error.
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <iostream>

#include "calc_command.h"
#include "meshsim/sim/error.h"
#include "run_command.h"
#include "scenario.h"

namespace {

using meshsim::cli::Scenario;

struct RunFlags {
  std::string scenario_file;
  Scenario overrides;
  meshsim::cli::RunOutputs outputs;
  std::string json_path;
  std::string trace_path = "meshsim-trace.json";
  bool no_trace = false;
  std::vector<CLI::Option*> set_opts;
};

// The run flags live on the top-level app, so that `meshsim --json r.json` runs the default
// scenario; `meshsim run [SCENARIO] ...` falls through to them.
void add_run_options(CLI::App* run, RunFlags& f) {
  auto& o = f.overrides;
  f.set_opts = {
      run->add_option("--model", o.model, "Model preset name, meshsim model JSON or HF config.json"),
      run->add_option("--cluster", o.cluster, "Cluster preset name or cluster JSON"),
      run->add_option("--nodes", o.nodes, "Resize the cluster to this many nodes"),
      run->add_option("--dp", o.dp, "Data-parallel degree"),
      run->add_option("--mbs", o.mbs, "Micro-batch size (sequences per rank per microbatch)"),
      run->add_option("--gbs", o.gbs, "Global batch size (sequences per step)"),
      run->add_option("--seq", o.seq, "Sequence length (tokens)"),
      run->add_option("--dtype", o.dtype, "Matmul format")->check(CLI::IsMember({"bf16", "fp8"})),
      run->add_option("--attention", o.attention, "Attention kernel")
          ->check(CLI::IsMember({"flash", "naive"})),
      run->add_option("--hardware-catalogue", o.hardware_catalogue, "Chip catalogue JSON file"),
  };
  run->add_option("--json", f.json_path, "Write the report as JSON to FILE");
  run->add_option("--trace", f.trace_path, "Write a Chrome JSON trace (opens in ui.perfetto.dev)")
      ->capture_default_str();
  run->add_flag("--no-trace", f.no_trace, "Do not write a trace");
}

// The scenario: defaults, then the file, then the flags given explicitly.
Scenario resolve(const RunFlags& f) {
  Scenario s = meshsim::cli::default_scenario();
  if (!f.scenario_file.empty()) {
    s = meshsim::cli::load_scenario(f.scenario_file, s);
  }
  const Scenario& o = f.overrides;
  auto given = [&](const char* name) {
    for (const CLI::Option* opt : f.set_opts) {
      if (opt->get_name() == name && opt->count() > 0) {
        return true;
      }
    }
    return false;
  };
  if (given("--model")) s.model = o.model;
  if (given("--cluster")) s.cluster = o.cluster;
  if (given("--nodes")) s.nodes = o.nodes;
  if (given("--dp")) s.dp = o.dp;
  if (given("--mbs")) s.mbs = o.mbs;
  if (given("--gbs")) s.gbs = o.gbs;
  if (given("--seq")) s.seq = o.seq;
  if (given("--dtype")) s.dtype = o.dtype;
  if (given("--attention")) s.attention = o.attention;
  if (given("--hardware-catalogue")) s.hardware_catalogue = o.hardware_catalogue;
  return s;
}

int run_main(int argc, char** argv) {
  CLI::App app{"meshsim: a discrete-event simulator of distributed training clusters"};
  app.set_version_flag("--version", std::string("meshsim ") + MESHSIM_VERSION);
  RunFlags run_flags;
  add_run_options(&app, run_flags);
  CLI::App* run = app.add_subcommand("run", "Simulate one training step of a scenario");
  run->add_option("scenario", run_flags.scenario_file,
                  "Scenario JSON file (flags override its fields)")
      ->check(CLI::ExistingFile);
  run->fallthrough();

  std::string calc_model;
  int64_t calc_seq = 4096;
  int64_t calc_mbs = 1;
  CLI::App* calc = app.add_subcommand("calc", "Print a model's parameter, FLOP and memory accounting");
  calc->add_option("--model", calc_model, "Model preset name or model JSON")->required();
  calc->add_option("--seq", calc_seq, "Sequence length for FLOPs and activations")
      ->check(CLI::PositiveNumber);
  calc->add_option("--mbs", calc_mbs, "Sequences for the KV cache and activations")
      ->check(CLI::PositiveNumber);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) {
      return app.exit(e);  // --help, --version
    }
    std::cerr << "meshsim: error: " << e.what() << " (run with --help for the options)\n";
    return 2;
  }
  if (*calc) {
    meshsim::cli::print_accounting(calc_model, calc_seq, calc_mbs, std::cout);
    return 0;
  }
  RunFlags& f = run_flags;
  if (!f.json_path.empty()) {
    f.outputs.json_path = f.json_path;
  }
  if (!f.no_trace) {
    f.outputs.trace_path = f.trace_path;
  }
  // No subcommand: the default scenario.
  return meshsim::cli::run_command(resolve(f), f.outputs, std::cout);
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run_main(argc, argv);
  } catch (const meshsim::InputError& e) {
    std::cerr << "meshsim: error: " << e.what() << "\n";
    return 2;
  } catch (const meshsim::InfeasibleError& e) {
    std::cerr << "meshsim: error: " << e.what() << "\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "meshsim: internal error: " << e.what() << "\n";
    return 1;
  }
}
