#include "report_state.h"

#include "meshsim/scenario/report_fields.h"

namespace meshsim::studies::detail {
namespace {

using scenario::MemoryBreakdown;

using nlohmann::json;

json memory(const MemoryBreakdown& m) {
  json a = json::array();
  for (const Bytes b : m.by_category) {
    a.push_back(b.count());
  }
  return a;
}

MemoryBreakdown memory_from(const json& a) {
  MemoryBreakdown m;
  for (size_t i = 0; i < m.by_category.size(); ++i) {
    m.by_category[i] = Bytes::of(a.at(i).get<int64_t>());
  }
  return m;
}

Duration ps(const json& v) { return Duration::from_ps(v.get<int64_t>()); }

}  // namespace

json report_state(const StepReport& r) {
  json j = {{"inputs", r.inputs},
            {"peak_dtype", static_cast<int>(r.peak_dtype)},
            {"peak_breakdown", memory(r.peak_breakdown)},
            {"caveats", r.caveats}};
  for (const scenario::ReportFieldSpec& f : scenario::report_fields()) {
    j[f.key] = f.exact(r);
  }
  json by_class = json::array();
  for (const Duration d : r.time_by_class) {
    by_class.push_back(d.ps());
  }
  j["time_by_class"] = by_class;
  json stages = json::array();
  for (const StepReport::Stage& s : r.stages) {
    stages.push_back({s.stage, s.bubble_fraction, s.compute.ps(), s.peak_memory.count(),
                      memory(s.peak_breakdown)});
  }
  j["stages"] = stages;
  json kinds = json::array();
  for (const auto& [kind, d] : r.exposed_by_kind) {
    kinds.push_back({kind, d.ps()});
  }
  j["exposed_by_kind"] = kinds;
  return j;
}

StepReport report_from_state(const json& j) {
  StepReport r;
  r.inputs = j.at("inputs");
  r.peak_dtype = static_cast<Dtype>(j.at("peak_dtype").get<int>());
  r.peak_breakdown = memory_from(j.at("peak_breakdown"));
  r.caveats = j.at("caveats").get<std::vector<std::string>>();
  for (const scenario::ReportFieldSpec& f : scenario::report_fields()) {
    f.set_exact(r, j.at(f.key));
  }
  for (size_t i = 0; i < r.time_by_class.size(); ++i) {
    r.time_by_class[i] = ps(j.at("time_by_class").at(i));
  }
  for (const json& s : j.at("stages")) {
    r.stages.push_back({s.at(0).get<int64_t>(), s.at(1).get<double>(), ps(s.at(2)),
                        Bytes::of(s.at(3).get<int64_t>()), memory_from(s.at(4))});
  }
  for (const json& k : j.at("exposed_by_kind")) {
    r.exposed_by_kind.emplace_back(k.at(0).get<std::string>(), ps(k.at(1)));
  }
  return r;
}

}  // namespace meshsim::studies::detail
