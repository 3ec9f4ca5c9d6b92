#include "meshsim/workloads/plan_loader.h"

namespace meshsim::workloads {

void load_plan(Simulation& sim, StepPlan& plan) {
  std::vector<ProgramIndex> programs;
  for (Program& p : plan.programs) {
    programs.push_back(sim.add_program(std::move(p)));
  }
  std::vector<GroupId> groups;
  for (const PlannedGroup& g : plan.groups) {
    std::vector<RankId> members;
    std::vector<RankId> global;
    for (const uint32_t r : g.members) {
      members.emplace_back(r);
    }
    for (const uint32_t r : g.global) {
      global.emplace_back(r);
    }
    groups.push_back(sim.add_group(std::move(members), std::move(global)));
  }
  for (const RankBinding& b : plan.ranks) {
    std::vector<GroupId> slots;
    for (const uint32_t g : b.group_slots) {
      slots.push_back(groups[g]);
    }
    std::vector<RankId> peers;
    for (const uint32_t p : b.peer_slots) {
      peers.emplace_back(p);
    }
    sim.add_rank(programs[b.program], std::move(slots), std::move(peers), RankId(b.global_rank));
  }
}

}  // namespace meshsim::workloads
