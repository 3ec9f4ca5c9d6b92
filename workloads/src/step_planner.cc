// plan_step: the per-stage programs, the simulated ranks, their groups and the families of
// concurrent groups.
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <map>
#include <set>

#include "meshsim/sim/error.h"
#include "meshsim/workloads/accounting.h"
#include "meshsim/workloads/partition.h"
#include "meshsim/workloads/training_memory.h"
#include "meshsim/workloads/step.h"
#include "slots.h"
#include "stage_program.h"

namespace meshsim::workloads {
namespace {

std::vector<RankId> rank_ids(const std::vector<int64_t>& ranks) {
  std::vector<RankId> out;
  for (const int64_t r : ranks) {
    out.emplace_back(static_cast<uint32_t>(r));
  }
  return out;
}

// The groups of every rank, by group slot (slots.h), each computed once: a group is found from
// its first member and recorded for all of its members, so the work is linear in the ranks even
// when a group spans all of them (computing each rank's group from scratch was quadratic: minutes
// for data parallelism over 65,536 ranks).
class GroupTable {
 public:
  explicit GroupTable(const RankLayout& layout) : layout_(layout) {
    for (auto& slot : of_rank_) {
      slot.assign(static_cast<size_t>(layout.world()), kNone);
    }
  }

  // The group of global rank `r` in `slot`, in rank order.
  const std::vector<RankId>& group(size_t slot, int64_t r) {
    uint32_t& id = of_rank_[slot][static_cast<size_t>(r)];
    if (id == kNone) {
      std::vector<RankId> members = rank_ids(detail::kGroupSlots[slot].members(layout_, r));
      const auto fresh = static_cast<uint32_t>(groups_.size());
      for (const RankId m : members) {
        of_rank_[slot][m.index()] = fresh;
      }
      groups_.push_back(std::move(members));
    }
    return groups_[of_rank_[slot][static_cast<size_t>(r)]];
  }

