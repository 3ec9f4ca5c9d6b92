#include "calibrate_collectives_command.h"

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "meshsim/sim/error.h"
#include "meshsim/sim/json_input.h"
#include "meshsim/sim/unit_parse.h"
#include "meshsim/topology/chip.h"
#include "meshsim/validation/collective_fit.h"
#include "output_file.h"
#include "scenario_flags.h"
#include "version.h"

namespace meshsim::cli {
namespace {

namespace fs = std::filesystem;
using validation::CollectiveSweep;
using validation::PlatformParameter;

template <NamedEnum E>
E parse_choice(const std::string& flag, const std::string& text) {
  const std::optional<E> v = parse_enum<E>(text);
  if (!v) {
    throw InputError(flag, "", fmt::format("\"{}\" is not one of {}", text, describe_choices<E>()));
  }
  return *v;
}

std::string flag_of(validation::SweepField f) {
  using F = validation::SweepField;
  switch (f) {
    case F::kTest:
      return "--collective";
    case F::kNccl:
      return "--nccl";
    case F::kAlgorithm:
      return "--algo";
    case F::kProtocol:
      return "--proto";
    case F::kRanks:
      return "--ranks";
    case F::kNodes:
      return "--nodes";
    case F::kColumns:
      return "--columns";
  }
  return "";
}

validation::SweepDefaults defaults_of(const CalibrateCollectivesArgs& a) {
  validation::SweepDefaults d;
  if (a.collective) {
    d.test = parse_choice<traces::NcclTest>("--collective", *a.collective);
  }
  if (a.nccl) {
    std::string why;
    d.nccl = validation::modelled_release(*a.nccl, &why);
    if (!d.nccl) {
      throw InputError("--nccl", "", fmt::format("\"{}\": expected an NCCL release such as 2.18.5 "
                                                 "({})",
                                                 *a.nccl, why));
    }
  }
  if (a.algo) {
    d.algorithm = parse_algo_flag(*a.algo);
  }
  if (a.proto) {
    d.protocol = parse_choice<collectives::NcclProtocol>("--proto", *a.proto);
  }
  for (const auto& [flag, value] : {std::pair{"--ranks", a.ranks}, std::pair{"--nodes", a.nodes}}) {
    if (value && (*value < 1 || *value > topology::kMaxDevices)) {
      throw InputError(flag, "", fmt::format("expected 1 to {}, got {}", topology::kMaxDevices,
                                             *value));
    }
  }
  d.ranks = a.ranks;
  d.nodes = a.nodes;
  if (a.columns != "both" && a.columns != "in-place" && a.columns != "out-of-place") {
    throw InputError("--columns", "",
                     fmt::format("\"{}\" is not one of both, in-place, out-of-place", a.columns));
  }
  d.in_place = a.columns != "out-of-place";
  d.out_of_place = a.columns != "in-place";
  return d;
}

std::vector<CollectiveSweep> read_sweeps(const CalibrateCollectivesArgs& a,
                                         std::vector<traces::NcclTestsLog>& logs) {
  const validation::SweepDefaults d = defaults_of(a);
  std::vector<CollectiveSweep> sweeps;
  for (const std::string& path : a.logs) {
    const std::string head = read_input_file(path, traces::kMaxNcclTestsLogBytes, "a log");
    std::vector<CollectiveSweep> more;
    try {
      if (validation::looks_like_sweep_json(head)) {
        more = validation::read_sweep_file(path);
      } else {
        logs.push_back(traces::parse_nccl_tests_log(head, path));
        more = validation::sweeps_from_log(logs.back(), d);
      }
    } catch (const validation::SweepError& e) {
      throw InputError(flag_of(e.field()), "", e.message());
    }
    for (CollectiveSweep& s : more) {
      sweeps.push_back(std::move(s));
    }
  }
  return sweeps;
}

// The preset of the reference system whose GPUs the log names (CUDA's device names).
std::optional<std::string> preset_for(const std::string& device) {
  // In order: a name that contains a later one's needle comes first (GH200 contains H200). The
  // H100 needle is the SXM part's name ("NVIDIA H100 80GB HBM3"); PCIe and NVL parts match none.
  static const std::pair<const char*, const char*> kPresets[] = {
      {"GH200", nullptr},      {"GB200", "gb200-nvl72"},         {"B200", "dgx-b200"},
      {"H200", "h200"},        {"H100 80GB HBM3", "dgx-h100"},   {"A100-SXM4", "dgx-a100"}};
  for (const auto& [needle, preset] : kPresets) {
    if (device.find(needle) != std::string::npos) {
      return preset == nullptr ? std::nullopt : std::optional<std::string>(preset);
    }
  }
  return std::nullopt;
}

std::string base_name(const CalibrateCollectivesArgs& a, const std::vector<traces::NcclTestsLog>& logs,
                      std::string& why) {
  if (a.cluster) {
    return *a.cluster;
  }
  for (const traces::NcclTestsLog& log : logs) {
    for (const traces::NcclTestsRun& run : log.runs) {
      if (run.devices.empty()) {
        continue;
      }
      if (const std::optional<std::string> p = preset_for(run.devices.front().name)) {
        why = fmt::format(" (chosen from the devices of {}: {}; --cluster names another)",
                          log.source, run.devices.front().name);
        return *p;
      }
      throw InputError("--cluster", "",
                       fmt::format("{} ran on \"{}\", which is no preset's GPU: name the base "
                                   "cluster (a preset or a cluster file)",
                                   log.source, run.devices.front().name));
    }
  }
  throw InputError("--cluster", "",
                   "the inputs list no devices to choose a base from: name the base cluster (a "
                   "preset or a cluster file)");
}

std::string size_text(int64_t bytes) {
  static const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1024 && u < 4) {
    v /= 1024;
    ++u;
  }
  return v == std::floor(v) ? fmt::format("{:.0f} {}", v, kUnits[u])
                            : fmt::format("{:.1f} {}", v, kUnits[u]);
}

std::string value_text(PlatformParameter p, double v) {
  if (p == PlatformParameter::kLaunchFloor || p == PlatformParameter::kSimpleStepOverhead) {
    return fmt::format("{:.2f} us", v * 1e6);
  }
  return fmt::format("{:.4f}", v);
}

void print_sweeps(const std::vector<CollectiveSweep>& sweeps, std::ostream& out) {
  for (const CollectiveSweep& s : sweeps) {
    out << fmt::format("  {}: {} ranks on {} host(s), NCCL {}, algorithm {}{}, {} points\n",
                       s.label, s.ranks, s.nodes, collectives::to_string(s.nccl),
                       collectives::to_string(s.algorithm),
                       s.protocol ? fmt::format(", protocol {}", collectives::to_string(*s.protocol))
                                  : "",
                       s.points.size());
  }
}

void print_parameters(const validation::CollectiveFit& fit, std::ostream& out) {
  out << fmt::format("\n  {:<22} {:<36} {:>12} {:>12}\n", "parameter", "in the cluster file",
                     "base", "fitted");
  for (const validation::ParameterResult& r : fit.parameters) {
    if (!validation::has_parameter(fit.fitted, r.parameter)) {
      continue;
    }
    out << fmt::format("  {:<22} {:<36} {:>12} {:>12}\n", to_string(r.parameter),
                       validation::cluster_pointer(r.parameter), value_text(r.parameter, r.base),
                       r.pinned ? value_text(r.parameter, r.fitted)
                                : std::string("kept: the points do not pin it down"));
  }
}

double error_of(Duration model, Duration measured) { return model / measured - 1; }

void print_residuals(const validation::CollectiveFit& fit,
                     const std::vector<CollectiveSweep>& sweeps, std::ostream& out) {
  out << "\n  residual per size (error = model time / measured time - 1; * = fitted point):\n";
  out << fmt::format("  {:>4} {:>10} {:<13} {:>12} {:>10} {:>8} {:>11} {:>8}  {}\n", "sweep",
                     "size", "column", "measured us", "base us", "error", "fitted us", "error",
                     "model runs");
  for (const validation::PointResult& r : fit.points) {
    out << fmt::format("  {:>4} {:>10} {:<13} {:>12.2f} {:>10.2f} {:>+7.1f}% {:>11.2f} {:>+7.1f}%{} "
                       "{}\n",
                       r.sweep + 1, size_text(r.point.bytes), r.point.column,
                       r.point.time.microseconds(), r.base.microseconds(),
                       100 * error_of(r.base, r.point.time), r.calibrated.microseconds(),
                       100 * error_of(r.calibrated, r.point.time), r.fitted ? "*" : " ",
                       r.algorithm);
  }
  (void)sweeps;
}

// The base as the fragment names it: a preset by name, a file by its path from the fragment's
// directory (which is how the loader resolves it).
std::string base_reference(const std::string& base, const std::string& out_path) {
  if (base.find('/') == std::string::npos && !base.ends_with(".json")) {
    return base;
  }
  const fs::path dir = fs::absolute(fs::path(out_path)).parent_path();
  return fs::proximate(fs::absolute(base), dir).generic_string();
}

nlohmann::json report_json(const validation::CollectiveFit& fit,
                           const std::vector<CollectiveSweep>& sweeps) {
  nlohmann::json j = {{"rms_base", fit.rms_base},
                      {"rms_fitted", fit.rms_calibrated},
                      {"fitted_points", fit.fitted_points},
                      {"evaluations", fit.evaluations}};
  for (const validation::ParameterResult& r : fit.parameters) {
    j["parameters"].push_back({{"name", std::string(to_string(r.parameter))},
                               {"pointer", validation::cluster_pointer(r.parameter)},
                               {"base", r.base},
                               {"fitted", r.fitted},
                               {"pinned", r.pinned}});
  }
  for (const validation::PointResult& r : fit.points) {
    j["points"].push_back({{"sweep", sweeps[r.sweep].label},
                           {"bytes", r.point.bytes},
                           {"column", r.point.column},
                           {"where", r.point.where},
                           {"measured_us", r.point.time.microseconds()},
                           {"base_us", r.base.microseconds()},
                           {"fitted_us", r.calibrated.microseconds()},
                           {"fitted_point", r.fitted},
                           {"model", r.algorithm}});
  }
  return j;
}

}  // namespace

