#include "meshsim/scenario/scenario.h"

#include <fmt/format.h>

#include "meshsim/scenario/plan_fields.h"
#include "meshsim/sim/json_input.h"
#include "meshsim/sim/unit_parse.h"

namespace meshsim::scenario {

using workloads::ParallelPlan;
using workloads::PlanField;

workloads::ParallelPlan Scenario::neutral_plan() {
  ParallelPlan p;
  p.seq = 4096;
  return p;
}

Scenario default_scenario() {
  Scenario s;
  s.model = "llama3-70b";
  s.cluster = "dgx-h100";
  s.nodes = 256;
  ParallelPlan& p = s.plan;
  p.tp = 8;
  p.sp = true;
  p.pp = 4;
  p.vpp = 5;
  p.schedule = workloads::PipelineSchedule::kInterleaved;
  p.dp = 64;
  p.zero = workloads::ZeroStage::kOptimizerStates;
  p.mbs = 1;
  p.gbs = 512;
  p.seq = 8192;
  p.origins.set_all(Origin::preset("the default scenario"));
  s.origins.set_all(Origin::preset("the default scenario"));
  return s;
}

namespace {

// Reads the fabric keys of a scenario file into `k`, with their origins.
void read_fabric(JsonObject& o, FabricKnobs& k) {
  using F = topology::FabricField;
  auto read = [&o, &k](F f, auto& slot, auto get) {
    const std::string key(to_string(f));
    if (o.has(key)) {
      slot = get(key);
      k.origins.set(f, Origin::file(o.source(), o.pointer_of(key)));
    }
  };
  read(F::kOversubscription, k.oversubscription,
       [&o](const auto& key) { return o.positive_number(key); });
  read(F::kTiers, k.tiers, [&o](const auto& key) { return o.positive_integer(key); });
  read(F::kRailOptimized, k.rail_optimized, [&o](const auto& key) { return o.boolean(key); });
  read(F::kNicsPerDevice, k.nics_per_device,
       [&o](const auto& key) { return o.positive_integer(key); });
  read(F::kNicBandwidth, k.nic_bandwidth, [&o](const auto& key) { return o.string(key); });
  read(F::kSharp, k.sharp, [&o](const auto& key) { return o.boolean(key); });
}

}  // namespace

topology::FabricOverrides fabric_overrides(const FabricKnobs& k) {
  topology::FabricOverrides f;
  f.oversubscription = k.oversubscription;
  f.tiers = k.tiers;
  f.rail_optimized = k.rail_optimized;
  f.nics_per_device = k.nics_per_device;
  f.sharp = k.sharp;
  if (k.nic_bandwidth) {
    try {
      f.nic_bandwidth = parse_bandwidth(*k.nic_bandwidth);
    } catch (const UnitParseError& e) {
      throw topology::FabricError(topology::FabricField::kNicBandwidth, e.what());
    }
  }
  return f;
}

bool scenario_file_names_workload(const std::string& path) {
  const nlohmann::json doc = load_json_file(path);
  return doc.is_object() && (doc.contains("model") || doc.contains("cluster"));
}

Scenario apply_scenario_json(const nlohmann::json& doc, const std::string& source,
                             const std::string& pointer, Scenario s) {
  JsonObject o(doc, source, pointer);
  const auto field = [&](ScenarioField f, auto getter, auto store) {
    const std::string key(to_string(f));
    if (auto v = opt(o, key, getter)) {
      store(*v);
      s.origins.set(f, Origin::file(o.source(), o.pointer_of(key)));
    }
  };
  field(ScenarioField::kModel, &JsonObject::string, [&](std::string v) { s.model = v; });
  field(ScenarioField::kCluster, &JsonObject::string, [&](std::string v) { s.cluster = v; });
  field(ScenarioField::kNodes, &JsonObject::positive_integer, [&](int64_t v) { s.nodes = v; });
  field(ScenarioField::kGpus, &JsonObject::positive_integer, [&](int64_t v) { s.gpus = v; });
  field(ScenarioField::kShape, &JsonObject::string, [&](std::string v) { s.shape = v; });
  field(ScenarioField::kSlices, &JsonObject::positive_integer, [&](int64_t v) { s.slices = v; });
  field(ScenarioField::kDcnDp, &JsonObject::positive_integer, [&](int64_t v) { s.dcn_dp = v; });
  read_plan_fields(o, s.plan);
  field(ScenarioField::kHardwareCatalogue, &JsonObject::string,
        [&](std::string v) { s.hardware_catalogue = v; });
  read_fabric(o, s.fabric);
  read_faults(o, s.faults);
  o.finish();
  return s;
}

Scenario load_scenario(const std::string& path, Scenario s) {
  return apply_scenario_json(load_json_file(path), path, "", std::move(s));
}

namespace {

// MaxText's dcn_data_parallelism K with --dp the total: shard groups of dp / K ranks (ici_fsdp),
// K replicas of each (across slices when K is the number of slices).
void apply_dcn_dp(Scenario& s) {
  const int64_t k = *s.dcn_dp;
  ParallelPlan& p = s.plan;
  if (k <= 0 || p.dp % k != 0) {
    throw ScenarioError(ScenarioField::kDcnDp,
                        fmt::format("expected a positive divisor of dp ({}), got {}", p.dp, k));
  }
  const int64_t shard = p.dp / k;
  if (p.origins[PlanField::kFsdp].given() && p.fsdp != shard) {
    throw ScenarioError(ScenarioField::kDcnDp,
                        fmt::format("dcn_dp {} makes shard groups of dp / dcn_dp = {} / {} = {} "
                                    "ranks, but fsdp {} is given too (expected them to agree)",
                                    k, p.dp, k, shard, p.fsdp));
  }
  p.fsdp = shard;
  p.origins.set(PlanField::kFsdp, s.origins[ScenarioField::kDcnDp]);
}

}  // namespace

void complete(Scenario& s) {
  if (s.plan.origins[PlanField::kGbs].kind() == Origin::Kind::kDefault) {
    s.plan.gbs = s.plan.dp * s.plan.mbs;
  }
  if (s.dcn_dp) {
    apply_dcn_dp(s);
  }
}

workloads::ZeroStage zero_stage(int64_t value, const Origin& where) {
  if (value < 0 || value > 3) {
    throw where.error(fmt::format("expected a ZeRO stage 0, 1, 2 or 3, got {}", value));
  }
  return static_cast<workloads::ZeroStage>(value);
}


std::vector<int64_t> parse_shape(const std::string& text) {
  std::vector<int64_t> dims;
  std::string_view rest = text;
  do {
    const size_t x = rest.find('x');
    const std::string part(rest.substr(0, x));
    const int64_t v = parse_integer(part).value_or(0);
    if (v <= 0) {
      throw ScenarioError(ScenarioField::kShape,
                          fmt::format("\"{}\": expected positive extents joined by 'x', e.g. "
                                      "8x16x16",
                                      text));
    }
    dims.push_back(v);
    rest = x == std::string_view::npos ? std::string_view{} : rest.substr(x + 1);
  } while (!rest.empty());
  return dims;
}

namespace {

// `resize(c)`, with the cluster's complaints about its own new size (an InputError on the cluster's
// file: too many devices, a slice that does not fill its hosts) turned into a ScenarioError on
// `field`, which the edge locates at the flag or scenario key that asked for the size.
template <typename F>
topology::ClusterSpec resized(topology::ClusterSpec c, ScenarioField field, F&& resize) {
  const std::string cluster_source = c.source;
  try {
    return resize(std::move(c));
  } catch (const InputError& e) {
    if (e.source() != cluster_source) {
      throw;
    }
    throw ScenarioError(field, e.message());
  }
}

}  // namespace

topology::ClusterSpec load_cluster(const Scenario& s) {
  const topology::Catalogue catalogue = s.hardware_catalogue
                                            ? topology::Catalogue::load(*s.hardware_catalogue)
                                            : topology::Catalogue::builtin();
  topology::ClusterSpec c = topology::load_cluster(s.cluster, catalogue);
  const topology::FabricOverrides fabric = fabric_overrides(s.fabric);
  const bool torus = c.scale_up == topology::ScaleUpFabric::kIciTorus;
  if (s.nodes && s.shape) {
    throw ScenarioError(ScenarioField::kShape,
                        "a cluster is resized by its nodes (GPU clusters) or by its torus shape "
                        "(TPU slices), not both");
  }
  if (s.gpus && (s.nodes || s.shape)) {
    throw ScenarioError(ScenarioField::kGpus,
                        fmt::format("a cluster is resized by one of gpus, nodes and shape; got "
                                    "gpus and {}",
                                    s.nodes ? "nodes" : "shape"));
  }
  if (s.gpus) {
    // topology::resize_devices refuses a TPU slice and a count neither whole nodes nor part of one.
    c = resized(std::move(c), ScenarioField::kGpus, [&](topology::ClusterSpec spec) {
      return topology::resize_devices(std::move(spec), *s.gpus, fabric);
    });
  }
  if (s.nodes) {
    if (torus) {
      throw ScenarioError(ScenarioField::kNodes,
                          fmt::format("{} is a TPU slice, sized by its torus shape (e.g. "
                                      "8x16x16), not by a number of nodes",
                                      c.name));
    }
    if (*s.nodes <= 0) {
      throw ScenarioError(ScenarioField::kNodes,
                          fmt::format("expected a positive integer, got {}", *s.nodes));
    }
    c = resized(std::move(c), ScenarioField::kNodes, [&](topology::ClusterSpec spec) {
      return topology::resize_nodes(std::move(spec), *s.nodes, fabric);
    });
  }
  if (s.shape) {
    if (!torus) {
      throw ScenarioError(ScenarioField::kShape,
                          fmt::format("{} is a GPU cluster, sized by its number of nodes; a torus "
                                      "shape applies to TPU slices",
                                      c.name));
    }
    std::vector<int64_t> shape = parse_shape(*s.shape);
    c = resized(std::move(c), ScenarioField::kShape, [&](topology::ClusterSpec spec) {
      return topology::resize_torus(std::move(spec), std::move(shape));
    });
  }
  if (s.slices) {
    if (!torus || *s.slices <= 0) {
      throw ScenarioError(ScenarioField::kSlices,
                          torus ? fmt::format("expected a positive integer, got {}", *s.slices)
                                : fmt::format("{} is a GPU cluster; slices joined by DCN apply to "
                                              "TPU clusters",
                                              c.name));
    }
    c = topology::join_slices(std::move(c), *s.slices);
  }
  return topology::override_fabric(std::move(c), fabric);
}

std::vector<std::string> recompute_module_names(const workloads::ParallelPlan& p) {
  std::vector<std::string> names;
  for (const workloads::RecomputeModule m : p.recompute_modules) {
    names.emplace_back(to_string(m));
  }
  return names;
}

nlohmann::json scenario_json(const Scenario& s, const topology::ClusterSpec& cluster) {
  nlohmann::json j = {{"model", s.model},
                      {"cluster", s.cluster},
                      {"nodes", cluster.nodes},
                      {"devices", cluster.device_count()}};
  write_plan_fields(s.plan, j);
  if (!cluster.torus_shape.empty()) {
    j["shape"] = cluster.torus_shape;
  }
  if (cluster.slices > 1) {  // echoed only when set
    j["slices"] = cluster.slices;
  }
  if (s.dcn_dp) {
    j["dcn_dp"] = *s.dcn_dp;
  }
  if (!s.faults.empty()) {
    j["faults"] = faults_json(s.faults);
  }
  return j;
}

}  // namespace meshsim::scenario
