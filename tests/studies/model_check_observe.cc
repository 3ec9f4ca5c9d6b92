// The model checker's simulations of one scenario (model_check.h: observe), and what the engine's
// timeline shows while the engine is still alive (the traced runs' observer).
#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "meshsim/collectives/comm_model.h"
#include "meshsim/scenario/stack_setup.h"
#include "meshsim/scenario/step.h"
#include "meshsim/sim/analysis.h"
#include "meshsim/sim/simulation.h"
#include "meshsim/sim/timeline.h"
#include "meshsim/studies/step_bound.h"
#include "meshsim/topology/network.h"
#include "meshsim/workloads/partition.h"
#include "meshsim/workloads/training_memory.h"
#include "model_check.h"

namespace meshsim::model_check {
namespace {

// FNV-1a, 64 bits, over the integers of the records.
class Digest {
 public:
  void add(int64_t v) {
    auto u = static_cast<uint64_t>(v);
    for (int i = 0; i < 8; ++i) {
      h_ ^= u & 0xff;
      h_ *=
          0x100000001b3ULL;  // the FNV-1a 64-bit prime (Fowler, Noll, Vo; IETF draft-eastlake-fnv)
      u >>= 8;
    }
  }
  uint64_t value() const { return h_; }

 private:
  uint64_t h_ = 0xcbf29ce484222325ULL;  // the FNV-1a 64-bit offset basis (same source)
};

// At most this many problems are kept per timeline: the first ones say what broke.
constexpr size_t kMaxProblems = 8;

class Examiner {
 public:
  Examiner(const Timeline& t, const Simulation& sim, SimTime end) : t_(t), sim_(sim) {
    facts_.op_records = t.ops.size();
    facts_.memory_records = t.memory.size();
    digest();
    index_records();
    for (size_t r = 0; r < by_rank_.size(); ++r) {
      check_rank(r);
    }
    check_matches();
    check_ledger();
    facts_.analyzed = analyze(t, sim, end);
  }
  TimelineFacts take() { return std::move(facts_); }

 private:
  template <typename... Args>
  void problem(fmt::format_string<Args...> f, Args&&... args) {
    if (facts_.problems.size() < kMaxProblems) {
      facts_.problems.push_back(fmt::format(f, std::forward<Args>(args)...));
    }
  }

  void digest() {
    Digest d;
    for (const OpRecord& o : t_.ops) {
      for (const int64_t v :
           {int64_t{o.rank.value()}, int64_t{o.op.value()}, int64_t{o.stream}, o.ready.ps(),
            o.start.ps(), o.end.ps(), static_cast<int64_t>(o.match), o.issued.ps()}) {
        d.add(v);
      }
      facts_.last_end = std::max(facts_.last_end, o.end);
    }
    for (const MemoryRecord& m : t_.memory) {
      for (const int64_t v :
           {m.time.ps(), int64_t{m.rank.value()}, static_cast<int64_t>(m.category), m.delta.count(),
            m.total_after.count()}) {
        d.add(v);
      }
    }
    facts_.digest = d.value();
  }

  // Each simulated rank's records by op id; an op recorded twice is a problem.
  void index_records() {
    by_rank_.resize(sim_.num_ranks());
    for (size_t r = 0; r < by_rank_.size(); ++r) {
      by_rank_[r].assign(sim_.program_of(RankId(static_cast<uint32_t>(r))).size(), nullptr);
    }
    for (const OpRecord& o : t_.ops) {
      if (o.rank.index() >= by_rank_.size() || o.op.index() >= by_rank_[o.rank.index()].size()) {
        problem("a record of rank {} op {} that no program holds", o.rank.value(), o.op.value());
        continue;
      }
      const OpRecord*& slot = by_rank_[o.rank.index()][o.op.index()];
      if (slot != nullptr) {
        problem("rank {} op {} ran twice", o.rank.value(), o.op.value());
      }
      slot = &o;
    }
  }

  // The engine's rules for one rank (simulation.h): every op runs once, after its dependencies,
  // on its own stream, one at a time and in program order, not before its host issued it.
  void check_rank(size_t r) {
    const Program& program = sim_.program_of(RankId(static_cast<uint32_t>(r)));
    std::map<uint8_t, const OpRecord*> last_on_stream;
    for (size_t i = 0; i < by_rank_[r].size(); ++i) {
      const OpRecord* o = by_rank_[r][i];
      const Op& op = program.op(OpId(static_cast<uint32_t>(i)));
      if (o == nullptr) {
        problem("rank {} op {} ({}) never ran", r, i, op.name);
        continue;
      }
      if (o->stream != op.stream) {
        problem("rank {} op {} ({}) ran on stream {}, its program says {}", r, i, op.name,
                o->stream, op.stream);
      }
      if (!(o->ready <= o->start && o->start <= o->end)) {
        problem("rank {} op {} ({}): ready {} ps, start {} ps, end {} ps out of order", r, i,
                op.name, o->ready.ps(), o->start.ps(), o->end.ps());
      }
      if (o->start < o->issued) {
        problem("rank {} op {} ({}) started at {} ps, before its host issued it at {} ps", r, i,
                op.name, o->start.ps(), o->issued.ps());
      }
      for (const OpId pred : program.predecessors(OpId(static_cast<uint32_t>(i)))) {
        const OpRecord* p = by_rank_[r][pred.index()];
        if (p != nullptr && p->end > o->ready) {
          problem(
              "rank {} op {} ({}) ready at {} ps, before its dependency op {} ({}) ended at "
              "{} ps",
              r, i, op.name, o->ready.ps(), pred.value(), program.op(pred).name, p->end.ps());
        }
      }
      const OpRecord*& last = last_on_stream[op.stream];
      if (last != nullptr && last->end > o->ready) {
        problem("rank {} stream {}: op {} ({}) ready at {} ps while op {} ran until {} ps", r,
                op.stream, i, op.name, o->ready.ps(), last->op.value(), last->end.ps());
      }
      last = o;
    }
  }

