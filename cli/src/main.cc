// The meshsim command. Exit codes: 0 success, 2 bad input (the message names the file or flag, the
// field and what was expected), 3 the configuration does not fit in memory, 1 internal error.
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <fstream>
#include <functional>
#include <iostream>
#include <map>
#include <set>

#include "calc_command.h"
#include "calibrate_collectives_command.h"
#include "calibrate_command.h"
#include "calibrate_traces.h"
#include "collective_command.h"
#include "compare_command.h"
#include "fault_flags.h"
#include "goodput_command.h"
#include "help_markdown.h"
#include "kernel_model_command.h"
#include "meshsim/sim/error.h"
#include "output_file.h"
#include "plan_command.h"
#include "plan_flags.h"
#include "presets_command.h"
#include "published_command.h"
#include "run_command.h"
#include "scenario_flags.h"
#include "sweep_command.h"
#include "trace_limits.h"
#include "validate_command.h"
#include "validate_traces.h"
#include "version.h"
#include "workload_command.h"

namespace {

using meshsim::Origin;
using meshsim::cli::flag_of;
using meshsim::cli::Scenario;

constexpr const char* kMaxTraceSizeHelp =
    "Largest measured trace to read, as stored and inflated (a manifest's trace: default 64MiB, "
    "the parsed document takes 15 to 35 times that in memory; per-rank profiler traces, streamed "
    "in bounded memory: default 64GiB stored, 256GiB inflated)";

// A flag bound to the override scenario, applied (with its origin) only when given on the
// command line.
struct Override {
  CLI::Option* option;
  std::function<void(Scenario&)> apply;
};

struct RunFlags {
  std::string scenario_file;
  Scenario given;                  // values of the flags that map onto scenario fields
  meshsim::cli::PlanFlags plan;    // the plan's flags, one per field (plan_flags.h)
  std::vector<Override> overrides;
  meshsim::cli::RunOutputs outputs;
  std::string json_path;
  int64_t gpus = 0;  // --gpus: the cluster resized to this many devices (nodes, or part of one)
  std::string trace_path = "meshsim-trace.pftrace";
  std::string trace_ranks;
  std::string trace_limit;  // --trace-limit, a size ("64GiB")
  bool no_trace = false;
  // --trace-limit's limit (the default where not given); refused with --no-trace.
  meshsim::cli::TraceLimit limit_of_trace() const {
    if (no_trace && !trace_limit.empty()) {
      throw meshsim::InputError("--trace-limit", "", "there is no trace to limit (--no-trace)");
    }
    return meshsim::cli::trace_limit_flag(trace_limit);
  }
  meshsim::cli::CommFlags comm;
  // Fault flags (cli/src/fault_flags.h), each replacing that part of the scenario's "faults"
  // block.
  std::vector<std::string> slow_ranks;
  std::string stragglers;
  double kernel_jitter = 0;
  std::vector<std::string> degrade;
  std::vector<std::string> fail;
  int64_t fault_seed = 0;
  std::string workload;       // --workload: Chakra traces instead of a model and a plan
  std::string export_chakra;  // --export-chakra DIR
};

// The Chakra flags of `run` (not of goodput: a whole run's days are a model's).
void add_chakra_options(CLI::App* app, RunFlags& f) {
  app->add_option("--workload", f.workload,
                  "Simulate Chakra execution traces (a directory of <prefix>.<rank>.et files, or "
                  "their prefix) instead of a model and a plan; needs --cluster");
  app->add_option("--export-chakra", f.export_chakra,
                  "Write every rank's program as a Chakra execution trace to DIR (rank.N.et and "
                  "comm_group.json)");
}

// `run --workload`: only the cluster, communication and output flags apply.
int workload_main(const CLI::App& app, const CLI::App& run, RunFlags& f) {
  static const std::set<std::string> kApply = {
      "--workload", "--export-chakra", "--cluster", "--nodes", "--shape", "--hardware-catalogue",
      "--oversubscription", "--tiers", "--rail-optimized", "--nics-per-device", "--nic-bandwidth",
      "--sharp", "--backend", "--algo", "--proto", "--nccl", "--json", "--trace", "--trace-ranks",
      "--no-trace", "--full-simulation"};
  for (const CLI::App* a : {&app, &run}) {
    for (const CLI::Option* o : a->get_options()) {
      if (o->count() > 0 && kApply.count(o->get_name()) == 0 && o->get_name() != "--help") {
        throw meshsim::InputError(
            o->get_name().empty() ? "scenario" : o->get_name(), "",
            "does not apply to --workload: the programs come from the Chakra traces (a model, a "
            "plan and faults do not apply); the cluster and communication flags, --json, --trace "
            "and --export-chakra do");
      }
    }
  }
  bool cluster_given = false;
  for (const CLI::App* a : {&app, &run}) {
    cluster_given = cluster_given || a->get_option("--cluster")->count() > 0;
  }
  if (!cluster_given) {
    throw meshsim::InputError("--workload", "",
                              "name the cluster to simulate the traces on (--cluster)");
  }
  meshsim::cli::WorkloadArgs w;
  w.path = f.workload;
  w.cluster.cluster = f.given.cluster;
  w.cluster.nodes = f.given.nodes;
  w.cluster.shape = f.given.shape;
  w.cluster.hardware_catalogue = f.given.hardware_catalogue;
  w.cluster.fabric = f.given.fabric;
  w.comm = meshsim::cli::comm_options(f.comm);
  if (!f.json_path.empty()) {
    w.json_path = f.json_path;
  }
  w.trace_limit = f.limit_of_trace();
  if (!f.no_trace) {
    w.trace_path = f.trace_path;
    if (!f.trace_ranks.empty()) {
      w.trace_ranks = f.trace_ranks;
    }
  }
  if (!f.export_chakra.empty()) {
    w.export_dir = f.export_chakra;
  }
  return meshsim::cli::workload_command(w, std::cout);
}

void add_fault_options(CLI::App* app, RunFlags& f) {
  const auto add = [&f](CLI::Option* o, std::function<void(Scenario&)> apply) {
    f.overrides.push_back({o, std::move(apply)});
  };
  add(app->add_option("--slow-rank", f.slow_ranks,
                      "RANK:FACTOR: the rank's kernels take FACTOR times as long (repeatable)"),
      [&f](Scenario& s) { meshsim::cli::set_slow_ranks_flag(f.slow_ranks, s.faults); });
  add(app->add_option("--stragglers", f.stragglers,
                      "FRACTION:MIN:MAX: each rank is slow with probability FRACTION, by a "
                      "factor uniform in [MIN, MAX] (seeded)"),
      [&f](Scenario& s) { meshsim::cli::set_stragglers_flag(f.stragglers, s.faults); });
  add(app->add_option("--kernel-jitter", f.kernel_jitter,
                      "Coefficient of variation of every kernel's time (lognormal, seeded)"),
      [&f](Scenario& s) { meshsim::cli::set_kernel_jitter_flag(f.kernel_jitter, s.faults); });
  add(app->add_option("--degrade", f.degrade,
                      "DEVICE:LINK:FACTOR: the device's LINK (network, nvlink, ici, pcie) keeps "
                      "FACTOR of its bandwidth (repeatable)"),
      [&f](Scenario& s) { meshsim::cli::set_degrade_flag(f.degrade, s.faults); });
  add(app->add_option("--fail", f.fail,
                      "DEVICE:LINK[:WHICH]: the device's LINK (network, pcie: all its NICs, or "
                      "NIC WHICH; ici: the link WHICH, e.g. x+) is down and its traffic "
                      "rerouted where the fabric allows (repeatable)"),
      [&f](Scenario& s) { meshsim::cli::set_fail_flag(f.fail, s.faults); });
  add(app->add_option("--fault-seed", f.fault_seed, "Seed of the stragglers and the jitter")
          ->check(CLI::NonNegativeNumber),
      [&f](Scenario& s) { s.faults.compute.seed = static_cast<uint64_t>(f.fault_seed); });
}

// Copies one fabric knob from the flags to the scenario.
void copy_fabric_field(const meshsim::scenario::FabricKnobs& from,
                       meshsim::scenario::FabricKnobs& to,
                       meshsim::topology::FabricField field) {
  using F = meshsim::topology::FabricField;
  switch (field) {
    case F::kOversubscription:
      to.oversubscription = from.oversubscription;
      break;
    case F::kTiers:
      to.tiers = from.tiers;
      break;
    case F::kRailOptimized:
      to.rail_optimized = from.rail_optimized;
      break;
    case F::kNicsPerDevice:
      to.nics_per_device = from.nics_per_device;
      break;
    case F::kNicBandwidth:
      to.nic_bandwidth = from.nic_bandwidth;
      break;
    case F::kSharp:
      to.sharp = from.sharp;
      break;
  }
}

// A flag of a scenario field outside the plan (model, cluster, ...).
template <typename T>
void bind_scenario(CLI::App* app, RunFlags& f, meshsim::scenario::ScenarioField which,
                   T Scenario::*field, const std::string& help) {
  const std::string name = meshsim::cli::flag_of(which);
  CLI::Option* o = app->add_option(name, f.given.*field, help);
  f.overrides.push_back({o, [&f, field, which, name](Scenario& s) {
                           s.*field = f.given.*field;
                           s.origins.set(which, Origin::flag(name));
                         }});
}

void add_run_options(CLI::App* app, RunFlags& f) {
  using meshsim::scenario::ScenarioField;
  bind_scenario(app, f, ScenarioField::kModel, &Scenario::model,
                "Model preset, meshsim model JSON or HF config.json");
  bind_scenario(app, f, ScenarioField::kCluster, &Scenario::cluster,
                "Cluster preset or cluster JSON");
  bind_scenario(app, f, ScenarioField::kNodes, &Scenario::nodes,
                "Resize a GPU cluster to this many nodes");
  app->add_option("--gpus", f.gpus,
                  "Resize a GPU cluster to this many devices: whole nodes, or part of one node "
                  "(e.g. 2 of a DGX's 8, each keeping its NVLink bandwidth); --nodes counts nodes")
      ->check(meshsim::cli::positive_number());
  bind_scenario(app, f, ScenarioField::kShape, &Scenario::shape,
                "Resize a TPU slice to this torus, e.g. 8x16x16");
  bind_scenario(app, f, ScenarioField::kSlices, &Scenario::slices,
                "TPU: this many identical slices joined by DCN (MaxText multi-slice)");
  bind_scenario(app, f, ScenarioField::kDcnDp, &Scenario::dcn_dp,
                "MaxText dcn_data_parallelism: replicas across slices, FSDP over dp / this "
                "inside each (sets --fsdp; --dp stays the total)");
  f.plan.add_to(app);
  meshsim::cli::add_fabric_options(app, f.given.fabric,
                     [&f](CLI::Option* o, meshsim::topology::FabricField field) {
                       f.overrides.push_back({o, [&f, field](Scenario& s) {
                                                copy_fabric_field(f.given.fabric, s.fabric, field);
                                                s.fabric.origins.set(
                                                    field, meshsim::Origin::flag(
                                                               meshsim::cli::flag_of(field)));
                                              }});
                     });
  bind_scenario(app, f, ScenarioField::kHardwareCatalogue, &Scenario::hardware_catalogue,
                "Chip catalogue JSON");
  app->add_option("--json", f.json_path, "Write the report as JSON to FILE");
  meshsim::cli::add_budget_options(app, f.outputs.budget);
  app->add_option("--trace", f.trace_path,
                  "Write the timeline: FILE.pftrace (native Perfetto) or FILE.json (Chrome JSON)")
      ->capture_default_str();
  app->add_option("--trace-ranks", f.trace_ranks,
                  "Ranks in the trace: all | 0-7,64 | stage:0 | node:3 (default: the first rank "
                  "of each stage and the TP group of rank 0)");
  app->add_option("--trace-limit", f.trace_limit,
                  "Largest trace to write, e.g. 64GiB (default 16GiB: Perfetto's UI opens about "
                  "2 GB; past the limit the run stops with exit 2)");
  meshsim::cli::add_bool_flag(app, "--no-trace", f.no_trace, "Do not write a trace");
  meshsim::cli::add_bool_flag(app, "--full-simulation", f.outputs.step.full_simulation,
                "Simulate every rank instead of one per class of identical ranks");
  add_fault_options(app, f);
  app->add_option("--backend", f.comm.backend, "Collective cost backend")
      ->check(CLI::IsMember({"analytical", "simgrid"}))
      ->capture_default_str();
  app->add_option("--algo", f.comm.algorithm,
                  "Collective algorithm (default: what NCCL's tuner, or XLA on a TPU, picks)")
      ->capture_default_str();
  app->add_option("--proto", f.comm.protocol, "NCCL protocol: auto, ll, ll128, simple")
      ->capture_default_str();
  app->add_option("--nccl", f.comm.nccl, "NCCL release whose tuner decides (2.18 on)")
      ->capture_default_str();
}

bool given(const RunFlags& f, const std::string& name) {
  for (const Override& o : f.overrides) {
    if (o.option->get_name() == name && o.option->count() > 0) {
      return true;
    }
  }
  return false;
}

void add_cluster_options(CLI::App* app, meshsim::cli::ClusterArgs& a) {
  app->add_option("--cluster", a.cluster, "Cluster preset or cluster JSON")->capture_default_str();
  app->add_option("--nodes", a.nodes, "Resize a GPU cluster to this many nodes");
  app->add_option("--shape", a.shape, "Resize a TPU slice to this torus, e.g. 8x16x16");
  app->add_option("--hardware-catalogue", a.hardware_catalogue, "Chip catalogue JSON");
  meshsim::cli::add_fabric_options(app, a.fabric, [&a](CLI::Option*, meshsim::topology::FabricField f) {
    a.fabric.origins.set(f, meshsim::Origin::flag(meshsim::cli::flag_of(f)));
  });
}

// The scenario: a base (see Scenario), then the file, then the flags given explicitly.
Scenario resolve(const RunFlags& f) {
  const bool names_workload =
      given(f, "--model") || given(f, "--cluster") ||
      (!f.scenario_file.empty() &&
       meshsim::scenario::scenario_file_names_workload(f.scenario_file));
  Scenario s = names_workload ? Scenario{} : meshsim::scenario::default_scenario();
  if (!f.scenario_file.empty()) {
    s = meshsim::scenario::load_scenario(f.scenario_file, s);
  }
  for (const Override& o : f.overrides) {
    if (o.option->count() > 0) {
      o.apply(s);
    }
  }
  f.plan.apply(s.plan);
  if (given(f, "--shape") && !s.origins[meshsim::scenario::ScenarioField::kNodes].given()) {
    s.nodes.reset();  // the base's node count (the default scenario's) gives way to the shape
  }
  if (given(f, "--nodes") || given(f, "--shape")) {
    s.gpus.reset();  // a scenario file's GPU count gives way to the size the flags give
  }
  if (f.gpus > 0) {
    meshsim::cli::resize_to_devices(s, f.gpus);
  }
  meshsim::cli::located(s, [&s] { meshsim::scenario::complete(s); });
  return s;
}

// Where a command prints its text report: standard output, or standard error when its JSON goes to
// standard output ("--json -"), so that standard output holds the JSON alone.
std::ostream& report_stream(const std::string& json_path) {
  return json_path == meshsim::cli::kStandardOutput ? std::cerr : std::cout;
}

int run_main(int argc, char** argv) {
  CLI::App app{"meshsim: a discrete-event simulator of distributed training clusters"};
  app.set_version_flag("--version", "meshsim " + std::string(meshsim::cli::version()));
  app.footer(
      "meshsim presets lists the models, clusters, chips and software stacks built in; meshsim "
      "SUBCOMMAND --help a subcommand's options.");
  RunFlags run_flags;
  add_run_options(&app, run_flags);
  CLI::App* run = app.add_subcommand("run", "Simulate one training step of a scenario");
  // A scenario file that does not exist is often the value of a flag that is not one (`run --tpp
  // 8`): say so rather than "File does not exist: 8".
  const CLI::Validator scenario_file(
      [](std::string& path) {
        return std::ifstream(path).good()
                   ? std::string()
                   : "\"" + path + "\" is not a scenario file (if it is the value of a flag, "
                                    "that flag is unknown: --help lists them)";
      },
      "FILE");
  run->add_option("scenario", run_flags.scenario_file,
                  "Scenario JSON file (flags override its fields)")
      ->check(scenario_file);
  // The run flags on `run` too, so that `meshsim run --help` lists them.
  add_run_options(run, run_flags);
  add_chakra_options(&app, run_flags);
  add_chakra_options(run, run_flags);
  run->fallthrough();

  // `goodput`: the run's scenario flags, then a whole run under failures and checkpoints.
  meshsim::cli::GoodputArgs goodput_args;
  CLI::App* goodput = app.add_subcommand(
      "goodput", "Days to train and goodput of a scenario under failures, checkpoints and "
                 "restarts (Monte Carlo, with Young/Daly's optimum interval)");
  goodput->add_option("scenario", run_flags.scenario_file,
                      "Scenario JSON file (flags override its fields)")
      ->check(scenario_file);
  add_run_options(goodput, run_flags);
  meshsim::cli::add_goodput_options(goodput, goodput_args);
  goodput->fallthrough();

  std::string calc_model;
  int64_t calc_seq = 4096;
  int64_t calc_mbs = 1;
  CLI::App* calc = app.add_subcommand("calc", "Print a model's parameter, FLOP and memory accounting");
  calc->add_option("--model", calc_model, "Model preset name or model JSON")->required();
  calc->add_option("--seq", calc_seq, "Sequence length for FLOPs and activations")
      ->check(meshsim::cli::positive_number());
  calc->add_option("--mbs", calc_mbs, "Sequences for the KV cache and activations")
      ->check(meshsim::cli::positive_number());

  meshsim::cli::ClusterArgs topo_args;
  CLI::App* topo = app.add_subcommand("topology", "Summarize a cluster's network");
  add_cluster_options(topo, topo_args);

  meshsim::cli::CollectiveArgs coll;
  CLI::App* collective =
      app.add_subcommand("collective", "Time a collective over sizes, like nccl-tests");
  add_cluster_options(collective, coll.cluster);
  collective->add_option("--op", coll.op,
                         "allreduce, reducescatter, allgather, alltoall, broadcast, reduce, "
                         "sendrecv")
      ->capture_default_str();
  collective->add_option("--group", coll.group, "all | 0-7,64 | node:0-3 | rail:K")
      ->capture_default_str();
  collective->add_option("--algo", coll.algo, "Algorithm (auto: what NCCL's tuner picks)")
      ->capture_default_str();
  collective->add_option("--proto", coll.proto, "NCCL protocol: auto, ll, ll128, simple")
      ->capture_default_str();
  collective->add_option("--nccl", coll.nccl, "NCCL release whose tuner decides (2.18 on)")
      ->capture_default_str();
  collective->add_option("--backend", coll.backend, "analytical or simgrid")->capture_default_str();
  collective->add_option("--sizes", coll.sizes, "MIN:MAX, e.g. 8B:8GiB")->capture_default_str();
  collective->add_option("--factor", coll.factor, "Size step factor")->capture_default_str();
  std::string coll_json;
  collective->add_option("--json", coll_json, "Write the rows as JSON to FILE");

  meshsim::cli::ValidateArgs val;
  std::vector<std::string> val_inputs;
  std::string val_cluster;
  std::string val_json;
  CLI::App* validate = app.add_subcommand(
      "validate",
      "Compare measured steps with meshsim's: a validation manifest (one device), or the per-rank "
      "PyTorch profiler traces of a multi-GPU job (files or directories), replayed");
  validate->add_option("inputs", val_inputs,
                       "manifest.json of a measured run, or trace files / directories of them")
      ->required();
  validate->add_option("--hardware-profile", val.hardware_profile,
                       "One-chip catalogue JSON describing the measured hardware (traces: "
                       "default, the chip their deviceProperties name)");
  validate->add_option("--cluster", val_cluster,
                       "Traces: the cluster their collectives ran on, a preset or cluster JSON "
                       "(default: the chip's reference system)");
  validate->add_option("--json", val_json, "Write the comparison as JSON to FILE");
  std::string val_trace;
  validate->add_option("--trace", val_trace,
                       "Write the simulated and the measured step side by side: FILE.pftrace "
                       "(native Perfetto) or FILE.json (Chrome JSON)");
  double val_max_error = -1;
  validate
      ->add_option("--max-step-error", val_max_error,
                   "Exit with status 4 when |simulated / measured - 1| of the step time "
                   "exceeds this fraction (e.g. 0.05)")
      ->check(meshsim::cli::positive_number());
  std::string val_trace_size;
  validate->add_option("--max-trace-size", val_trace_size, kMaxTraceSizeHelp);

  meshsim::cli::CalibrateArgs cal;
  std::string cal_json;
  CLI::App* calibrate = app.add_subcommand(
      "calibrate", "Fit a chip's efficiency parameters to measured runs (with leave-one-out)");
  std::string cal_cluster;
  calibrate->add_option("manifests", cal.manifests,
                        "manifest.json files of measured runs, or profiler trace files / "
                        "directories of them")
      ->required();
  calibrate->add_option("--cluster", cal_cluster,
                        "Traces: the cluster their collectives ran on, a preset or cluster JSON "
                        "(default: the chip's reference system)");
  calibrate->add_option("--out", cal.out, "Write the fitted hardware profile to FILE")->required();
  calibrate->add_option("--hardware-profile", cal.hardware_profile,
                        "Base one-chip catalogue JSON (its efficiencies are the starting point; "
                        "traces: default, the catalogue's chip their deviceProperties name)");
  calibrate->add_option("--json", cal_json, "Write the errors before, after and held out as JSON");
  std::string cal_trace_size;
  calibrate->add_option("--max-trace-size", cal_trace_size, kMaxTraceSizeHelp);

  meshsim::cli::CalibrateCollectivesArgs calcoll_args;
  CLI::App* calcoll = meshsim::cli::add_calibrate_collectives_command(app, calcoll_args);
  meshsim::cli::KernelModelArgs kernel_args;
  CLI::App* kernel_model = meshsim::cli::add_kernel_model_command(app, kernel_args);

  meshsim::cli::PlanArgs plan_args;
  CLI::App* plan = meshsim::cli::add_plan_command(app, plan_args);
  meshsim::cli::SweepArgs sweep_args;
  CLI::App* sweep = meshsim::cli::add_sweep_command(app, sweep_args);
  std::string compare_a;
  std::string compare_b;
  CLI::App* compare = app.add_subcommand(
      "compare", "Two run reports (meshsim run --json) side by side: what changed and why");
  compare->add_option("a", compare_a, "The first report (A)")->required();
  compare->add_option("b", compare_b, "The second report (B)")->required();

  meshsim::cli::PublishedArgs pub;
  std::string pub_json, pub_thresholds;
  CLI::App* published = app.add_subcommand(
      "validate-published",
      "Compare meshsim with published real-hardware training runs (step time per run)");
  published->add_option("runs", pub.runs, "published_runs.json")->required();
  published->add_option("--json", pub_json, "Write the report as JSON to FILE");
  published->add_option("--thresholds", pub_thresholds,
                        "thresholds.json: exit with status 4 beyond its \"published\" limits");
  meshsim::cli::add_bool_flag(published, "--assumptions", pub.assumptions,
                      "Print how each measured metric became a step time and every default "
                      "applied");
  std::string pub_run, pub_trace, pub_trace_ranks;
  published->add_option("--run", pub_run,
                        "Only the run with this id, reported as `meshsim run` reports a step "
                        "(with --json its report, with --trace its timeline)");
  published->add_option("--trace", pub_trace,
                        "With --run: write its timeline, FILE.pftrace (native Perfetto) or "
                        "FILE.json (Chrome JSON)");
  published->add_option("--trace-ranks", pub_trace_ranks,
                        "With --run and --trace: the ranks in the trace, as meshsim run's");
  meshsim::cli::add_bool_flag(published, "--full-simulation", pub.full_simulation,
                      "With --run: simulate every rank instead of one per class of identical "
                      "ranks, as meshsim run --full-simulation");

  CLI::App* presets = app.add_subcommand(
      "presets", "List the built-in models, clusters, chips and software stacks, one line each");
  // Hidden (no group): writes docs/cli.md from these definitions.
  CLI::App* help_markdown =
      app.add_subcommand("help-markdown", "Print this command line as Markdown (docs/cli.md)")
          ->group("");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) {
      return app.exit(e);  // --help, --version
    }
    std::cerr << "meshsim: error: " << e.what() << " (run with --help for the options)\n";
    return 2;
  }
  if (*presets) {
    meshsim::cli::presets_command(std::cout);
    return 0;
  }
  if (*help_markdown) {
    meshsim::cli::write_cli_markdown(app, std::cout);
    return 0;
  }
  if (*validate) {
    if (meshsim::cli::looks_like_traces(val_inputs)) {
      meshsim::cli::ValidateTracesArgs vt;
      vt.inputs.inputs = val_inputs;
      vt.inputs.hardware_profile = val.hardware_profile;
      vt.inputs.cluster = val_cluster;
      if (!val_json.empty()) {
        vt.json_path = val_json;
      }
      if (val_max_error > 0) {
        vt.max_step_error = val_max_error;
      }
      if (!val_trace.empty()) {
        vt.trace_path = val_trace;
      }
      if (!val_trace_size.empty()) {
        meshsim::cli::set_trace_size(vt.inputs.limits, val_trace_size);
      }
      return meshsim::cli::validate_traces_command(vt, std::cout);
    }
    if (val_inputs.size() != 1) {
      throw meshsim::InputError(val_inputs[1], "",
                                "validate takes one manifest, or profiler traces (this is "
                                "neither a directory nor a Chrome trace)");
    }
    if (!val_cluster.empty()) {
      throw meshsim::InputError("--cluster", "",
                                "a manifest's single device needs no cluster: --cluster is for "
                                "profiler traces");
    }
    val.manifest = val_inputs.front();
    if (!val_json.empty()) {
      val.json_path = val_json;
    }
    if (val_max_error > 0) {
      val.max_step_error = val_max_error;
    }
    if (!val_trace.empty()) {
      val.trace_path = val_trace;
    }
    if (!val_trace_size.empty()) {
      val.trace_limits = meshsim::cli::trace_limits_from(val_trace_size);
    }
    return meshsim::cli::validate_command(val, report_stream(val_json));
  }
  if (*published) {
    if (!pub_json.empty()) {
      pub.json_path = pub_json;
    }
    if (!pub_thresholds.empty()) {
      pub.thresholds = pub_thresholds;
    }
    if (!pub_run.empty()) {
      pub.run_id = pub_run;
    }
    if (!pub_trace.empty()) {
      pub.trace_path = pub_trace;
    }
    if (!pub_trace_ranks.empty()) {
      pub.trace_ranks = pub_trace_ranks;
    }
    return meshsim::cli::published_command(pub, report_stream(pub_json));
  }
  if (*calibrate) {
    if (meshsim::cli::looks_like_traces(cal.manifests)) {
      meshsim::cli::CalibrateTracesArgs ct;
      ct.inputs.inputs = cal.manifests;
      ct.inputs.hardware_profile = cal.hardware_profile;
      ct.inputs.cluster = cal_cluster;
      ct.out = cal.out;
      if (!cal_json.empty()) {
        ct.json_path = cal_json;
      }
      if (!cal_trace_size.empty()) {
        meshsim::cli::set_trace_size(ct.inputs.limits, cal_trace_size);
      }
      return meshsim::cli::calibrate_traces_command(ct, std::cout);
    }
    if (!cal_cluster.empty()) {
      throw meshsim::InputError("--cluster", "",
                                "manifests' single devices need no cluster: --cluster is for "
                                "profiler traces");
    }
    if (!cal_json.empty()) {
      cal.json_path = cal_json;
    }
    if (!cal_trace_size.empty()) {
      cal.trace_limits = meshsim::cli::trace_limits_from(cal_trace_size);
    }
    return meshsim::cli::calibrate_command(cal, report_stream(cal_json));
  }
  if (*calcoll) {
    return meshsim::cli::calibrate_collectives_command(calcoll_args, std::cout);
  }
  if (*kernel_model) {
    return meshsim::cli::kernel_model_command(kernel_args, std::cout);
  }
  if (*compare) {
    return meshsim::cli::compare_command(compare_a, compare_b, std::cout);
  }
  if (*sweep) {
    return meshsim::cli::sweep_command(sweep_args, report_stream(sweep_args.json_path));
  }
  if (*plan) {
    return meshsim::cli::plan_command(plan_args, report_stream(plan_args.json_path));
  }
  if (*calc) {
    meshsim::cli::print_accounting(calc_model, calc_seq, calc_mbs, std::cout);
    return 0;
  }
  if (*topo) {
    meshsim::cli::topology_command(topo_args, std::cout);
    return 0;
  }
  if (*collective) {
    if (!coll_json.empty()) {
      coll.json_path = coll_json;
    }
    meshsim::cli::collective_command(coll, report_stream(coll_json));
    return 0;
  }
  RunFlags& f = run_flags;
  f.outputs.step.comm = meshsim::cli::comm_options(f.comm);
  if (!f.json_path.empty()) {
    f.outputs.json_path = f.json_path;
  }
  f.outputs.trace_limit = f.limit_of_trace();
  if (!f.no_trace) {
    f.outputs.trace_path = f.trace_path;
    if (!f.trace_ranks.empty()) {
      f.outputs.trace_ranks = f.trace_ranks;
    }
  }
  if (*goodput) {
    // A trace only when asked for (the run's default trace file is not written).
    if (goodput->get_option("--trace")->count() == 0 && app.get_option("--trace")->count() == 0) {
      f.outputs.trace_path.reset();
    }
    return meshsim::cli::goodput_command(resolve(f), f.outputs, goodput_args,
                                         report_stream(f.json_path));
  }
  if (!f.workload.empty()) {
    return workload_main(app, *run, f);
  }
  if (!f.export_chakra.empty()) {
    f.outputs.export_chakra = f.export_chakra;
  }
  // No subcommand: the default scenario.
  return meshsim::cli::run_command(resolve(f), f.outputs, report_stream(f.json_path));
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run_main(argc, argv);
  } catch (const meshsim::InputError& e) {
    std::cerr << "meshsim: error: " << e.what() << "\n";
    return 2;
  } catch (const meshsim::workloads::PlanError& e) {
    // A plan no edge located (a validation manifest's): the field's name and what was expected.
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
