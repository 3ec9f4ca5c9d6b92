#include "run_command.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <fstream>
#include <map>

#include "comm_setup.h"
#include "output_file.h"
#include "trace_setup.h"
#include "meshsim/sim/analysis.h"
#include "meshsim/sim/error.h"
#include "meshsim/sim/simulation.h"
#include "meshsim/topology/compute_model.h"
#include "meshsim/workloads/accounting.h"
#include "meshsim/workloads/plan_loader.h"
#include "meshsim/workloads/step.h"

namespace meshsim::cli {
namespace {

struct Loaded {
  topology::ClusterSpec cluster;
  workloads::ModelConfig model;
};

// The cluster and the model, and the plan checked against both: the library's checks first (a
// PlanError), then the composition root's (the degrees against the cluster's devices, the
// precision against the chip's rates), each located where the field's value came from.
Loaded load(const Scenario& s) {
  Loaded l{load_cluster_for(s), workloads::load_model(s.model)};
  const workloads::ParallelPlan& p = s.plan;
  workloads::validate_plan(l.model, p);
  if (p.world() != l.cluster.device_count()) {
    throw origin_of(p, workloads::PlanField::kDp)
        .error(fmt::format("tp {} x cp {} x dp {} x pp {} = {} ranks, but cluster {} has {} "
                           "devices ({} nodes x {}); the degrees must multiply to the device "
                           "count (resize the cluster with --nodes or --shape)",
                           p.tp, p.cp, p.dp, p.pp, p.world(), l.cluster.name,
                           l.cluster.device_count(), l.cluster.nodes,
                           l.cluster.devices_per_node));
  }
  if (!l.cluster.chip.peak(p.matmul_dtype)) {
    std::vector<std::string> have;
    for (const auto& [dtype, rate] : l.cluster.chip.peaks) {
      if (dtype != Dtype::kFp16) {  // not a training precision meshsim offers
        have.emplace_back(to_string(dtype));
      }
    }
    const std::string_view dtype = to_string(p.matmul_dtype);
    throw origin_of(p, workloads::PlanField::kDtype)
        .error(fmt::format("{} matmuls: {} has no {} rate in the catalogue (expected one of {})",
                           dtype, l.cluster.chip.description, dtype, fmt::join(have, ", ")));
  }
  return l;
}

StepReport describe(const Scenario& s, const Loaded& l) {
  StepReport r;
  r.inputs = scenario_json(s, l.cluster);
  r.parameters = workloads::total_parameters(l.model);
  r.devices = l.cluster.device_count();
  r.model_description = describe_model(l.model);
  r.cluster_description =
      fmt::format("{}: {} node(s) x {} {} = {} devices", l.cluster.name, l.cluster.nodes,
                  l.cluster.devices_per_node, l.cluster.chip.description, r.devices);
  const workloads::ParallelPlan& p = s.plan;
  const bool default_kernels = p.kernels == workloads::Kernels::kFused &&
                               p.optimizer_kernels == workloads::OptimizerKernels::kFused;
  r.plan_description = fmt::format(
      "TP {}{} x CP {} x PP {} ({}{}) x DP {}{}{}; microbatch {} x {} tokens, global batch {} "
      "({} microbatches per pipeline); {} matmuls, {} attention, recompute {}{}",
      p.tp, p.sp ? " (SP)" : "", p.cp, p.pp, to_string(p.schedule),
      p.vpp > 1 ? fmt::format(", {} virtual stages", p.vpp) : "", p.dp,
      p.zero != workloads::ZeroStage::kNone ? fmt::format(" (ZeRO-{})", static_cast<int>(p.zero))
                                            : "",
      p.ep > 1 ? fmt::format(", EP {}", p.ep) : "", p.mbs, p.seq, p.gbs, p.microbatches(),
      to_string(p.matmul_dtype), to_string(p.attention), to_string(p.recompute),
      default_kernels ? ""
                      : fmt::format("; {} kernels, {} optimizer", to_string(p.kernels),
                                    to_string(p.optimizer_kernels)));
  r.memory_capacity = l.cluster.chip.hbm_capacity;
  // MFU against the dense bf16 peak (also for fp8, as Megatron reports it); fp32 and tf32 runs
  // against their own matmul rate.
  const bool fp32 = p.matmul_dtype == Dtype::kFp32 || p.matmul_dtype == Dtype::kTf32;
  r.peak_dtype = fp32 ? p.matmul_dtype : Dtype::kBf16;
  r.peak_per_device = *l.cluster.chip.peak(r.peak_dtype);
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

// The model state alone (weights, gradients, optimizer) of some stage exceeds the chip: report
// OOM with the closed-form breakdown instead of simulating.
bool precheck_memory(StepReport& r, const workloads::StepPlan& plan) {
  for (size_t s = 0; s < plan.memory_estimate.size(); ++s) {
    const workloads::TrainingMemory& m = plan.memory_estimate[s];
    if (m.model_state() > r.memory_capacity) {
      r.oom = true;
      r.oom_stage = fmt::format("pipeline stage {}", s);
      r.peak_memory = m.total();
      r.peak_breakdown = estimate_breakdown(m);
      return false;
    }
  }
  return true;
}

// The fraction of the devices' peak that `work` is over the step (MFU, HFU).
double utilisation(Flops work, const StepReport& r) {
  return work / (r.peak_per_device * r.step_time * static_cast<double>(r.devices));
}

// Per pipeline stage, the worst of its simulated ranks: idle fraction, compute, peak memory.
std::vector<StepReport::Stage> stage_results(const StepReport& r, const RunResult& run,
                                             const std::vector<RankBreakdown>& b,
                                             const workloads::StepPlan& plan) {
  std::map<int64_t, StepReport::Stage> stages;
  for (size_t i = 0; i < b.size(); ++i) {
    const int64_t stage = plan.ranks[i].stage;
    StepReport::Stage& st = stages[stage];
    st.stage = stage;
    st.bubble_fraction = std::max(st.bubble_fraction, b[i].idle / r.step_time);
    st.compute = std::max(st.compute, b[i].compute);
    if (run.ranks[i].memory.peak > st.peak_memory) {
      st.peak_memory = run.ranks[i].memory.peak;
      st.peak_breakdown.by_category = run.ranks[i].memory.at_peak;
    }
  }
  std::vector<StepReport::Stage> out;
  for (const auto& [stage, st] : stages) {
    out.push_back(st);
  }
  return out;
}

void fill_results(StepReport& r, const RunResult& run, const std::vector<RankBreakdown>& b,
                  const workloads::StepPlan& plan) {
  r.simulated = true;
  r.events = run.events;
  r.simulated_ranks = static_cast<int64_t>(plan.ranks.size());
  r.step_time = run.end - SimTime::zero();
  r.tokens_per_step = plan.tokens_per_step;
  r.tokens_per_s = static_cast<double>(plan.tokens_per_step) / r.step_time.seconds();
  r.tokens_per_s_per_device = r.tokens_per_s / static_cast<double>(r.devices);
  r.mfu = utilisation(plan.model_flops_per_step, r);
  // Executed FLOPs: each simulated rank stands for world / simulated ranks of its kind; every
  // pipeline stage has the same number of ranks, so scale the simulated sum.
  Flops executed;
  for (const RankBreakdown& rb : b) {
    executed += rb.flops;
    r.compute = std::max(r.compute, rb.compute);
    r.exposed_comm = std::max(r.exposed_comm, rb.exposed_comm);
  }
  r.hfu = utilisation(
      executed * static_cast<double>(plan.world) / static_cast<double>(b.size()), r);
  for (const workloads::CommKind kind : enum_values<workloads::CommKind>()) {
    Duration worst;
    for (const RankBreakdown& rb : b) {
      worst = std::max(worst, rb.exposed_in(workloads::category_of(kind)));
    }
    r.exposed_by_kind.emplace_back(std::string(to_string(kind)), worst);
  }
  r.stages = stage_results(r, run, b, plan);
  double bubble = 0;
  for (const StepReport::Stage& st : r.stages) {
    bubble += st.bubble_fraction;
    if (st.peak_memory > r.peak_memory) {
      r.peak_memory = st.peak_memory;
      r.peak_breakdown = st.peak_breakdown;
      r.oom_stage = fmt::format("pipeline stage {}", st.stage);
    }
  }
  r.bubble_fraction = bubble / static_cast<double>(r.stages.size());
  r.time_by_class = b.front().by_class;
  r.oom = r.peak_memory > r.memory_capacity;
  if (!r.oom) {
    r.oom_stage.clear();
  }
}

}  // namespace

std::string describe_model(const workloads::ModelConfig& m) {
  const auto params = static_cast<double>(workloads::total_parameters(m));
  return fmt::format("{} ({}, {} layers)", m.name,
                     params >= 1e9 ? fmt::format("{:.2f} B parameters", params * 1e-9)
                                   : fmt::format("{:.1f} M parameters", params * 1e-6),
                     m.num_layers);
}

namespace {

StepReport simulate(const Scenario& s, const RunOutputs& outputs) {
  const Loaded l = load(s);
  StepReport report = describe(s, l);
  std::optional<TraceSetup> trace;
  if (outputs.trace_path) {
    trace.emplace(TraceRequest{*outputs.trace_path, outputs.trace_ranks}, s.plan, l.cluster);
  }
  const bool full = outputs.full_simulation || (trace && trace->needs_full_simulation());
  report.simulation_mode = full ? "full" : "representative";
  workloads::StepPlan plan = workloads::plan_step(
      l.model, s.plan,
      full ? workloads::SimulationMode::kFull : workloads::SimulationMode::kRepresentative,
      trace ? trace->ranks_to_simulate() : std::vector<int64_t>{});
  if (!precheck_memory(report, plan)) {
    return report;
  }
  topology::RooflineComputeModel compute(l.cluster.chip);
  CommSetup comm(l.cluster, plan, outputs.comm);
  Simulation sim(compute, comm.model());
  workloads::load_plan(sim, plan);
  Timeline timeline;
  sim.record_into(timeline);
  if (trace) {
    trace->attach(sim, comm.model(), {{"meshsim_version", MESHSIM_VERSION},
                        {"model", report.model_description},
                        {"cluster", report.cluster_description},
                        {"plan", report.plan_description},
                        {"scenario", dump_json(report.inputs)}});
  }
  const RunResult run = sim.run();
  if (trace) {
    trace->finish(run.end);
    report.trace_path = trace->path();
    report.trace_events = trace->events();
    report.trace_description = trace->description();
  }
  fill_results(report, run, analyze(timeline, sim, run.end), plan);
  return report;
}

}  // namespace

StepReport simulate_step(const Scenario& s, const RunOutputs& outputs) {
  try {
    return simulate(s, outputs);
  } catch (const workloads::PlanError& e) {
    throw locate(s.plan, e);
  } catch (const collectives::CommError& e) {
    throw locate(e);
  }
}

int run_command(const Scenario& s, const RunOutputs& outputs, std::ostream& out) {
  // Created before the simulation: a report that cannot be written fails at once, not after it.
  std::optional<OutputFile> json;
  if (outputs.json_path) {
    json.emplace(*outputs.json_path, "--json");
  }
  const StepReport report = simulate_step(s, outputs);
  print_summary(report, out);
  if (json) {
    write_json(*json, to_json(report));
  }
  return report.oom ? 3 : 0;
}

}  // namespace meshsim::cli
