// The model checker (docs/model-checker.md): random scenarios from seeds, each simulated through
// scenario::simulate_step and held to the model's invariants (model_check.h). Environment:
//   MESHSIM_MODEL_CHECK_SEED     the first seed (default 1)
//   MESHSIM_MODEL_CHECK_COUNT    how many seeds (default: about 10 s of a Release build; fewer
//                                under the sanitizers and in Debug builds)
//   MESHSIM_MODEL_CHECK_VERBOSE  1: print every seed's scenario and what became of it
//   MESHSIM_MODEL_CHECK_STRICT   1: fail on the known issues' violations too (model_check.h)
//   MESHSIM_MODEL_CHECK_SCENARIO a scenario file to check instead of generated ones (a failing
//                                seed's scenario, edited to find what breaks the invariant)
// A violation fails the test with the seed, the scenario JSON and the commands that replay it.
#include "model_check.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <iostream>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "meshsim/scenario/step.h"
#include "meshsim/sim/json_input.h"
#include "meshsim/sim/simulation.h"
#include "meshsim/sim/timeline.h"

namespace meshsim::model_check {
namespace {

// Sanitizer builds (g++ defines __SANITIZE_ADDRESS__, clang answers __has_feature) and Debug
// builds run the libraries many times slower.
#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define MESHSIM_MODEL_CHECK_ASAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__) || defined(MESHSIM_MODEL_CHECK_ASAN) || !defined(NDEBUG)
constexpr bool kSlowBuild = true;
#else
constexpr bool kSlowBuild = false;
#endif

// Seeds a default run checks: about 10 s on the 2-core build machine in Release (docs/
// model-checker.md has the measurement); a tenth of it under the sanitizers or unoptimised.
constexpr uint64_t kReleaseCount = 700;
constexpr uint64_t kSlowBuildCount = 40;

uint64_t env_u64(const char* name, uint64_t fallback) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') {
    return fallback;
  }
  char* end = nullptr;
  const unsigned long long parsed = std::strtoull(v, &end, 10);
  if (end == v || *end != '\0') {
    ADD_FAILURE() << name << "=\"" << v << "\": expected a non-negative integer";
    return fallback;
  }
  return parsed;
}

// The first word of a refusal (the field it names: "tp", "schedule", "stack", ...).
std::string refusal_field(const std::string& message) {
  const size_t colon = message.find(':');
  return colon == std::string::npos ? message.substr(0, 40) : message.substr(0, colon);
}

// The largest of some figure over the seeds, and the seed it came from.
struct Extreme {
  double value = 0;
  uint64_t seed = 0;
  void note(double v, uint64_t s) {
    if (v > value) {
      value = v;
      seed = s;
    }
  }
};

struct Tally {
  uint64_t simulated = 0;
  uint64_t out_of_memory = 0;
  uint64_t refused = 0;
  uint64_t failed = 0;
  std::map<std::string, uint64_t> refused_by;
  // Representative mode's relative step difference from full simulation, and the step lower
  // bound over the step: the largest seen, outside the known issues' classes and inside them.
  Extreme representative, representative_known, bound, bound_known;
  uint64_t full_compared = 0;
  uint64_t zero_compared = 0;
  // Faster hardware's step over the step, less 1 (largest), and SimGrid's relative difference from
  // the fluid model (largest), with how many of each were compared.
  Extreme faster, simgrid;
  uint64_t faster_compared = 0;
  uint64_t simgrid_compared = 0;
  std::map<std::string, uint64_t> known;    // violations explained by a known issue, by its id
  std::map<std::string, uint64_t> covered;  // scenarios in each known issue's class
};

// Whether a known issue about `invariant` covers the scenario.
bool under_known_issue(const Observation& o, std::string_view invariant) {
  for (const KnownIssue& k : known_issues()) {
    if (k.invariant == invariant && k.applies(o)) {
      return true;
    }
  }
  return false;
}

