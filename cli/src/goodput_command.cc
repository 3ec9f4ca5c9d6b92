#include "goodput_command.h"

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <numeric>

#include "meshsim/sim/error.h"
#include "meshsim/sim/unit_parse.h"
#include "meshsim/studies/goodput.h"
#include "output_file.h"
#include "progress.h"
#include "scenario_flags.h"

namespace meshsim::cli {

using studies::GoodputField;

// Defaults, with their sources:
//  --storage-bandwidth 2TB/s: Meta's Tectonic file system behind the Llama 3 405B run, "2 TB/s
//    sustained throughput, 7 TB/s peak" (Dubey et al. 2024, The Llama 3 Herd of Models,
//    Sec. 3.3.1).
//  --snapshot-bandwidth 64GB/s: one direction of PCIe Gen5 x16, the H100 SXM's host link (NVIDIA
//    H100 datasheet: PCIe Gen5 128 GB/s, both directions); a peak, real copies reach less.
//  --restart-time 10min: an assumption, not a measurement (rescheduling, process start, NCCL
//    init and warm-up steps; no published figure for the Llama 3 run was verified): set it.
void add_goodput_options(CLI::App* app, GoodputArgs& a) {
  app->add_option("--checkpoint-interval", a.checkpoint_interval,
                  "Work between checkpoints: auto (the interval that maximises goodput) or a "
                  "duration, e.g. 30min, 1.5h, 600s")
      ->capture_default_str();
  add_checkpoint_options(app, a);
  app->add_option("--runs", a.runs, "Monte Carlo runs (1 to 1000000)")->capture_default_str();
  app->add_option("--seed", a.seed, "Monte Carlo seed (0 to 2^64 - 1)")
      ->check(CLI::Validator(
          [](std::string& v) {
            return !v.empty() && v.front() == '-'
                       ? std::string("expected a seed from 0 to 2^64 - 1, got ") + v
                       : std::string();
          },
          "SEED"))
      ->capture_default_str();
}

void add_checkpoint_options(CLI::App* app, GoodputArgs& a) {
  app->add_option("--node-storage-bandwidth", a.node_storage_bandwidth,
                  "Each node's checkpoint write and read bandwidth (default: no limit but the "
                  "aggregate); with it, who writes the checkpoint matters: replicated state by "
                  "one DP replica's nodes, sharded state by all");
  app->add_option("--storage-bandwidth", a.storage_bandwidth,
                  "Aggregate checkpoint write and read bandwidth (default: Llama 3's Tectonic, "
                  "2 TB/s sustained)")
      ->capture_default_str();
  add_bool_flag(app, "--async-checkpoint", a.async_checkpoint,
                "Training stops only to snapshot each rank's shard to host memory; the write to "
                "storage runs behind it");
  app->add_option("--snapshot-bandwidth", a.snapshot_bandwidth,
                  "Device-to-host copy bandwidth per device for --async-checkpoint (default: "
                  "PCIe Gen5 x16, one direction)")
      ->capture_default_str();
  app->add_option("--restart-time", a.restart_time,
                  "Relaunch and warm-up after an interruption, besides loading the checkpoint "
                  "(default 10min: an assumption)")
      ->capture_default_str();
  app->add_option("--failure-table", a.failure_table,
                  "Interruption table JSON (schema of studies/data/failures-llama3.json)");
}

std::string flag_of(GoodputField f) {
  switch (f) {
    case GoodputField::kCheckpointInterval:
      return "--checkpoint-interval";
    case GoodputField::kStorageBandwidth:
      return "--storage-bandwidth";
    case GoodputField::kSnapshotBandwidth:
      return "--snapshot-bandwidth";
    case GoodputField::kRestartTime:
      return "--restart-time";
    case GoodputField::kRuns:
      return "--runs";
    case GoodputField::kWork:
      return "--tokens";
    case GoodputField::kNodeStorageBandwidth:
      return "--node-storage-bandwidth";
  }
  return "";
}

namespace {

// "30min", "1.5h", "2d" or what parse_duration reads ("600s", "250ms").
Duration parse_long_duration(const std::string& text, const std::string& flag) {
  static const std::vector<std::pair<std::string, double>> kLong = {
      {"min", 60.0}, {"h", 3600.0}, {"d", kSecondsPerDay}};
  try {
    for (const auto& [unit, seconds] : kLong) {
      if (text.size() > unit.size() && text.ends_with(unit)) {
        const std::optional<double> v =
            parse_number(std::string_view(text).substr(0, text.size() - unit.size()));
        if (v && *v >= 0 && *v * seconds < 9e6) {
          return Seconds(*v * seconds);
        }
        throw UnitParseError("");
      }
    }
    const Duration d = parse_duration(text);
    if (d < Duration::zero()) {
      throw UnitParseError("");
    }
    return d;
  } catch (const std::exception&) {
    throw InputError(flag, "",
                     fmt::format("\"{}\": expected a duration such as 30min, 1.5h, 600s or 2d "
                                 "(at most 104 days)",
                                 text));
  }
}

BytesPerSec parse_rate(const std::string& text, const std::string& flag) {
  try {
    const BytesPerSec b = parse_bandwidth(text);
    if (b.value() > 0) {
      return b;
    }
  } catch (const UnitParseError&) {
  }
  throw InputError(flag, "",
                   fmt::format("\"{}\": expected a positive bandwidth such as 2TB/s, 400Gbps, "
                               "64GB/s",
                               text));
}

void check_args(const GoodputArgs& a, const RunOutputs& o) {
  if (o.budget.tokens.empty()) {
    throw InputError("--tokens", "",
                     o.budget.days > 0 ? "goodput needs a token budget (--tokens), not --days"
                                       : "goodput needs the tokens to train, e.g. --tokens 15T");
  }
  if (a.runs < 1 || a.runs > 1000000) {
    throw InputError("--runs", "", fmt::format("{}: expected 1 to 1000000 runs", a.runs));
  }
  if (a.checkpoint_interval != "auto") {
    parse_long_duration(a.checkpoint_interval, "--checkpoint-interval");
  }
  parse_rate(a.storage_bandwidth, "--storage-bandwidth");
  parse_rate(a.snapshot_bandwidth, "--snapshot-bandwidth");
  if (!a.node_storage_bandwidth.empty()) {
    parse_rate(a.node_storage_bandwidth, "--node-storage-bandwidth");
  }
  parse_long_duration(a.restart_time, "--restart-time");
}

}  // namespace

studies::CheckpointPolicy checkpoint_policy(const GoodputArgs& a) {
  studies::CheckpointPolicy p;
  if (!a.node_storage_bandwidth.empty()) {
    p.node_bandwidth = parse_rate(a.node_storage_bandwidth, "--node-storage-bandwidth");
  }
  p.storage_bandwidth = parse_rate(a.storage_bandwidth, "--storage-bandwidth");
  p.async = a.async_checkpoint;
  p.snapshot_bandwidth = parse_rate(a.snapshot_bandwidth, "--snapshot-bandwidth");
  p.relaunch = parse_long_duration(a.restart_time, "--restart-time");
  return p;
}

std::string format_span(double seconds) {
  if (!std::isfinite(seconds)) {
    return "infinite (no failures)";
  }
  if (seconds >= 2 * 3600.0) {
    return fmt::format("{:.2f} h", seconds / 3600.0);
  }
  if (seconds >= 120.0) {
    return fmt::format("{:.1f} min", seconds / 60.0);
  }
  if (seconds >= 1.0) {
    return fmt::format("{:.1f} s", seconds);
  }
  return fmt::format("{:.1f} ms", seconds * 1e3);
}

namespace {

void print_inputs(const studies::GoodputModel& m, const scenario::StepReport& r, const Scenario& s,
                  const GoodputArgs& a, const std::string& tokens, std::ostream& out) {
  out << fmt::format("  work            {} tokens at {:.0f} tokens/s: {:.2f} days failure-free\n",
                     tokens, r.tokens_per_s, m.work_s / kSecondsPerDay);
  const Bytes state =
      studies::checkpoint_bytes(r.parameters, s.plan.state.weight, s.plan.state.optimizer);
  out << fmt::format(
      "  checkpoint      {:.2f} TB (weights and optimizer state); write {} at {}, {}; restart {} "
      "(relaunch {} + load {})\n",
      state.as_double() * 1e-12, format_span(m.costs.write.seconds()), a.storage_bandwidth,
      a.async_checkpoint ? fmt::format("asynchronous: training stops {} for the snapshot",
                                       format_span(m.costs.blocking.seconds()))
                         : std::string("synchronous"),
      format_span(m.costs.restart.seconds()),
      format_span((m.costs.restart - m.costs.load).seconds()), format_span(m.costs.load.seconds()));
}

// A TPU run with the builtin table: the table is a GPU fleet's (Llama 3 on H100s); no TPU source
// publishes interruptions by component, so the run borrows the GPU rates, and says so.
std::string borrowed_table_note(const studies::FailureTable& table, bool tpu) {
  if (!tpu || table.source != studies::FailureTable::builtin().source) {
    return "";
  }
  return "the failure table is a GPU fleet's (Llama 3's H100s): no TPU source publishes "
         "interruptions by component, so this TPU run borrows the GPU rates per chip, host and "
         "switch (--failure-table FILE to give TPU rates)";
}

void print_failures(const studies::GoodputModel& m, const studies::FailureTable& table,
                    const studies::ComponentCounts& c, const std::string& note, std::ostream& out) {
  out << fmt::format(
      "  failures        {:.2f} unexpected + {:.2f} planned interruptions per day on "
      "{} GPUs, {} nodes, {} switches: MTBF {}\n",
      m.rates.unexpected_per_day, m.rates.planned_per_day, c.gpus, c.nodes, c.switches,
      format_span(m.rates.mtbf_s()));
  std::vector<size_t> order(m.categories.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t x, size_t y) { return m.rates.per_day[x] > m.rates.per_day[y]; });
  std::string top;
  for (size_t i = 0; i < std::min<size_t>(4, order.size()); ++i) {
    top += fmt::format("{}{} {:.2f}", i ? ", " : "", m.categories[order[i]].name,
                       m.rates.per_day[order[i]]);
  }
  out << fmt::format("                  per day: {} ...\n                  from {}: {}\n", top,
                     table.source, table.citation);
  if (!note.empty()) {
    out << fmt::format("                  note: {}\n", note);
  }
}

void print_result(const studies::GoodputModel& m, const studies::MonteCarloResult& mc,
                  bool automatic, double wall_s, std::ostream& out) {
  const double delta = m.costs.blocking.seconds();
  const double mtbf = m.rates.mtbf_s();
  out << fmt::format(
      "  interval        {}{} of work between checkpoints (optimum {}; Young "
      "sqrt(2 delta M) {}, Daly {})\n",
      automatic ? "auto: " : "", format_span(mc.interval_s),
      format_span(studies::optimal_interval_s(m)),
      format_span(studies::young_interval_s(delta, mtbf)),
      format_span(studies::daly_interval_s(delta, mtbf)));
  out << fmt::format(
      "  expected        goodput {:.2f} % (closed form, exponential failures), "
      "{:.1f} days\n",
      100.0 * studies::expected_goodput(m, mc.interval_s),
      m.work_s / kSecondsPerDay / studies::expected_goodput(m, mc.interval_s));
  out << fmt::format(
      "  monte carlo     {} runs, seed {}: {:.2f} days (p10 {:.2f}, p50 {:.2f}, "
      "p90 {:.2f}); goodput {:.2f} % (p10 {:.2f}, p50 {:.2f}, p90 {:.2f})\n",
      mc.runs, mc.seed, mc.days.mean, mc.days.p10, mc.days.p50, mc.days.p90,
      100.0 * mc.goodput.mean, 100.0 * mc.goodput.p10, 100.0 * mc.goodput.p50,
      100.0 * mc.goodput.p90);
  const double interruptions =
      std::accumulate(mc.interruptions.begin(), mc.interruptions.end(), 0.0);
  out << fmt::format(
      "                  per run: {:.0f} interruptions; {:.2f} days of "
      "checkpoints, {:.2f} of lost work, {:.2f} of restarts, {:.2f} of planned "
      "stops' checkpoints ({:.2f} s of Monte Carlo)\n",
      interruptions, mc.checkpoint_days, mc.lost_days, mc.restart_days, mc.planned_write_days,
      wall_s);
}

}  // namespace

