#include "meshsim/scenario/step.h"

#include "meshsim/scenario/stack_setup.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <map>

#include "meshsim/sim/breakdown.h"
#include "meshsim/sim/error.h"
#include "meshsim/sim/simulation.h"
#include "meshsim/topology/compute_model.h"
#include "meshsim/workloads/accounting.h"
#include "meshsim/workloads/partition.h"
#include "meshsim/workloads/plan_loader.h"
#include "meshsim/workloads/stack_rules.h"
#include "meshsim/workloads/step.h"
#include "meshsim/workloads/training_memory.h"

namespace meshsim::scenario {

void check_plan(const LoadedScenario& l, const workloads::ParallelPlan& given) {
  workloads::ParallelPlan p = given;
  bind_to_cluster(p, l.cluster);  // the plan as it runs there (stack, the flex dispatcher's nodes)
  workloads::validate_plan(l.model, p);
  workloads::check_stack_runs(l.model, p);
  if (p.world() != l.cluster.device_count()) {
    // The data-parallel degree that makes them multiply, when the other degrees divide the devices.
    const int64_t others = p.tp * p.cp * p.pp;
    const std::string fix =
        l.cluster.device_count() % others == 0
            ? fmt::format("expected dp {} (tp x cp x pp = {} divides the {} devices)",
                          l.cluster.device_count() / others, others, l.cluster.device_count())
            : fmt::format("tp x cp x pp = {} does not divide them either: expected degrees "
                          "whose product is {}",
                          others, l.cluster.device_count());
    throw workloads::PlanError(
        workloads::PlanField::kDp,
        fmt::format("tp {} x cp {} x dp {} x pp {} = {} ranks, but cluster {} has {} devices ({} "
                    "nodes x {}); the degrees must multiply to the device count: {}",
                    p.tp, p.cp, p.dp, p.pp, p.world(), l.cluster.name, l.cluster.device_count(),
                    l.cluster.nodes, l.cluster.devices_per_node, fix));
  }
  if (!l.cluster.chip.peak(p.matmul_dtype)) {
    std::vector<std::string> have;
    for (const auto& [dtype, rate] : l.cluster.chip.peaks) {
      have.emplace_back(to_string(dtype));
    }
    const std::string_view dtype = to_string(p.matmul_dtype);
    throw workloads::PlanError(
        workloads::PlanField::kDtype,
        fmt::format("{} matmuls: {} has no {} rate in the catalogue (expected one of {})", dtype,
                    l.cluster.chip.description, dtype, fmt::join(have, ", ")));
  }
  if (p.offload_layers > 0) {
    require_host_link(l.cluster.chip);
  }
}

void require_host_link(const topology::Chip& chip) {
  if (!chip.host_link) {
    throw workloads::PlanError(
        workloads::PlanField::kOffloadLayers,
        fmt::format("activation offloading: {} has no host_link rates in the catalogue "
                    "(expected host_link/to_device and host_link/to_host)",
                    chip.description));
  }
}

LoadedScenario load_inputs(const Scenario& s) {
  return LoadedScenario{load_cluster(s), workloads::load_model(s.model)};
}

LoadedScenario load_and_check(const Scenario& s) {
  LoadedScenario l = load_inputs(s);
  check_plan(l, s.plan);
  return l;
}

namespace {

// "selective (mla_up_proj, mlp)" when modules are listed, else the recompute's name; then the
// layers whose activations are offloaded, if any.
std::string describe_recompute(const workloads::ParallelPlan& p) {
  std::string out = p.recompute_modules.empty()
                        ? std::string(to_string(p.recompute))
                        : fmt::format("{} ({})", to_string(p.recompute),
                                      fmt::join(recompute_module_names(p), ", "));
  if (p.offload_layers > 0) {
    out += fmt::format(", activations of {} layers per chunk offloaded", p.offload_layers);
  }
  return out;
}

}  // namespace

std::string describe_plan(const workloads::ParallelPlan& p) {
  const bool default_kernels = p.kernels == workloads::Kernels::kFused &&
                               p.optimizer_kernels == workloads::OptimizerKernels::kFused;
  return fmt::format(
      "TP {}{} x CP {} x PP {} ({}{}) x DP {}{}{}; microbatch {} x {} tokens, global batch {} "
      "({} microbatches per pipeline); {} matmuls, {} attention, recompute {}; stack {}{}{}",
      p.tp, p.sp ? " (SP)" : "", p.cp, p.pp, to_string(p.schedule),
      p.vpp > 1 ? fmt::format(", {} virtual stages", p.vpp) : "", p.dp,
      p.zero != workloads::ZeroStage::kNone
          ? fmt::format(" (ZeRO-{}{}{})", static_cast<int>(p.zero),
                        p.fsdp > 0 ? fmt::format(", HSDP: sharded over {}, {} replicas", p.fsdp,
                                                 p.dp / p.fsdp)
                                   : "",
                        p.fp8_param_gather ? ", FP8 parameter gathers" : "")
          : "",
      p.ep > 1 ? fmt::format(", EP {}", p.ep) : "", p.mbs, p.seq, p.gbs, p.microbatches(),
      to_string(p.matmul_dtype), to_string(p.attention), describe_recompute(p), to_string(p.stack),
      p.overlap.tensor_parallel ? ", TP overlap" : "",
      default_kernels ? ""
                      : fmt::format("; {} kernels, {} optimizer", to_string(p.kernels),
                                    to_string(p.optimizer_kernels)));
}

namespace {

StepReport describe(const Scenario& s, const LoadedScenario& l) {
  StepReport r;
  r.inputs = scenario_json(s, l.cluster);
  r.parameters = workloads::total_parameters(l.model);
  r.caveats = workloads::plan_caveats(l.model, s.plan);
  r.devices = l.cluster.device_count();
  r.chip = l.cluster.chip.name;
  r.model_flops_per_token = workloads::training_flops_per_token(l.model, s.plan.seq);
  r.model_description = describe_model(l.model);
  r.cluster_description =
      fmt::format("{}: {} node(s) x {} {} = {} devices", l.cluster.name, l.cluster.nodes,
                  l.cluster.devices_per_node, l.cluster.chip.description, r.devices);
  if (l.cluster.slices > 1) {  // multi-slice TPU: the slices and their torus
    r.cluster_description += fmt::format(" in {} slices of {} joined by DCN", l.cluster.slices,
                                         fmt::join(l.cluster.torus_shape, "x"));
  }
  const workloads::ParallelPlan& p = s.plan;
  r.plan_description = describe_plan(p);
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

// The model state alone (weights, gradients, optimizer) of some stage exceeds the chip, or the
// lower bound on its simulated peak does (workloads::least_peak_memory: the model state and the
// activations the schedule must hold at once, never above the ledger's peak): report OOM with the closed-form
// breakdown instead of simulating a step that cannot run (at long sequences, seconds of work).
bool precheck_memory(StepReport& r, const workloads::ModelConfig& model,
                     const workloads::ParallelPlan& p, const workloads::StepPlan& plan) {
  const std::vector<Bytes> least =
      workloads::least_peak_memory(p, workloads::partition_stages(model, p));
  for (size_t s = 0; s < plan.memory_estimate.size(); ++s) {
    const workloads::TrainingMemory& m = plan.memory_estimate[s];
    if (m.model_state() > r.memory_capacity ||
        (s < least.size() && least[s] > r.memory_capacity)) {
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
    // Idle while the host had not issued the next kernel is the host's, not the pipeline's.
    const Duration bubble = b[i].idle - std::min(b[i].idle, run.ranks[i].host_wait);
    st.bubble_fraction = std::max(st.bubble_fraction, bubble / r.step_time);
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
  for (const RankResult& rr : run.ranks) {
    r.host_wait = std::max(r.host_wait, rr.host_wait);
  }
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

StepReport simulate(const Scenario& given, const LoadedScenario& l, const StepOptions& options,
                    StepObserver* observer);

// The communication model with the faults' links degraded or down; a fault the network cannot
// take is an InputError where it was given.
std::unique_ptr<CommSetup> comm_setup(const topology::ClusterSpec& cluster,
                                      const workloads::StepPlan& plan, const CommOptions& options,
                                      const Faults& faults) {
  try {
    return std::make_unique<CommSetup>(cluster, plan, options, faults.links);
  } catch (const topology::LinkFaultError& e) {
    throw faults.link_origins.at(e.index()).error(e.message());
  }
}

// What the faults of `s` did: its step against the same step without them, simulated in
// representative mode (exact on symmetric inputs).
FaultEffect compare_with_nominal(const Scenario& s, const LoadedScenario& l,
                                 const StepOptions& options, const workloads::StepPlan& plan,
                                 const std::vector<RankBreakdown>& breakdown) {
  Scenario nominal = s;
  nominal.faults = {};
  StepOptions quiet;
  quiet.comm = options.comm;
  quiet.skip_memory_precheck = options.skip_memory_precheck;
  FaultEffect e =
      fault_effect(s.faults, plan, breakdown, simulate(nominal, l, quiet, nullptr).step_time);
  e.switched_to_full = !options.full_simulation;
  return e;
}

// The ranks representative mode simulates besides one per class (plan_step's `also_simulate`):
// what the observer shows and, on an ICI torus, every rank of rank 0's TP group. A simulated
// group's images (its family's other groups, workloads::plan_step) run its collectives as one
// transfer at one rate: exact where they meet the same contention, as the data-parallel groups of
// the TP positions do on a fat tree (each on its own rail) and a full simulation of every GPU
// run of validation/published bears out. On a torus those groups cross the TP groups' links at
// different places, and tied to one rate they left the TP collectives more bandwidth than they
// get: MaxText's v5p runs with TP 8 and 16 came out 6.0 % and 4.9 % faster than with every rank
// simulated. With the TP group simulated, each TP position's data-parallel group is a transfer of
// its own, and those runs match full simulation exactly.
std::vector<int64_t> representative_ranks(const topology::ClusterSpec& cluster,
                                          const workloads::ParallelPlan& plan,
                                          const StepObserver* observer) {
  std::vector<int64_t> ranks =
      observer != nullptr ? observer->ranks_to_simulate() : std::vector<int64_t>{};
  if (cluster.scale_up == topology::ScaleUpFabric::kIciTorus && plan.tp > 1) {
    const workloads::RankLayout layout(plan);
    for (int64_t tp = 1; tp < plan.tp; ++tp) {
      ranks.push_back(layout.rank(workloads::RankCoords{tp, 0, 0, 0}));
    }
  }
  return ranks;
}

StepReport simulate(const Scenario& given, const LoadedScenario& l, const StepOptions& options,
                    StepObserver* observer) {
  Scenario s = given;
  bind_to_cluster(s.plan, l.cluster);
  check_plan(l, s.plan);
  StepReport report = describe(s, l);
  const bool faulty = !s.faults.empty();
  if (faulty) {
    check_faults(s.faults, s.plan.world());
  }
  // Faults make ranks differ: representative mode would be wrong, so every rank is simulated.
  const bool full = options.full_simulation || faulty ||
                    (observer != nullptr && observer->needs_full_simulation());
  report.simulation_mode = full ? "full" : "representative";
  workloads::StepPlan plan = workloads::plan_step(
      l.model, s.plan,
      full ? workloads::SimulationMode::kFull : workloads::SimulationMode::kRepresentative,
      representative_ranks(l.cluster, s.plan, observer));
  if (!options.skip_memory_precheck && !precheck_memory(report, l.model, s.plan, plan)) {
    return report;
  }
  topology::RooflineComputeModel compute(l.cluster.chip);
  const std::unique_ptr<CommSetup> comm = comm_setup(l.cluster, plan, options.comm, s.faults);
  Simulation sim(compute, comm->model());
  workloads::load_plan(sim, plan);
  apply_compute_faults(s.faults, plan, sim);
  if (observer != nullptr) {
    observer->attach(sim, *comm, report);
  }
  const RunResult run = sim.run();
  if (observer != nullptr) {
    observer->finish(run.end, report);
  }
  std::vector<RankBreakdown> breakdown;
  breakdown.reserve(run.ranks.size());
  for (const RankResult& rank : run.ranks) {
    breakdown.push_back(rank.breakdown);
  }
  fill_results(report, run, breakdown, plan);
  if (faulty) {
    report.faults = compare_with_nominal(s, l, options, plan, breakdown);
    report.faults->reroutes = comm->reroutes();
  }
  return report;
}

}  // namespace

StepReport simulate_step(const Scenario& s, const LoadedScenario& loaded,
                         const StepOptions& options, StepObserver* observer) {
  return simulate(s, loaded, options, observer);
}

StepReport simulate_step(const Scenario& s, const StepOptions& options, StepObserver* observer) {
  return simulate(s, load_and_check(s), options, observer);
}

}  // namespace meshsim::scenario
