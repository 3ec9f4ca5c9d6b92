#include "scenario.h"

#include <fmt/format.h>

#include "meshsim/sim/json_input.h"
#include "meshsim/sim/unit_parse.h"

namespace meshsim::cli {

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
  return s;
}

namespace {

// Reads one plan field from the scenario file when present, recording its origin.
class PlanReader {
 public:
  PlanReader(JsonObject& o, ParallelPlan& p) : o_(o), p_(p) {}

  // `read(o, key)` gives the value; `store` puts it into the plan.
  template <typename Read, typename Store>
  void field(PlanField f, Read read, Store store) {
    const std::string key(to_string(f));
    o_.ignore(key);  // known even when absent (error messages list it)
    if (o_.has(key)) {
      store(read(key));
      p_.origins.set(f, Origin::file(o_.source(), o_.pointer_of(key)));
    }
  }
  template <typename T>
  void field(PlanField f, T ParallelPlan::*member, T (JsonObject::*getter)(const std::string&)) {
    field(
        f, [&](const std::string& k) { return (o_.*getter)(k); },
        [&](T v) { p_.*member = std::move(v); });
  }
  template <NamedEnum E>
  void choice(PlanField f, E ParallelPlan::*member) {
    field(
        f, [&](const std::string& k) { return o_.choice<E>(k); }, [&](E v) { p_.*member = v; });
  }

 private:
  JsonObject& o_;
  ParallelPlan& p_;
};

void read_plan(JsonObject& o, ParallelPlan& p) {
  using J = JsonObject;
  PlanReader r(o, p);
  r.field(PlanField::kDp, &ParallelPlan::dp, &J::positive_integer);
  r.field(
      PlanField::kZero, [&](const std::string& k) { return o.non_negative_integer(k); },
      [&](int64_t v) { p.zero = zero_stage(v, Origin::file(o.source(), o.pointer_of("zero"))); });
  r.field(PlanField::kTp, &ParallelPlan::tp, &J::positive_integer);
  r.field(PlanField::kSp, &ParallelPlan::sp, &J::boolean);
  r.field(PlanField::kCp, &ParallelPlan::cp, &J::positive_integer);
  r.field(PlanField::kPp, &ParallelPlan::pp, &J::positive_integer);
  r.field(PlanField::kVpp, &ParallelPlan::vpp, &J::positive_integer);
  r.choice(PlanField::kSchedule, &ParallelPlan::schedule);
  r.field(PlanField::kEp, &ParallelPlan::ep, &J::positive_integer);
  r.field(PlanField::kCapacityFactor, &ParallelPlan::capacity_factor, &J::positive_number);
  r.field(PlanField::kMbs, &ParallelPlan::mbs, &J::positive_integer);
  r.field(PlanField::kGbs, &ParallelPlan::gbs, &J::positive_integer);
  r.field(PlanField::kSeq, &ParallelPlan::seq, &J::positive_integer);
  r.choice(PlanField::kRecompute, &ParallelPlan::recompute);
  r.field(
      PlanField::kDtype, [&](const std::string& k) { return o.choice<Dtype>(k); },
      [&](Dtype d) { p.set_training_dtype(d); });
  r.choice(PlanField::kAttention, &ParallelPlan::attention);
  r.choice(PlanField::kKernels, &ParallelPlan::kernels);
  r.choice(PlanField::kOptimizerKernels, &ParallelPlan::optimizer_kernels);
  r.field(PlanField::kStageLayers, &ParallelPlan::stage_layers, &J::positive_integer_array);
  const auto overlap = [&](PlanField f, bool workloads::OverlapOptions::*member) {
    r.field(
        f, [&](const std::string& k) { return o.boolean(k); },
        [&](bool v) { p.overlap.*member = v; });
  };
  overlap(PlanField::kOverlapGradReduce, &workloads::OverlapOptions::grad_reduce);
  overlap(PlanField::kOverlapParamGather, &workloads::OverlapOptions::param_gather);
  overlap(PlanField::kOverlapP2p, &workloads::OverlapOptions::pipeline_p2p);
  overlap(PlanField::kOverlapTp, &workloads::OverlapOptions::tensor_parallel);
}

}  // namespace

bool scenario_file_names_workload(const std::string& path) {
  const nlohmann::json doc = load_json_file(path);
  return doc.is_object() && (doc.contains("model") || doc.contains("cluster"));
}

Scenario load_scenario(const std::string& path, Scenario s) {
  const nlohmann::json doc = load_json_file(path);
  JsonObject o(doc, path);
  if (auto v = opt(o, "model", &JsonObject::string)) {
    s.model = *v;
  }
  if (auto v = opt(o, "cluster", &JsonObject::string)) {
    s.cluster = *v;
  }
  if (auto v = opt(o, "nodes", &JsonObject::positive_integer)) {
    s.nodes = *v;
    s.size_origin = Origin::file(path, "/nodes");
  }
  if (auto v = opt(o, "shape", &JsonObject::string)) {
    s.shape = *v;
    s.size_origin = Origin::file(path, "/shape");
  }
  read_plan(o, s.plan);
  if (auto v = opt(o, "hardware_catalogue", &JsonObject::string)) {
    s.hardware_catalogue = *v;
  }
  read_fabric(o, s.fabric);
  o.finish();
  return s;
}

std::string flag_of(topology::FabricField field) {
  std::string flag = "--" + std::string(to_string(field));
  for (char& c : flag) {
    c = c == '_' ? '-' : c;
  }
  return flag;
}

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
      const Origin& at = k.origins[topology::FabricField::kNicBandwidth];
      throw (at.given() ? at : Origin::flag("--nic-bandwidth")).error(e.what());
    }
  }
  return f;
}

void complete(Scenario& s) {
  if (s.plan.origins[PlanField::kGbs].kind() == Origin::Kind::kDefault) {
    s.plan.gbs = s.plan.dp * s.plan.mbs;
  }
}

std::string flag_of(PlanField field) {
  switch (field) {
    case PlanField::kOverlapGradReduce:
      return "--no-overlap-grad-reduce";
    case PlanField::kOverlapParamGather:
      return "--no-overlap-param-gather";
    case PlanField::kOverlapP2p:
      return "--no-overlap-p2p";
    default:
      break;
  }
  std::string flag = "--" + std::string(to_string(field));
  for (char& c : flag) {
    c = c == '_' ? '-' : c;
  }
  return flag;
}

workloads::ZeroStage zero_stage(int64_t value, const Origin& where) {
  if (value < 0 || value > 3) {
    throw where.error(fmt::format("expected a ZeRO stage 0, 1, 2 or 3, got {}", value));
  }
  return static_cast<workloads::ZeroStage>(value);
}

Origin origin_of(const ParallelPlan& plan, PlanField field) {
  const Origin& o = plan.origins[field];
  return o.given() ? o : Origin::flag(flag_of(field));
}

InputError locate(const ParallelPlan& plan, const workloads::PlanError& e) {
  return origin_of(plan, e.field()).error(e.message());
}

}  // namespace meshsim::cli
