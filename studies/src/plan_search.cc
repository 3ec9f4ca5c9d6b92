// The plan search (plan_search.h): enumerate, prune exactly, simulate in bound order, rank.
#include "meshsim/studies/plan_search.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <numeric>
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

// The innermost loops: ZeRO, EP, HSDP, microbatch, recompute and TP overlap for fixed degrees.
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
  // kernel (FlashAttention-2/3, cuDNN, splash, Triton) never saves: with one, selective is the
  // same plan as none.
  // Offloaded activations are not recomputed (Megatron-Core refuses the two together).
  const std::vector<Recompute> recomputes =
      p.offload_layers > 0 ? std::vector<Recompute>{Recompute::kNone}
      : workloads::fused_attention(p.attention).has_value()
          ? std::vector<Recompute>{Recompute::kNone, Recompute::kFull}
          : std::vector<Recompute>{Recompute::kNone, Recompute::kSelective, Recompute::kFull};
  const std::vector<bool> overlaps =
      p.tp > 1 ? std::vector<bool>{false, true} : std::vector<bool>{false};
  for (const ZeroStage zero : only_or(f.zero, zeros)) {
    p.zero = zero;
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

// Every combination, valid or not, in enumeration order.
void enumerate_all(const LoadedScenario& l, const ParallelPlan& base, const SearchOptions& o,
                   const std::function<void(const ParallelPlan&)>& visit) {
  const int64_t world = l.cluster.device_count();
  const int64_t max_tp = o.max_tp > 0 ? o.max_tp : l.cluster.scale_up_domain_size();
  const Fixed& f = o.fixed;
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
  const int64_t domain = l.cluster.scale_up_domain_size();
  for (const int64_t tp : only_or(f.tp, divisors(world))) {
    if (tp > max_tp && !f.tp) {
      continue;
    }
    for (const bool sp : only_or(f.sp, {tp > 1})) {
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

std::vector<ParallelPlan> enumerate_plans(const LoadedScenario& l, const ParallelPlan& base,
                                          const SearchOptions& options, SearchResult* counts) {
  // The batch and each held degree within the plan's bounds before any plan is formed from them:
  // a held pp of 2^62 had wrapped tp x cp x pp to 0 (SIGFPE), a global batch of 2^62 sequences
  // had run for minutes.
  using workloads::PlanField;
  workloads::check_plan_size(PlanField::kGbs, base.gbs);
  workloads::check_plan_size(PlanField::kSeq, base.seq);
  const Fixed& f = options.fixed;
  for (const auto& [field, held] :
       {std::pair{PlanField::kTp, f.tp}, {PlanField::kCp, f.cp}, {PlanField::kPp, f.pp},
        {PlanField::kVpp, f.vpp}, {PlanField::kDp, f.dp}, {PlanField::kEp, f.ep},
        {PlanField::kMbs, f.mbs}}) {
    if (held) {
      workloads::check_plan_size(field, *held);
    }
  }
  std::vector<ParallelPlan> out;
  enumerate_all(l, base, options, [&](const ParallelPlan& p) {
    if (counts != nullptr) {
      ++counts->considered;
    }
    try {
      // The plan as simulate_step runs it: its software stack's kernels for this chip (the
      // bound, the memory pruning and the table see the same plan).
      ParallelPlan q = p;
      bind_to_cluster(q, l.cluster);
      check_plan(l, q);
      out.push_back(std::move(q));
    } catch (const workloads::PlanError& e) {
      if (counts != nullptr) {
        ++counts->invalid[std::string(to_string(e.field()))];
      }
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
    return fmt::format("no valid plan of the {} considered (invalid by field: {})", r.considered,
                       by);
  }
  return fmt::format("no plan fits in memory ({} over memory, {} within the headroom, {} out of "
                     "memory when simulated)",
                     r.pruned_memory, r.pruned_headroom, r.simulated_oom);
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

struct Candidate {
  size_t index = 0;  // enumeration order, the tie-break
  ParallelPlan plan;
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
  Bytes worst;
  const std::vector<int64_t> in_flight = workloads::max_in_flight_per_stage(plan.pipeline());
  for (const workloads::StagePartition& st : workloads::partition_stages(model, plan)) {
    const int64_t chunks = in_flight[static_cast<size_t>(st.stage)];
    const int64_t chunk_layers = st.params.layers / plan.vpp;
    const workloads::TrainingMemory state = workloads::training_memory(st, plan, 1);
    // Layers differ (dense first layers, windows, recompute_num_layers): the least of them.
    Bytes least_saved =
        st.activations.by_layer.empty() ? Bytes::zero() : st.activations.by_layer.front().saved;
    for (const workloads::LayerSaved& layer : st.activations.by_layer) {
      least_saved = std::min(least_saved, layer.saved);
    }
    worst = std::max(worst, state.model_state() + least_saved * (chunk_layers * chunks));
  }
  return worst;
}

namespace {

// Memory pruning and bounds, in enumeration order.
std::vector<Candidate> prune(const LoadedScenario& l, const std::vector<ParallelPlan>& plans,
                             const SearchOptions& o, SearchResult& r, const ProgressFn& progress) {
  // The communication model the data-parallel bound asks: the cluster's network, ranks in order,
  // the backend and algorithm the simulations use.
  const topology::Network net = topology::Network::build(l.cluster);
  collectives::NetworkCommModel comm(net, topology::Placement::in_order(l.cluster.device_count()),
                                     o.step.comm.backend, o.step.comm.collective);
  StepLowerBound bound(l.model, l.cluster, &comm);
  const Bytes capacity = l.cluster.chip.hbm_capacity;
  const auto usable =
      Bytes::of(static_cast<int64_t>(capacity.as_double() * (1.0 - o.min_headroom)));
  std::vector<Candidate> out;
  for (size_t i = 0; i < plans.size(); ++i) {
    const Bytes peak = memory_lower_bound(l.model, plans[i]);
    if (peak > capacity) {
      ++r.pruned_memory;
    } else if (peak > usable) {
      ++r.pruned_headroom;
    } else {
      out.push_back({i, plans[i], bound(plans[i]), peak});
    }
    if (progress && (i % 256 == 0 || i + 1 == plans.size())) {
      progress("bounding", static_cast<int64_t>(i + 1), static_cast<int64_t>(plans.size()));
    }
  }
  r.probes = static_cast<int64_t>(bound.probes());
  return out;
}

// Simulates the items of `batch` this process owns (every `count`-th from `index`) on up to
// `jobs` threads; their reports in batch order (the others default), and the exception of each
// item that threw.
std::vector<StepReport> simulate_own(const Scenario& base, const LoadedScenario& l,
                                     const std::vector<const Candidate*>& batch,
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
        s.plan = batch[i]->plan;
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
                                       const std::vector<const Candidate*>& batch,
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

// The best plans simulated so far, best first, at most `top`.
class Ranking {
 public:
  explicit Ranking(int64_t top) : top_(top) {}
  // The objective a plan must beat to enter (infinity until the ranking is full).
  double nth_best() const {
    return static_cast<int64_t>(ranked_.size()) < top_ ? std::numeric_limits<double>::infinity()
                                                       : ranked_.back().first;
  }
  void offer(double value, RankedPlan plan) {
    const auto at = std::upper_bound(
        ranked_.begin(), ranked_.end(), value,
        [](double x, const std::pair<double, RankedPlan>& e) { return x < e.first; });
    ranked_.insert(at, {value, std::move(plan)});
    if (static_cast<int64_t>(ranked_.size()) > top_) {
      ranked_.pop_back();
    }
  }
  std::vector<RankedPlan> take() {
    std::vector<RankedPlan> out;
    for (auto& [v, plan] : ranked_) {
      out.push_back(std::move(plan));
    }
    return out;
  }

 private:
  int64_t top_;
  std::vector<std::pair<double, RankedPlan>> ranked_;
};

// The cap counts simulations of plans that fit: out-of-memory ones (the memory bound lets
// through what it cannot prove too big) do not use it up, up to ten times the cap in all.
bool cap_reached(const SearchResult& r, int64_t cap) {
  const int64_t fitted = r.simulated - r.simulated_oom;
  return cap > 0 && (fitted >= cap || r.simulated >= 10 * cap);
}

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
  std::vector<Candidate> candidates =
      prune(l, enumerate_plans(l, base.plan, o, &r), o, r, progress);
  const double price =
      PriceTable::builtin().device(l.cluster.chip.name).usd_per_device_hour.value_or(1.0);
  const ObjectiveScale scale = objective_scale(l, base.plan, o.objective, price);
  std::sort(candidates.begin(), candidates.end(), [&](const Candidate& a, const Candidate& b) {
    return std::pair(scale.of(a.bound), a.index) < std::pair(scale.of(b.bound), b.index);
  });
  // Simulate a fixed batch at a time (the same plans whatever the thread or process count) until
  // no plan left has a bound below the N-th best. Which plans go first: the smallest bound times
  // the least step/bound ratio simulated so far in the plan's ZeRO stage (1 before any). The bound
  // is loosest where the step waits on the data-parallel stream (ZeRO-3's gathers), so under a
  // simulation cap the plain bound order would spend the cap on one family; the stopping rule,
  // and so --exact, still uses the bound itself.
  constexpr size_t kBatch = 4;
  const Bytes usable = Bytes::of(
      static_cast<int64_t>(r.memory_capacity.as_double() * (1.0 - o.min_headroom)));
  Ranking ranking(o.top);
  const auto in_reach = [&](size_t i) {
    return scale.of(candidates[i].bound) <= ranking.nth_best();
  };
  constexpr size_t kZeroStages = 4;
  std::array<double, kZeroStages> ratio{1.0, 1.0, 1.0, 1.0};
  std::array<bool, kZeroStages> seen{};
  std::vector<bool> done(candidates.size(), false);
  const auto order_key = [&](size_t i) {
    const auto z = static_cast<size_t>(candidates[i].plan.zero);
    return std::pair(candidates[i].bound.seconds() * ratio[z], i);
  };
  // The next batch: the in-reach plans with the smallest keys.
  const auto next_batch = [&] {
    std::vector<size_t> picked;
    for (size_t i = 0; i < candidates.size(); ++i) {
      if (done[i] || !in_reach(i)) {
        continue;
      }
      picked.push_back(i);
      std::sort(picked.begin(), picked.end(),
                [&](size_t a, size_t b) { return order_key(a) < order_key(b); });
      if (picked.size() > kBatch) {
        picked.pop_back();
      }
    }
    return picked;
  };
  while (!cap_reached(r, o.max_simulations)) {
    const std::vector<size_t> picked = next_batch();
    if (picked.empty()) {
      break;
    }
    std::vector<const Candidate*> batch;
    for (const size_t i : picked) {
      done[i] = true;
      batch.push_back(&candidates[i]);
    }
    const std::vector<StepReport> reports = simulate_batch(base, l, batch, o);
    for (size_t i = 0; i < batch.size(); ++i) {
      ++r.simulated;
      if (reports[i].simulated && batch[i]->bound > Duration::zero()) {
        const auto z = static_cast<size_t>(batch[i]->plan.zero);
        const double k = reports[i].step_time / batch[i]->bound;
        ratio[z] = seen[z] ? std::min(ratio[z], k) : k;
        seen[z] = true;
      }
      if (reports[i].oom || reports[i].peak_memory > usable) {
        ++r.simulated_oom;
        continue;
      }
      ranking.offer(objective_value(reports[i], o.objective, price),
                    RankedPlan{batch[i]->plan, batch[i]->bound, batch[i]->memory, reports[i]});
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
  r.top = ranking.take();
  return r;
}

}  // namespace meshsim::studies
