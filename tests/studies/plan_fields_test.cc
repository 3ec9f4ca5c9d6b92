// The plan field table (scenario/plan_fields.h) and the bindings it drives: every field set by its
// flag (cli/src/plan_flags.h), echoed as the scenario file writes it, and read back from that JSON
// comes back equal, with each step's origin; boolean flags take true/false and nothing else.
#include <CLI/CLI.hpp>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "meshsim/scenario/located.h"
#include "meshsim/scenario/plan_fields.h"
#include "meshsim/scenario/scenario.h"
#include "plan_flags.h"

namespace meshsim::scenario {
namespace {

using nlohmann::json;
using workloads::ParallelPlan;
using workloads::PlanField;

// A flag giving the field a value other than the neutral plan's: 2 for an integer (every count's
// default is 0 or 1, the sequence's 4096), 1.5 for a number, a boolean's opposite, a choice's last
// spelling (an alias where the enum has one: the echo writes the canonical name), lists of two.
std::string flag_giving_another_value(const PlanFieldSpec& f) {
  switch (f.kind) {
    case FieldKind::kInteger:
      return f.flag() + "=2";
    case FieldKind::kNumber:
      return f.flag() + "=1.5";
    case FieldKind::kBoolean:
      return f.get(ParallelPlan{}) == json(true) ? f.negated_flag() : f.flag();
    case FieldKind::kChoice:
      return f.flag() + "=" + f.spellings().back();
    case FieldKind::kIntegerList:
      return f.flag() + "=3,0,5";
    case FieldKind::kChoiceList:
      return f.flag() + "=" + f.spellings().back() + "," + f.spellings().front();
  }
  return "";
}

// Parses `args` (after the program name) with the plan flags and applies them to the neutral plan.
ParallelPlan plan_from_flags(const std::vector<std::string>& args) {
  CLI::App app;
  cli::PlanFlags flags;
  flags.add_to(&app);
  std::vector<std::string> reversed(args.rbegin(), args.rend());  // CLI11 takes them reversed
  app.parse(reversed);
  ParallelPlan p = Scenario::neutral_plan();
  flags.apply(p);
  return p;
}

TEST(PlanFieldTable, HasEveryPlanFieldOnceWithItsKeyAndFlag) {
  std::set<PlanField> seen;
  std::set<std::string> columns;
  for (const PlanFieldSpec& f : plan_fields()) {
    EXPECT_TRUE(seen.insert(f.field).second) << f.key();
    EXPECT_EQ(&plan_field(f.field), &f);
    EXPECT_EQ(f.flag(), flag_of_key(f.key()));
    EXPECT_NE(std::string(f.doc), "") << f.key();
    EXPECT_EQ(f.spellings != nullptr,
              f.kind == FieldKind::kChoice || f.kind == FieldKind::kChoiceList)
        << f.key();
    if (f.column != nullptr) {
      EXPECT_TRUE(columns.insert(f.column).second) << f.column;
    }
  }
  EXPECT_EQ(seen.size(), enum_values<PlanField>().size());
}

TEST(PlanFieldTable, FlagPlanJsonPlanRoundTripsEveryField) {
  std::vector<std::string> args;
  for (const PlanFieldSpec& f : plan_fields()) {
    args.push_back(flag_giving_another_value(f));
  }
  const ParallelPlan neutral = Scenario::neutral_plan();
  const ParallelPlan from_flags = plan_from_flags(args);
  json echoed = json::object();
  write_plan_fields(from_flags, echoed);
  const Scenario read = apply_scenario_json(echoed, "round-trip.json", "", Scenario{});
  for (const PlanFieldSpec& f : plan_fields()) {
    SCOPED_TRACE(f.key());
    // The flag set it, and says so.
    EXPECT_NE(f.get(from_flags), f.get(neutral));
    EXPECT_EQ(from_flags.origins[f.field].kind(), Origin::Kind::kFlag);
    const bool cleared = f.kind == FieldKind::kBoolean && f.get(from_flags) == json(false);
    EXPECT_EQ(from_flags.origins[f.field], Origin::flag(cleared ? f.negated_flag() : f.flag()));
    // Echoed (a set field always is), and read back equal, located in the file.
    ASSERT_TRUE(echoed.contains(f.key()));
    EXPECT_EQ(echoed.at(f.key()), f.get(from_flags));
    EXPECT_EQ(f.get(read.plan), f.get(from_flags));
    EXPECT_EQ(read.plan.origins[f.field], Origin::file("round-trip.json", "/" + f.key()));
  }
  // What the precision sets besides the matmul type.
  EXPECT_EQ(read.plan.activation_bytes, from_flags.activation_bytes);
  EXPECT_EQ(read.plan.state.optimizer, from_flags.state.optimizer);
  // Nothing else was echoed.
  EXPECT_EQ(echoed.size(), plan_fields().size());
}

TEST(PlanFieldTable, NeutralPlanEchoesOnlyTheAlwaysEchoedFields) {
  json echoed = json::object();
  write_plan_fields(Scenario::neutral_plan(), echoed);
  for (const PlanFieldSpec& f : plan_fields()) {
    EXPECT_EQ(echoed.contains(f.key()), f.echoed == nullptr) << f.key();
  }
}

TEST(PlanFieldTable, BooleanFlagsTakeTrueOrFalseOnly) {
  EXPECT_TRUE(plan_from_flags({"--sp"}).sp);
  EXPECT_TRUE(plan_from_flags({"--sp=true"}).sp);
  EXPECT_FALSE(plan_from_flags({"--sp=false"}).sp);
  EXPECT_FALSE(plan_from_flags({"--no-sp"}).sp);
  EXPECT_EQ(plan_from_flags({"--no-sp"}).origins[PlanField::kSp], Origin::flag("--no-sp"));
  EXPECT_FALSE(plan_from_flags({"--overlap-p2p=false"}).overlap.pipeline_p2p);
  EXPECT_EQ(plan_from_flags({"--overlap-p2p=false"}).origins[PlanField::kOverlapP2p],
            Origin::flag("--no-overlap-p2p"));
  for (const char* bad : {"--sp=on", "--sp=1", "--sp=yes", "--sp=False", "--no-sp=maybe"}) {
    EXPECT_THROW(plan_from_flags({bad}), CLI::ParseError) << bad;
  }
}

TEST(PlanFieldTable, AnUnsetFieldIsNamedByTheFlagThatWouldChangeIt) {
  EXPECT_EQ(flag_of(PlanField::kSp), "--sp");
  EXPECT_EQ(flag_of(PlanField::kOverlapTp), "--overlap-tp");
  EXPECT_EQ(flag_of(PlanField::kOverlapGradReduce), "--no-overlap-grad-reduce");
  EXPECT_EQ(flag_of(PlanField::kCapacityFactor), "--capacity-factor");
}

TEST(PlanFieldTable, AFileValueOutOfBoundNamesFileAndPointer) {
  try {
    apply_scenario_json(json{{"tp", 0}}, "s.json", "", Scenario{});
    FAIL() << "tp 0 read";
  } catch (const InputError& e) {
    EXPECT_EQ(e.source(), "s.json");
    EXPECT_EQ(e.location(), "/tp");
  }
  try {
    apply_scenario_json(json{{"recompute_modules", {"mlp", "attn"}}}, "s.json", "", Scenario{});
    FAIL() << "an unknown module read";
  } catch (const InputError& e) {
    EXPECT_EQ(e.location(), "/recompute_modules/1");
    EXPECT_THAT(e.message(), ::testing::HasSubstr("core_attn"));
  }
}

}  // namespace
}  // namespace meshsim::scenario