CLI::App* add_calibrate_collectives_command(CLI::App& app, CalibrateCollectivesArgs& a) {
  CLI::App* c = app.add_subcommand(
      "calibrate-collectives",
      "Fit a platform's collective figures (launch floor, per-step overhead, achieved link "
      "rates) to nccl-tests logs; write a cluster fragment");
  c->add_option("logs", a.logs,
                "nccl-tests output (all_reduce_perf, all_gather_perf, reduce_scatter_perf, "
                "alltoall_perf, sendrecv_perf, ...), or a sweep table in meshsim's JSON form")
      ->required();
  c->add_option("--cluster", a.cluster,
                "Base cluster, preset or file (default: the preset of the log's GPUs)");
  c->add_option("--out", a.out, "Write the cluster fragment (base + fitted figures) to FILE")
      ->required();
  c->add_option("--collective", a.collective,
                "The test of logs that do not name it: all_reduce, all_gather, reduce_scatter, "
                "alltoall, sendrecv, broadcast, reduce");
  c->add_option("--nccl", a.nccl, "The NCCL release of logs that do not name it (2.18 on)");
  c->add_option("--algo", a.algo,
                "The NCCL_ALGO the logs ran with, when they do not show it (default: NCCL's "
                "choice)");
  c->add_option("--proto", a.proto, "The NCCL_PROTO the logs ran with (ll, ll128, simple)");
  c->add_option("--ranks", a.ranks, "Ranks of logs that list no devices");
  c->add_option("--nodes", a.nodes, "Hosts of logs that list no devices");
  c->add_option("--min-size", a.min_size,
                "Fit sizes from this one up; smaller ones are reported, not fitted")
      ->capture_default_str();
  c->add_option("--max-size", a.max_size, "Fit sizes up to this one (default: all)");
  c->add_option("--columns", a.columns, "Which times to fit: both, in-place, out-of-place")
      ->capture_default_str();
  c->add_option("--json", a.json_path, "Write the fit and every residual as JSON to FILE");
  return c;
}

