// The plan's fields as one table: for each user-set field of workloads::ParallelPlan, how it is
// written (its kind, the bound a file's value must meet, its unit), what it means (the flag's
// help), how it is read from and written to a plan, whether reports echo it, and its column in the
// plan table. Everything that binds plan fields is driven by it:
//   * the scenario file's keys (scenario.h: read_plan_fields, plan_fields_json), each value's
//     origin recorded (the file and its JSON pointer);
//   * the command line's flags (cli/: one flag per row, `--` and the key with '-' for '_'; a
//     boolean takes `--sp`, `--sp=true`, `--sp=false` or `--no-sp`), each value's origin the flag;
//   * the echo of the plan in reports (`inputs` of `meshsim run --json`), which `meshsim compare`
//     diffs key by key;
//   * the plan columns of the plan search's and the sweeps' CSV and JSON (studies/plan_table.h).
// Adding a plan field: its member and semantics in workloads/ (parallel.h, plan_field.h), and one
// row in plan_fields.cc.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

#include "meshsim/sim/json_input.h"
#include "meshsim/sim/provenance.h"
#include "meshsim/workloads/parallel.h"

namespace meshsim::scenario {

// How a field's value is written: a number, a boolean, one of a set of names, or a list.
enum class FieldKind : uint8_t { kInteger, kNumber, kBoolean, kChoice, kIntegerList, kChoiceList };

// The bound a scenario file's number must meet (read by JsonObject, which names the file, the
// pointer and what was expected). A flag's value is held to the plan's own rules
// (workloads::validate_plan), as a file's is after it is read.
enum class FieldBound : uint8_t { kAny, kPositive, kNonNegative };

// A value as written, of the alternative its kind holds: kInteger int64_t, kNumber double,
// kBoolean bool, kChoice std::string (one of the field's spellings), kIntegerList
// std::vector<int64_t>, kChoiceList std::vector<std::string>.
using FieldValue = std::variant<int64_t, double, bool, std::string, std::vector<int64_t>,
                                std::vector<std::string>>;

struct PlanFieldSpec {
  workloads::PlanField field;
  FieldKind kind;
  FieldBound bound;
  const char* unit;  // of a number or list of numbers ("ranks", "sequences"); "" otherwise
  const char* doc;   // what the field means, as the flag's help says it
  // kChoice and kChoiceList: the names accepted (canonical and aliases), and their description
  // for errors ("gpipe, 1f1b, ..."); null otherwise.
  std::vector<std::string> (*spellings)();
  std::string (*describe_choices)();
  // The value as the scenario file writes it (null for an optional value that is unset).
  nlohmann::json (*get)(const workloads::ParallelPlan& p);
  // Stores a value of the row's kind, within its bound and among its spellings; `where` locates
  // a value the field refuses itself (a ZeRO stage past 3: InputError there).
  void (*set)(workloads::ParallelPlan& p, const FieldValue& v, const Origin& where);
  // Whether reports echo the field; null: always. Fields most plans leave unset are echoed only
  // when set, so that the reports of plans without them stay as they were.
  bool (*echoed)(const workloads::ParallelPlan& p);
  const char* column;  // its column in the plan table (studies/plan_table.h); null: none

  // The scenario file's key: the field's name ("capacity_factor").
  std::string key() const;
  // The flag that sets it: "--capacity-factor"; a boolean's sets it true.
  std::string flag() const;
  // A boolean's flag that sets it false: "--no-sp" (empty for other kinds).
  std::string negated_flag() const;
};

// The flag of a scenario file's key: "--" and the key with '-' for '_' ("--capacity-factor").
std::string flag_of_key(std::string_view key);

// Every user-set plan field, once, in table order: the plan table's column order, and the order
// of the flags in --help.
std::span<const PlanFieldSpec> plan_fields();
const PlanFieldSpec& plan_field(workloads::PlanField field);

// The flag that would change a field from the neutral plan's value: the field's flag, or for a
// boolean that defaults to true its negation ("--no-overlap-p2p").
std::string changing_flag(workloads::PlanField field);
// The flag a boolean value was given with: "--sp" for true, "--no-sp" for false.
std::string flag_for(workloads::PlanField field, const FieldValue& v);

// Stores `v` in `p` (the row's set) and records `where` as the field's origin.
void set_plan_field(workloads::ParallelPlan& p, workloads::PlanField field, const FieldValue& v,
                    const Origin& where);

// Reads the plan fields present in `o` into `p` (each key marked known, present or not, so that
// an unknown-key error lists them), recording each one's origin: o's source and the key's JSON
// pointer. InputError (JsonObject's) on a value of the wrong kind or out of bound.
void read_plan_fields(JsonObject& o, workloads::ParallelPlan& p);

// The fields reports echo, as the scenario file writes them, added to `out` (an object).
void write_plan_fields(const workloads::ParallelPlan& p, nlohmann::json& out);

}  // namespace meshsim::scenario
