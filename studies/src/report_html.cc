// The sweep's HTML report (report_html.h): Vega specs built from the sweep's JSON, inlined with
// Debian's Vega modules into one page.
#include "meshsim/studies/report_html.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <fstream>
#include <sstream>

#include "meshsim/sim/error.h"

namespace meshsim::studies {
namespace {

using nlohmann::json;

// "gpus=64, model=llama3-8b"
std::string point_label(const json& point, bool skip_size) {
  std::string s;
  for (const auto& [field, value] : point.at("point").items()) {
    if (skip_size && (field == "gpus" || field == "nodes" || field == "shape")) {
      continue;
    }
    s += fmt::format("{}{}={}", s.empty() ? "" : ", ", field,
                     value.is_string() ? value.get<std::string>() : value.dump());
  }
  return s.empty() ? "all" : s;
}

const json* best_row(const json& point) {
  return point.at("rows").empty() ? nullptr : &point.at("rows").front();
}

// A chart's frame: size, data, scales, axes, legend.
json frame(const std::string& title, json values, int width = 640, int height = 280) {
  return {{"$schema", "https://vega.github.io/schema/vega/v5.json"},
          {"title", {{"text", title}, {"anchor", "start"}}},
          {"width", width},
          {"height", height},
          {"padding", 8},
          {"data", json::array({{{"name", "table"}, {"values", std::move(values)}}})}};
}

json color_scale(const std::string& field) {
  return {{"name", "color"},
          {"type", "ordinal"},
          {"range", "category"},
          {"domain", {{"data", "table"}, {"field", field}}}};
}

// Lines of y against x, one per series `s`, with a symbol at each point.
json line_chart(const std::string& title, json values, const std::string& x_title,
                const std::string& y_title, const std::string& y_format) {
  json c = frame(title, std::move(values));
  c["scales"] = json::array(
      {{{"name", "x"}, {"type", "linear"}, {"range", "width"}, {"nice", true}, {"zero", false},
        {"domain", {{"data", "table"}, {"field", "x"}}}},
       {{"name", "y"}, {"type", "linear"}, {"range", "height"}, {"nice", true}, {"zero", true},
        {"domain", {{"data", "table"}, {"field", "y"}}}},
       color_scale("s")});
  c["axes"] = json::array({{{"orient", "bottom"}, {"scale", "x"}, {"title", x_title}},
                           {{"orient", "left"}, {"scale", "y"}, {"title", y_title},
                            {"format", y_format}, {"grid", true}}});
  c["legends"] = json::array({{{"stroke", "color"}, {"title", "series"}}});
  const json xy = {{"x", {{"scale", "x"}, {"field", "x"}}},
                   {"y", {{"scale", "y"}, {"field", "y"}}}};
  json line_enter = xy;
  line_enter["stroke"] = {{"scale", "color"}, {"field", "s"}};
  line_enter["strokeWidth"] = {{"value", 2}};
  json dot_enter = xy;
  dot_enter["fill"] = {{"scale", "color"}, {"field", "s"}};
  dot_enter["size"] = {{"value", 50}};
  dot_enter["tooltip"] = {{"signal", "datum.tip"}};
  c["marks"] = json::array(
      {{{"type", "group"},
        {"from", {{"facet", {{"name", "series"}, {"data", "table"}, {"groupby", "s"}}}}},
        {"marks", json::array({{{"type", "line"},
                                {"from", {{"data", "series"}}},
                                {"encode", {{"enter", line_enter}}}}})}},
       {{"type", "symbol"}, {"from", {{"data", "table"}}}, {"encode", {{"enter", dot_enter}}}}});
  return c;
}

// Bars of x (a band), stacked by category `c` with value `y`.
json stacked_bars(const std::string& title, json values, const std::string& y_title,
                  const std::string& legend) {
  const auto bars = static_cast<int>(values.size());
  json c = frame(title, std::move(values), std::max(320, std::min(900, 40 * bars)), 300);
  c["data"][0]["transform"] = json::array(
      {{{"type", "stack"}, {"groupby", json::array({"x"})}, {"sort", {{"field", "order"}}},
        {"field", "y"}}});
  c["scales"] = json::array(
      {{{"name", "x"}, {"type", "band"}, {"range", "width"}, {"padding", 0.15},
        {"domain", {{"data", "table"}, {"field", "x"}}}},
       {{"name", "y"}, {"type", "linear"}, {"range", "height"}, {"nice", true}, {"zero", true},
        {"domain", {{"data", "table"}, {"field", "y1"}}}},
       color_scale("c")});
  c["axes"] = json::array(
      {{{"orient", "bottom"}, {"scale", "x"}, {"labelAngle", -30}, {"labelAlign", "right"},
        {"labelLimit", 260}},
       {{"orient", "left"}, {"scale", "y"}, {"title", y_title}, {"grid", true}}});
  c["legends"] = json::array({{{"fill", "color"}, {"title", legend}}});
  c["marks"] = json::array(
      {{{"type", "rect"},
        {"from", {{"data", "table"}}},
        {"encode",
         {{"enter",
           {{"x", {{"scale", "x"}, {"field", "x"}}},
            {"width", {{"scale", "x"}, {"band", 1}}},
            {"y", {{"scale", "y"}, {"field", "y0"}}},
            {"y2", {{"scale", "y"}, {"field", "y1"}}},
            {"fill", {{"scale", "color"}, {"field", "c"}}},
            {"tooltip", {{"signal", "datum.c + ': ' + format(datum.y, '.4~r')"}}}}}}}}});
  return c;
}

json scaling_values(const json& sweep, const std::string& field) {
  json values = json::array();
  for (const json& p : sweep.at("points")) {
    if (const json* row = best_row(p)) {
      const std::string s = point_label(p, true);
      values.push_back({{"x", row->at("devices")},
                        {"y", row->at(field)},
                        {"s", s},
                        {"tip", fmt::format("{}: {} devices, {}", s, row->at("devices").dump(),
                                            row->at("plan").get<std::string>())}});
    }
  }
  return values;
}

json breakdown_values(const json& sweep) {
  json values = json::array();
  constexpr std::array<std::pair<const char*, const char*>, 6> kParts = {
      {{"compute", "compute_s"},
       {"exposed TP", "exposed_tp_s"},
       {"exposed CP", "exposed_cp_s"},
       {"exposed DP", "exposed_dp_s"},
       {"exposed PP", "exposed_pp_s"},
       {"exposed EP", "exposed_ep_s"}}};
  for (const json& p : sweep.at("points")) {
    if (const json* row = best_row(p)) {
      const std::string x = point_label(p, false) + " | " + row->at("plan").get<std::string>();
      int order = 0;
      for (const auto& [name, key] : kParts) {
        values.push_back({{"x", x}, {"c", name}, {"y", row->at(key)}, {"order", order++}});
      }
      const double bubble =
          row->at("bubble_fraction").get<double>() * row->at("step_time_s").get<double>();
      values.push_back({{"x", x}, {"c", "bubble"}, {"y", bubble}, {"order", order}});
    }
  }
  return values;
}

json memory_values(const json& sweep) {
  json values = json::array();
  for (const json& p : sweep.at("points")) {
    const json* row = best_row(p);
    if (row == nullptr) {
      continue;
    }
    for (const json& st : row->at("stages")) {
      const std::string x = fmt::format("{} | stage {}", point_label(p, false),
                                        st.at("stage").get<int64_t>());
      int order = 0;
      for (const auto& [category, bytes] : st.at("peak_memory_breakdown_bytes").items()) {
        values.push_back({{"x", x},
                          {"c", category},
                          {"y", bytes.get<double>() / (1024.0 * 1024.0 * 1024.0)},
                          {"order", order++}});
      }
    }
  }
  return values;
}

// The memory chart with a dashed line over each bar at its chip's memory, inside the y scale.
json with_capacity(json chart, const json& sweep) {
  json caps = json::array();
  for (const json& p : sweep.at("points")) {
    const json* row = best_row(p);
    if (row == nullptr) {
      continue;
    }
    for (const json& st : row->at("stages")) {
      caps.push_back({{"x", fmt::format("{} | stage {}", point_label(p, false),
                                        st.at("stage").get<int64_t>())},
                      {"y", row->at("memory_capacity_bytes").get<double>() /
                                (1024.0 * 1024.0 * 1024.0)}});
    }
  }
  chart["data"].push_back({{"name", "capacity"}, {"values", caps}});
  chart["scales"][1]["domain"] = {
      {"fields", json::array({{{"data", "table"}, {"field", "y1"}},
                              {{"data", "capacity"}, {"field", "y"}}})}};
  chart["marks"].push_back(
      {{"type", "rule"},
       {"from", {{"data", "capacity"}}},
       {"encode",
        {{"enter",
          {{"x", {{"scale", "x"}, {"field", "x"}}},
           {"x2", {{"scale", "x"}, {"field", "x"}, {"band", 1}}},
           {"y", {{"scale", "y"}, {"field", "y"}}},
           {"stroke", {{"value", "#d62728"}}},
           {"strokeDash", {{"value", json::array({6, 4})}}},
           {"strokeWidth", {{"value", 2}}}}}}}});
  return chart;
}

json top_plan_values(const json& sweep) {
  json values = json::array();
  for (const json& p : sweep.at("points")) {
    int rank = 1;
    for (const json& row : p.at("rows")) {
      values.push_back({{"x", fmt::format("{} | #{} {}", point_label(p, false), rank++,
                                          row.at("plan").get<std::string>())},
                        {"c", "step time"},
                        {"y", row.at("step_time_s")},
                        {"order", 0}});
    }
  }
  return values;
}

std::string escape_html(const std::string& s) {
  std::string out;
  for (const char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

// `s` with every occurrence of `what` preceded by a backslash after its first character: "</"
// becomes "<\/", which a JSON string or a JavaScript string reads as the same text but which cannot
// end the <script> element around it.
std::string escape_after_first(const std::string& s, const std::string& what) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    out.push_back(s[i]);
    if (s.compare(i, what.size(), what) == 0) {
      out.push_back('\\');
    }
  }
  return out;
}

// JSON inside a <script> element.
std::string script_safe_json(const std::string& s) { return escape_after_first(s, "</"); }
// A library's code inside a <script> element: only "</script" could end it early (Vega's code has
// none; "</" alone also starts regular expressions there, so it stays as it is).
std::string script_safe_code(const std::string& s) { return escape_after_first(s, "</script"); }

// Debian's Vega modules in dependency order (each a UMD build that calls define(deps, factory)),
// with the module name vega-functions asks its selection helpers by.
constexpr std::array<std::pair<const char*, const char*>, 19> kVegaModules = {
    {{"vega-util", "vega-util"},
     {"vega-canvas", "vega-canvas"},
     {"vega-time", "vega-time"},
     {"vega-format", "vega-format"},
     {"vega-loader", "vega-loader"},
     {"vega-scale", "vega-scale"},
     {"vega-dataflow", "vega-dataflow"},
     {"vega-scenegraph", "vega-scenegraph"},
     {"vega-expression", "vega-expression"},
     {"vega-selection", "vega-selections"},
     {"vega-statistics", "vega-statistics"},
     {"vega-event-selector", "vega-event-selector"},
     {"vega-functions", "vega-functions"},
     {"vega-runtime", "vega-runtime"},
     {"vega-parser", "vega-parser"},
     {"vega-view", "vega-view"},
     {"vega-transforms", "vega-transforms"},
     {"vega-view-transforms", "vega-view-transforms"},
     {"vega-encode", "vega-encode"}}};

// An AMD loader for the modules above: each define() call stores its exports under the name set
// just before its script. Then the transforms Vega's own bundle registers.
constexpr const char* kAmdShim = R"(var meshsimVega = {};
var meshsimVegaName = null;
function define(deps, factory) {
  var exports = {};
  factory.apply(null, deps.map(function (d) {
    return d === "exports" ? exports : meshsimVega[d];
  }));
  meshsimVega[meshsimVegaName] = exports;
}
define.amd = true;
)";

constexpr const char* kRegister = R"(Object.assign(meshsimVega["vega-dataflow"].transforms,
  meshsimVega["vega-transforms"], meshsimVega["vega-view-transforms"], meshsimVega["vega-encode"]);
)";

