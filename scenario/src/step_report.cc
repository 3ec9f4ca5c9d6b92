#include "meshsim/scenario/step_report.h"

#include <fmt/format.h>


#include "meshsim/scenario/report_fields.h"
#include "meshsim/sim/error.h"

namespace meshsim::scenario {

Bytes MemoryBreakdown::total() const {
  Bytes t;
  for (const Bytes b : by_category) {
    t += b;
  }
  return t;
}

std::string format_bytes(Bytes b) {
  const double v = b.as_double();
  constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
  if (v >= kGiB) {
    return fmt::format("{:.2f} GiB", v / kGiB);
  }
  return fmt::format("{:.1f} MiB", v / (1024.0 * 1024.0));
}

std::string format_duration(Duration d) {
  if (d >= Seconds(1)) {
    return fmt::format("{:.3f} s", d.seconds());
  }
  if (d >= Milliseconds(1)) {
    return fmt::format("{:.2f} ms", d.milliseconds());
  }
  return fmt::format("{:.2f} us", d.microseconds());
}

namespace {

nlohmann::json memory_json(const MemoryBreakdown& m) {
  nlohmann::json j = nlohmann::json::object();
  for (int i = 0; i < kNumMemoryCategories; ++i) {
    j[std::string(to_string(static_cast<MemoryCategory>(i)))] =
        m.by_category[static_cast<size_t>(i)].count();
  }
  return j;
}

}  // namespace

std::string memory_line(const MemoryBreakdown& m) {
  std::string s;
  for (int i = 0; i < kNumMemoryCategories; ++i) {
    const Bytes b = m.by_category[static_cast<size_t>(i)];
    if (b > Bytes::zero()) {
      s += fmt::format("{}{} {}", s.empty() ? "" : ", ",
                       to_string(static_cast<MemoryCategory>(i)), format_bytes(b));
    }
  }
  return s;
}

nlohmann::json stages_json(const StepReport& r) {
  nlohmann::json stages = nlohmann::json::array();
  for (const auto& st : r.stages) {
    stages.push_back({{"stage", st.stage},
                      {"bubble_fraction", st.bubble_fraction},
                      {"compute_s", st.compute.seconds()},
                      {"peak_memory_bytes", st.peak_memory.count()},
                      {"peak_memory_breakdown_bytes", memory_json(st.peak_breakdown)}});
  }
  return stages;
}

nlohmann::json to_json(const StepReport& r) {
  nlohmann::json j;
  j["inputs"] = r.inputs;
  for (const ReportFieldSpec& f : report_fields()) {
    if (f.written) {
      j[f.key] = f.value(r);
    }
  }
  j["mfu_peak_dtype"] = std::string(to_string(r.peak_dtype));
  j["peak_memory_breakdown_bytes"] = memory_json(r.peak_breakdown);
  nlohmann::json by_class = nlohmann::json::object();
  for (int i = 0; i < kNumOpClasses; ++i) {
    by_class[std::string(to_string(static_cast<OpClass>(i)))] =
        r.time_by_class[static_cast<size_t>(i)].seconds();
  }
  j["time_by_op_class_s"] = by_class;
  nlohmann::json exposed = nlohmann::json::object();
  for (const auto& [kind, d] : r.exposed_by_kind) {
    exposed[kind] = d.seconds();
  }
  j["exposed_comm_by_kind_s"] = exposed;
  j["stages"] = stages_json(r);
  j["simulation"] = {{"mode", r.simulation_mode}, {"simulated_ranks", r.simulated_ranks}};
  if (r.oom) {
    j["oom_stage"] = r.oom_stage;
  }
  if (!r.caveats.empty()) {
    j["caveats"] = r.caveats;
  }
  if (r.faults) {
    j["faults"] = fault_effect_json(*r.faults, r.step_time);
  }
  return j;
}

}  // namespace meshsim::scenario
