// The scalar results of a step's report (step_report.h) as one table: each field's JSON key in
// `meshsim run --json` (also its column in the plan search's and the sweeps' tables), its unit,
// what it means, and whether `meshsim compare` sets two reports' values side by side. It drives
// the report's JSON (to_json), the plan table's result columns (studies/plan_table.h), the exact
// exchange of reports between processes (studies' report_state) and compare's metrics.
// Adding a scalar result: its member of StepReport, what computes it (step.cc), one row in
// report_fields.cc.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <variant>

#include <nlohmann/json.hpp>

#include "meshsim/scenario/step_report.h"
#include "meshsim/sim/units.h"

namespace meshsim::scenario {

// The member a row reads, by its type: its JSON value is seconds for a Duration, bytes for Bytes,
// FLOP/s for a rate, the number or string itself otherwise.
using ReportMember =
    std::variant<Duration StepReport::*, Bytes StepReport::*, FlopsPerSec StepReport::*,
                 Flops StepReport::*, double StepReport::*, int64_t StepReport::*,
                 uint64_t StepReport::*, bool StepReport::*, std::string StepReport::*>;

struct ReportFieldSpec {
  const char* key;   // "step_time_s"
  const char* unit;  // "s", "B", "1/s", "FLOP/s", "FLOP"; "" for a fraction, a count or a flag
  const char* doc;
  ReportMember member;
  bool written;         // a key of `meshsim run --json` (else only exchanged between processes)
  bool column;          // a column of the plan table
  const char* compare;  // compare's name for it ("step time"); null: not compared

  // The value as `meshsim run --json` writes it, in the row's unit.
  nlohmann::json value(const StepReport& r) const;
  // The value exactly (picoseconds, bytes, the double's own bits through nlohmann's round trip),
  // and back: what processes exchange so that each holds the very report another computed.
  nlohmann::json exact(const StepReport& r) const;
  void set_exact(StepReport& r, const nlohmann::json& v) const;
};

// Every row, in table order (the order of compare's metrics and of the plan table's columns).
std::span<const ReportFieldSpec> report_fields();
// The row of `key`; InternalError when there is none.
const ReportFieldSpec& report_field(std::string_view key);

}  // namespace meshsim::scenario
