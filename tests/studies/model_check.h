// The model checker (docs/model-checker.md), in the spirit of FoundationDB's simulation tests and
// TigerBeetle's VOPR: a seed makes a random but valid scenario (a small cluster, a small model, a
// random plan and software stack, sometimes faults), which is simulated through the one code path
// every command shares (scenario::simulate_step), and the invariants the model promises are
// checked on what comes out. A seed replays its scenario exactly: the generator draws from
// meshsim's own Rng (sim/rng.h), whose numbers do not depend on the standard library.
//
// The parts, each a function so that the checker's own test can feed it a report broken on
// purpose and see the invariant fail (model_check_test.cc):
//   generate_scenario   seed -> the scenario file's JSON (what `meshsim run FILE` reads)
//   observe             scenario -> its simulations (twice traced, once in full, at a higher ZeRO
//                       stage) and the facts the invariants compare them with
//   check_invariants    observation -> the violations, each naming its invariant
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "meshsim/scenario/scenario.h"
#include "meshsim/scenario/step.h"
#include "meshsim/scenario/step_report.h"
#include "meshsim/sim/breakdown.h"
#include "meshsim/sim/simulation.h"
#include "meshsim/sim/timeline.h"
#include "meshsim/sim/units.h"
#include "meshsim/workloads/parallel.h"

namespace meshsim::model_check {

// The scenario file of seed `seed`: model, cluster and size, plan, stack, sometimes fabric knobs
// and faults. Models given by path name files of this repository by absolute path, so that the
// JSON replays with `meshsim run` from anywhere on the machine that built the test.
nlohmann::json generate_scenario(uint64_t seed);

// The scenario as `meshsim run FILE` reads it: the neutral base, the file, then complete().
// Throws what the loaders throw (InputError, ScenarioError).
scenario::Scenario to_scenario(const nlohmann::json& doc);

// The scenario as printed in a reproducer: the model files named relative to the repository root
// (where `meshsim run` is meant to be replayed), so a report reads the same on every machine.
nlohmann::json for_display(const nlohmann::json& doc);

// The same scenario as `meshsim run` flags, paths as for_display prints them:
// "--model llama3.2-1b --cluster dgx-h100 --tp 2 ...".
std::string run_flags(const nlohmann::json& doc);

// What one traced simulation's timeline shows, gathered while the engine is still alive
// (StepObserver::finish).
struct TimelineFacts {
  // Breaches of the engine's execution rules (simulation.h): an op before its dependencies, two
  // ops of one stream at once or out of program order, an op before its host issued it, the
  // members of one collective starting apart, an op run twice or never, a ledger total that is
  // not the sum of its changes.
  std::vector<std::string> problems;
  uint64_t digest = 0;  // FNV-1a over every op and memory record, in the order they came
  size_t op_records = 0;
  size_t memory_records = 0;
  SimTime last_end;                     // the latest op end of any rank
  std::vector<RankBreakdown> analyzed;  // sim/analysis.h's offline breakdown, per simulated rank
  Bytes ledger_peak;                    // the largest ledger total of any rank
};

// Examines a timeline recorded from `sim` (still alive: its programs give each op's dependencies
// and stream) for a step that ended at `end`.
TimelineFacts examine(const Timeline& t, const Simulation& sim, SimTime end);

// A step observer that records the run's timeline without changing what is simulated; finish()
// of a subclass examines timeline_ while the engine (sim_) is still alive.
class TimelineRecorder : public scenario::StepObserver {
 public:
  bool needs_full_simulation() const override { return false; }
  std::vector<int64_t> ranks_to_simulate() const override { return {}; }
  void attach(Simulation& sim, scenario::CommSetup&, const scenario::StepReport&) override {
    sim_ = &sim;
    sim.record_into(timeline_);
  }