int calibrate_collectives_command(const CalibrateCollectivesArgs& a, std::ostream& out) {
  validation::FitOptions options;
  try {
    options.min_bytes = parse_bytes(a.min_size);
    if (a.max_size) {
      options.max_bytes = parse_bytes(*a.max_size);
    }
  } catch (const UnitParseError& e) {
    throw InputError(a.max_size ? "--max-size" : "--min-size", "", e.what());
  }
  OutputFile fragment(a.out, "--out");
  std::optional<OutputFile> json;
  if (a.json_path) {
    json.emplace(*a.json_path, "--json");
  }
  std::vector<traces::NcclTestsLog> logs;
  const std::vector<CollectiveSweep> sweeps = read_sweeps(a, logs);
  std::string why;
  const std::string base = base_name(a, logs, why);
  const topology::ClusterSpec cluster =
      topology::load_cluster(base, topology::Catalogue::builtin());
  out << fmt::format("meshsim calibrate-collectives: {} sweep(s) from {} file(s), base {}{}\n",
                     sweeps.size(), a.logs.size(), cluster.name, why);
  print_sweeps(sweeps, out);
  const validation::CollectiveFit fit =
      validation::fit_collective_platform(cluster, sweeps, options);
  out << fmt::format("fitted on {} points from {} (--min-size){}; residual rms {:.1f}% on the base "
                     "cluster, {:.1f}% fitted ({} model evaluations)\n",
                     fit.fitted_points, size_text(options.min_bytes.count()),
                     a.max_size ? fmt::format(" to {}", size_text(options.max_bytes.count())) : "",
                     100 * fit.rms_base, 100 * fit.rms_calibrated, fit.evaluations);
  print_parameters(fit, out);
  print_residuals(fit, sweeps, out);
  std::string files;
  for (const std::string& l : a.logs) {
    if (!files.empty()) {
      files += ", ";
    }
    files += fs::path(l).filename().string();
  }
  const std::string source = fmt::format(
      "fitted by meshsim {} calibrate-collectives to {} ({} points from {}; residual rms "
      "{:.1f}%)",
      version(), files, fit.fitted_points, size_text(options.min_bytes.count()),
      100 * fit.rms_calibrated);
  const nlohmann::json doc = validation::cluster_fragment(
      fit, base_reference(base, a.out),
      fmt::format("{} with its collective figures fitted to measured sweeps ({})", cluster.name,
                  files),
      source);
  write_json(fragment, doc);
  if (json) {
    write_json(*json, report_json(fit, sweeps));
  }
  out << fmt::format("\nwrote {}: --cluster {} simulates {} with these figures\n", a.out, a.out,
                     cluster.name);
  return 0;
}

}  // namespace meshsim::cli