  // The members of one collective, or a send and its receive, start together.
  void check_matches() {
    std::map<uint64_t, const OpRecord*> first;
    for (const OpRecord& o : t_.ops) {
      if (o.match == 0) {
        continue;
      }
      const auto [it, inserted] = first.emplace(o.match, &o);
      if (!inserted && it->second->start != o.start) {
        problem("match {}: rank {} op {} started at {} ps, rank {} op {} at {} ps", o.match,
                it->second->rank.value(), it->second->op.value(), it->second->start.ps(),
                o.rank.value(), o.op.value(), o.start.ps());
      }
    }
  }

  // Each rank's ledger: every total is the sum of the changes so far, never negative.
  void check_ledger() {
    std::vector<Bytes> total(by_rank_.size());
    for (const MemoryRecord& m : t_.memory) {
      if (m.rank.index() >= total.size()) {
        problem("a memory record of rank {}, which is not simulated", m.rank.value());
        continue;
      }
      Bytes& sum = total[m.rank.index()];
      sum = sum + m.delta;
      if (sum != m.total_after || m.total_after < Bytes::zero()) {
        problem(
            "rank {} at {} ps: ledger total {} B after a change of {} B, the changes sum to "
            "{} B",
            m.rank.value(), m.time.ps(), m.total_after.count(), m.delta.count(), sum.count());
        sum = m.total_after;
      }
      facts_.ledger_peak = std::max(facts_.ledger_peak, m.total_after);
    }
  }