int goodput_command(const Scenario& s, const RunOutputs& outputs, const GoodputArgs& a,
                    std::ostream& out) {
  check_args(a, outputs);
  check_budget(outputs.budget);
  const double tokens = *studies::parse_token_count(outputs.budget.tokens);
  const studies::FailureTable table = a.failure_table.empty()
                                          ? studies::FailureTable::builtin()
                                          : studies::FailureTable::load(a.failure_table);
  scenario::StepReport report;
  studies::ComponentCounts counts;
  bool tpu = false;
  {
    Progress progress("simulation");
    const scenario::LoadedScenario loaded = load_located(s);
    report = simulate_step(s, loaded, outputs);
    counts = studies::count_components(loaded.cluster);
    tpu = loaded.cluster.chip.kind == topology::ChipKind::kTpu;
  }
  const std::string note = borrowed_table_note(table, tpu);
  if (report.oom || !report.simulated || report.tokens_per_s <= 0) {
    out << "meshsim: goodput over a whole run\n";
    print_summary(report, out);
    out << "  the plan does not fit in memory: no run to train\n";
    return 3;
  }
  // Everything is computed (and every error raised) before anything is printed.
  studies::GoodputModel m;
  double interval = 0;
  studies::MonteCarloResult mc;
  double wall = 0;
  try {
    m = studies::goodput_model(report, s.plan, checkpoint_policy(a), table, counts, tokens);
    interval = a.checkpoint_interval == "auto"
                   ? studies::optimal_interval_s(m)
                   : parse_long_duration(a.checkpoint_interval, "--checkpoint-interval").seconds();
    const auto start = std::chrono::steady_clock::now();
    mc = studies::monte_carlo(m, interval, a.runs, a.seed);
    wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  } catch (const studies::GoodputError& e) {
    throw InputError(flag_of(e.field()), "", e.message());
  }
  out << "meshsim: goodput over a whole run\n";
  print_summary(report, out);
  print_inputs(m, report, s, a, outputs.budget.tokens, out);
  print_failures(m, table, counts, note, out);
  print_result(m, mc, a.checkpoint_interval == "auto", wall, out);
  if (outputs.json_path) {
    const nlohmann::json j = {
        {"step", to_json(report)},
        {"tokens", tokens},
        {"failure_table", table.source},
        {"failure_table_note", note},
        {"components",
         {{"gpus", counts.gpus}, {"nodes", counts.nodes}, {"switches", counts.switches}}},
        {"asynchronous_checkpoint", a.async_checkpoint},
        {"goodput", studies::to_json(mc, m)}};
    write_json_file(*outputs.json_path, j, "--json");
  }
  return 0;
}

}  // namespace meshsim::cli
