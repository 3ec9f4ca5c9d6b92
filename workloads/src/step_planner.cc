// plan_step: the per-stage programs, the simulated ranks, their groups and the families of
// concurrent groups.
#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <set>

#include "meshsim/sim/error.h"
#include "meshsim/workloads/accounting.h"
#include "meshsim/workloads/partition.h"
#include "meshsim/workloads/training_memory.h"
#include "meshsim/workloads/step.h"
#include "stage_program.h"

namespace meshsim::workloads {
namespace {

std::vector<uint32_t> to_u32(const std::vector<int64_t>& v) {
  return {v.begin(), v.end()};
}

// The groups of one rank, by slot (see stage_program.h).
std::vector<std::vector<uint32_t>> groups_of(const RankLayout& layout, int64_t r) {
  return {to_u32(layout.group_along(r, Axis::kTensor)), to_u32(layout.dp_cp_group(r)),
          to_u32(layout.expert_group(r)), to_u32(layout.expert_dp_group(r))};
}

constexpr CommKind kSlotKinds[] = {CommKind::kTensor, CommKind::kData, CommKind::kExpert,
                                   CommKind::kData};

std::vector<int64_t> peers_of(const RankLayout& layout, int64_t r, const ParallelPlan& p) {
  RankCoords c = layout.coords(r);
  auto with = [&](int64_t pp, int64_t cp) {
    RankCoords x = c;
    x.pp = (pp + p.pp) % p.pp;
    x.cp = (cp + p.cp) % p.cp;
    return layout.rank(x);
  };
  return {with(c.pp + 1, c.cp), with(c.pp - 1, c.cp), with(c.pp, c.cp + 1), with(c.pp, c.cp - 1)};
}

void bind_ranks(StepPlan& plan, const RankLayout& layout, const ParallelPlan& p,
                const std::vector<int64_t>& simulated) {
  std::map<int64_t, uint32_t> sim_index;
  for (size_t i = 0; i < simulated.size(); ++i) {
    sim_index[simulated[i]] = static_cast<uint32_t>(i);
  }
  std::map<std::vector<uint32_t>, uint32_t> group_index;
  for (const int64_t r : simulated) {
    RankBinding b;
    b.global_rank = static_cast<uint32_t>(r);
    b.stage = layout.coords(r).pp;
    b.program = static_cast<uint32_t>(b.stage);
    const auto groups = groups_of(layout, r);
    for (size_t slot = 0; slot < groups.size(); ++slot) {
      auto [it, fresh] = group_index.emplace(groups[slot], static_cast<uint32_t>(plan.groups.size()));
      if (fresh) {
        PlannedGroup g;
        g.kind = kSlotKinds[slot];
        g.global = groups[slot];
        for (const uint32_t member : g.global) {
          if (auto s = sim_index.find(member); s != sim_index.end()) {
            g.members.push_back(s->second);
          }
        }
        plan.groups.push_back(std::move(g));
      }
      b.group_slots.push_back(it->second);
    }
    for (const int64_t peer : peers_of(layout, r, p)) {
      const auto s = sim_index.find(peer);
      SIM_CHECK(s != sim_index.end(), "rank {} peers with rank {}, which is not simulated", r,
                peer);
      b.peer_slots.push_back(s->second);
    }
    plan.ranks.push_back(std::move(b));
  }
}

// One family per (slot, stage): every group of that kind among the stage's ranks. A group is in
// one family only (without EP the expert-DP groups are the DP groups).
void add_families(StepPlan& plan, const RankLayout& layout, const ParallelPlan& p) {
  std::set<std::vector<uint32_t>> seen;
  for (int64_t stage = 0; stage < p.pp; ++stage) {
    std::vector<std::set<std::vector<uint32_t>>> by_slot(4);
    for (int64_t r = 0; r < layout.world(); ++r) {
      if (layout.coords(r).pp != stage) {
        continue;
      }
      const auto groups = groups_of(layout, r);
      for (size_t slot = 0; slot < groups.size(); ++slot) {
        if (groups[slot].size() > 1) {
          by_slot[slot].insert(groups[slot]);
        }
      }
    }
    for (auto& family : by_slot) {
      std::vector<std::vector<uint32_t>> fresh;
      for (const auto& g : family) {
        if (seen.insert(g).second) {
          fresh.push_back(g);
        }
      }
      if (fresh.size() > 1) {
        plan.families.push_back(std::move(fresh));
      }
    }
  }
}

std::vector<int64_t> simulated_ranks(const RankLayout& layout, SimulationMode mode,
                                     const std::vector<int64_t>& also) {
  std::set<std::pair<int64_t, int64_t>> columns = {{0, 0}};  // (tp, dp)
  for (const int64_t r : also) {
    SIM_CHECK(r >= 0 && r < layout.world(), "rank {} to simulate is outside 0..{}", r,
              layout.world() - 1);
    const RankCoords c = layout.coords(r);
    columns.emplace(c.tp, c.dp);
  }
  std::vector<int64_t> out;
  for (int64_t r = 0; r < layout.world(); ++r) {
    const RankCoords c = layout.coords(r);
    if (mode == SimulationMode::kFull || columns.count({c.tp, c.dp}) > 0) {
      out.push_back(r);
    }
  }
  return out;
}

}  // namespace

StepPlan plan_step(const ModelConfig& model, const ParallelPlan& plan, SimulationMode mode,
                   const std::vector<int64_t>& also_simulate) {
  validate_plan(model, plan);
  const std::vector<StagePartition> stages = partition_stages(model, plan);
  StepPlan out;
  out.world = plan.world();
  out.microbatches = plan.microbatches();
  out.tokens_per_step = plan.gbs * plan.seq;
  out.model_flops_per_step =
      training_flops_per_token(model, plan.seq) * static_cast<double>(out.tokens_per_step);
  const PipelineConfig pipe = plan.pipeline();
  for (const StagePartition& stage : stages) {
    out.programs.push_back(detail::build_stage_program(model, plan, stage));
    // Chunk passes in flight, in whole microbatches' worth of the stage's activations.
    const int64_t in_flight = (max_in_flight(pipe, stage.stage) + plan.vpp - 1) / plan.vpp;
    out.memory_estimate.push_back(training_memory(stage, plan, in_flight));
  }
  const RankLayout layout(plan);
  bind_ranks(out, layout, plan, simulated_ranks(layout, mode, also_simulate));
  add_families(out, layout, plan);
  return out;
}

}  // namespace meshsim::workloads