 protected:
  const Simulation* sim_ = nullptr;
  Timeline timeline_;
};

// One scenario's simulations and the facts the invariants need.
struct Observation {
  uint64_t seed = 0;
  nlohmann::json doc;
  scenario::StepReport report;  // representative mode (the default), traced
  TimelineFacts timeline;
  scenario::StepReport again;  // the same scenario simulated a second time, traced
  TimelineFacts timeline_again;
  std::optional<scenario::StepReport> full;  // StepOptions::full_simulation (absent with faults:
                                             // the report already simulated every rank)
  // The same scenario on hardware kFasterHardware times as fast in every rate (compute peaks,
  // HBM and cache, every link): absent with faults.
  std::optional<scenario::StepReport> faster;
  // The same scenario on SimGrid's network model instead of the fluid one (every
  // kSimGridEvery-th seed, without faults).
  std::optional<scenario::StepReport> simgrid;
  Duration lower_bound;                      // studies::StepLowerBound of the plan
  std::vector<Bytes> least_peak;             // workloads::least_peak_memory, per stage
  // Model state (weights + gradients + optimizer state) per stage, from the ledger at each
  // stage's peak, at the plan's ZeRO stage and at the next higher stage the plan's stack runs.
  std::vector<Bytes> model_state;
  std::optional<int> higher_zero;
  std::vector<Bytes> model_state_higher_zero;
  // The memory pre-check refused the step (report.simulated false): the same step simulated
  // without the pre-check, whose peak must then exceed the chip's memory.
  std::optional<scenario::StepReport> unchecked;
  // The plan as it ran (bound to its cluster: the stack's profile applied) and the cluster's
  // shape, for the known issues' conditions.
  workloads::ParallelPlan plan;
  bool torus = false;
  bool rail_optimized = true;
  bool sharp = false;  // the fat tree reduces in the network (SHARP)
  // The platform runs LL128 below NCCL's own estimate of it (topology::CollectivePlatform).
  bool ll128_below_nccl = false;
  int64_t devices_per_node = 1;
  // The fp8 peak is counted against the bf16 rate (MFU as Megatron reports it), so MFU and HFU
  // may pass 1 only then.
  bool fp8 = false;
  // Kernel jitter draws kernels faster as well as slower than the cost model: the step lower
  // bound, which assumes the cost model's times, does not hold then.
  bool jitter = false;
};

// What became of one seed.
enum class Outcome : uint8_t {
  kSimulated,    // simulated (report.simulated), invariants checked
  kOutOfMemory,  // refused by the memory pre-check (report.simulated false), checked likewise
  kRefused,      // the plan checks refused it (validate_plan, the stack's rules, the cluster)
};

struct SeedResult {
  Outcome outcome = Outcome::kRefused;
  std::string refusal;  // kRefused: the error's message
  std::optional<Observation> observation;
};

// Simulates the scenario of `doc` as the invariants need it. A refusal by the plan checks
// (scenario::load_and_check) is an outcome, not an error; anything thrown after the checks passed
// (an InternalError of the engine, say) propagates.
SeedResult observe(uint64_t seed, const nlohmann::json& doc);

struct Violation {
  std::string invariant;  // "determinism", "representative-vs-full", "step-bounds", ...
  std::string message;
};

// The relative difference representative mode may show against full simulation (step time):
// floating-point rounding only. A collective run with its images as one transfer gets a rate that
// differs in the last bits from the rates of the same transfers run apart, and the picosecond
// rounding of their ends can then differ: measured up to 1 ps in a 25.7 ms step (3.9e-11;
// docs/model-checker.md). 1e-9 is 1 ps per millisecond of step. Each such end rounds by at most a
// picosecond, so a step of many collectives may differ by up to one per event of the simulated
// rank (seed 203299: DeepSeek-V2-Lite at TP 8 and EP 2, its MoE all-to-alls and TP all-reduces on
// every layer, 161 ps in 103 ms, the same at any host speed): the check allows whichever is larger.
inline constexpr double kRepresentativeTolerance = 1e-9;
inline constexpr double kRoundingPerEventPs = 1.0;

// How much faster the `faster` run's hardware is, in every rate.
inline constexpr double kFasterHardware = 1.5;
// Every how many seeds the scenario also runs on SimGrid (a few times slower than the fluid
// model), and how far the two network models may differ on the step (the issue's figure).
inline constexpr uint64_t kSimGridEvery = 10;
inline constexpr double kSimGridTolerance = 0.05;

// Every violation of the invariants by what the scenario's simulations gave.
std::vector<Violation> check_invariants(const Observation& o);

// A class of scenarios on which an invariant is known not to hold: found by this checker, with
// the seed that found it, reported, and not yet fixed (docs/model-checker.md, "What it found").
// A default run counts a violation of `invariant` on a scenario of the class as known, not as a
// failure; MESHSIM_MODEL_CHECK_STRICT=1 fails on it too. Remove an entry when its cause is fixed.
struct KnownIssue {
  const char* id;
  const char* invariant;
  const char* what;
  bool (*applies)(const Observation& o);
};
std::span<const KnownIssue> known_issues();
// The known issue that explains `v` on `o`, if one does.
const KnownIssue* known_issue(const Observation& o, const Violation& v);

// What a failure prints: the seed, each violation, the scenario JSON, how to replay the seed in
// this test and the equivalent `meshsim run` command.
std::string describe_failure(uint64_t seed, const nlohmann::json& doc,
                             const std::vector<Violation>& violations);

}  // namespace meshsim::model_check