 private:
  static constexpr uint32_t kNone = UINT32_MAX;
  const RankLayout& layout_;
  std::array<std::vector<uint32_t>, detail::kNumGroupSlots> of_rank_;
  std::vector<std::vector<RankId>> groups_;
};

// The global rank bound to peer slot `slot` of global rank `r`: its neighbour `slot.step`
// positions on along the slot's axis, cyclically.
int64_t peer_of(const RankLayout& layout, int64_t r, const detail::PeerSlotInfo& slot) {
  const std::vector<int64_t> ring = layout.group_along(r, slot.axis);  // in axis order
  const auto n = static_cast<int64_t>(ring.size());
  const int64_t at = std::find(ring.begin(), ring.end(), r) - ring.begin();
  return ring[static_cast<size_t>(((at + slot.step) % n + n) % n)];
}

// Binds every slot of every simulated rank (slots.h), creating each group once.
void bind_ranks(StepPlan& plan, const RankLayout& layout, GroupTable& table,
                const std::vector<int64_t>& simulated) {
  std::map<int64_t, RankId> sim_index;
  for (size_t i = 0; i < simulated.size(); ++i) {
    sim_index.emplace(simulated[i], RankId(static_cast<uint32_t>(i)));
  }
  std::map<std::vector<RankId>, GroupId> group_index;
  for (const int64_t r : simulated) {
    RankBinding b;
    b.global_rank = RankId(static_cast<uint32_t>(r));
    b.stage = layout.coords(r).pp;
    b.program = ProgramIndex(static_cast<uint32_t>(b.stage));
    for (const detail::GroupSlotInfo& slot : detail::kGroupSlots) {
      const std::vector<RankId>& members = table.group(detail::index(slot.slot), r);
      const auto [it, fresh] =
          group_index.emplace(members, GroupId(static_cast<uint32_t>(plan.groups.size())));
      if (fresh) {
        PlannedGroup g{slot.kind, {}, members, {}};
        for (const RankId member : members) {
          if (auto s = sim_index.find(member.value()); s != sim_index.end()) {
            g.members.push_back(s->second);
          }
        }
        plan.groups.push_back(std::move(g));
      }
      b.groups.push_back(it->second);
    }
    for (const detail::PeerSlotInfo& slot : detail::kPeerSlots) {
      const int64_t peer = peer_of(layout, r, slot);
      const auto s = sim_index.find(peer);
      SIM_CHECK(s != sim_index.end(), "rank {} peers with rank {}, which is not simulated", r,
                peer);
      b.peers.push_back(s->second);
    }
    plan.ranks.push_back(std::move(b));
  }
}

// One family per (group slot, stage): every group of that slot among the stage's ranks. A group
// is in one family only (without EP the expert-DP groups are the DP groups).
void add_families(StepPlan& plan, const RankLayout& layout, GroupTable& table, int64_t stages) {
  std::set<std::vector<RankId>> seen;
  for (int64_t stage = 0; stage < stages; ++stage) {
    std::array<std::set<std::vector<RankId>>, detail::kNumGroupSlots> by_slot;
    for (int64_t r = 0; r < layout.world(); ++r) {
      if (layout.coords(r).pp != stage) {
        continue;
      }
      for (size_t slot = 0; slot < detail::kNumGroupSlots; ++slot) {
        const std::vector<RankId>& group = table.group(slot, r);
        if (group.size() > 1 && group.front().value() == r) {  // once, at its first member
          by_slot[slot].insert(group);
        }
      }
    }
    for (const auto& family : by_slot) {
      std::vector<std::vector<RankId>> fresh;
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

// Representative mode (SPMD symmetry): the groups of a family that are not simulated run the same
// collectives at the same moments as those that are; each is assigned, in order and round-robin,
// to a simulated group of its family, whose collectives then load its links too. Ranks likewise:
// the (tp, dp) columns that are not simulated are assigned round-robin to the simulated columns,
// and image i of a simulated rank is the rank of its column's i-th assigned column at the same
// pipeline stage and context index, so that the images of a send pair up. In full mode every
// group and column is simulated and nothing has images.
void add_images(StepPlan& plan, const RankLayout& layout, const ParallelPlan& degrees) {
  std::map<std::vector<RankId>, size_t> planned;
  for (size_t g = 0; g < plan.groups.size(); ++g) {
    planned.emplace(plan.groups[g].global, g);
  }
  for (const auto& family : plan.families) {
    std::vector<size_t> simulated;
    std::vector<const std::vector<RankId>*> others;
    for (const auto& g : family) {
      if (const auto it = planned.find(g); it != planned.end()) {
        simulated.push_back(it->second);
      } else {
        others.push_back(&g);
      }
    }
    for (size_t i = 0; i < others.size() && !simulated.empty(); ++i) {
      plan.groups[simulated[i % simulated.size()]].images.push_back(*others[i]);
    }
  }
  std::set<std::pair<int64_t, int64_t>> sim_columns;
  for (const RankBinding& b : plan.ranks) {
    const RankCoords c = layout.coords(b.global_rank.value());
    sim_columns.emplace(c.tp, c.dp);
  }
  const std::vector<std::pair<int64_t, int64_t>> simulated(sim_columns.begin(), sim_columns.end());
  std::map<std::pair<int64_t, int64_t>, std::vector<std::pair<int64_t, int64_t>>> assigned;
  size_t next = 0;
  for (int64_t dp = 0; dp < degrees.dp; ++dp) {
    for (int64_t tp = 0; tp < degrees.tp; ++tp) {
      if (!sim_columns.contains({tp, dp})) {
        assigned[simulated[next++ % simulated.size()]].emplace_back(tp, dp);
      }
    }
  }
  for (RankBinding& b : plan.ranks) {
    const RankCoords c = layout.coords(b.global_rank.value());
    for (const auto& [tp, dp] : assigned[{c.tp, c.dp}]) {
      b.images.emplace_back(static_cast<uint32_t>(layout.rank(RankCoords{tp, c.cp, dp, c.pp})));
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

// One rank of `stage` at its peak: the chunk passes in flight, in whole microbatches' worth of the
// stage's activations.
TrainingMemory stage_memory(const StagePartition& stage, const ParallelPlan& plan,
                            const std::vector<int64_t>& held_per_stage) {
  const int64_t held = held_per_stage[static_cast<size_t>(stage.stage)];
  return training_memory(stage, plan, (held + plan.vpp - 1) / plan.vpp);
}

}  // namespace

std::vector<TrainingMemory> estimate_step_memory(const ModelConfig& model,
                                                 const ParallelPlan& plan) {
  std::vector<TrainingMemory> out;
  const std::vector<int64_t> in_flight = max_in_flight_per_stage(plan.pipeline());
  for (const StagePartition& stage : partition_stages(model, plan)) {
    out.push_back(stage_memory(stage, plan, in_flight));
  }
  return out;
}

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
  const std::vector<int64_t> in_flight = max_in_flight_per_stage(plan.pipeline());
  for (const StagePartition& stage : stages) {
    out.programs.push_back(detail::build_stage_program(model, plan, stage));
    out.memory_estimate.push_back(stage_memory(stage, plan, in_flight));
  }
  const RankLayout layout(plan);
  GroupTable groups(layout);
  bind_ranks(out, layout, groups, simulated_ranks(layout, mode, also_simulate));
  add_families(out, layout, groups, plan.pp);
  add_images(out, layout, plan);
  return out;
}

}  // namespace meshsim::workloads
