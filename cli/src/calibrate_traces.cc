#include "calibrate_traces.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <nlohmann/json.hpp>

#include "meshsim/sim/error.h"
#include "meshsim/traces/rank_steps.h"
#include "meshsim/validation/calibrate.h"
#include "meshsim/validation/profile.h"
#include "output_file.h"
#include "trace_limits.h"
#include "version.h"

namespace meshsim::cli {

namespace {

struct LoadedRank {
  std::string file;
  traces::RankTrace trace;
  traces::RankSteps steps;
  validation::RankIdentity id;
};

std::string value_text(const validation::FittedParameter& p, double v) {
  if (p.name == "launch_overhead" || p.name == "call_overhead") {
    return fmt::format("{:.3f} us", v * 1e6);
  }
  return fmt::format("{:.4g}", v);
}

nlohmann::json opt(const std::optional<double>& v) {
  return v ? nlohmann::json(*v) : nlohmann::json(nullptr);
}

nlohmann::json opt_us(const std::optional<Duration>& d) {
  return d ? nlohmann::json(d->seconds()) : nlohmann::json(nullptr);
}

// The base profile: --hardware-profile, or the catalogue's chip as a one-chip profile.
validation::Profile base_profile(const TracePlatform& p) {
  if (p.profile) {
    return *p.profile;
  }
  const nlohmann::json all = topology::Catalogue::builtin_document();
  nlohmann::json doc = {
      {"notes", fmt::format("{} from meshsim's builtin catalogue (topology/chips.json), "
                            "efficiencies fitted by meshsim calibrate",
                            p.chip.name)},
      {"chips", {{p.chip.name, all.at("chips").at(p.chip.name)}}}};
  return validation::profile_from(doc, fmt::format("builtin:topology/chips.json#{}", p.chip.name));
}

}  // namespace

int calibrate_traces_command(const CalibrateTracesArgs& args, std::ostream& out) {
  const std::vector<std::string> files = traces::trace_files(args.inputs.inputs);
  std::vector<LoadedRank> ranks;
  for (size_t i = 0; i < files.size(); ++i) {
    LoadedRank r;
    r.file = files[i];
    r.trace = with_trace_limit_hint(
        [&] { return traces::read_kineto(files[i], args.inputs.limits); });
    r.steps = traces::find_steps(r.trace);
    r.id = validation::rank_identity(r.trace, static_cast<int64_t>(i),
                                     static_cast<int64_t>(files.size()));
    for (const LoadedRank& o : ranks) {
      if (o.id.rank == r.id.rank) {
        throw InputError(files[i], "/distributedInfo/rank",
                         fmt::format("rank {} appears in two of the traces given", r.id.rank));
      }
    }
    ranks.push_back(std::move(r));
  }
  const TracePlatform platform =
      make_platform(ranks.front().trace, ranks.front().id.world, args.inputs);
  std::vector<validation::TraceCase> cases;
  for (const LoadedRank& r : ranks) {
    if (r.id.world != platform.world || r.id.rank >= platform.world) {
      throw InputError(r.file, "/distributedInfo/world_size",
                       fmt::format("rank {} of {}, where {} says a world of {}", r.id.rank,
                                   r.id.world, ranks.front().file, platform.world));
    }
    for (const traces::RankStep& s : r.steps.steps) {
      cases.push_back({&r.trace, &s, r.id.rank});
    }
  }
  const validation::TraceCalibration c = validation::calibrate_traces(
      platform.chip, cases, platform.world, [&platform] { return platform.comm(); });

  out << fmt::format("calibrate {} from {} trace(s), {} step(s), {} distinct kernels fitted\n",
                     platform.chip_origin, files.size(), cases.size(), c.fitted_kernels);
  out << fmt::format("  cluster  {}\n  loss     {:.4g} before, {:.4g} after\n",
                     platform.cluster_origin, c.loss_before, c.loss_after);
  out << fmt::format("\n  {:<24}{:>14}{:>14}  {}\n", "parameter", "catalogue", "fitted", "");
  nlohmann::json params = nlohmann::json::array();
  for (const validation::FittedParameter& p : c.parameters) {
    out << fmt::format("  {:<24}{:>14}{:>14}  {}\n", p.name, value_text(p, p.before),
                       value_text(p, p.after),
                       p.pinned ? "pinned by the traces" : "not pinned: catalogue value kept");
    params.push_back({{"name", p.name}, {"catalogue", p.before}, {"fitted", p.after},
                      {"pinned", p.pinned}});
  }
  out << fmt::format("\n  {:<8}{:>8}{:>14}{:>14}{:>10}{:>10}{:>10}\n", "rank", "step",
                     "measured ms", "fitted ms", "before", "after",
                     c.held_out_by.empty() ? "held out" : "held out");
  nlohmann::json rows = nlohmann::json::array();
  for (const validation::TraceCalibrationCase& k : c.cases) {
    out << fmt::format("  {:<8}{:>8}{:>14.3f}{:>14.3f}{:>+9.1f}%{:>+9.1f}%{:>10}\n", k.rank,
                       k.step, k.measured.seconds() * 1e3, k.fitted_kernels.seconds() * 1e3,
                       100 * k.error_before, 100 * k.error_after,
                       k.error_held_out ? fmt::format("{:+.1f}%", 100 * *k.error_held_out)
                                        : std::string("n/a"));
    rows.push_back({{"rank", k.rank},
                    {"step", k.step},
                    {"measured_step_s", k.measured.seconds()},
                    {"fitted_kernels_s", k.fitted_kernels.seconds()},
                    {"step_time_error_before", k.error_before},
                    {"step_time_error_after", k.error_after},
                    {"step_time_error_held_out", opt(k.error_held_out)},
                    {"held_out_with", k.held_out_with}});
  }
  if (c.max_abs_held_out_error) {
    out << fmt::format("  held out: {} replayed with a fit to the other {}s' steps; the largest "
                       "|error| is {:.1f}%\n",
                       c.held_out_by == "rank" ? "each rank's steps" : "each step",
                       c.held_out_by, 100 * *c.max_abs_held_out_error);
  } else {
    out << "  leave-one-out: impossible with one step of one rank\n";
  }
  out << "\n  kernel time per op class (the fitted kernels), simulated / measured - 1:\n";
  nlohmann::json classes = nlohmann::json::object();
  for (size_t k = 0; k < c.class_errors_after.size(); ++k) {
    if (c.class_errors_after[k]) {
      const std::string name(to_string(static_cast<OpClass>(k)));
      out << fmt::format("    {:<14} before {:+.1f}%, after {:+.1f}%\n", name,
                         100 * c.class_errors_before[k].value_or(0),
                         100 * *c.class_errors_after[k]);
      classes[name] = {{"before", opt(c.class_errors_before[k])},
                       {"after", opt(c.class_errors_after[k])}};
    }
  }
  // Per-op host dispatch, measured: not yet a parameter of a profile (the engine's host model is
  // the stack's), reported for it.
  out << "\n  host dispatch per rank (medians; measured, not fitted: the engine's per-op host "
         "dispatch cost is its stack's):\n";
  nlohmann::json host = nlohmann::json::array();
  for (const LoadedRank& r : ranks) {
    const traces::HostDispatch h = traces::host_dispatch(r.trace, r.steps);
    const auto f = [](const std::optional<Duration>& d) {
      return d ? fmt::format("{:.1f} us", d->microseconds()) : std::string("n/a");
    };
    out << fmt::format("    rank {:<5} launch to launch {}, operator to launch {}, launch call {}, "
                       "launch latency {}\n",
                       r.id.rank, f(h.launch_interval), f(h.op_to_launch), f(h.launch_call),
                       f(h.launch_latency));
    host.push_back({{"rank", r.id.rank},
                    {"launch_to_launch_s", opt_us(h.launch_interval)},
                    {"operator_to_launch_s", opt_us(h.op_to_launch)},
                    {"launch_call_s", opt_us(h.launch_call)},
                    {"launch_latency_s", opt_us(h.launch_latency)}});
  }
  const validation::Profile base = base_profile(platform);
  const std::string source = validation::trace_calibration_source(
      c, base.path, files, fmt::format("meshsim calibrate (meshsim {})", version()));
  write_json_file(args.out, validation::profile_document(base, c.after, source), "--out");
  out << fmt::format("\nwrote {} (chip {}): meshsim run --hardware-catalogue {} with a cluster of "
                     "{}, or meshsim validate --hardware-profile {}\n",
                     args.out, base.chip_name, args.out, base.chip_name, args.out);
  if (args.json_path) {
    write_json_file(*args.json_path,
                    {{"traces", files},
                     {"chip", platform.chip.name},
                     {"base_profile", base.path},
                     {"out", args.out},
                     {"loss_before", c.loss_before},
                     {"loss_after", c.loss_after},
                     {"parameters", params},
                     {"held_out_by", c.held_out_by},
                     {"max_abs_held_out_step_error", opt(c.max_abs_held_out_error)},
                     {"cases", rows},
                     {"op_class_errors", classes},
                     {"host_dispatch", host}},
                    "--json");
  }
  return 0;
}

}  // namespace meshsim::cli
