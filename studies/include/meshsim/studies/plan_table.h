// Plans and their simulated steps as table rows: CSV and JSON for the plan search and the sweeps
// (one row per simulated plan, the same columns in both).
#pragma once

#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "meshsim/studies/cost.h"
#include "meshsim/studies/plan_search.h"
#include "meshsim/scenario/step_report.h"
#include "meshsim/workloads/parallel.h"

namespace meshsim::studies {

// "TP8 SP PP4 i5 DP64 Z1 mbs1" (+ " CP2", " EP8", " HSDP8x8" (shard groups of 8 DP ranks x 8
// replicas), " rc-full", " tp-overlap", " zb", "1f1b" only where they are not the default of a plan
// with those degrees).
std::string short_plan(const workloads::ParallelPlan& p);

// One row: the plan's fields and the step's results (step time, tokens/s, MFU, peak memory,
// headroom, exposed communication by kind, bubble), and the time to train when given.
struct PlanRow {
  workloads::ParallelPlan plan;
  scenario::StepReport report;
  std::optional<Duration> lower_bound;
  std::optional<TimeToTrain> time_to_train;
};

nlohmann::json row_json(const PlanRow& row);
// The columns of row_json, in table order.
const std::vector<std::string>& row_columns();
// One CSV cell (RFC 4180 quoting; null is empty; numbers with 9 significant digits).
std::string csv_cell(const nlohmann::json& v);
// The CSV header line and rows (RFC 4180; numbers with enough digits to round-trip).
void write_rows_csv(const std::vector<PlanRow>& rows, std::ostream& out);

// The search's counts (considered, invalid by field, pruned by why, simulated) as JSON.
nlohmann::json search_counts_json(const SearchResult& r);

}  // namespace meshsim::studies
