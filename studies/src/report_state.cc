#include "report_state.h"

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
            {"model_description", r.model_description},
            {"cluster_description", r.cluster_description},
            {"plan_description", r.plan_description},
            {"devices", r.devices},
            {"parameters", r.parameters},
            {"chip", r.chip},
            {"model_flops_per_token", r.model_flops_per_token.count()},
            {"simulated", r.simulated},
            {"step_time", r.step_time.ps()},
            {"tokens_per_step", r.tokens_per_step},
            {"tokens_per_s", r.tokens_per_s},
            {"tokens_per_s_per_device", r.tokens_per_s_per_device},
            {"mfu", r.mfu},
            {"hfu", r.hfu},
            {"peak_per_device", r.peak_per_device.value()},
            {"peak_dtype", static_cast<int>(r.peak_dtype)},
            {"compute", r.compute.ps()},
            {"exposed_comm", r.exposed_comm.ps()},
            {"bubble_fraction", r.bubble_fraction},
            {"peak_memory", r.peak_memory.count()},
            {"peak_breakdown", memory(r.peak_breakdown)},
            {"memory_capacity", r.memory_capacity.count()},
            {"oom", r.oom},
            {"oom_stage", r.oom_stage},
            {"caveats", r.caveats},
            {"simulation_mode", r.simulation_mode},
            {"simulated_ranks", r.simulated_ranks},
            {"events", r.events}};
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
  r.model_description = j.at("model_description");
  r.cluster_description = j.at("cluster_description");
  r.plan_description = j.at("plan_description");
  r.devices = j.at("devices");
  r.parameters = j.at("parameters");
  r.chip = j.at("chip");
  r.model_flops_per_token = Flops::of(j.at("model_flops_per_token").get<double>());
  r.simulated = j.at("simulated");
  r.step_time = ps(j.at("step_time"));
  r.tokens_per_step = j.at("tokens_per_step");
  r.tokens_per_s = j.at("tokens_per_s");
  r.tokens_per_s_per_device = j.at("tokens_per_s_per_device");
  r.mfu = j.at("mfu");
  r.hfu = j.at("hfu");
  r.peak_per_device = FlopsPerSec::of(j.at("peak_per_device").get<double>());
  r.peak_dtype = static_cast<Dtype>(j.at("peak_dtype").get<int>());
  r.compute = ps(j.at("compute"));
  r.exposed_comm = ps(j.at("exposed_comm"));
  r.bubble_fraction = j.at("bubble_fraction");
  r.peak_memory = Bytes::of(j.at("peak_memory").get<int64_t>());
  r.peak_breakdown = memory_from(j.at("peak_breakdown"));
  r.memory_capacity = Bytes::of(j.at("memory_capacity").get<int64_t>());
  r.oom = j.at("oom");
  r.oom_stage = j.at("oom_stage");
  r.caveats = j.at("caveats").get<std::vector<std::string>>();
  r.simulation_mode = j.at("simulation_mode");
  r.simulated_ranks = j.at("simulated_ranks");
  r.events = j.at("events");
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
