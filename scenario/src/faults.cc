#include "meshsim/scenario/faults.h"

#include <algorithm>

#include <fmt/format.h>

#include <cmath>
#include <map>

#include "meshsim/sim/error.h"
#include "meshsim/scenario/step_report.h"

namespace meshsim::scenario {

namespace {

// A rank or device index below topology::kMaxDevices, read from `key`.
uint32_t index_of(JsonObject& o, const std::string& key, const char* what) {
  const int64_t v = o.non_negative_integer(key);
  if (v >= topology::kMaxDevices) {
    o.fail(key, fmt::format("{} {} is past the {} {}s of the largest cluster meshsim simulates",
                            what, v, topology::kMaxDevices, what));
  }
  return static_cast<uint32_t>(v);
}

// A slowdown factor in (0, kMaxSlowdown], read from `key`.
double slowdown_of(JsonObject& o, const std::string& key) {
  const double v = o.positive_number(key);
  if (v > kMaxSlowdown) {
    o.fail(key, fmt::format("{} is above the limit of {} (a kernel at most 1000 x its time)", v,
                            kMaxSlowdown));
  }
  return v;
}

topology::LinkFault read_failed_link(JsonObject& l) {
  const DeviceId device(index_of(l, "device", "device"));
  topology::LinkFault fault =
      topology::LinkFault::failed(device, l.choice<topology::LinkKind>("link"));
  if (l.has("nic")) {
    fault.nic = l.non_negative_integer("nic");
  }
  if (l.has("spine")) {
    fault.spine = l.non_negative_integer("spine");
  }
  if (l.has("direction")) {
    const std::string d = l.string("direction");
    const auto dir = topology::parse_ici_link(d);
    if (!dir) {
      l.fail("direction", fmt::format("\"{}\": expected one of x+, x-, y+, y-, z+, z-", d));
    }
    fault.ici_axis = dir->first;
    fault.ici_direction = dir->second;
  }
  return fault;
}

void read_block(JsonObject& o, Faults& f) {
  if (auto seed = opt(o, "seed", &JsonObject::non_negative_integer)) {
    f.compute.seed = static_cast<uint64_t>(*seed);
  }
  if (o.has("slow_ranks")) {
    for (JsonObject& s : o.object_array("slow_ranks")) {
      const uint32_t rank = index_of(s, "rank", "rank");
      f.compute.slow_ranks.push_back({RankId(rank), slowdown_of(s, "factor")});
      f.slow_rank_origins.push_back(Origin::file(s.source(), s.pointer_of("rank")));
      s.finish();
    }
  }
  if (o.has("stragglers")) {
    JsonObject s = o.object("stragglers");
    StragglerDistribution& d = f.compute.stragglers;
    d.fraction = s.fraction("fraction");
    d.min_factor = slowdown_of(s, "min_factor");
    d.max_factor = slowdown_of(s, "max_factor");
    if (d.max_factor < d.min_factor) {
      s.fail("max_factor", fmt::format("{} is below min_factor {}", d.max_factor, d.min_factor));
    }
    s.finish();
  }
  if (o.has("kernel_jitter")) {
    const double cv = o.number("kernel_jitter");
    if (!(cv >= 0 && cv <= kMaxJitterCv)) {
      o.fail("kernel_jitter", fmt::format("{}: expected a coefficient of variation from 0 to {}, "
                                          "e.g. 0.03",
                                          cv, kMaxJitterCv));
    }
    f.compute.jitter_cv = cv;
  }
  if (o.has("degraded_links")) {
    for (JsonObject& l : o.object_array("degraded_links")) {
      const uint32_t device = index_of(l, "device", "device");
      const auto kind = l.choice<topology::LinkKind>("link");
      f.links.push_back(
          topology::LinkFault::degraded(DeviceId(device), kind, l.fraction("factor")));
      f.link_origins.push_back(Origin::file(l.source(), l.pointer_of("device")));
      l.finish();
    }
  }
  if (o.has("failed_links")) {
    for (JsonObject& l : o.object_array("failed_links")) {
      f.links.push_back(read_failed_link(l));
      f.link_origins.push_back(Origin::file(l.source(), l.pointer_of("device")));
      l.finish();
    }
  }
  o.finish();
}

}  // namespace

void read_faults(JsonObject& scenario, Faults& f) {
  if (!scenario.has("faults")) {
    scenario.ignore("faults");
    return;
  }
  JsonObject o = scenario.object("faults");
  read_block(o, f);
}

void check_faults(const Faults& f, int64_t world) {
  for (size_t i = 0; i < f.compute.slow_ranks.size(); ++i) {
    const RankId r = f.compute.slow_ranks[i].rank;
    if (static_cast<int64_t>(r.value()) >= world) {
      throw f.slow_rank_origins[i].error(
          fmt::format("rank {} is outside the run's {} ranks (0 to {})", r.value(), world,
                      world - 1));
    }
  }
  for (size_t i = 0; i < f.links.size(); ++i) {
    const DeviceId d = f.links[i].device;
    if (static_cast<int64_t>(d.value()) >= world) {
      throw f.link_origins[i].error(fmt::format(
          "device {} is outside the cluster's {} devices (0 to {})", d.value(), world, world - 1));
    }
  }
}

void apply_compute_faults(const Faults& f, const workloads::StepPlan& plan, Simulation& sim) {
  const std::vector<double> slowdown = f.compute.slowdowns(static_cast<size_t>(plan.world));
  for (size_t i = 0; i < plan.ranks.size(); ++i) {
    const double factor = slowdown[plan.ranks[i].global_rank.index()];
    if (factor != 1.0) {
      sim.set_compute_slowdown(RankId(static_cast<uint32_t>(i)), factor);
    }
  }
  if (f.compute.jitter_cv > 0) {
    sim.set_kernel_jitter(f.compute.jitter_cv, f.compute.seed);
  }
}

nlohmann::json faults_json(const Faults& f) {
  nlohmann::json j = nlohmann::json::object();
  j["seed"] = f.compute.seed;
  nlohmann::json slow = nlohmann::json::array();
  for (const SlowRank& s : f.compute.slow_ranks) {
    slow.push_back({{"rank", s.rank.value()}, {"factor", s.factor}});
  }
  j["slow_ranks"] = slow;
  const StragglerDistribution& d = f.compute.stragglers;
  if (d.fraction > 0) {
    j["stragglers"] = {
        {"fraction", d.fraction}, {"min_factor", d.min_factor}, {"max_factor", d.max_factor}};
  }
  j["kernel_jitter"] = f.compute.jitter_cv;
  nlohmann::json links = nlohmann::json::array();
  nlohmann::json failed = nlohmann::json::array();
  for (const topology::LinkFault& l : f.links) {
    if (!l.down()) {
      links.push_back(
          {{"device", l.device.value()}, {"link", to_string(l.kind)}, {"factor", l.factor}});
      continue;
    }
    nlohmann::json x = {{"device", l.device.value()}, {"link", to_string(l.kind)}};
    if (l.nic) {
      x["nic"] = *l.nic;
    }
    if (l.spine) {
      x["spine"] = *l.spine;
    }
    if (l.ici_axis) {
      x["direction"] = topology::ici_link_name(*l.ici_axis, l.ici_direction);
    }
    failed.push_back(x);
  }
  j["degraded_links"] = links;
  if (!failed.empty()) {
    j["failed_links"] = failed;
  }
  return j;
}

FaultEffect fault_effect(const Faults& f, const workloads::StepPlan& plan,
                         const std::vector<RankBreakdown>& ranks, Duration nominal_step) {
  FaultEffect e;
  e.nominal_step = nominal_step;
  const std::vector<double> slowdown = f.compute.slowdowns(static_cast<size_t>(plan.world));
  for (const double s : slowdown) {
    e.slow_ranks += s > 1.0 ? 1 : 0;
    e.max_slowdown = std::max(e.max_slowdown, s);
  }
  e.jitter = f.compute.jitter_cv > 0;
  for (const topology::LinkFault& l : f.links) {
    e.degraded_links += l.factor < 1.0 && !l.down() ? 1 : 0;
    e.failed_links += l.down() ? 1 : 0;
  }
  std::vector<Duration> compute;
  size_t busiest = 0;
  for (size_t i = 0; i < ranks.size(); ++i) {
    compute.push_back(ranks[i].compute);
    if (ranks[i].compute > ranks[busiest].compute) {
      busiest = i;
    }
  }
  if (!compute.empty()) {
    const auto middle = compute.begin() + static_cast<std::ptrdiff_t>(compute.size() / 2);
    std::nth_element(compute.begin(), middle, compute.end());
    e.median_compute = compute[compute.size() / 2];
    e.busiest_rank = plan.ranks[busiest].global_rank.value();
    e.busiest_stage = plan.ranks[busiest].stage;
    e.busiest_slowdown = slowdown[plan.ranks[busiest].global_rank.index()];
    e.busiest_compute = ranks[busiest].compute;
  }
  return e;
}

static nlohmann::json fault_effect_core_json(const FaultEffect& e, Duration step_time) {
  return {{"nominal_step_time_s", e.nominal_step.seconds()},
          {"step_growth", step_time / e.nominal_step - 1.0},
          {"slow_ranks", e.slow_ranks},
          {"max_slowdown", e.max_slowdown},
          {"kernel_jitter", e.jitter},
          {"degraded_links", e.degraded_links},
          {"switched_to_full_simulation", e.switched_to_full},
          {"busiest_rank",
           {{"rank", e.busiest_rank},
            {"stage", e.busiest_stage},
            {"slowdown", e.busiest_slowdown},
            {"compute_s", e.busiest_compute.seconds()}}},
          {"median_rank_compute_s", e.median_compute.seconds()}};
}

static void print_fault_summary(const FaultEffect& e, Duration step_time, std::ostream& out) {
  std::string what;
  if (e.slow_ranks > 0) {
    what = fmt::format("{} slow rank{}, up to x{:.2f}", e.slow_ranks, e.slow_ranks == 1 ? "" : "s",
                       e.max_slowdown);
  }
  if (e.jitter) {
    what += fmt::format("{}kernel jitter", what.empty() ? "" : "; ");
  }
  if (e.degraded_links > 0) {
    what += fmt::format("{}{} degraded link{}", what.empty() ? "" : "; ", e.degraded_links,
                        e.degraded_links == 1 ? "" : "s");
  }
  if (e.failed_links > 0) {
    what += fmt::format("{}{} link{} down, rerouted", what.empty() ? "" : "; ", e.failed_links,
                        e.failed_links == 1 ? "" : "s");
  }
  out << fmt::format("  faults                step {:+.1f} % over the fault-free {} ({})\n",
                     100.0 * (step_time / e.nominal_step - 1.0),
                     format_duration(e.nominal_step), what);
  out << fmt::format("                        the others wait on rank {} (stage {}{}): compute {} "
                     "vs {} for the median rank\n",
                     e.busiest_rank, e.busiest_stage,
                     e.busiest_slowdown != 1.0 ? fmt::format(", x{:.2f}", e.busiest_slowdown) : "",
                     format_duration(e.busiest_compute), format_duration(e.median_compute));
  if (e.switched_to_full) {
    out << "                        every rank simulated: the faults make ranks differ "
           "(representative mode is exact only on symmetric inputs)\n";
  }
}

nlohmann::json fault_effect_json(const FaultEffect& e, Duration step_time) {
  nlohmann::json j = fault_effect_core_json(e, step_time);
  if (e.failed_links > 0) {
    j["failed_links"] = e.failed_links;
    j["reroutes"] = e.reroutes;
  }
  return j;
}

void print_fault_effect(const FaultEffect& e, Duration step_time, std::ostream& out) {
  print_fault_summary(e, step_time, out);
  for (const std::string& r : e.reroutes) {
    out << fmt::format("                        {}\n", r);
  }
}

}  // namespace meshsim::scenario
