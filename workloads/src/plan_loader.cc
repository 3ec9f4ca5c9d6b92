#include "meshsim/workloads/plan_loader.h"

#include "meshsim/sim/error.h"

namespace meshsim::workloads {

void load_plan(Simulation& sim, StepPlan& plan) {
  std::vector<ProgramIndex> programs;
  for (Program& p : plan.programs) {
    programs.push_back(sim.add_program(std::move(p)));
  }
  std::vector<GroupId> groups;  // the engine's id of each of the plan's groups
  for (const PlannedGroup& g : plan.groups) {
    groups.push_back(sim.add_group(g.members, g.global));
  }
  for (const RankBinding& b : plan.ranks) {
    std::vector<GroupId> slots;
    for (const GroupId g : b.groups) {
      slots.push_back(groups[g.index()]);
    }
    const RankId id = sim.add_rank(programs[b.program.index()], std::move(slots), b.peers,
                                   b.global_rank);
    SIM_CHECK(id.index() == static_cast<size_t>(&b - plan.ranks.data()),
              "simulated rank {} was added as {}", &b - plan.ranks.data(), id.value());
  }
}

}  // namespace meshsim::workloads
