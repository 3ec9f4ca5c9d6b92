// The plan search (plan_search.h): enumerate, prune exactly, simulate in bound order, rank.
#include "meshsim/studies/plan_search.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <numeric>
#include <atomic>
#include <mutex>
#include <set>
#include <thread>

#include "meshsim/collectives/comm_model.h"
#include "meshsim/sim/error.h"
#include "meshsim/topology/network.h"
#include "meshsim/studies/cost.h"
#include "meshsim/scenario/stack_setup.h"
#include "report_state.h"
#include "meshsim/studies/step_bound.h"
#include "meshsim/workloads/accounting.h"
#include "meshsim/workloads/partition.h"
#include "meshsim/workloads/pipeline.h"
#include "meshsim/workloads/stack_rules.h"
#include "meshsim/workloads/step.h"
#include "meshsim/workloads/training_memory.h"

namespace meshsim::studies {

using scenario::bind_to_cluster;
using scenario::check_plan;
using scenario::load_inputs;
using scenario::LoadedScenario;
using scenario::require_host_link;
using scenario::Scenario;
using scenario::simulate_step;
using scenario::StepReport;
using workloads::ParallelPlan;
using scenario::ScenarioError;
using scenario::ScenarioField;
using workloads::PipelineSchedule;
using workloads::Recompute;
using workloads::ZeroStage;

namespace {

// In ascending order, in O(sqrt n): a global batch of 2^30 sequences has per-rank batches near
// 2^30, whose divisors a linear scan took minutes to list for every plan.
std::vector<int64_t> divisors(int64_t n) {
  std::vector<int64_t> out;
  std::vector<int64_t> above;  // n / d for each d below sqrt(n), descending
  for (int64_t d = 1; d <= n / d; ++d) {
    if (n % d == 0) {
      out.push_back(d);
      if (d != n / d) {
        above.push_back(n / d);
      }
    }
  }
  out.insert(out.end(), above.rbegin(), above.rend());
  return out;
}

template <typename T>
std::vector<T> only_or(const std::optional<T>& fixed, std::vector<T> all) {
  if (fixed) {
    return {*fixed};
  }
  return all;
}

struct ScheduleChoice {
  PipelineSchedule schedule;
  int64_t vpp;
};

std::vector<ScheduleChoice> schedules(int64_t pp, int64_t layers_per_stage, const Fixed& f) {
  std::vector<ScheduleChoice> out;
  if (pp == 1) {
    out.push_back({PipelineSchedule::kOneFOneB, 1});
  } else {
    out.push_back({PipelineSchedule::kOneFOneB, 1});
    for (const int64_t v : divisors(layers_per_stage)) {
      if (v > 1) {
        out.push_back({PipelineSchedule::kInterleaved, v});
      }
    }
    out.push_back({PipelineSchedule::kZeroBubble, 1});
    if (layers_per_stage % 2 == 0) {
      out.push_back({PipelineSchedule::kZeroBubbleV, 2});
    }
  }
  if (f.schedule == PipelineSchedule::kGpipe) {
    out = {{PipelineSchedule::kGpipe, 1}};
  }
  std::erase_if(out, [&](const ScheduleChoice& c) {
    return (f.schedule && c.schedule != *f.schedule) || (f.vpp && c.vpp != *f.vpp);
  });
  return out;
}

// The HSDP shard groups of a plan with these degrees (plan_search.h): 0 (ZeRO over all of DP) and,
// where DP crosses the scale-up domain, the largest group inside it; or what the flags fix.
std::vector<int64_t> hsdp_choices(const ParallelPlan& p, int64_t domain, const Fixed& f) {
  if (f.dcn_dp) {
    return {p.zero == ZeroStage::kNone ? 0 : p.dp / *f.dcn_dp};
  }
  if (f.fsdp) {
    return *f.fsdp > 0 && p.zero == ZeroStage::kNone ? std::vector<int64_t>{}
                                                     : std::vector<int64_t>{*f.fsdp};
  }
  std::vector<int64_t> out = {0};
  const int64_t span = p.tp * p.cp;
  // Without ZeRO there is nothing to shard; with EP HSDP is not modelled; a DP group inside one
  // domain has nothing to gain from replicas.
  if (p.zero == ZeroStage::kNone || p.ep > 1 || domain % (span * p.dp) == 0) {
    return out;
  }
  for (int64_t g = p.dp - 1; g > 1; --g) {
    if (p.dp % g == 0 && domain % (span * g) == 0) {
      out.push_back(g);
      break;
    }
  }
  return out;
}

// The innermost loops: ZeRO, FP8 parameter gathers, EP, HSDP, microbatch, recompute and TP overlap
// for fixed degrees.
void enumerate_inner(const workloads::ModelConfig& model, int64_t domain, ParallelPlan p,
                     const Fixed& f, const std::function<void(const ParallelPlan&)>& visit) {
  std::vector<ZeroStage> zeros = {ZeroStage::kNone};
  if (p.dp > 1) {
    zeros = {ZeroStage::kNone, ZeroStage::kOptimizerStates, ZeroStage::kGradients,
             ZeroStage::kParameters};
  }
  const std::vector<int64_t> eps = model.moe ? divisors(p.dp) : std::vector<int64_t>{1};
  const int64_t per_dp = p.gbs % p.dp == 0 ? p.gbs / p.dp : 0;
  // Selective recompute drops the attention scores and their dropout, which a fused attention
  // kernel (FlashAttention-2/3, cuDNN, splash, Triton) never saves: with one, selective frees at
  // most the kernel's statistics (and re-runs it, ParallelPlan::fused_attention_checkpointed), a
  // plan none dominates.
  // Offloaded activations are not recomputed (Megatron-Core refuses the two together). JAX's
  // policies, each between none and full in memory and time, where the stack runs them
  // (MaxText's remat_policy minimal, save_dot_except_mlp and save_qkv_proj; Praxis's first two).
  std::vector<Recompute> recomputes =
      p.offload_layers > 0 ? std::vector<Recompute>{Recompute::kNone}
      : workloads::fused_attention(p.attention).has_value()
          ? std::vector<Recompute>{Recompute::kNone, Recompute::kFull}
          : std::vector<Recompute>{Recompute::kNone, Recompute::kSelective, Recompute::kFull};
  if (p.offload_layers == 0) {
    for (const Recompute r : {Recompute::kDots, Recompute::kQkvOutProj, Recompute::kQkvProj}) {
      if (workloads::runs_recompute(p.stack, r)) {
        recomputes.push_back(r);
      }
    }
  }
  const std::vector<bool> overlaps =
      p.tp > 1 ? std::vector<bool>{false, true} : std::vector<bool>{false};
  for (const ZeroStage zero : only_or(f.zero, zeros)) {
    p.zero = zero;
    // Gathering the weights in FP8 halves the parameter gathers but is its own plan
    // (Megatron-Core's
    // --fp8-param-gather), so both are tried where the plan can take it; held, it is what it is
    // (validate_plan refuses it where it cannot be).
    const std::vector<bool> fp8_gathers = workloads::fp8_param_gather_refusal(p)
                                              ? std::vector<bool>{false}
                                              : std::vector<bool>{false, true};
    for (const bool fp8_gather : only_or(f.fp8_param_gather, fp8_gathers)) {
      p.fp8_param_gather = fp8_gather;
      for (const int64_t ep : only_or(f.ep, eps)) {
        p.ep = ep;
        for (const int64_t fsdp : hsdp_choices(p, domain, f)) {
          p.fsdp = fsdp;
          for (const int64_t mbs :
               only_or(f.mbs, per_dp > 0 ? divisors(per_dp) : std::vector{p.mbs})) {
            for (const Recompute rc : only_or(f.recompute, recomputes)) {
              for (const bool ovl : only_or(f.overlap_tp, overlaps)) {
                p.mbs = mbs;
                p.recompute = rc;
                p.overlap.tensor_parallel = ovl;
                visit(p);
              }
            }
          }
        }
      }
    }
  }
}

// The base as every enumerated plan starts (enumerate_all), before its degrees and choices.
ParallelPlan prepared(const ParallelPlan& base, const Fixed& f) {
  ParallelPlan p = base;
  p.stage_layers.clear();
  // Not searched: Megatron's block recompute (full recomputes every layer), whose setting would
  // not carry over to other degrees and recompute policies. HSDP is enumerated per plan.
  p.fsdp = 0;
  p.recompute_num_layers = 0;
  p.recompute_modules.clear();
  // Activation offloading only where held: its count is a memory budget the user picks, and
  // each count would multiply the plans by the no-recompute share.
  p.offload_layers = f.offload_layers.value_or(0);
  return p;
}

// Every combination, valid or not, in enumeration order.
void enumerate_all(const LoadedScenario& l, const ParallelPlan& base, const SearchOptions& o,
                   const std::function<void(const ParallelPlan&)>& visit) {
  const int64_t world = l.cluster.device_count();
  const int64_t max_tp = o.max_tp > 0 ? o.max_tp : l.cluster.scale_up_domain_size();
  const Fixed& f = o.fixed;
  ParallelPlan p = prepared(base, f);
  {
    // The stack the cluster runs when none is given (MaxText on TPUs): its rules decide what
    // is enumerated below.
    ParallelPlan bound = p;
    bind_to_cluster(bound, l.cluster);
    p.stack = bound.stack;
  }
  const int64_t domain = l.cluster.scale_up_domain_size();
  // TP with SP where the stack runs it, else whole-activation TP (Megatron-LM 2021, DeepSpeed).
  const bool sp_with_tp = workloads::runs_sequence_parallelism(p.stack);
  for (const int64_t tp : only_or(f.tp, divisors(world))) {
    if (tp > max_tp && !f.tp) {
      continue;
    }
    for (const bool sp : only_or(f.sp, {tp > 1 && sp_with_tp})) {
      for (const int64_t cp : only_or(f.cp, divisors(world / std::max<int64_t>(tp, 1)))) {
        for (const int64_t pp : only_or(f.pp, divisors(world / std::max<int64_t>(tp * cp, 1)))) {
          if (world % (tp * cp * pp) != 0) {
            continue;
          }
          const int64_t dp = world / (tp * cp * pp);
          if ((f.dp && *f.dp != dp) || (f.dcn_dp && dp % *f.dcn_dp != 0)) {
            continue;
          }
          const int64_t per_stage = l.model.num_layers % pp == 0 ? l.model.num_layers / pp : 1;
          for (const ScheduleChoice& s : schedules(pp, per_stage, f)) {
            p.tp = tp;
            p.sp = sp;
            p.cp = cp;
            p.pp = pp;
            p.dp = dp;
            p.schedule = s.schedule;
            p.vpp = s.vpp;
            enumerate_inner(l.model, domain, p, f, visit);
          }
        }
      }
    }
  }
}

}  // namespace

namespace {

// The held degrees and the batch within the plan's bounds before any plan is formed from them: a
// held pp of 2^62 had wrapped tp x cp x pp to 0 (SIGFPE), a global batch of 2^62 sequences had run
// for minutes.
void check_sizes(const ParallelPlan& base, const Fixed& f) {
  using workloads::PlanField;
  workloads::check_plan_size(PlanField::kGbs, base.gbs);
  workloads::check_plan_size(PlanField::kSeq, base.seq);
  for (const auto& [field, held] :
       {std::pair{PlanField::kTp, f.tp}, {PlanField::kCp, f.cp}, {PlanField::kPp, f.pp},
        {PlanField::kVpp, f.vpp}, {PlanField::kDp, f.dp}, {PlanField::kEp, f.ep},
        {PlanField::kMbs, f.mbs}}) {
    if (held) {
      workloads::check_plan_size(field, *held);
    }
  }
}

// What became of one enumerated plan before its memory was looked at.
struct Screened {
  const workloads::StackRule* refused = nullptr;  // the stack's rule that refuses it
  std::optional<workloads::PlanField> invalid;    // the field validate_plan faults
};

// The plan as simulate_step runs it (its software stack's kernels for this chip: the bound, the
// memory pruning and the table see the same plan), and whether it is runnable.
Screened screen(const LoadedScenario& l, ParallelPlan& q) {
  Screened out;
  try {
    bind_to_cluster(q, l.cluster);
    out.refused = workloads::stack_refusal(l.model, q);
    if (out.refused == nullptr) {
      check_plan(l, q);
    }
  } catch (const workloads::PlanError& e) {
    out.invalid = e.field();
  }
  return out;
}

void count(const Screened& s, SearchResult* counts) {
  if (counts == nullptr) {
    return;
  }
  if (s.refused != nullptr) {
    ++counts->refused[std::string(s.refused->what)];
  } else if (s.invalid) {
    ++counts->invalid[std::string(to_string(*s.invalid))];
  }
}

}  // namespace

std::vector<ParallelPlan> enumerate_plans(const LoadedScenario& l, const ParallelPlan& base,
                                          const SearchOptions& options, SearchResult* counts) {
  check_sizes(base, options.fixed);
  std::vector<ParallelPlan> out;
  enumerate_all(l, base, options, [&](const ParallelPlan& p) {
    if (counts != nullptr) {
      ++counts->considered;
    }
    ParallelPlan q = p;
    const Screened s = screen(l, q);
    count(s, counts);
    if (s.refused == nullptr && !s.invalid) {
      out.push_back(std::move(q));
    }
  });
  return out;
}

std::string no_plan_reason(const SearchResult& r) {
  const int64_t fit_tested = r.pruned_memory + r.pruned_headroom + r.simulated;
  if (fit_tested == 0) {
    std::string by;
    for (const auto& [field, n] : r.invalid) {
      by += fmt::format("{}{} {}", by.empty() ? "" : ", ", field, n);
    }
    std::string refused;
    for (const auto& [what, n] : r.refused) {
      refused += fmt::format("{}{} {}", refused.empty() ? "" : "; ", what, n);
    }
    return fmt::format("no valid plan of the {} considered (invalid by field: {}{})",
                       r.considered, by.empty() ? "none" : by,
                       refused.empty() ? ""
                                       : fmt::format("; not run by the stack: {}", refused));
  }
  return fmt::format("no plan fits in memory with {:.0f} % left free ({} over memory, {} within "
                     "the headroom, {} out of memory and {} within the headroom when simulated)",
                     100.0 * r.min_headroom, r.pruned_memory, r.pruned_headroom, r.simulated_oom,
                     r.simulated_headroom);
}

double objective_value(const StepReport& r, Objective objective, double usd_per_device_hour) {
  switch (objective) {
    case Objective::kTime:
      return r.step_time.seconds();
    case Objective::kCost:
      return r.step_time.seconds() / 3600.0 * static_cast<double>(r.devices) * usd_per_device_hour;
    case Objective::kMfu:
      return -r.mfu;
  }
  return r.step_time.seconds();
}

namespace {

// What the search varies in a plan: a candidate keeps these (not the whole plan, whose copies
// were most of the memory of a search over hundreds of thousands of plans), and its plan is the
// template's (plan_template) with them set.
struct PlanKey {
  int64_t tp = 1, cp = 1, pp = 1, vpp = 1, dp = 1, ep = 1, fsdp = 0, mbs = 1;
  PipelineSchedule schedule = PipelineSchedule::kOneFOneB;
  ZeroStage zero = ZeroStage::kNone;
  Recompute recompute = Recompute::kNone;
  bool sp = false;
  bool overlap_tp = false;
  bool fp8_param_gather = false;
};

PlanKey key_of(const ParallelPlan& p) {
  return PlanKey{p.tp,
                 p.cp,
                 p.pp,
                 p.vpp,
                 p.dp,
                 p.ep,
                 p.fsdp,
                 p.mbs,
                 p.schedule,
                 p.zero,
                 p.recompute,
                 p.sp,
                 p.overlap.tensor_parallel,
                 p.fp8_param_gather};
}

ParallelPlan with_key(ParallelPlan p, const PlanKey& k) {
  p.tp = k.tp;
  p.cp = k.cp;
  p.pp = k.pp;
  p.vpp = k.vpp;
  p.dp = k.dp;
  p.ep = k.ep;
  p.fsdp = k.fsdp;
  p.mbs = k.mbs;
  p.schedule = k.schedule;
  p.zero = k.zero;
  p.recompute = k.recompute;
  p.sp = k.sp;
  p.overlap.tensor_parallel = k.overlap_tp;
  p.fp8_param_gather = k.fp8_param_gather;
  return p;
}

// The plan every candidate's key completes: the base as enumerated, bound to the cluster (its
// stack, kernels and ranks per node do not depend on the key).
ParallelPlan template_of(const LoadedScenario& l, const ParallelPlan& base, const SearchOptions& o) {
  ParallelPlan t = prepared(base, o.fixed);
  bind_to_cluster(t, l.cluster);
  return t;
}

struct Candidate {
  size_t index = 0;  // enumeration order, the tie-break
  PlanKey key;
  Duration bound;
  Bytes memory;
};

// The objective of a step of `step` seconds (what a lower bound on the step gives).
struct ObjectiveScale {
  Objective objective;
  double usd_per_step_second;   // cost
  double mfu_times_step;        // MFU x step time (model FLOPs / (devices x peak))
  double of(Duration step) const {
    switch (objective) {
      case Objective::kCost:
        return step.seconds() * usd_per_step_second;
      case Objective::kMfu:
        return -mfu_times_step / step.seconds();
      case Objective::kTime:
        break;
    }
    return step.seconds();
  }
};

ObjectiveScale objective_scale(const LoadedScenario& l, const ParallelPlan& base, Objective o,
                               double usd_per_device_hour) {
  const Flops flops = workloads::training_flops_per_token(l.model, base.seq) *
                      static_cast<double>(base.gbs * base.seq);
  const FlopsPerSec peak = l.cluster.chip.peak(Dtype::kBf16).value_or(FlopsPerSec::of(1.0));
  const auto devices = static_cast<double>(l.cluster.device_count());
  return {o, devices * usd_per_device_hour / 3600.0, flops.count() / (devices * peak.value())};
}

}  // namespace

Bytes memory_lower_bound(const workloads::ModelConfig& model, const ParallelPlan& plan) {
  return memory_lower_bound(plan, workloads::partition_stages(model, plan));
}

Bytes memory_lower_bound(const ParallelPlan& plan,
                         const std::vector<workloads::StagePartition>& parts) {
  const std::vector<Bytes> by_stage = memory_lower_bounds(plan, parts);
  return by_stage.empty() ? Bytes::zero() : *std::max_element(by_stage.begin(), by_stage.end());
}

std::vector<Bytes> memory_lower_bounds(const ParallelPlan& plan,
                                       const std::vector<workloads::StagePartition>& parts) {
  return workloads::least_peak_memory(plan, parts);
}

namespace {

// The largest closed-form memory of a rank of any stage (workloads::estimate_step_memory).
Bytes closed_form_peak(const workloads::ModelConfig& model, const ParallelPlan& plan) {
  Bytes most;
  for (const workloads::TrainingMemory& m : workloads::estimate_step_memory(model, plan)) {
    most = std::max(most, m.total());
  }
  return most;
}

// The usable memory of a chip under a headroom (a fraction of its capacity left free).
Bytes usable_memory(Bytes capacity, double headroom) {
  return Bytes::of(static_cast<int64_t>(capacity.as_double() * (1.0 - headroom)));
}

// Enumeration, screening, memory pruning and bounds, streamed: the plans are enumerated in chunks
// (only candidates are kept, so memory stays small however many plans there are), and each chunk's
// plans are screened and bounded on up to `o.jobs` threads (each with its own bound and
// communication model; every plan's values are its own, so the result does not depend on the
// thread count). Counts go to `r` in enumeration order.
std::vector<Candidate> prune(const LoadedScenario& l, const ParallelPlan& base,
                             const SearchOptions& o, SearchResult& r, const ProgressFn& progress) {
  check_sizes(base, o.fixed);
  // The communication model the data-parallel bound asks: the cluster's network, ranks in order,
  // the backend and algorithm the simulations use.
  const topology::Network net = topology::Network::build(l.cluster);
  const Bytes capacity = l.cluster.chip.hbm_capacity;
  const Bytes usable = usable_memory(capacity, o.min_headroom);
  const auto threads = static_cast<size_t>(std::clamp(o.jobs, 1, 64));
  // Each worker keeps its bound (whose caches hold times, a few words each) for the whole search,
  // and a fresh communication model per chunk: the model memoizes each collective's plan with
  // its link loads, which on thousands of devices grew to hundreds of MB over a search.
  struct Worker {
    std::unique_ptr<collectives::NetworkCommModel> comm;
    StepLowerBound bound;
  };
  const auto fresh_comm = [&] {
    return std::make_unique<collectives::NetworkCommModel>(
        net, topology::Placement::in_order(l.cluster.device_count()), o.step.comm.backend,
        o.step.comm.collective);
  };
  std::vector<std::unique_ptr<Worker>> workers;
  for (size_t t = 0; t < threads; ++t) {
    workers.push_back(
        std::unique_ptr<Worker>(new Worker{nullptr, StepLowerBound(l.model, l.cluster)}));
  }
  enum class Fate : uint8_t { kScreenedOut, kOverMemory, kOverHeadroom, kOverEstimate, kCandidate };
  constexpr size_t kChunk = 4096;
  std::vector<ParallelPlan> chunk;
  std::vector<Candidate> out;
  const auto process = [&] {
    const size_t n = chunk.size();
    std::vector<Screened> screened(n);
    std::vector<Fate> fate(n, Fate::kScreenedOut);
    std::vector<Candidate> found(n);
    const auto work = [&](size_t t) {
      workers[t]->comm = fresh_comm();
      workers[t]->bound.set_comm(workers[t]->comm.get());
      for (size_t i = t; i < n; i += threads) {
        screened[i] = screen(l, chunk[i]);
        if (screened[i].refused != nullptr || screened[i].invalid) {
          continue;
        }
        const std::vector<workloads::StagePartition> parts =
            workloads::partition_stages(l.model, chunk[i]);
        const Bytes peak = memory_lower_bound(chunk[i], parts);
        if (peak > capacity) {
          fate[i] = Fate::kOverMemory;
        } else if (peak > usable) {
          fate[i] = Fate::kOverHeadroom;
        } else if (o.closed_form_memory && closed_form_peak(l.model, chunk[i]) > usable) {
          fate[i] = Fate::kOverEstimate;
        } else {
          fate[i] = Fate::kCandidate;
          found[i] = Candidate{0, key_of(chunk[i]), workers[t]->bound(chunk[i], parts), peak};
        }
      }
    };
    std::vector<std::thread> pool;
    for (size_t t = 1; t < std::min(threads, n); ++t) {
      pool.emplace_back(work, t);
    }
    work(0);
    for (std::thread& th : pool) {
      th.join();
    }
    const auto first = static_cast<size_t>(r.considered) - n;
    for (size_t i = 0; i < n; ++i) {
      count(screened[i], &r);
      switch (fate[i]) {
        case Fate::kScreenedOut:
          break;
        case Fate::kOverMemory:
          ++r.pruned_memory;
          break;
        case Fate::kOverHeadroom:
          ++r.pruned_headroom;
          break;
        case Fate::kOverEstimate:
          ++r.pruned_estimate;
          break;
        case Fate::kCandidate:
          found[i].index = first + i;
          out.push_back(std::move(found[i]));
          break;
      }
    }
    chunk.clear();
    if (progress) {
      progress("bounding", r.considered, 0);
    }
  };
  enumerate_all(l, base, o, [&](const ParallelPlan& p) {
    ++r.considered;
    chunk.push_back(p);
    if (chunk.size() == kChunk) {
      process();
    }
  });
  process();
  std::set<StepLowerBound::ProbeKey> keys;
  for (const auto& w : workers) {
    for (const auto& k : w->bound.probe_keys()) {
      keys.insert(k);
    }
  }
  r.probes = static_cast<int64_t>(keys.size());
  return out;
}

// Simulates the items of `batch` this process owns (every `count`-th from `index`) on up to
// `jobs` threads; their reports in batch order (the others default), and the exception of each
// item that threw.
std::vector<StepReport> simulate_own(const Scenario& base, const LoadedScenario& l,
                                     const std::vector<ParallelPlan>& batch,
                                     const SearchOptions& o, size_t index, size_t count,
                                     std::vector<std::exception_ptr>& errors) {
  std::vector<size_t> mine;
  for (size_t i = index; i < batch.size(); i += count) {
    mine.push_back(i);
  }
  std::vector<StepReport> out(batch.size());
  errors.assign(batch.size(), nullptr);
  const auto run = [&](size_t first, size_t stride) {
    for (size_t k = first; k < mine.size(); k += stride) {
      const size_t i = mine[k];
      try {
        Scenario s = base;
        s.plan = batch[i];
        out[i] = simulate_step(s, l, o.step);
      } catch (...) {
        errors[i] = std::current_exception();
      }
    }
  };
  const size_t jobs = std::max<size_t>(
      1, std::min(static_cast<size_t>(std::clamp<int64_t>(o.jobs, 1, 64)), mine.size()));
  std::vector<std::thread> threads;
  for (size_t t = 1; t < jobs; ++t) {
    threads.emplace_back(run, t, jobs);
  }
  run(0, jobs);
  for (std::thread& t : threads) {
    t.join();
  }
  return out;
}

void rethrow_first(const std::vector<std::exception_ptr>& errors) {
  for (const std::exception_ptr& e : errors) {
    if (e) {
      std::rethrow_exception(e);
    }
  }
}

std::string what_of(const std::exception_ptr& e) {
  try {
    std::rethrow_exception(e);
  } catch (const std::exception& x) {
    return x.what();
  } catch (...) {
    return "an unknown exception";
  }
}

// Simulates `batch`: here, or split over the processes of o.distributor and exchanged.
std::vector<StepReport> simulate_batch(const Scenario& base, const LoadedScenario& l,
                                       const std::vector<ParallelPlan>& batch,
                                       const SearchOptions& o) {
  Distributor* d = o.distributor;
  std::vector<std::exception_ptr> errors;
  if (d == nullptr || d->size() == 1) {
    std::vector<StepReport> out = simulate_own(base, l, batch, o, 0, 1, errors);
    rethrow_first(errors);
    return out;
  }
  // Every process exchanges its reports, or the error of an item, so that all of them go on (or
  // stop) together.
  const auto index = static_cast<size_t>(d->rank());
  const auto count = static_cast<size_t>(d->size());
  const std::vector<StepReport> own = simulate_own(base, l, batch, o, index, count, errors);
  nlohmann::json mine = nlohmann::json::array();
  for (size_t i = index; i < batch.size(); i += count) {
    mine.push_back(errors[i] ? nlohmann::json{{"error", what_of(errors[i])}}
                             : detail::report_state(own[i]));
  }
  const std::vector<std::string> all = d->all_gather(mine.dump());
  rethrow_first(errors);
  std::vector<StepReport> out(batch.size());
  for (size_t r = 0; r < all.size(); ++r) {
    const nlohmann::json theirs = nlohmann::json::parse(all[r]);
    for (size_t k = 0; k < theirs.size(); ++k) {
      if (theirs[k].contains("error")) {
        throw InternalError(fmt::format("process {} of the plan search: {}", r,
                                        theirs[k]["error"].get<std::string>()));
      }
      out[r + k * count] = detail::report_from_state(theirs[k]);
    }
  }
  return out;
}

}  // namespace

namespace {

// The best plans simulated so far, best first, at most `top`. Equal objectives rank the plan with
// more memory left first (a lower simulated peak), then the earlier in enumeration order.
class Ranking {
 public:
  explicit Ranking(int64_t top) : top_(top) {}
  // The objective a plan must beat to enter (infinity until the ranking is full).
  double nth_best() const {
    return static_cast<int64_t>(ranked_.size()) < top_ ? std::numeric_limits<double>::infinity()
                                                       : std::get<0>(ranked_.back().first);
  }
  void offer(double value, size_t index, RankedPlan plan) {
    const Key key{value, plan.report.peak_memory.count(), index};
    const auto at = std::upper_bound(
        ranked_.begin(), ranked_.end(), key,
        [](const Key& x, const std::pair<Key, RankedPlan>& e) { return x < e.first; });
    ranked_.insert(at, {key, std::move(plan)});
    if (static_cast<int64_t>(ranked_.size()) > top_) {
      ranked_.pop_back();
    }
  }
  std::vector<RankedPlan> take() {
    std::vector<RankedPlan> out;
    for (auto& [k, plan] : ranked_) {
      out.push_back(std::move(plan));
    }
    return out;
  }

