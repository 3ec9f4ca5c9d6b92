#include "meshsim/studies/failures.h"

#include <fmt/format.h>

#include <limits>

#include "meshsim/sim/error.h"
#include "meshsim/sim/json_input.h"
#include "meshsim/topology/network.h"

namespace meshsim::studies {

namespace detail {
const std::vector<std::pair<std::string_view, std::string_view>>& embedded_failure_tables();
}  // namespace detail

namespace {

double non_negative(JsonObject& o, const std::string& key) {
  const double v = o.number(key);
  if (!(v >= 0)) {
    o.fail(key, fmt::format("expected a count of interruptions >= 0, got {}", v));
  }
  return v;
}

FailureCategory read_category(JsonObject o) {
  FailureCategory c;
  c.name = o.string("name");
  c.unit = o.choice<FailureUnit>("component");
  c.count = non_negative(o, "count");
  c.planned = opt(o, "planned", &JsonObject::boolean).value_or(false);
  c.source = o.string("source");
  o.finish();
  return c;
}

}  // namespace

int64_t ComponentCounts::of(FailureUnit u) const {
  switch (u) {
    case FailureUnit::kGpu:
      return gpus;
    case FailureUnit::kNode:
      return nodes;
    case FailureUnit::kSwitch:
      return switches;
    case FailureUnit::kJob:
      return 1;
  }
  return 0;
}

ComponentCounts count_components(const topology::ClusterSpec& cluster) {
  const topology::Network net = topology::Network::build(cluster);
  ComponentCounts c;
  c.gpus = cluster.device_count();
  c.nodes = cluster.nodes;
  for (size_t v = 0; v < net.num_vertices(); ++v) {
    switch (net.vertex(topology::VertexId(static_cast<uint32_t>(v))).kind) {
      case topology::VertexKind::kLeaf:
      case topology::VertexKind::kSpine:
      case topology::VertexKind::kCore:
      case topology::VertexKind::kDcn:
        ++c.switches;
        break;
      default:
        break;
    }
  }
  return c;
}

FailureTable FailureTable::parse(const nlohmann::json& doc, const std::string& source) {
  JsonObject o(doc, source);
  FailureTable t;
  t.source = source;
  o.ignore("notes");
  t.citation = o.string("source");
  {
    JsonObject w = o.object("observed");
    t.observed_days = w.positive_number("days");
    t.observed.gpus = w.positive_integer("gpus");
    t.observed.nodes = w.positive_integer("nodes");
    t.observed.switches = w.positive_integer("switches");
    t.observed_source = w.string("source");
    w.finish();
  }
  const std::vector<JsonObject> categories = o.object_array("categories");
  if (categories.empty()) {
    o.fail("categories", "expected at least one failure category");
  }
  for (const JsonObject& c : categories) {
    t.categories.push_back(read_category(c));
  }
  o.finish();
  return t;
}

FailureTable FailureTable::builtin() {
  for (const auto& [stem, text] : detail::embedded_failure_tables()) {
    if (stem == "failures-llama3") {
      return parse(nlohmann::json::parse(text), "builtin:studies/data/failures-llama3.json");
    }
  }
  throw InternalError("the builtin failure table is not compiled in");
}

FailureTable FailureTable::load(const std::string& path) {
  return parse(load_json_file(path), path);
}

double FailureRates::mtbf_s() const {
  return unexpected_per_day > 0 ? kSecondsPerDay / unexpected_per_day
                                : std::numeric_limits<double>::infinity();
}

FailureRates failure_rates(const FailureTable& table, const ComponentCounts& cluster) {
  FailureRates r;
  for (const FailureCategory& c : table.categories) {
    const double scale =
        static_cast<double>(cluster.of(c.unit)) / static_cast<double>(table.observed.of(c.unit));
    const double per_day = c.count / table.observed_days * scale;
    r.per_day.push_back(per_day);
    (c.planned ? r.planned_per_day : r.unexpected_per_day) += per_day;
  }
  return r;
}

}  // namespace meshsim::studies
