#include "meshsim/studies/chakra_run.h"

#include <fmt/format.h>

#include <string_view>

#include "meshsim/sim/error.h"
#include "meshsim/scenario/stack_setup.h"
#include "meshsim/topology/compute_model.h"
#include "meshsim/topology/network.h"
#include "meshsim/workloads/step.h"

namespace meshsim::studies {

using namespace meshsim::scenario;  // the step these studies run
namespace {

// The time of every compute op of `p` on `compute` (measured ones as measured); zero for the
// others.
std::vector<Duration> compute_times(const Program& p, const ComputeCostModel& compute) {
  std::vector<Duration> out(p.size());
  for (size_t i = 0; i < p.size(); ++i) {
    if (const auto* c = std::get_if<ComputeWork>(&p.op(OpId(static_cast<uint32_t>(i))).work)) {
      out[i] = c->measured ? *c->measured : compute.compute_time(RankId(0), *c);
    }
  }
  return out;
}

// The kernels of `w` that `chip` cannot cost, refused as the traces' error: a matrix kernel in a
// format the chip has no rate of, an attention implementation it has no measurements of, a host
// copy without its host link (traces written for another chip; the compute model checks these as
// invariants, which the planner otherwise guarantees).
void check_kernels(const traces::ChakraWorkload& w, const topology::Chip& chip) {
  for (size_t r = 0; r < w.programs.size(); ++r) {
    const Program& p = w.programs[r];
    for (size_t i = 0; i < p.size(); ++i) {
      const Op& op = p.op(OpId(static_cast<uint32_t>(i)));
      const auto* c = std::get_if<ComputeWork>(&op.work);
      if (c == nullptr || c->measured) {
        continue;
      }
      std::string why;
      if ((c->shape || c->attention) && !chip.peak(c->dtype)) {
        why = fmt::format("a {} matrix kernel, and {} has no {} rate", to_string(c->dtype),
                          chip.description, to_string(c->dtype));
      } else if (c->attention && !chip.efficiency.attention.empty() &&
                 topology::attention_fit(chip.efficiency, *c->attention) == nullptr) {
        std::string have;
        for (const AttentionImpl a : chip.attention_impls()) {
          have += (have.empty() ? "" : ", ") + std::string(to_string(a));
        }
        why = fmt::format("{} attention, which {} has no measurements of (the catalogue has: {})",
                          to_string(c->attention->impl), chip.description, have);
      } else if (c->host != HostCopy::kNone && !chip.host_link) {
        why = fmt::format("a copy to or from the host, and {} has no host link rates",
                          chip.description);
      }
      if (!why.empty()) {
        throw InputError(w.source, fmt::format("rank {}, op '{}'", r, op.name),
                         fmt::format("{} (the traces were written for another chip?)", why));
      }
    }
  }
}

}  // namespace

WorkloadReport simulate_workload(traces::ChakraWorkload w,
                                 const topology::ClusterSpec& cluster, const CommOptions& options,
                                 const WorkloadHooks& hooks) {
  const auto world = static_cast<int64_t>(w.programs.size());
  if (world > cluster.device_count()) {
    throw InputError(w.source, "",
                     fmt::format("{} ranks, but cluster {} has {} devices ({} nodes x {}): give a "
                                 "cluster of at least {} devices",
                                 world, cluster.name, cluster.device_count(), cluster.nodes,
                                 cluster.devices_per_node, world));
  }
  check_kernels(w, cluster.chip);
  const topology::Network net = topology::Network::build(cluster);
  collectives::NetworkCommModel comm(net, topology::Placement::in_order(world), options.backend,
                                     options.collective);
  const topology::RooflineComputeModel compute(cluster.chip);
  Simulation sim(compute, comm);
  std::vector<GroupId> groups;
  for (const std::vector<RankId>& g : w.groups) {
    groups.push_back(sim.add_group(g));
  }
  for (int64_t r = 0; r < world; ++r) {
    const auto i = static_cast<size_t>(r);
    std::vector<GroupId> slots;
    for (const GroupId g : w.group_slots[i]) {
      slots.push_back(groups[g.index()]);
    }
    sim.add_rank(sim.add_program(std::move(w.programs[i])), std::move(slots), w.peer_slots[i]);
  }
  if (hooks.attach) {
    hooks.attach(sim, comm);
  }
  RunResult run;
  try {
    run = sim.run();
  } catch (const InternalError& e) {
    // The programs came from the user's traces: ranks that wait on each other forever are their
    // input's doing (the engine's report names the ranks and ops).
    if (std::string_view(e.what()).find("simulation cannot finish") == std::string_view::npos) {
      throw;
    }
    throw InputError(w.source, "",
                     fmt::format("the ranks' programs wait on each other forever (the order of "
                                 "their collectives and sends, with their dependencies, admits "
                                 "no run): {}",
                                 e.what()));
  }
  if (hooks.finish) {
    hooks.finish(run.end);
  }
  WorkloadReport r;
  r.source = w.source;
  r.cluster_description =
      fmt::format("{}: {} node(s) x {} {}", cluster.name, cluster.nodes, cluster.devices_per_node,
                  cluster.chip.description);
  r.ranks = world;
  r.step_time = run.end - SimTime::zero();
  r.events = run.events;
  for (const RankResult& rank : run.ranks) {
    r.breakdown.push_back(rank.breakdown);
  }
  return r;
}

void export_workload(const traces::ChakraWorkload& w, const topology::ClusterSpec& cluster,
                     const std::string& dir) {
  check_kernels(w, cluster.chip);
  const topology::RooflineComputeModel compute(cluster.chip);
  std::vector<traces::ChakraRank> ranks;
  for (size_t r = 0; r < w.programs.size(); ++r) {
    traces::ChakraRank c;
    c.program = &w.programs[r];
    for (const GroupId g : w.group_slots[r]) {
      c.groups.push_back(w.groups[g.index()]);
    }
    c.peers = w.peer_slots[r];
    c.durations = compute_times(w.programs[r], compute);
    ranks.push_back(std::move(c));
  }
  traces::write_chakra_workload(
      dir, ranks, fmt::format("meshsim: Chakra workload {} on {}", w.source, cluster.name));
}

void export_step(const Scenario& given, const LoadedScenario& l, const std::string& dir) {
  Scenario s = given;
  bind_to_cluster(s.plan, l.cluster);
  check_plan(l, s.plan);
  const workloads::StepPlan plan =
      workloads::plan_step(l.model, s.plan, workloads::SimulationMode::kFull);
  const topology::RooflineComputeModel compute(l.cluster.chip);
  std::vector<std::vector<Duration>> times;
  for (const Program& p : plan.programs) {
    times.push_back(compute_times(p, compute));
  }
  std::vector<traces::ChakraRank> ranks(plan.ranks.size());
  for (const workloads::RankBinding& b : plan.ranks) {
    traces::ChakraRank& c = ranks.at(b.global_rank.index());
    c.program = &plan.programs[b.program.index()];
    for (const GroupId g : b.groups) {
      c.groups.push_back(plan.groups[g.index()].global);
    }
    for (const RankId peer : b.peers) {
      c.peers.push_back(plan.ranks[peer.index()].global_rank);
    }
    c.durations = times[b.program.index()];
  }
  traces::write_chakra_workload(
      dir, ranks,
      fmt::format("meshsim: {} on {} ({})", describe_model(l.model), l.cluster.name,
                  describe_plan(s.plan)));
}

}  // namespace meshsim::studies
