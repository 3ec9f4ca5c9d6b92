#include "sweep_command.h"

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <unistd.h>

#include <thread>

#include "meshsim/sim/error.h"
#include "meshsim/studies/distribute.h"
#include "meshsim/studies/report_html.h"
#include "meshsim/studies/sweep.h"
#include "progress.h"
#include "scenario_flags.h"
#include "report.h"

namespace meshsim::cli {

CLI::App* add_sweep_command(CLI::App& app, SweepArgs& a) {
  CLI::App* c = app.add_subcommand(
      "sweep", "Run a sweep over scenario fields; write CSV, JSON and an HTML report with plots");
  c->add_option("spec", a.spec, "Sweep spec JSON (axes, base scenario, plans)")->required();
  c->add_option("--csv", a.csv_path, "Write one row per plan of every point as CSV to FILE");
  c->add_option("--json", a.json_path, "Write the sweep as JSON to FILE");
  c->add_option("--html", a.html_path, "Write the report with plots (self-contained) to FILE");
  c->add_option("--vega-dir", a.vega_dir,
                "Where Debian's libjs-vega modules are (inlined into the report)")
      ->capture_default_str();
  c->add_option("--jobs", a.jobs, "Simulations at once within a point's plan search")
      ->check(CLI::Range(int64_t{1}, studies::kMaxJobs));
  add_bool_flag(c, "--no-mpi", a.no_mpi, "Run in one process even under mpirun");
  return c;
}

namespace {

// Writes the file whole or not at all (an OutputFile); InputError on `flag` when it cannot.
template <typename Write>
void write_file(const std::string& path, const std::string& flag, Write write) {
  OutputFile f(path, flag);
  write(f.stream());
  f.commit();
}

void print_sweep_summary(const nlohmann::json& sweep, const std::string& how, std::ostream& out) {
  const auto& points = sweep.at("points");
  out << fmt::format("meshsim: sweep \"{}\": {} points ({} plans), {}\n",
                     sweep.at("title").get<std::string>(), points.size(),
                     sweep.at("plans").get<std::string>(), how);
  for (const nlohmann::json& p : points) {
    std::string label;
    for (const auto& [field, value] : p.at("point").items()) {
      label += fmt::format("{}{}={}", label.empty() ? "" : " ", field,
                           value.is_string() ? value.get<std::string>() : value.dump());
    }
    if (p.at("rows").empty()) {
      out << fmt::format("  {:<40} {}\n", label, p.value("error", std::string("no result")));
      continue;
    }
    const nlohmann::json& r = p.at("rows").front();
    out << fmt::format("  {:<40} {:<34} step {:.3f} s  {:>10.0f} tokens/s  MFU {:4.1f} %{}\n",
                       label, r.at("plan").get<std::string>(), r.at("step_time_s").get<double>(),
                       r.at("tokens_per_s").get<double>(), 100.0 * r.at("mfu").get<double>(),
                       p.contains("error") ? "  (" + p.at("error").get<std::string>() + ")" : "");
  }
}

}  // namespace

int sweep_command(const SweepArgs& a, std::ostream& out) {
  const studies::SweepSpec spec = [&] {
    studies::SweepSpec s = studies::load_sweep_spec(a.spec);
    const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
    s.search_options.jobs = static_cast<int>(a.jobs > 0 ? a.jobs : cores);
    return s;
  }();
  const std::unique_ptr<studies::Distributor> dist =
      a.no_mpi ? studies::make_single_process() : studies::make_distributor();
  const bool lead = dist->rank() == 0;
  std::string mine;
  {
    Progress progress(fmt::format("sweep of {} points", spec.points()),
                      lead ? Progress::mode_here(false) : Progress::Mode::kOff);
    mine = studies::run_sweep(spec, {dist->rank(), dist->size()}, scenario::StepOptions{},
                              [&](int64_t done, int64_t total) {
                                progress.update("points", done, total);
                              });
  }
  const std::vector<std::string> parts = dist->all_gather(mine);
  if (!lead) {
    return 0;
  }
  const nlohmann::json sweep = studies::merge_sweep(spec, parts);
  print_sweep_summary(sweep, dist->describe(), out);
  if (!a.csv_path.empty()) {
    write_file(a.csv_path, "--csv", [&](std::ostream& f) { studies::write_sweep_csv(sweep, f); });
    out << fmt::format("  csv   {}\n", a.csv_path);
  }
  if (!a.json_path.empty()) {
    write_json_file(a.json_path, sweep, "--json");
    out << fmt::format("  json  {}\n", a.json_path);
  }
  if (!a.html_path.empty()) {
    write_file(a.html_path, "--html", [&](std::ostream& f) {
      studies::write_sweep_html(sweep, studies::HtmlOptions{a.vega_dir}, f);
    });
    out << fmt::format("  html  {} (open it in a browser; it needs no network)\n", a.html_path);
  }
  return 0;
}

}  // namespace meshsim::cli