void note(const Observation& o, Tally& t) {
  for (const KnownIssue& k : known_issues()) {
    t.covered[k.id] += k.applies(o) ? 1U : 0U;
  }
  if (o.full) {
    ++t.full_compared;
    const double dev = std::abs(o.report.step_time.seconds() - o.full->step_time.seconds()) /
                       o.full->step_time.seconds();
    Extreme& e =
        under_known_issue(o, "representative-vs-full") ? t.representative_known : t.representative;
    e.note(dev, o.seed);
  }
  if (o.higher_zero) {
    ++t.zero_compared;
  }
  if (o.faster && o.faster->simulated && o.report.simulated) {
    ++t.faster_compared;
    t.faster.note(o.faster->step_time / o.report.step_time - 1, o.seed);
  }
  if (o.simgrid && o.simgrid->simulated && o.report.simulated) {
    ++t.simgrid_compared;
    t.simgrid.note(std::abs(o.simgrid->step_time / o.report.step_time - 1), o.seed);
  }
  if (o.report.simulated && !o.jitter) {
    Extreme& e = under_known_issue(o, "step-lower-bound") ? t.bound_known : t.bound;
    e.note(o.lower_bound / o.report.step_time, o.seed);
  }
}

// "step 12.345 ms (lower bound 11.000 ms), 2 ranks simulated, full simulation 12.345 ms"
std::string summary(const Observation& o) {
  return fmt::format(
      "step {:.6f} ms (lower bound {:.6f} ms), {} ranks simulated{}",
      o.report.step_time.milliseconds(), o.lower_bound.milliseconds(), o.report.simulated_ranks,
      o.full ? fmt::format(", full simulation {:.6f} ms", o.full->step_time.milliseconds()) : "");
}

// One scenario: simulate, check. Returns false on a violation (already reported).
bool check_scenario(uint64_t seed, const nlohmann::json& doc, bool verbose, bool strict, Tally& t) {
  SeedResult result;
  try {
    result = observe(seed, doc);
  } catch (const std::exception& e) {
    // The plan checks accepted the scenario, so it must simulate.
    ADD_FAILURE() << describe_failure(seed, doc, {{"simulates", e.what()}});
    ++t.failed;
    return false;
  }
  if (result.outcome == Outcome::kRefused) {
    ++t.refused;
    ++t.refused_by[refusal_field(result.refusal)];
    if (verbose) {
      std::cout << "seed " << seed << ": refused (" << result.refusal << ")\n  " << doc.dump()
                << "\n";
    }
    return true;
  }
  const Observation& o = *result.observation;
  ++(result.outcome == Outcome::kSimulated ? t.simulated : t.out_of_memory);
  note(o, t);
  if (verbose) {
    std::cout << "seed " << seed << ": "
              << (o.report.simulated ? summary(o) : "out of memory (pre-check)") << "\n  "
              << for_display(doc).dump() << "\n  " << run_flags(doc) << "\n";
  }
  std::vector<Violation> violations;
  for (const Violation& v : check_invariants(o)) {
    const KnownIssue* known = known_issue(o, v);
    if (known == nullptr) {
      violations.push_back(v);
    } else if (strict) {
      violations.push_back({v.invariant, v.message + " (known issue " + known->id + ")"});
    } else {
      ++t.known[known->id];
      if (verbose) {
        std::cout << "  known issue " << known->id << ": [" << v.invariant << "] " << v.message
                  << "\n";
      }
    }
  }
  if (!violations.empty()) {
    ADD_FAILURE() << describe_failure(seed, doc, violations);
    ++t.failed;
    return false;
  }
  return true;
}

