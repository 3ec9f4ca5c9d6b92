// The model checker checks itself: a report or a timeline broken on purpose must fail the
// invariant it breaks (docs/model-checker.md: every check must be able to fail).
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "meshsim/scenario/step.h"
#include "meshsim/sim/simulation.h"
#include "meshsim/sim/timeline.h"
#include "model_check.h"

namespace meshsim::model_check {
namespace {

// The first seed whose scenario simulates with every comparison present (a full simulation, a
// higher ZeRO stage, a pipeline of several stages, exposed communication) and breaks nothing.
Observation rich_observation() {
  for (uint64_t seed = 1; seed < 2000; ++seed) {
    const nlohmann::json doc = generate_scenario(seed);
    if (doc.value("pp", 1) < 2) {
      continue;
    }
    SeedResult r = observe(seed, doc);
    if (r.outcome == Outcome::kSimulated && r.observation->full && r.observation->higher_zero &&
        r.observation->faster && r.observation->simgrid &&
        r.observation->report.exposed_comm > Duration::zero() &&
        check_invariants(*r.observation).empty()) {
      return *r.observation;
    }
  }
  ADD_FAILURE() << "no seed below 2000 makes a pipeline with every comparison";
  return {};
}

bool breaks(const Observation& o, const std::string& invariant) {
  for (const Violation& v : check_invariants(o)) {
    if (v.invariant == invariant) {
      return true;
    }
  }
  return false;
}

TEST(ModelCheckSelf, InvariantsCatchABrokenReport) {
  const Observation good = rich_observation();
  ASSERT_TRUE(good.report.simulated);
  const std::vector<Violation> clean = check_invariants(good);
  ASSERT_TRUE(clean.empty()) << describe_failure(good.seed, good.doc, clean);
  const Duration ps = Duration::from_ps(1);
  // The faster hardware is faster: the comparison is not vacuous.
  EXPECT_LT(good.faster->step_time, good.report.step_time);
  struct Breakage {
    const char* invariant;
    const char* what;
    std::function<void(Observation&)> apply;
  };
  const std::vector<Breakage> cases = {
      {"determinism", "second run 1 ps longer", [&](Observation& o) { o.again.step_time += ps; }},
      {"determinism", "second timeline differs",
       [](Observation& o) { o.timeline_again.digest ^= 1; }},
      {"representative-vs-full", "full simulation 0.0001 % longer",
       [](Observation& o) {
         o.full->step_time += Duration::from_ps(o.full->step_time.ps() / 1000000 + 1);
       }},
      {"representative-vs-full", "full simulation's peak 1 B higher",
       [](Observation& o) { o.full->peak_memory = o.full->peak_memory + Bytes::of(1); }},
      {"faster-hardware", "faster hardware 0.0001 % slower",
       [](Observation& o) {
         o.faster->step_time =
             o.report.step_time + Duration::from_ps(o.report.step_time.ps() / 1000000 + 1);
       }},
      {"simgrid-agrees", "SimGrid 6 % slower",
       [](Observation& o) {
         o.simgrid->step_time = Duration::from_ps(o.report.step_time.ps() / 100 * 106);
       }},
      {"step-lower-bound", "lower bound past the step",
       [&](Observation& o) { o.lower_bound = o.report.step_time + ps; }},
      {"step-bounds", "compute past the step",
       [&](Observation& o) { o.report.compute = o.report.step_time + ps; }},
      {"step-bounds", "exposed communication past the step",
       [&](Observation& o) { o.report.exposed_comm = o.report.step_time + ps; }},
      {"step-bounds", "bubble fraction above 1",
       [](Observation& o) { o.report.bubble_fraction = 1.01; }},
      {"step-bounds", "a stage's bubble below 0",
       [](Observation& o) { o.report.stages.back().bubble_fraction = -0.01; }},
      {"rates", "tokens/s 0.1 % high", [](Observation& o) { o.report.tokens_per_s *= 1.001; }},
      {"rates", "tokens per step one short", [](Observation& o) { --o.report.tokens_per_step; }},
      {"rates", "MFU 0.1 % high", [](Observation& o) { o.report.mfu *= 1.001; }},
      {"memory", "a breakdown 1 B over its peak",
       [](Observation& o) {
         o.report.peak_breakdown.by_category[0] =
             o.report.peak_breakdown.by_category[0] + Bytes::of(1);
       }},
      {"least-peak-memory", "the least peak above the ledger's",
       [](Observation& o) { o.least_peak[0] = o.report.stages[0].peak_memory + Bytes::of(1); }},
      {"zero-model-state", "a higher ZeRO stage holding more model state",
       [](Observation& o) { o.model_state_higher_zero[0] = o.model_state[0] + Bytes::of(1); }},
      {"memory", "out of memory below the capacity",
       [](Observation& o) { o.report.oom = !o.report.oom; }},
      {"timeline", "a rule broken in the timeline",
       [](Observation& o) { o.timeline.problems.push_back("broken on purpose"); }},
      {"timeline", "the last op 1 ps after the step",
       [&](Observation& o) { o.timeline.last_end += ps; }},
      {"timeline", "a rank's idle 1 ps long",
       [&](Observation& o) { o.timeline.analyzed[0].idle += ps; }},
      {"timeline", "the ledger's records peaking higher",
       [](Observation& o) { o.timeline.ledger_peak = o.timeline.ledger_peak + Bytes::of(1); }},
  };
  for (const Breakage& b : cases) {
    Observation broken = good;
    b.apply(broken);
    EXPECT_TRUE(breaks(broken, b.invariant)) << b.what << " did not break " << b.invariant;
  }
  // The memory pre-check refusing a step that fits when simulated.
  Observation refused = good;
  refused.unchecked = good.report;
  refused.report.simulated = false;
  refused.report.oom = true;
  ASSERT_FALSE(good.report.oom);
  EXPECT_TRUE(breaks(refused, "memory")) << "a pre-check refusing a step that fits";
}

// Records a real run's timeline, breaks a copy of it in one way per case and examines each, while
// the engine is alive.
class Tamperer final : public TimelineRecorder {
 public:
  void finish(SimTime end, scenario::StepReport&) override {
    clean_ = examine(timeline_, *sim_, end).problems;
    for (const auto& [what, tamper] : cases_) {
      Timeline t = timeline_;
      tamper(t);
      if (examine(t, *sim_, end).problems.empty()) {
        missed_.push_back(what);
      }
    }
  }
  std::vector<std::pair<std::string, std::function<void(Timeline&)>>> cases_;
  std::vector<std::string> clean_;
  std::vector<std::string> missed_;
};

// Index of the first record matching `pred`.
size_t find(const Timeline& t, const std::function<bool(const OpRecord&)>& pred) {
  for (size_t i = 0; i < t.ops.size(); ++i) {
    if (pred(t.ops[i])) {
      return i;
    }
  }
  ADD_FAILURE() << "no such record";
  return 0;
}

TEST(ModelCheckSelf, TimelineExaminerCatchesBrokenRules) {
  // TP 2 x PP 2 x DP 2 on one node: collectives, sends and receives, several streams.
  const scenario::Scenario s = to_scenario({{"model", "llama3.2-1b"},
                                            {"cluster", "dgx-h100"},
                                            {"nodes", 1},
                                            {"tp", 2},
                                            {"pp", 2},
                                            {"dp", 2},
                                            {"gbs", 8},
                                            {"seq", 1024},
                                            {"zero", 1}});
  Tamperer t;
  const Duration ps = Duration::from_ps(1);
  const auto later = [](const OpRecord& o) { return o.op.value() > 0 && o.match == 0; };
  t.cases_ = {
      {"an op run twice", [](Timeline& tl) { tl.ops.push_back(tl.ops.front()); }},
      {"an op never run", [](Timeline& tl) { tl.ops.pop_back(); }},
      {"an op ready before its dependency ended",
       [&](Timeline& tl) {
         // The last compute op of the step waits for something; make it ready at time zero.
         OpRecord& o = tl.ops[find(tl, later)];
         o.ready = SimTime::zero();
         o.start = SimTime::zero();
       }},
      {"an op started before it was issued",
       [&](Timeline& tl) {
         OpRecord& o = tl.ops[find(tl, later)];
         o.issued = o.start + ps;
       }},
      {"an op ending before it started",
       [&](Timeline& tl) {
         OpRecord& o = tl.ops.back();
         o.end = o.start + Duration::from_ps(-1);
       }},
      {"members of a collective starting apart",
       [&](Timeline& tl) {
         // Two records of one match (two simulated ranks, or a send and its receive).
         for (size_t i = 0; i < tl.ops.size(); ++i) {
           for (size_t j = i + 1; j < tl.ops.size(); ++j) {
             if (tl.ops[i].match != 0 && tl.ops[i].match == tl.ops[j].match) {
               tl.ops[j].start += ps;
               tl.ops[j].end += ps;
               return;
             }
           }
         }
         ADD_FAILURE() << "no matched records";
       }},
      {"two ops of one stream at once",
       [&](Timeline& tl) {
         // Consecutive ops of rank 0's compute stream: the second made ready while the first runs.
         for (const OpRecord& a : tl.ops) {
           for (OpRecord& b : tl.ops) {
             if (a.rank == b.rank && a.stream == 0 && b.stream == 0 &&
                 b.op.value() == a.op.value() + 1 && a.end > a.start) {
               b.ready = a.start;
               b.start = a.start;
               return;
             }
           }
         }
         ADD_FAILURE() << "no consecutive compute ops";
       }},
      {"a ledger total that is not the sum of its changes",
       [](Timeline& tl) {
         tl.memory.back().total_after = tl.memory.back().total_after + Bytes::of(1);
       }},
  };
  const scenario::StepReport r = scenario::simulate_step(s, scenario::StepOptions{}, &t);
  ASSERT_TRUE(r.simulated);
  EXPECT_TRUE(t.clean_.empty()) << t.clean_.front();
  for (const std::string& m : t.missed_) {
    ADD_FAILURE() << m << ": not caught";
  }
}

}  // namespace
}  // namespace meshsim::model_check
