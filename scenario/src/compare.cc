#include "meshsim/scenario/compare.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "meshsim/scenario/report_fields.h"
#include "meshsim/sim/error.h"
#include "meshsim/sim/json_input.h"

namespace meshsim::scenario {
namespace {

using nlohmann::json;

// The report's fields compare sets side by side (report_fields.h), in table order; compute_s and
// exposed_comm_s among them, which the idle time needs.
const std::vector<ReportFieldSpec>& compared() {
  static const std::vector<ReportFieldSpec> kCompared = [] {
    std::vector<ReportFieldSpec> out;
    for (const ReportFieldSpec& f : report_fields()) {
      if (f.compare != nullptr) {
        out.push_back(f);
      }
    }
    return out;
  }();
  return kCompared;
}

// The fields compare reads, checked up front so that errors name the file and pointer.
void check_report(const json& r, const std::string& name) {
  JsonObject o(r, name);
  o.allow_unknown();
  for (const ReportFieldSpec& f : compared()) {
    if (std::string_view(f.unit) == "B") {
      o.integer(f.key);
    } else {
      o.number(f.key);
    }
  }
  o.object("inputs");
  for (const char* key : {"exposed_comm_by_kind_s", "time_by_op_class_s"}) {
    JsonObject times = o.object(key);  // every value a number of seconds
    times.allow_unknown();
    for (const auto& [part, seconds] : r.at(key).items()) {
      times.number(part);
    }
  }
  if (!o.boolean("simulated")) {
    o.fail("simulated", "the report is of a step that was not simulated (out of memory)");
  }
}

double number(const json& r, const std::string& key) { return r.at(key).get<double>(); }

// A value as text; bytes that are not UTF-8 (the report is anyone's file) become U+FFFD.
std::string text(const json& v) {
  return v.is_string() ? v.get<std::string>()
                       : v.dump(-1, ' ', false, json::error_handler_t::replace);
}

json metric(const std::string& name, const std::string& unit, double a, double b) {
  return {{"name", name}, {"unit", unit}, {"a", a}, {"b", b}, {"delta", b - a}};
}

// (name, delta) sorted by |delta|, largest first; ties by name.
json ranked(std::vector<std::pair<std::string, double>> parts, const char* key) {
  std::stable_sort(parts.begin(), parts.end(), [](const auto& x, const auto& y) {
    return std::fabs(x.second) > std::fabs(y.second);
  });
  json out = json::array();
  for (const auto& [name, d] : parts) {
    out.push_back({{key, name}, {"delta_s", d}});
  }
  return out;
}

}  // namespace

json compare_reports(const json& a, const std::string& a_name, const json& b,
                     const std::string& b_name) {
  check_report(a, a_name);
  check_report(b, b_name);
  json out;
  out["inputs_changed"] = json::array();
  json keys = a.at("inputs");
  keys.update(b.at("inputs"));
  for (const auto& [field, unused] : keys.items()) {
    const json va = a.at("inputs").value(field, json());
    const json vb = b.at("inputs").value(field, json());
    if (va != vb) {
      out["inputs_changed"].push_back({{"field", field}, {"a", text(va)}, {"b", text(vb)}});
    }
  }
  const auto idle = [](const json& r) {
    return number(r, "step_time_s") - number(r, "compute_s") - number(r, "exposed_comm_s");
  };
  const double idle_a = idle(a);
  const double idle_b = idle(b);
  out["metrics"] = json::array();
  for (const ReportFieldSpec& f : compared()) {
    out["metrics"].push_back(metric(f.compare, f.unit, number(a, f.key), number(b, f.key)));
    if (std::string_view(f.key) == "exposed_comm_s") {  // what neither compute nor it explains
      out["metrics"].push_back(metric("idle (bubble, waits)", "s", idle_a, idle_b));
    }
  }
  const double step_change = number(b, "step_time_s") - number(a, "step_time_s");
  out["step_change_s"] = step_change;
  std::vector<std::pair<std::string, double>> parts = {
      {"compute", number(b, "compute_s") - number(a, "compute_s")}, {"idle", idle_b - idle_a}};
  for (const auto& [kind, d] : b.at("exposed_comm_by_kind_s").items()) {
    parts.emplace_back("exposed " + kind,
                       d.get<double>() - a.at("exposed_comm_by_kind_s").value(kind, 0.0));
  }
  out["parts"] = ranked(parts, "part");
  std::vector<std::pair<std::string, double>> classes;
  for (const auto& [cls, d] : b.at("time_by_op_class_s").items()) {
    classes.emplace_back(cls, d.get<double>() - a.at("time_by_op_class_s").value(cls, 0.0));
  }
  out["op_classes"] = ranked(classes, "class");
  const json& top = out["parts"].front();
  const double share = step_change != 0.0 ? top["delta_s"].get<double>() / step_change : 0.0;
  out["verdict"] =
      std::fabs(step_change) < 1e-9
          ? std::string("the step did not move")
          : fmt::format("the step {} by {:.2f} ms ({:+.1f} %); the largest part of the change is "
                        "{} ({:+.2f} ms, {:.0f} % of it)",
                        step_change > 0 ? "grew" : "shrank", std::fabs(step_change) * 1e3,
                        100.0 * step_change / number(a, "step_time_s"),
                        top["part"].get<std::string>(), top["delta_s"].get<double>() * 1e3,
                        100.0 * share);
  return out;
}

}  // namespace meshsim::scenario