  const Timeline& t_;
  const Simulation& sim_;
  std::vector<std::vector<const OpRecord*>> by_rank_;
  TimelineFacts facts_;
};

// Records the timeline of a run (without changing what is simulated) and examines it in finish,
// while the engine and its programs are alive.
class Recorder final : public TimelineRecorder {
 public:
  void finish(SimTime end, scenario::StepReport&) override {
    facts_ = examine(timeline_, *sim_, end);
    timeline_ = Timeline{};
  }
  TimelineFacts facts_;
};

scenario::StepReport traced(const scenario::Scenario& s, const scenario::LoadedScenario& l,
                            const scenario::StepOptions& options, TimelineFacts& facts) {
  Recorder recorder;
  scenario::StepReport r = scenario::simulate_step(s, l, options, &recorder);
  facts = std::move(recorder.facts_);
  return r;
}

// Weights, gradients and optimizer state at each stage's peak.
std::vector<Bytes> model_state(const scenario::StepReport& r) {
  std::vector<Bytes> out;
  for (const scenario::StepReport::Stage& st : r.stages) {
    const auto& c = st.peak_breakdown.by_category;
    out.push_back(c[static_cast<size_t>(MemoryCategory::kWeights)] +
                  c[static_cast<size_t>(MemoryCategory::kGradients)] +
                  c[static_cast<size_t>(MemoryCategory::kOptimizerState)]);
  }
  return out;
}

// The scenario at the next higher ZeRO stage its stack runs, simulated whatever the memory
// pre-check says (the ledger's model state is what is compared).
void observe_higher_zero(const nlohmann::json& doc, const scenario::LoadedScenario& l,
                         Observation& o) {
  const int zero = doc.value("zero", 0);
  for (int z = zero + 1; z <= 3; ++z) {
    nlohmann::json higher = doc;
    higher["zero"] = z;
    scenario::Scenario s;
    try {
      s = to_scenario(higher);
      scenario::check_plan(l, s.plan);
    } catch (const std::runtime_error&) {
      continue;  // the stack (or the plan checks) refuses this stage
    }
    scenario::StepOptions options;
    options.skip_memory_precheck = true;
    o.higher_zero = z;
    o.model_state_higher_zero = model_state(scenario::simulate_step(s, l, options));
    return;
  }
}

// `l` on hardware `factor` times as fast in every rate: the chip's compute peaks, HBM and cache,
// host link, NVLink, NICs, ICI and DCN, and the cluster's links.
scenario::LoadedScenario faster_hardware(scenario::LoadedScenario l, double factor) {
  topology::Chip& c = l.cluster.chip;
  for (auto& [dtype, peak] : c.peaks) {
    peak = peak * factor;
  }
  c.hbm_bandwidth = c.hbm_bandwidth * factor;
  if (c.cache) {
    c.cache->bandwidth = c.cache->bandwidth * factor;
  }
  if (c.host_link) {
    c.host_link->to_device = c.host_link->to_device * factor;
    c.host_link->to_host = c.host_link->to_host * factor;
  }
  if (c.nvlink) {
    c.nvlink->link_bandwidth = c.nvlink->link_bandwidth * factor;
  }
  if (c.nic_bandwidth) {
    *c.nic_bandwidth = *c.nic_bandwidth * factor;
  }
  if (c.ici) {
    c.ici->link_bandwidth = c.ici->link_bandwidth * factor;
  }
  if (c.dcn_bandwidth) {
    *c.dcn_bandwidth = *c.dcn_bandwidth * factor;
  }
  topology::ClusterSpec& k = l.cluster;
  k.scale_up_link_bandwidth = k.scale_up_link_bandwidth * factor;
  k.dcn_bandwidth = k.dcn_bandwidth * factor;
  if (k.fat_tree) {
    k.fat_tree->nic_bandwidth = k.fat_tree->nic_bandwidth * factor;
  }
  if (k.graph) {
    for (topology::GraphLinkSpec& link : k.graph->links) {
      link.bandwidth = link.bandwidth * factor;
    }
  }
  return l;
}

Duration step_lower_bound(const scenario::Scenario& s, const scenario::LoadedScenario& l,
                          std::vector<Bytes>& least_peak) {
  workloads::ParallelPlan plan = s.plan;
  scenario::bind_to_cluster(plan, l.cluster);
  least_peak = workloads::least_peak_memory(plan, workloads::partition_stages(l.model, plan));
  const topology::Network net = topology::Network::build(l.cluster);
  collectives::NetworkCommModel comm(net, topology::Placement::in_order(plan.world()),
                                     collectives::NetworkBackend::kAnalytical);
  studies::StepLowerBound bound(l.model, l.cluster, &comm);
  return bound(plan);
}

}  // namespace

TimelineFacts examine(const Timeline& t, const Simulation& sim, SimTime end) {
  return Examiner(t, sim, end).take();
}

SeedResult observe(uint64_t seed, const nlohmann::json& doc) {
  SeedResult result;
  scenario::Scenario s;
  scenario::LoadedScenario loaded;
  try {
    s = to_scenario(doc);
    loaded = scenario::load_and_check(s);
  } catch (const std::runtime_error& e) {  // PlanError, ScenarioError, InputError, LimitError
    result.outcome = Outcome::kRefused;
    result.refusal = e.what();
    return result;
  }
  Observation o;
  o.seed = seed;
  o.doc = doc;
  o.plan = s.plan;
  scenario::bind_to_cluster(o.plan, loaded.cluster);
  o.torus = loaded.cluster.scale_up == topology::ScaleUpFabric::kIciTorus;
  o.rail_optimized = !loaded.cluster.fat_tree || loaded.cluster.fat_tree->rail_optimized;
  o.sharp = loaded.cluster.fat_tree && loaded.cluster.fat_tree->sharp;
  o.ll128_below_nccl = loaded.cluster.collectives.ll128_efficiency < 1.0;
  o.devices_per_node = loaded.cluster.devices_per_node;
  o.fp8 = s.plan.matmul_dtype == Dtype::kFp8;
  o.jitter = !s.faults.compute.is_uniform() && s.faults.compute.jitter_cv > 0;
  const scenario::StepOptions representative;
  o.report = traced(s, loaded, representative, o.timeline);
  o.again = traced(s, loaded, representative, o.timeline_again);
  if (!o.report.simulated) {  // the memory pre-check: would the step really not fit?
    scenario::StepOptions unchecked;
    unchecked.skip_memory_precheck = true;
    o.unchecked = scenario::simulate_step(s, loaded, unchecked);
    result.outcome = Outcome::kOutOfMemory;
    result.observation = std::move(o);
    return result;
  }
  if (s.faults.empty()) {
    scenario::StepOptions full;
    full.full_simulation = true;
    o.full = scenario::simulate_step(s, loaded, full);
    o.faster = scenario::simulate_step(s, faster_hardware(loaded, kFasterHardware), representative);
    if (seed % kSimGridEvery == 0) {
      scenario::StepOptions simgrid;
      simgrid.comm.backend = collectives::NetworkBackend::kSimGrid;
      o.simgrid = scenario::simulate_step(s, loaded, simgrid);
    }
  }
  o.lower_bound = step_lower_bound(s, loaded, o.least_peak);
  o.model_state = model_state(o.report);
  observe_higher_zero(doc, loaded, o);
  result.outcome = Outcome::kSimulated;
  result.observation = std::move(o);
  return result;
}

}  // namespace meshsim::model_check
