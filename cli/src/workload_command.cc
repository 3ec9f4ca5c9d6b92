#include "workload_command.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "meshsim/scenario/step_report.h"
#include "meshsim/studies/chakra_run.h"
#include "meshsim/traces/chakra.h"
#include "output_file.h"
#include "progress.h"
#include "trace_setup.h"
#include "version.h"

namespace meshsim::cli {
namespace {

using scenario::format_duration;

// The worst rank's figure of a breakdown.
Duration worst(const std::vector<RankBreakdown>& b, Duration RankBreakdown::*field) {
  Duration d;
  for (const RankBreakdown& r : b) {
    d = std::max(d, r.*field);
  }
  return d;
}

nlohmann::json report_json(const traces::ChakraWorkload& w, const studies::WorkloadReport& r) {
  nlohmann::json ranks = nlohmann::json::array();
  for (const RankBreakdown& b : r.breakdown) {
    ranks.push_back({{"compute_s", b.compute.seconds()},
                     {"comm_s", b.comm.seconds()},
                     {"exposed_comm_s", b.exposed_comm.seconds()},
                     {"idle_s", b.idle.seconds()}});
  }
  return {{"workload", w.source},
          {"cluster", r.cluster_description},
          {"ranks", r.ranks},
          {"nodes",
           {{"total", w.nodes},
            {"measured", w.measured},
            {"modelled", w.modelled},
            {"untimed", w.untimed},
            {"collectives", w.collectives},
            {"p2p", w.p2p}}},
          {"step_time_s", r.step_time.seconds()},
          {"events", r.events},
          {"by_rank", ranks}};
}

}  // namespace

int workload_command(const WorkloadArgs& a, std::ostream& out) {
  const topology::ClusterSpec cluster = load_cluster_args(a.cluster);
  std::optional<OutputFile> json;
  if (a.json_path) {
    json.emplace(*a.json_path, "--json");
  }
  traces::ChakraWorkload w = traces::read_chakra_workload(a.path);
  const auto ranks = static_cast<int64_t>(w.programs.size());
  out << fmt::format("meshsim: Chakra workload {}: {} ranks, {} nodes ({} compute with measured "
                     "times, {} costed by the cluster, {} without time; {} collectives, {} sends "
                     "and receives)\n",
                     w.source, ranks, w.nodes, w.measured, w.modelled, w.untimed, w.collectives,
                     w.p2p);
  if (a.export_dir) {
    studies::export_workload(w, cluster, *a.export_dir);
  }
  std::optional<TraceSetup> trace;
  if (a.trace_path) {
    workloads::ParallelPlan plan;
    plan.dp = ranks;
    trace.emplace(TraceRequest{*a.trace_path, a.trace_ranks, {}, a.trace_limit}, plan, cluster);
  }
  studies::WorkloadHooks hooks;
  if (trace) {
    hooks.attach = [&](Simulation& sim, collectives::NetworkCommModel& comm) {
      trace->attach(sim, comm,
                    {{"meshsim_version", std::string(version())},
                     {"workload", w.source},
                     {"cluster", cluster.description}});
    };
    hooks.finish = [&](SimTime end) { trace->finish(end); };
  }
  const traces::ChakraWorkload counts = [&] {  // what the report prints after the run
    traces::ChakraWorkload c;
    c.source = w.source;
    c.nodes = w.nodes;
    c.measured = w.measured;
    c.modelled = w.modelled;
    c.untimed = w.untimed;
    c.collectives = w.collectives;
    c.p2p = w.p2p;
    return c;
  }();
  studies::WorkloadReport r;
  {
    Progress progress("simulation");
    r = studies::simulate_workload(std::move(w), cluster, a.comm, hooks);
  }
  out << fmt::format("  cluster               {}\n", r.cluster_description);
  out << fmt::format("  step time             {}\n", format_duration(r.step_time));
  out << fmt::format("  compute               {} (busiest rank)\n",
                     format_duration(worst(r.breakdown, &RankBreakdown::compute)));
  out << fmt::format("  communication         {}, {} exposed (worst rank)\n",
                     format_duration(worst(r.breakdown, &RankBreakdown::comm)),
                     format_duration(worst(r.breakdown, &RankBreakdown::exposed_comm)));
  out << fmt::format("  idle                  {} (worst rank)\n",
                     format_duration(worst(r.breakdown, &RankBreakdown::idle)));
  out << fmt::format("  simulated             {} ranks (full), {} events\n", r.ranks, r.events);
  if (trace) {
    out << fmt::format("  trace                 {} ({} events; open it in ui.perfetto.dev)\n",
                       trace->path(), trace->events());
    out << fmt::format("                        {}\n", trace->description());
  }
  if (a.export_dir) {
    out << fmt::format("  Chakra traces         {}/rank.0.et ... rank.{}.et, comm_group.json\n",
                       *a.export_dir, ranks - 1);
  }
  if (json) {
    write_json(*json, report_json(counts, r));
  }
  return 0;
}

}  // namespace meshsim::cli