 private:
  using Key = std::tuple<double, int64_t, size_t>;  // objective, peak memory, enumeration index
  int64_t top_;
  std::vector<std::pair<Key, RankedPlan>> ranked_;
};

// The cap counts simulations of plans that fit: out-of-memory ones (the memory bound lets
// through what it cannot prove too big) do not use it up, up to ten times the cap in all.
bool cap_reached(const SearchResult& r, const SearchOptions& o) {
  const int64_t cap = o.max_simulations;
  const int64_t fitted = r.simulated - r.simulated_oom - r.simulated_headroom;
  const int64_t all = o.max_all_simulations > 0 ? o.max_all_simulations : 10 * cap;
  return cap > 0 && (fitted >= cap || r.simulated >= all);
}

// Plans whose step the bound misses by a similar factor: the ZeRO stage (ZeRO-3's gathers and
// reductions run beside every layer), whether there is a pipeline, and TP overlap (both add
// communication the bound cannot place).
size_t family_of(const PlanKey& p) {
  return static_cast<size_t>(p.zero) * 4 + (p.pp > 1 ? 2 : 0) + (p.overlap_tp ? 1 : 0);
}
constexpr size_t kFamilies = 16;

}  // namespace

SearchResult search_plans(const Scenario& base, const SearchOptions& o,
                          const ProgressFn& progress) {
  SIM_CHECK(o.top > 0 && o.min_headroom >= 0.0 && o.min_headroom < 1.0,
            "search for the top {} with headroom {}", o.top, o.min_headroom);
  const LoadedScenario l = load_inputs(base);
  if (o.fixed.offload_layers) {  // what every plan would be refused for
    require_host_link(l.cluster.chip);
    if (*o.fixed.offload_layers >= l.model.num_layers) {
      throw workloads::PlanError(
          workloads::PlanField::kOffloadLayers,
          fmt::format("{} offloaded layers per chunk: expected fewer than the model's {} layers "
                      "(Transformer Engine keeps a chunk's last layer on the device)",
                      *o.fixed.offload_layers, l.model.num_layers));
    }
  }
  SearchResult r;
  r.devices = l.cluster.device_count();
  r.memory_capacity = l.cluster.chip.hbm_capacity;
  r.min_headroom = o.min_headroom;
  std::vector<Candidate> candidates = prune(l, base.plan, o, r, progress);
  const ParallelPlan plan_template = candidates.empty() ? base.plan : template_of(l, base.plan, o);
  // The price of a device-hour: given, else the builtin table's. Only the cost objective needs
  // one; it refuses a chip without rather than rank by a made-up price.
  const std::optional<double> listed =
      o.usd_per_device_hour ? o.usd_per_device_hour
                            : PriceTable::builtin().device(l.cluster.chip.name).usd_per_device_hour;
  if (o.objective == Objective::kCost && !listed) {
    throw ScenarioError(ScenarioField::kCluster,
                        fmt::format("the cost objective needs a price per device-hour of {}, and "
                                    "the price table has none (studies/data/prices.json lists "
                                    "on-demand list prices where a provider publishes one)",
                                    l.cluster.chip.name));
  }
  const double price = listed.value_or(1.0);
  const ObjectiveScale scale = objective_scale(l, base.plan, o.objective, price);
  std::sort(candidates.begin(), candidates.end(), [&](const Candidate& a, const Candidate& b) {
    return std::pair(scale.of(a.bound), a.index) < std::pair(scale.of(b.bound), b.index);
  });
  // Simulate a fixed batch at a time (the same plans whatever the thread or process count) until
  // no plan left has a bound below the N-th best: then no plan left can enter the top N, and the
  // ranking is proven. Which plans go first: the smallest estimate, the bound times the least
  // step/bound ratio simulated so far in the plan's family (family_of; 1 before any). The
  // estimate is not a bound: it orders the simulations, and it stops a capped search early once
  // no plan left is estimated to enter (the ranking then says it is not proven). The stopping
  // rule that proves the ranking uses the bound itself.
  constexpr int64_t kBatch = 4;
  const Bytes usable = usable_memory(r.memory_capacity, o.min_headroom);
  Ranking ranking(o.top);
  const auto in_reach = [&](size_t i) {
    return scale.of(candidates[i].bound) <= ranking.nth_best();
  };
  std::array<double, kFamilies> ratio{};
  ratio.fill(1.0);
  std::array<bool, kFamilies> seen{};
  std::vector<bool> done(candidates.size(), false);
  const auto estimate = [&](size_t i) {
    return scale.of(Seconds(candidates[i].bound.seconds() * ratio[family_of(candidates[i].key)]));
  };
  // The next batch: the in-reach plans with the smallest estimates (under a cap, only those
  // estimated to enter the ranking).
  const auto next_batch = [&] {
    // At most kBatch, and no more than the cap leaves.
    size_t batch_size = kBatch;
    if (o.max_simulations > 0) {
      const int64_t all = o.max_all_simulations > 0 ? o.max_all_simulations
                                                    : 10 * o.max_simulations;
      const int64_t fitted = r.simulated - r.simulated_oom - r.simulated_headroom;
      batch_size = static_cast<size_t>(std::clamp<int64_t>(
          std::min(o.max_simulations - fitted, all - r.simulated), 1, kBatch));
    }
    std::vector<std::pair<double, size_t>> picked;
    for (size_t i = 0; i < candidates.size(); ++i) {
      if (done[i] || !in_reach(i)) {
        continue;
      }
      const double e = estimate(i);
      if (o.max_simulations > 0 && e > ranking.nth_best()) {
        continue;
      }
      picked.emplace_back(e, i);
      std::sort(picked.begin(), picked.end());
      if (picked.size() > batch_size) {
        picked.pop_back();
      }
    }
    std::vector<size_t> out;
    for (const auto& [e, i] : picked) {
      out.push_back(i);
    }
    return out;
  };
  while (true) {
    if (cap_reached(r, o)) {
      r.capped = true;
      break;
    }
    const std::vector<size_t> picked = next_batch();
    if (picked.empty()) {
      break;
    }
    std::vector<const Candidate*> batch;
    std::vector<ParallelPlan> plans;
    for (const size_t i : picked) {
      done[i] = true;
      batch.push_back(&candidates[i]);
      plans.push_back(with_key(plan_template, candidates[i].key));
    }
    const std::vector<StepReport> reports = simulate_batch(base, l, plans, o);
    for (size_t i = 0; i < batch.size(); ++i) {
      ++r.simulated;
      if (reports[i].simulated && batch[i]->bound > Duration::zero()) {
        const size_t f = family_of(batch[i]->key);
        const double k = reports[i].step_time / batch[i]->bound;
        ratio[f] = seen[f] ? std::min(ratio[f], k) : k;
        seen[f] = true;
      }
      if (reports[i].oom) {
        ++r.simulated_oom;
        continue;
      }
      if (reports[i].peak_memory > usable) {
        ++r.simulated_headroom;
        continue;
      }
      ranking.offer(objective_value(reports[i], o.objective, price), batch[i]->index,
                    RankedPlan{plans[i], batch[i]->bound, batch[i]->memory, reports[i]});
    }
    if (progress) {
      progress("simulating", r.simulated, static_cast<int64_t>(candidates.size()));
    }
  }
  for (size_t i = 0; i < candidates.size(); ++i) {
    if (!done[i]) {
      ++(in_reach(i) ? r.not_simulated : r.pruned_bound);
    }
  }
  r.exact = r.not_simulated == 0;
  r.capped = r.capped && !r.exact;
  r.top = ranking.take();
  return r;
}

}  // namespace meshsim::studies
