#include "meshsim/studies/plan_table.h"

#include <fmt/format.h>

#include <functional>
#include <iterator>

#include "meshsim/scenario/plan_fields.h"
#include "meshsim/scenario/report_fields.h"

namespace meshsim::studies {

using scenario::StepReport;
using workloads::ParallelPlan;

std::string short_plan(const ParallelPlan& p) {
  std::string s = fmt::format("TP{}{}", p.tp, p.sp ? " SP" : "");
  if (p.cp > 1) {
    s += fmt::format(" CP{}", p.cp);
  }
  s += fmt::format(" PP{}", p.pp);
  switch (p.schedule) {
    case workloads::PipelineSchedule::kInterleaved:
      s += fmt::format(" i{}", p.vpp);
      break;
    case workloads::PipelineSchedule::kZeroBubble:
      s += " zb";
      break;
    case workloads::PipelineSchedule::kZeroBubbleV:
      s += " zbv";
      break;
    case workloads::PipelineSchedule::kGpipe:
      s += " gpipe";
      break;
    case workloads::PipelineSchedule::kOneFOneB:
      break;
  }
  s += fmt::format(" DP{}", p.dp);
  if (p.zero != workloads::ZeroStage::kNone) {
    s += fmt::format(" Z{}", static_cast<int>(p.zero));
  }
  if (p.fp8_param_gather) {
    s += " fp8-gather";
  }
  if (p.fsdp > 0) {  // HSDP: shard groups of fsdp DP ranks, dp / fsdp replicas
    s += fmt::format(" HSDP{}x{}", p.fsdp, p.zero_replicas());
  }
  if (p.ep > 1) {
    s += fmt::format(" EP{}", p.ep);
  }
  s += fmt::format(" mbs{}", p.mbs);
  if (p.recompute != workloads::Recompute::kNone) {
    s += fmt::format(" rc-{}", to_string(p.recompute));
  }
  if (p.offload_layers > 0) {
    s += fmt::format(" offload{}", p.offload_layers);
  }
  if (p.overlap.tensor_parallel) {
    s += " tp-overlap";
  }
  return s;
}

namespace {

// A column: its name and the value of a row.
struct Column {
  std::string name;
  std::function<nlohmann::json(const PlanRow&)> value;
};

double exposed(const StepReport& r, std::string_view kind) {
  for (const auto& [k, d] : r.exposed_by_kind) {
    if (k == kind) {
      return d.seconds();
    }
  }
  return 0.0;
}

double headroom(const StepReport& r) {
  return 1.0 - r.peak_memory.as_double() / r.memory_capacity.as_double();
}

nlohmann::json exposed_column(const PlanRow& r, std::string_view kind) {
  return exposed(r.report, kind);
}

// Columns derived from the step's results, each after the result column it follows.
std::vector<Column> derived_after(std::string_view key) {
  if (key == "devices") {
    return {{"slices", [](const PlanRow& r) -> nlohmann::json {
               return r.report.inputs.is_object() ? r.report.inputs.value("slices", int64_t{1})
                                                  : int64_t{1};
             }}};
  }
  if (key == "exposed_comm_s") {  // by kind, as the step reports them
    std::vector<Column> by_kind;
    for (const workloads::CommKind kind : enum_values<workloads::CommKind>()) {
      const std::string name(to_string(kind));
      by_kind.push_back({"exposed_" + name + "_s",
                         [name](const PlanRow& r) { return exposed_column(r, name); }});
    }
    return by_kind;
  }
  if (key == "memory_capacity_bytes") {
    return {{"headroom", [](const PlanRow& r) -> nlohmann::json { return headroom(r.report); }}};
  }
  return {};
}

// What a row's optional study result is, or null.
template <typename T, typename F>
nlohmann::json or_null(const std::optional<T>& v, F f) {
  return v ? nlohmann::json(f(*v)) : nlohmann::json();
}

// The plan's columns (the plan field table's, in its order, then the derived zero_replicas),
// the step's (the report field table's, with the columns derived from them), the lower bound
// and the time to train.
std::vector<Column> make_columns() {
  std::vector<Column> c = {{"plan", [](const PlanRow& r) -> nlohmann::json {
                              return short_plan(r.plan);
                            }}};
  for (const scenario::PlanFieldSpec& f : scenario::plan_fields()) {
    if (f.column != nullptr) {
      c.push_back({f.column, [get = f.get](const PlanRow& r) { return get(r.plan); }});
    }
  }
  c.push_back({"zero_replicas",
               [](const PlanRow& r) -> nlohmann::json { return r.plan.zero_replicas(); }});
  for (const scenario::ReportFieldSpec& f : scenario::report_fields()) {
    if (f.column) {
      c.push_back({f.key, [&f](const PlanRow& r) { return f.value(r.report); }});
      const std::vector<Column> derived = derived_after(f.key);
      c.insert(c.end(), derived.begin(), derived.end());
    }
  }
  c.push_back({"lower_bound_s", [](const PlanRow& r) {
                 return or_null(r.lower_bound, [](Duration d) { return d.seconds(); });
               }});
  c.push_back({"days", [](const PlanRow& r) {
                 return or_null(r.time_to_train, [](const TimeToTrain& t) { return t.days; });
               }});
  c.push_back({"device_hours", [](const PlanRow& r) {
                 return or_null(r.time_to_train,
                                [](const TimeToTrain& t) { return t.device_hours; });
               }});
  c.push_back({"cost_usd", [](const PlanRow& r) {
                 return r.time_to_train ? or_null(r.time_to_train->cost_usd, std::identity())
                                        : nlohmann::json();
               }});
  c.push_back({"facility_energy_mwh", [](const PlanRow& r) {
                 return r.time_to_train
                            ? or_null(r.time_to_train->facility_energy_mwh, std::identity())
                            : nlohmann::json();
               }});
  return c;
}

const std::vector<Column>& columns() {
  static const std::vector<Column> kColumns = make_columns();
  return kColumns;
}

}  // namespace

std::string csv_cell(const nlohmann::json& v) {
  if (v.is_null()) {
    return "";
  }
  if (v.is_string()) {
    std::string s = v.get<std::string>();
    if (s.find_first_of(",\"\n") == std::string::npos) {
      return s;
    }
    std::string q = "\"";
    for (const char c : s) {
      q.push_back(c);
      if (c == '"') {
        q.push_back('"');
      }
    }
    q.push_back('"');
    return q;
  }
  if (v.is_number_float()) {
    return fmt::format("{:.9g}", v.get<double>());
  }
  return v.dump();
}

const std::vector<std::string>& row_columns() {
  static const std::vector<std::string> kNames = [] {
    std::vector<std::string> names;
    for (const Column& c : columns()) {
      names.emplace_back(c.name);
    }
    return names;
  }();
  return kNames;
}

nlohmann::json row_json(const PlanRow& row) {
  nlohmann::json j = nlohmann::json::object();
  for (const Column& c : columns()) {
    j[c.name] = c.value(row);
  }
  return j;
}

void write_rows_csv(const std::vector<PlanRow>& rows, std::ostream& out) {
  const char* sep = "";
  for (const Column& c : columns()) {
    out << sep << c.name;
    sep = ",";
  }
  out << "\n";
  for (const PlanRow& r : rows) {
    sep = "";
    for (const Column& c : columns()) {
      out << sep << csv_cell(c.value(r));
      sep = ",";
    }
    out << "\n";
  }
}

nlohmann::json search_counts_json(const SearchResult& r) {
  return {{"considered", r.considered},
          {"invalid", r.invalid},
          {"refused_by_stack", r.refused},
          {"pruned_memory", r.pruned_memory},
          {"pruned_headroom", r.pruned_headroom},
          {"pruned_estimate", r.pruned_estimate},
          {"pruned_bound", r.pruned_bound},
          {"not_simulated", r.not_simulated},
          {"simulated", r.simulated},
          {"simulated_oom", r.simulated_oom},
          {"simulated_headroom", r.simulated_headroom},
          {"min_headroom", r.min_headroom},
          {"probes", r.probes},
          {"exact", r.exact},
          {"ranking_proven", r.exact},
          {"capped", r.capped}};
}

}  // namespace meshsim::studies
