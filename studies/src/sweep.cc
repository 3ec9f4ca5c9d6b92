// Sweeps (sweep.h): the spec, the points, and their results as JSON and CSV.
#include "meshsim/studies/sweep.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <functional>
#include <map>

#include "meshsim/sim/error.h"
#include "meshsim/sim/json_input.h"
#include "meshsim/studies/plan_table.h"
#include "meshsim/scenario/step.h"

namespace meshsim::studies {

using scenario::apply_scenario_json;
using scenario::complete;
using scenario::default_scenario;
using scenario::load_cluster;
using scenario::Scenario;
using scenario::ScenarioError;
using scenario::ScenarioField;
using scenario::simulate_step;
using scenario::StepOptions;
using scenario::StepReport;

int64_t SweepSpec::points() const {
  int64_t n = 1;
  for (const std::vector<size_t>& d : dimensions) {
    n *= static_cast<int64_t>(axes[d.front()].values.size());
  }
  return n;
}

nlohmann::json SweepSpec::coordinates(int64_t i) const {
  nlohmann::json c = nlohmann::json::object();
  for (auto d = dimensions.rbegin(); d != dimensions.rend(); ++d) {
    const auto n = static_cast<int64_t>(axes[d->front()].values.size());
    for (const size_t a : *d) {
      c[axes[a].field] = axes[a].values[static_cast<size_t>(i % n)];
    }
    i /= n;
  }
  return c;
}

std::vector<int64_t> balanced_torus(int64_t chips, size_t dims) {
  std::vector<int64_t> best;
  std::vector<int64_t> cur;
  // Non-decreasing extents whose product is `chips`; the least largest extent wins, then the
  // least second-largest, and so on (the most cubic).
  const std::function<void(int64_t, int64_t)> walk = [&](int64_t left, int64_t from) {
    if (cur.size() + 1 == dims) {
      if (left >= from) {
        cur.push_back(left);
        std::vector<int64_t> desc(cur.rbegin(), cur.rend());
        std::vector<int64_t> best_desc(best.rbegin(), best.rend());
        if (best.empty() || desc < best_desc) {
          best = cur;
        }
        cur.pop_back();
      }
      return;
    }
    for (int64_t f = from; f <= left / f; ++f) {
      if (left % f == 0) {
        cur.push_back(f);
        walk(left / f, f);
        cur.pop_back();
      }
    }
  };
  if (dims == 0 || chips <= 0) {
    return {};
  }
  walk(chips, 1);
  std::reverse(best.begin(), best.end());  // largest first, as slice shapes are written
  return best;
}

namespace {

// The point's scenario: the base with each axis's value; "gpus" resizes the cluster.
struct PointScenario {
  Scenario scenario;
  std::vector<std::string> notes;
};

PointScenario point_scenario(const SweepSpec& spec, const nlohmann::json& coords) {
  PointScenario p{spec.base, {}};
  Scenario& s = p.scenario;
  std::optional<int64_t> gpus;
  for (const auto& [field, value] : coords.items()) {
    if (field == "gpus") {
      gpus = value.get<int64_t>();
    } else {
      s = apply_scenario_json(nlohmann::json{{field, value}}, spec.source, "/axes", std::move(s));
    }
  }
  if (gpus) {
    Scenario at_preset = s;
    at_preset.nodes.reset();
    at_preset.gpus.reset();
    const topology::ClusterSpec c = load_cluster(at_preset);
    if (c.scale_up == topology::ScaleUpFabric::kIciTorus) {
      // A TPU slice of that many chips: the most balanced torus of the preset's dimensions.
      const int64_t per_slice = *gpus / std::max<int64_t>(c.slices, 1);
      if (*gpus % std::max<int64_t>(c.slices, 1) != 0) {
        throw InputError(spec.source, "/axes/gpus",
                         fmt::format("{} chips do not split over the {} slices of {}", *gpus,
                                     c.slices, c.name));
      }
      const std::vector<int64_t> shape = balanced_torus(per_slice, c.torus_shape.size());
      std::string text;
      for (const int64_t e : shape) {
        text += fmt::format("{}{}", text.empty() ? "" : "x", e);
      }
      s.shape = text;
      s.nodes.reset();
      s.origins.set(ScenarioField::kShape, Origin::file(spec.source, "/axes/gpus"));
      p.notes.push_back(fmt::format("{} chips: a {} torus{}", *gpus, text,
                                    c.slices > 1 ? fmt::format(" x {} slices", c.slices) : ""));
      return p;
    }
    s.nodes.reset();
    s.gpus = *gpus;  // whole nodes, or part of one (topology::resize_devices)
    s.origins.set(ScenarioField::kGpus, Origin::file(spec.source, "/axes/gpus"));
  }
  return p;
}

// A given plan on a point of another size: DP fills the devices.
void fit_data_parallel(PointScenario& p) {
  workloads::ParallelPlan& plan = p.scenario.plan;
  const int64_t devices = load_cluster(p.scenario).device_count();
  const int64_t others = plan.tp * plan.cp * plan.pp;
  if (plan.world() != devices && devices % others == 0) {
    plan.dp = devices / others;
    p.notes.push_back(fmt::format("dp {} to fill the {} devices", plan.dp, devices));
  }
  complete(p.scenario);
}

nlohmann::json plan_row(const PlanRow& row) {
  nlohmann::json j = row_json(row);
  j["model_description"] = row.report.model_description;
  j["cluster_description"] = row.report.cluster_description;
  j["stages"] = scenario::stages_json(row.report);
  return j;
}

nlohmann::json run_point(const SweepSpec& spec, int64_t index, const StepOptions& step) {
  nlohmann::json point = {{"index", index},
                          {"point", spec.coordinates(index)},
                          {"rows", nlohmann::json::array()},
                          {"notes", nlohmann::json::array()}};
  try {
    PointScenario p = point_scenario(spec, point["point"]);
    if (spec.search) {
      SearchOptions o = spec.search_options;
      o.step = step;
      const SearchResult r = search_plans(p.scenario, o);
      for (const RankedPlan& rp : r.top) {
        point["rows"].push_back(plan_row({rp.plan, rp.report, rp.lower_bound, std::nullopt}));
      }
      point["search"] = search_counts_json(r);
      if (r.top.empty()) {
        point["error"] = no_plan_reason(r);
      }
    } else {
      fit_data_parallel(p);
      const StepReport r = simulate_step(p.scenario, step);
      point["rows"].push_back(plan_row({p.scenario.plan, r, std::nullopt, std::nullopt}));
      if (r.oom) {
        point["error"] = "out of memory: " + r.oom_stage;
      }
    }
    point["notes"] = p.notes;
  } catch (const workloads::PlanError& e) {
    point["error"] = e.what();
  } catch (const ScenarioError& e) {
    point["error"] = e.what();
  } catch (const InputError& e) {
    point["error"] = e.what();
  } catch (const InfeasibleError& e) {
    point["error"] = e.what();
  }
  return point;
}

SearchOptions read_search(JsonObject o) {
  SearchOptions s;
  s.top = 3;
  s.max_simulations = 12;
  const auto at_most = [&o](const char* key, int64_t v, int64_t most) {
    if (v > most) {
      o.fail(key, fmt::format("{} is above the limit of {}", v, most));
    }
    return v;
  };
  if (auto v = opt(o, "top", &JsonObject::positive_integer)) {
    s.top = at_most("top", *v, kMaxTop);
  }
  if (auto v = opt(o, "max_simulations", &JsonObject::non_negative_integer)) {
    s.max_simulations = at_most("max_simulations", *v, kMaxSimulations);
  }
  if (o.has("objective")) {
    s.objective = o.choice<Objective>("objective");
  }
  if (auto v = opt(o, "max_tp", &JsonObject::positive_integer)) {
    s.max_tp = *v;
  }
  if (auto v = opt(o, "min_headroom", &JsonObject::number)) {
    if (*v < 0.0 || *v >= 1.0) {
      o.fail("min_headroom", fmt::format("expected a fraction of memory in [0, 1), got {}", *v));
    }
    s.min_headroom = *v;
  }
  o.finish();
  return s;
}

std::vector<SweepAxis> read_axes(JsonObject& o, const SweepSpec& spec) {
  const nlohmann::json& axes = o.raw("axes");
  JsonObject a(axes, spec.source, o.pointer_of("axes"));
  std::vector<SweepAxis> out;
  for (const auto& [field, values] : axes.items()) {
    a.ignore(field);
    if (!values.is_array() || values.empty()) {
      a.fail(field, fmt::format("expected a non-empty array of values, got {}",
                                describe_json(values)));
    }
    if (values.size() > static_cast<size_t>(kMaxSweepPoints)) {
      a.fail(field, fmt::format("{} values, more than the {} points (2^16) a sweep runs",
                                values.size(), kMaxSweepPoints));
    }
    SweepAxis axis{field, {}};
    for (const nlohmann::json& v : values) {
      // Each value must be one the scenario accepts (checked now, named by the spec's pointer).
      if (field == "gpus") {
        if (!v.is_number_integer() || v.get<int64_t>() <= 0) {
          a.fail(field, fmt::format("expected positive device counts, got {}", describe_json(v)));
        }
      } else {
        apply_scenario_json(nlohmann::json{{field, v}}, spec.source, "/axes", spec.base);
      }
      axis.values.push_back(v);
    }
    out.push_back(std::move(axis));
  }
  if (out.empty()) {
    o.fail("axes", "expected at least one axis, e.g. {\"gpus\": [64, 128, 256]}");
  }
  return out;
}

// The dimensions: each "zip" group (axes of equal length that advance together) and every other
// axis alone, ordered by their first axis. InputError naming /zip on an unknown or repeated axis
// or unequal lengths.
std::vector<std::vector<size_t>> read_zip(JsonObject& o, const std::string& source,
                                          const std::vector<SweepAxis>& axes) {
  // An element of the zip array, at its JSON pointer.
  const auto fail_at = [&](const std::string& at, const std::string& message) {
    throw InputError(source, o.pointer_of("zip") + at, message);
  };
  std::vector<int> group_of(axes.size(), -1);
  std::vector<std::vector<size_t>> groups;
  if (o.has("zip")) {
    const nlohmann::json& zip = o.raw("zip");
    if (!zip.is_array()) {
      o.fail("zip", fmt::format("expected an array of axis groups, e.g. [[\"cluster\", "
                                "\"gpus\"]], got {}",
                                describe_json(zip)));
    }
    for (size_t g = 0; g < zip.size(); ++g) {
      const std::string at = fmt::format("/{}", g);
      if (!zip[g].is_array() || zip[g].size() < 2) {
        fail_at(at, fmt::format("expected an array of two or more axis names, got {}",
                               describe_json(zip[g])));
      }
      std::vector<size_t> group;
      for (size_t k = 0; k < zip[g].size(); ++k) {
        const nlohmann::json& name = zip[g][k];
        const auto it = std::find_if(axes.begin(), axes.end(), [&](const SweepAxis& a) {
          return name.is_string() && a.field == name.get<std::string>();
        });
        if (it == axes.end()) {
          fail_at(fmt::format("{}/{}", at, k),
                  fmt::format("expected the name of an axis, got {}", describe_json(name)));
        }
        const auto a = static_cast<size_t>(it - axes.begin());
        if (group_of[a] >= 0) {
          fail_at(fmt::format("{}/{}", at, k),
                  fmt::format("axis \"{}\" is zipped twice", it->field));
        }
        if (it->values.size() != axes[group.empty() ? a : group.front()].values.size()) {
          fail_at(fmt::format("{}/{}", at, k),
                  fmt::format("zipped axes advance together, so they need as many values: \"{}\" "
                              "has {}, \"{}\" {}",
                             it->field, it->values.size(), axes[group.front()].field,
                             axes[group.front()].values.size()));
        }
        group_of[a] = static_cast<int>(g);
        group.push_back(a);
      }
      std::sort(group.begin(), group.end());
      groups.push_back(std::move(group));
    }
  } else {
    o.ignore("zip");
  }
  for (size_t a = 0; a < axes.size(); ++a) {
    if (group_of[a] < 0) {
      groups.push_back({a});
    }
  }
  std::sort(groups.begin(), groups.end());
  return groups;
}

// The dimensions' lengths multiplied, at most kMaxSweepPoints; InputError at /axes otherwise.
void check_points(const JsonObject& o, const SweepSpec& spec) {
  int64_t n = 1;
  std::vector<std::string> lengths;
  for (const std::vector<size_t>& d : spec.dimensions) {
    const SweepAxis& a = spec.axes[d.front()];
    lengths.push_back(fmt::format("{} {}", a.values.size(), a.field));
    n = std::min(n * static_cast<int64_t>(a.values.size()), kMaxSweepPoints + 1);
  }
  if (n > kMaxSweepPoints) {
    o.fail("axes", fmt::format("{} is more than {} points (2^16), the most a sweep runs",
                               fmt::join(lengths, " x "), kMaxSweepPoints));
  }
}

}  // namespace

SweepSpec load_sweep_spec(const std::string& path) {
  const nlohmann::json doc = load_json_file(path);
  JsonObject o(doc, path);
  SweepSpec spec;
  spec.source = path;
  spec.base = default_scenario();
  if (o.has("base")) {
    const nlohmann::json& base = o.raw("base");
    const bool names = base.is_object() && (base.contains("model") || base.contains("cluster"));
    spec.base = apply_scenario_json(base, path, o.pointer_of("base"),
                                    names ? Scenario{} : default_scenario());
  } else {
    o.ignore("base");
  }
  spec.axes = read_axes(o, spec);
  spec.dimensions = read_zip(o, path, spec.axes);
  check_points(o, spec);
  if (o.has("plans")) {
    spec.search = o.one_of("plans", {"search", "given"}) == "search";
  } else {
    o.ignore("plans");
  }
  const nlohmann::json no_search = nlohmann::json::object();
  spec.search_options =
      read_search(o.has("search") ? o.object("search") : JsonObject(no_search, path, "/search"));
  if (auto t = opt(o, "title", &JsonObject::string)) {
    spec.title = *t;
  }
  o.finish();
  return spec;
}

std::string run_sweep(const SweepSpec& spec, const SweepPart& part, const StepOptions& step,
                      const SweepProgress& progress) {
  SIM_CHECK(part.count > 0 && part.index >= 0 && part.index < part.count, "sweep part {} of {}",
            part.index, part.count);
  nlohmann::json out = nlohmann::json::array();
  const int64_t n = spec.points();
  for (int64_t i = part.index; i < n; i += part.count) {
    out.push_back(run_point(spec, i, step));
    if (progress) {
      progress(i + 1, n);
    }
  }
  return out.dump();
}

nlohmann::json merge_sweep(const SweepSpec& spec, const std::vector<std::string>& parts) {
  std::map<int64_t, nlohmann::json> points;
  for (const std::string& text : parts) {
    for (nlohmann::json& p : nlohmann::json::parse(text)) {
      const int64_t i = p.at("index").get<int64_t>();
      SIM_CHECK(points.emplace(i, std::move(p)).second, "sweep point {} came twice", i);
    }
  }
  SIM_CHECK(static_cast<int64_t>(points.size()) == spec.points(), "{} of {} sweep points",
            points.size(), spec.points());
  nlohmann::json axes = nlohmann::json::object();
  for (const SweepAxis& a : spec.axes) {
    axes[a.field] = a.values;
  }
  nlohmann::json out = {{"title", spec.title},
                        {"axes", axes},
                        {"plans", spec.search ? "search" : "given"},
                        {"points", nlohmann::json::array()}};
  for (auto& [i, p] : points) {
    out["points"].push_back(std::move(p));
  }
  return out;
}

void write_sweep_csv(const nlohmann::json& sweep, std::ostream& out) {
  std::vector<std::string> axes;
  for (const auto& [field, values] : sweep.at("axes").items()) {
    axes.push_back(field);
  }
  const char* sep = "";
  for (const std::string& a : axes) {
    out << sep << a;
    sep = ",";
  }
  out << sep << "rank";
  for (const std::string& c : row_columns()) {
    out << "," << c;
  }
  out << ",error\n";
  for (const nlohmann::json& p : sweep.at("points")) {
    const auto line = [&](const nlohmann::json* row, int64_t rank) {
      sep = "";
      for (const std::string& a : axes) {
        out << sep << csv_cell(p.at("point").at(a));
        sep = ",";
      }
      out << sep << (row != nullptr ? std::to_string(rank) : "");
      for (const std::string& c : row_columns()) {
        out << "," << (row != nullptr ? csv_cell(row->at(c)) : "");
      }
      out << "," << csv_cell(p.value("error", nlohmann::json())) << "\n";
    };
    int64_t rank = 1;
    for (const nlohmann::json& row : p.at("rows")) {
      line(&row, rank++);
    }
    if (p.at("rows").empty()) {
      line(nullptr, 0);
    }
  }
}

}  // namespace meshsim::studies