TEST(ModelCheck, RandomScenariosKeepTheModelsInvariants) {
  const bool strict = env_u64("MESHSIM_MODEL_CHECK_STRICT", 0) != 0;
  if (const char* file = std::getenv("MESHSIM_MODEL_CHECK_SCENARIO"); file != nullptr && *file) {
    Tally t;
    EXPECT_TRUE(check_scenario(0, load_json_file(file), true, strict, t)) << file;
    EXPECT_EQ(t.refused, 0U) << file << ": the plan checks refuse it";
    return;
  }
  const uint64_t first = env_u64("MESHSIM_MODEL_CHECK_SEED", 1);
  const uint64_t count =
      env_u64("MESHSIM_MODEL_CHECK_COUNT", kSlowBuild ? kSlowBuildCount : kReleaseCount);
  const bool verbose = env_u64("MESHSIM_MODEL_CHECK_VERBOSE", 0) != 0;
  const auto began = std::chrono::steady_clock::now();
  Tally t;
  for (uint64_t seed = first; seed < first + count; ++seed) {
    check_scenario(seed, generate_scenario(seed), verbose, strict, t);
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count();
  std::string refusals;
  for (const auto& [field, n] : t.refused_by) {
    refusals += fmt::format("{}{} {}", refusals.empty() ? "" : ", ", field, n);
  }
  std::string known;
  for (const auto& [id, n] : t.covered) {
    const auto it = t.known.find(id);
    known += fmt::format("\n    {}: {} of {} scenarios in its class", id,
                         it == t.known.end() ? 0 : it->second, n);
  }
  const auto extreme = [](const Extreme& e, double scale, const char* unit) {
    return fmt::format("{:.4g}{} (seed {})", scale * e.value, unit, e.seed);
  };
  std::cout << fmt::format(
      "model check: seeds {}..{} in {:.1f} s: {} simulated, {} out of memory (pre-check), {} "
      "refused by the plan checks ({}), {} with violations{}\n"
      "  representative vs full simulation compared on {}: largest step difference {}, {} "
      "under a known issue\n"
      "  step lower bound / step: largest {}, {} under a known issue; ZeRO stages compared on {}\n"
      "  {}x faster hardware, compared on {}: largest slowdown {}; SimGrid vs the fluid "
      "model, compared on {}: largest difference {}\n"
      "  violations explained by known issues (not failures{}):{}\n",
      first, first + count - 1, seconds, t.simulated, t.out_of_memory, t.refused, refusals,
      t.failed, strict ? " (strict: known issues fail too)" : "", t.full_compared,
      extreme(t.representative, 100, " %"), extreme(t.representative_known, 100, " %"),
      extreme(t.bound, 1, ""), extreme(t.bound_known, 1, ""), t.zero_compared, kFasterHardware,
      t.faster_compared, extreme(t.faster, 100, " %"), t.simgrid_compared,
      extreme(t.simgrid, 100, " %"), strict ? "; strict, so they failed" : "", known);
  // The generator must mostly make scenarios the checks accept, or the invariants check little.
  if (count >= 50) {
    EXPECT_GE(t.simulated + t.out_of_memory, count / 2) << "the generator's scenarios are mostly "
                                                           "refused: "
                                                        << refusals;
  }
}

TEST(ModelCheck, ASeedAlwaysMakesTheSameScenario) {
  std::set<std::string> distinct;
  for (uint64_t seed = 1; seed <= 50; ++seed) {
    const nlohmann::json a = generate_scenario(seed);
    EXPECT_EQ(a.dump(), generate_scenario(seed).dump()) << "seed " << seed;
    distinct.insert(a.dump());
    // The replay line names every key of the scenario as a flag.
    const std::string flags = run_flags(a);
    for (const auto& [key, value] : a.items()) {
      std::string flag = "--" + key;
      std::replace(flag.begin(), flag.end(), '_', '-');
      EXPECT_TRUE(key == "faults" || flags.find(flag) != std::string::npos) << flags;
    }
  }
  EXPECT_GE(distinct.size(), 48U);
}

}  // namespace
}  // namespace meshsim::model_check