void inline_vega(const HtmlOptions& o, std::ostream& out) {
  out << "<script>" << kAmdShim << "</script>\n";
  for (const auto& [file, name] : kVegaModules) {
    const std::string path = o.vega_dir + "/" + file + ".min.js";
    std::ifstream f(path, std::ios::binary);
    if (!f) {
      throw InputError(o.vega_dir, "",
                       fmt::format("cannot read {} (the report's plots need Debian's libjs-vega: "
                                   "apt-get install libjs-vega)",
                                   path));
    }
    std::stringstream js;
    js << f.rdbuf();
    out << "<script>meshsimVegaName = \"" << name << "\";</script>\n<script>"
        << script_safe_code(js.str()) << "</script>\n";
  }
  out << "<script>" << kRegister << "</script>\n";
}

constexpr const char* kStyle = R"(body { font-family: sans-serif; margin: 24px; color: #222; }
h1 { font-size: 22px; } h2 { font-size: 17px; margin-top: 28px; }
table { border-collapse: collapse; font-size: 13px; }
th, td { border: 1px solid #ccc; padding: 3px 8px; text-align: right; }
th { background: #f3f3f3; } td.l { text-align: left; }
p.note { font-size: 13px; color: #555; max-width: 900px; }
)";

void write_table(const json& sweep, std::ostream& out) {
  out << "<table><tr><th>point</th><th>rank</th><th>plan</th><th>step (s)</th>"
         "<th>tokens/s</th><th>MFU</th><th>peak memory (GiB)</th><th>headroom</th>"
         "<th>exposed tp/cp/dp/pp/ep (ms)</th><th>bubble</th></tr>\n";
  for (const json& p : sweep.at("points")) {
    int rank = 1;
    for (const json& r : p.at("rows")) {
      const auto ms = [&](const char* k) { return r.at(k).get<double>() * 1e3; };
      out << fmt::format(
          "<tr><td class=l>{}</td><td>{}</td><td class=l>{}</td><td>{:.3f}</td><td>{:.0f}</td>"
          "<td>{:.1f} %</td><td>{:.2f}</td><td>{:.1f} %</td><td>{:.0f}/{:.0f}/{:.0f}/{:.0f}/{:.0f}"
          "</td><td>{:.1f} %</td></tr>\n",
          escape_html(point_label(p, false)), rank++, escape_html(r.at("plan").get<std::string>()),
          r.at("step_time_s").get<double>(), r.at("tokens_per_s").get<double>(),
          100.0 * r.at("mfu").get<double>(),
          r.at("peak_memory_bytes").get<double>() / (1024.0 * 1024.0 * 1024.0),
          100.0 * r.at("headroom").get<double>(), ms("exposed_tp_s"), ms("exposed_cp_s"),
          ms("exposed_dp_s"), ms("exposed_pp_s"), ms("exposed_ep_s"),
          100.0 * r.at("bubble_fraction").get<double>());
    }
    if (p.contains("error")) {
      out << fmt::format("<tr><td class=l>{}</td><td colspan=9 class=l>{}</td></tr>\n",
                         escape_html(point_label(p, false)),
                         escape_html(p.at("error").get<std::string>()));
    }
  }
  out << "</table>\n";
}

}  // namespace

json sweep_charts(const json& sweep) {
  return {
      {"scaling_tokens", line_chart("Throughput against devices (each point's best plan)",
                                    scaling_values(sweep, "tokens_per_s"), "devices",
                                    "tokens per second", "~s")},
      {"scaling_mfu", line_chart("MFU against devices (each point's best plan)",
                                 scaling_values(sweep, "mfu"), "devices", "MFU", ".0%")},
      {"breakdown", stacked_bars("Step time of each point's best plan",
                                 breakdown_values(sweep), "seconds", "part")},
      {"memory", with_capacity(stacked_bars("Peak memory per pipeline stage of each point's "
                                            "best plan (dashed: the chip's memory)",
                                            memory_values(sweep), "GiB", "category"),
                               sweep)},
      {"top_plans", stacked_bars("Step time of the top plans", top_plan_values(sweep),
                                 "seconds", "")}};
}

void write_sweep_html(const json& sweep, const HtmlOptions& options, std::ostream& out) {
  const std::string title = sweep.at("title").get<std::string>();
  out << "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n<title>"
      << escape_html(title) << "</title>\n<style>" << kStyle << "</style>\n";
  inline_vega(options, out);
  out << "</head><body>\n<h1>" << escape_html(title) << "</h1>\n";
  out << "<p class=note>Written by meshsim sweep: every number comes from simulating the plan "
         "with the engine (representative mode). Exposed communication by kind is each kind's "
         "time not hidden by compute; kinds can overlap each other and the bubble, so the "
         "stacked parts may exceed the step time.</p>\n";
  const json charts = sweep_charts(sweep);
  const std::array<std::pair<const char*, const char*>, 5> kSections = {
      {{"scaling_tokens", "Scaling"},
       {"scaling_mfu", ""},
       {"breakdown", "Where the step goes"},
       {"memory", "Memory per stage"},
       {"top_plans", "Top plans side by side"}}};
  for (const auto& [name, heading] : kSections) {
    if (*heading != '\0') {
      out << "<h2>" << heading << "</h2>\n";
    }
    out << "<div id=\"" << name << "\" class=\"chart\"></div>\n";
  }
  write_table(sweep, out);
  out << "<script>\nvar meshsimCharts = " << script_safe_json(charts.dump()) << ";\n"
      << R"(var names = Object.keys(meshsimCharts);
var rendered = 0;
names.forEach(function (name) {
  var view = new meshsimVega["vega-view"].View(
      meshsimVega["vega-parser"].parse(meshsimCharts[name]),
      {renderer: "svg", container: "#" + name, hover: true});
  view.runAsync().then(function () {
    rendered += 1;
    document.body.setAttribute("data-rendered", String(rendered));
  }).catch(function (e) {
    document.getElementById(name).textContent = "plot failed: " + e;
  });
});
</script>
</body></html>
)";
}

}  // namespace meshsim::studies
