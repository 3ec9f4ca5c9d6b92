// Faults of a run (issue 16): slow ranks, a seeded straggler distribution, kernel jitter and
// degraded NICs or links, from a scenario's "faults" block and from flags.
//
// Scenario JSON (strict; every key optional):
//   "faults": { "seed": 7,
//               "slow_ranks": [ { "rank": 5, "factor": 1.5 } ],
//               "stragglers": { "fraction": 0.01, "min_factor": 1.05, "max_factor": 1.3 },
//               "kernel_jitter": 0.03,
//               "degraded_links": [ { "device": 12, "link": "network", "factor": 0.5 } ],
//               "failed_links": [ { "device": 3, "link": "network", "nic": 0 },
//                                 { "device": 5, "link": "ici", "direction": "x+" } ] }
// A failed link is down (topology::LinkFault with factor 0): its traffic is rerouted where the
// fabric allows (Network::apply_faults), and the run stops with an error naming the entry where
// it does not. "nic" (network, pcie) and "direction" (ici: x+, x-, y+, y-, z+, z-) are optional
// and name one of the device's links of that kind; without them every one is down. "spine"
// (network) takes down instead the uplinks from the leaf of the device's NIC to that spine.
// The command line sets the same (cli/src/fault_flags.h), each flag replacing that part of the
// file's block.
// A factor multiplies kernel times (slow ranks, >= 1) or keeps that fraction of a link's
// bandwidth (degraded links, in (0, 1]). Any fault makes ranks differ, so the run simulates every
// rank (representative mode is exact only on symmetric inputs) and says so.
#pragma once

#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "meshsim/sim/heterogeneity.h"
#include "meshsim/sim/json_input.h"
#include "meshsim/sim/provenance.h"
#include "meshsim/sim/simulation.h"
#include "meshsim/topology/network.h"
#include "meshsim/workloads/step.h"

namespace meshsim::scenario {

// Bounds on the faults, checked where they are read (scenario file or flags), so that the engine's
// loop never meets a time it cannot hold. A rank or kernel at most 1000 x its nominal time (the
// slowest straggler Meta reports is a few times slower); a kernel-time coefficient of variation
// at most 10 (measured jitter is a few percent); ranks and devices below topology::kMaxDevices.
inline constexpr double kMaxSlowdown = 1000.0;
inline constexpr double kMaxJitterCv = 10.0;

struct Faults {
  Heterogeneity compute;
  std::vector<topology::LinkFault> links;
  // Where each slow rank and degraded link was given, for range errors (same order).
  std::vector<Origin> slow_rank_origins;
  std::vector<Origin> link_origins;

  bool empty() const { return compute.is_uniform() && links.empty(); }
};

// Reads the "faults" key of a scenario file, if present, into `f`.
void read_faults(JsonObject& scenario, Faults& f);

// What the faults did to the step, for the report.
struct FaultEffect {
  Duration nominal_step;       // the same step without faults (representative simulation)
  int64_t slow_ranks = 0;      // ranks whose kernels run slower (factor > 1)
  double max_slowdown = 1.0;   // the largest factor
  int64_t degraded_links = 0;  // degraded NICs or links, as given (each both directions)
  int64_t failed_links = 0;    // NICs or links down, as given
  std::vector<std::string> reroutes;  // per failed link: where its traffic went
  bool jitter = false;
  bool switched_to_full = false;  // the run asked for representative mode
  // The rank the others wait on: the one with the most compute (busiest), its pipeline stage,
  // and the median rank's compute.
  int64_t busiest_rank = 0;
  int64_t busiest_stage = 0;
  double busiest_slowdown = 1.0;
  Duration busiest_compute;
  Duration median_compute;
};
// The effect of `f` on a step of `step_time`, from the per-rank breakdowns of a full simulation.
FaultEffect fault_effect(const Faults& f, const workloads::StepPlan& plan,
                         const std::vector<RankBreakdown>& ranks, Duration nominal_step);
nlohmann::json fault_effect_json(const FaultEffect& e, Duration step_time);
void print_fault_effect(const FaultEffect& e, Duration step_time, std::ostream& out);

// Checks the ranks and devices against the run's `world`; InputError where they were given.
void check_faults(const Faults& f, int64_t world);
// Applies the compute faults to the simulated ranks of `plan` loaded into `sim`.
void apply_compute_faults(const Faults& f, const workloads::StepPlan& plan, Simulation& sim);
// The block as echoed in reports and trace metadata.
nlohmann::json faults_json(const Faults& f);

}  // namespace meshsim::scenario
