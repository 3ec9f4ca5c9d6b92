#include "run_command.h"

#include <fmt/format.h>

#include <algorithm>
#include <fstream>

#include "meshsim/collectives/ring_model.h"
#include "meshsim/sim/analysis.h"
#include "meshsim/sim/error.h"
#include "meshsim/sim/simulation.h"
#include "meshsim/topology/cluster.h"
#include "meshsim/topology/compute_model.h"
#include "meshsim/traces/chrome_trace.h"
#include "meshsim/workloads/accounting.h"
#include "meshsim/workloads/step.h"

namespace meshsim::cli {
namespace {

struct Loaded {
  topology::ClusterSpec cluster;
  workloads::ModelConfig model;
  workloads::StepConfig step;
};

topology::ClusterSpec load_cluster_for(const Scenario& s) {
  const topology::Catalogue catalogue = s.hardware_catalogue
                                            ? topology::Catalogue::load(*s.hardware_catalogue)
                                            : topology::Catalogue::builtin();
  topology::ClusterSpec c = topology::load_cluster(s.cluster, catalogue);
  if (s.nodes) {
    c = topology::resize_nodes(std::move(c), *s.nodes);
  }
  return c;
}

void require_positive(std::optional<int64_t> value, const char* flag) {
  if (value && *value <= 0) {
    throw InputError(flag, "", fmt::format("expected a positive integer, got {}", *value));
  }
}

Loaded load(const Scenario& s) {
  require_positive(s.nodes, "--nodes");
  require_positive(s.dp, "--dp");
  require_positive(s.mbs, "--mbs");
  require_positive(s.gbs, "--gbs");
  require_positive(s.seq, "--seq");
  Loaded l{load_cluster_for(s), workloads::load_model(s.model), {}};
  l.step.data_parallel = s.dp;
  l.step.micro_batch = s.mbs;
  l.step.global_batch = s.gbs;
  l.step.seq_len = s.seq;
  l.step.matmul_dtype = s.dtype == "fp8" ? Dtype::kFp8 : Dtype::kBf16;
  l.step.attention =
      s.attention == "naive" ? workloads::AttentionKernel::kNaive : workloads::AttentionKernel::kFlash;
  if (s.dp != l.cluster.device_count()) {
    throw InputError("--dp", "",
                     fmt::format("{} data-parallel ranks, but cluster {} has {} devices ({} nodes x "
                                 "{}); the parallel degrees must multiply to the device count "
                                 "(resize the cluster with --nodes)",
                                 s.dp, l.cluster.name, l.cluster.device_count(), l.cluster.nodes,
                                 l.cluster.devices_per_node));
  }
  if (!l.cluster.chip.peak(topology::Dtype::kFp8) && s.dtype == "fp8") {
    throw InputError("--dtype", "",
                     fmt::format("fp8 matmuls need fp8 tensor cores; {} has none (expected bf16)",
                                 l.cluster.chip.description));
  }
  return l;
}

// Ranks fill devices in order: rank r is device r, on node r / devices_per_node.
collectives::LinkFn link_fn(const topology::ClusterSpec& c) {
  const int64_t domain = c.scale_up_domain_size();
  const collectives::LinkParams up{c.intra_node_bandwidth(), c.intra_node_latency()};
  const collectives::LinkParams out{c.inter_node_bandwidth(), c.inter_node_latency()};
  return [domain, up, out](RankId a, RankId b) {
    return static_cast<int64_t>(a.value()) / domain == static_cast<int64_t>(b.value()) / domain
               ? up
               : out;
  };
}

StepReport describe(const Scenario& s, const Loaded& l) {
  StepReport r;
  r.inputs = {{"model", s.model},  {"cluster", s.cluster}, {"nodes", l.cluster.nodes},
              {"dp", s.dp},        {"mbs", s.mbs},         {"gbs", s.gbs},
              {"seq", s.seq},      {"dtype", s.dtype},     {"attention", s.attention}};
  r.parameters = workloads::total_parameters(l.model);
  r.devices = l.cluster.device_count();
  r.model_description = fmt::format("{} ({:.2f} B parameters, {} layers)", l.model.name,
                                    static_cast<double>(r.parameters) * 1e-9, l.model.num_layers);
  r.cluster_description =
      fmt::format("{}: {} node(s) x {} {} = {} devices", l.cluster.name, l.cluster.nodes,
                  l.cluster.devices_per_node, l.cluster.chip.description, r.devices);
  r.plan_description = fmt::format(
      "DP {}, microbatch {} x {} tokens, global batch {} ({} microbatches per rank), {} matmuls, "
      "{} attention",
      s.dp, s.mbs, s.seq, s.gbs, s.gbs / (s.dp * s.mbs), s.dtype, s.attention);
  r.memory_capacity = l.cluster.chip.hbm_capacity;
  r.peak_per_device = *l.cluster.chip.peak(topology::Dtype::kBf16);
  return r;
}

MemoryBreakdown estimate_breakdown(const workloads::TrainingMemory& m) {
  MemoryBreakdown b;
  b.by_category[static_cast<size_t>(MemoryCategory::kWeights)] = m.weights;
  b.by_category[static_cast<size_t>(MemoryCategory::kGradients)] = m.gradients;
  b.by_category[static_cast<size_t>(MemoryCategory::kOptimizerState)] = m.optimizer_states;
  b.by_category[static_cast<size_t>(MemoryCategory::kActivations)] = m.activations;
  return b;
}

void fill_results(StepReport& r, const RunResult& run, const std::vector<RankBreakdown>& b,
                  const workloads::StepPlan& plan) {
  r.simulated = true;
  r.events = run.events;
  r.step_time = run.end - SimTime::zero();
  r.tokens_per_step = plan.tokens_per_step;
  r.tokens_per_s = static_cast<double>(plan.tokens_per_step) / r.step_time.seconds();
  r.tokens_per_s_per_device = r.tokens_per_s / static_cast<double>(r.devices);
  r.mfu = plan.model_flops_per_step.count() /
          (r.step_time.seconds() * static_cast<double>(r.devices) * r.peak_per_device.value());
  double idle = 0;
  for (const RankBreakdown& rb : b) {
    r.compute = std::max(r.compute, rb.compute);
    r.exposed_comm = std::max(r.exposed_comm, rb.exposed_comm);
    idle += rb.idle / r.step_time;
  }
  r.bubble_fraction = idle / static_cast<double>(b.size());
  r.time_by_class = b.front().by_class;
  size_t worst = 0;
  for (size_t i = 0; i < run.ranks.size(); ++i) {
    if (run.ranks[i].memory.peak > run.ranks[worst].memory.peak) {
      worst = i;
    }
  }
  r.peak_memory = run.ranks[worst].memory.peak;
  r.peak_breakdown.by_category = run.ranks[worst].memory.at_peak;
  r.oom = r.peak_memory > r.memory_capacity;
}

// Hands the plan to a Simulation: its programs, its groups, and each rank's bindings.
void load_plan(Simulation& sim, workloads::StepPlan& plan) {
  std::vector<ProgramIndex> programs;
  for (Program& p : plan.programs) {
    programs.push_back(sim.add_program(std::move(p)));
  }
  std::vector<GroupId> groups;
  for (const auto& g : plan.groups) {
    std::vector<RankId> members;
    for (const uint32_t r : g) {
      members.emplace_back(r);
    }
    groups.push_back(sim.add_group(std::move(members)));
  }
  for (const workloads::RankBinding& b : plan.ranks) {
    std::vector<GroupId> slots;
    for (const uint32_t g : b.group_slots) {
      slots.push_back(groups[g]);
    }
    std::vector<RankId> peers;
    for (const uint32_t p : b.peer_slots) {
      peers.emplace_back(p);
    }
    sim.add_rank(programs[b.program], std::move(slots), std::move(peers));
  }
}

}  // namespace

StepReport simulate_step(const Scenario& s, const RunOutputs& outputs) {
  const Loaded l = load(s);
  StepReport report = describe(s, l);
  workloads::StepPlan plan = workloads::plan_data_parallel_step(l.model, l.step);
  if (plan.memory_estimate.total() > report.memory_capacity) {
    report.oom = true;
    report.peak_memory = plan.memory_estimate.total();
    report.peak_breakdown = estimate_breakdown(plan.memory_estimate);
    return report;
  }
  topology::RooflineComputeModel compute(l.cluster.chip);
  collectives::RingAlphaBetaModel comm(link_fn(l.cluster));
  Simulation sim(compute, comm);
  load_plan(sim, plan);
  Timeline timeline;
  sim.record_into(timeline);
  std::ofstream trace_file;
  std::optional<traces::ChromeTraceWriter> trace;
  if (outputs.trace_path) {
    trace_file.open(*outputs.trace_path, std::ios::binary);
    if (!trace_file) {
      throw InputError("--trace", "", fmt::format("cannot write {}", *outputs.trace_path));
    }
    traces::ChromeTraceOptions options;
    const int64_t per_node = l.cluster.devices_per_node;
    options.rank_name = [per_node](RankId r) {
      return fmt::format("rank {} (node {}, device {})", r.value(),
                         static_cast<int64_t>(r.value()) / per_node,
                         static_cast<int64_t>(r.value()) % per_node);
    };
    options.metadata = {{"meshsim_version", MESHSIM_VERSION},
                        {"scenario", report.inputs.dump()}};
    trace.emplace(sim, trace_file, std::move(options));
  }
  const RunResult run = sim.run();
  if (trace) {
    trace->finish();
    report.trace_path = *outputs.trace_path;
    report.trace_events = trace->events_written();
  }
  fill_results(report, run, analyze(timeline, sim, run.end), plan);
  return report;
}

int run_command(const Scenario& s, const RunOutputs& outputs, std::ostream& out) {
  const StepReport report = simulate_step(s, outputs);
  print_summary(report, out);
  if (outputs.json_path) {
    std::ofstream f(*outputs.json_path, std::ios::binary);
    if (!f) {
      throw InputError("--json", "", fmt::format("cannot write {}", *outputs.json_path));
    }
    f << to_json(report).dump(2) << "\n";
  }
  return report.oom ? 3 : 0;
}

}  // namespace meshsim::cli
