#include "manifest.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <filesystem>

#include "meshsim/sim/error.h"
#include "meshsim/sim/json_input.h"
#include "meshsim/workloads/step.h"
#include "plan_loader.h"
#include "run_command.h"

namespace meshsim::cli {
namespace {

namespace fs = std::filesystem;

// A single-device step communicates with no one.
class NoCommunication : public CommCostModel {
 public:
  Duration collective_time(CollectiveKind kind, Bytes, std::span<const RankId>) override {
    SIM_CHECK(false, "a single-device validation step has no {}", to_string(kind));
    return Duration{};
  }
  Duration p2p_time(RankId, RankId, Bytes) override {
    SIM_CHECK(false, "a single-device validation step has no send or receive");
    return Duration{};
  }
};

void read_execution(JsonObject& root, Manifest& m) {
  if (!root.has("execution")) {
    root.fail("execution",
              "missing: how the step ran ({\"kernels\": \"eager\"|\"fused\", \"attention\": "
              "\"naive\"|\"flash\", \"optimizer_kernels\": \"per-tensor\"|\"foreach\"|\"fused\"}); "
              "the reference trainers write it");
  }
  JsonObject ex = root.object("execution");
  m.kernels = ex.one_of("kernels", enum_choices<workloads::Kernels>());
  m.attention = ex.one_of("attention", enum_choices<workloads::AttentionKernel>());
  m.optimizer_kernels =
      ex.one_of("optimizer_kernels", enum_choices<workloads::OptimizerKernels>());
  ex.finish();
}

void read_mesh(JsonObject& root, const std::string& path) {
  JsonObject mesh = root.object("mesh");
  mesh.allow_unknown();
  int64_t devices = 1;
  for (const char* axis : {"data", "fsdp", "tensor"}) {
    if (mesh.has(axis)) {
      devices *= mesh.positive_integer(axis);
    }
  }
  if (devices != 1) {
    throw InputError(path, "/mesh",
                     fmt::format("a {}-device mesh is not supported yet (meshsim validate and "
                                 "calibrate simulate single-device manifests only)",
                                 devices));
  }
}

void read_trace(JsonObject& root, Manifest& m) {
  JsonObject trace = root.object("trace");
  trace.allow_unknown();
  const std::string& path = m.path;
  const std::string rel = trace.string("path");
  fs::path tp(rel);
  if (tp.is_relative()) {
    tp = fs::path(path).parent_path() / tp;
  }
  std::error_code ec;
  if (!fs::is_regular_file(tp, ec)) {
    trace.fail("path", fmt::format("trace file \"{}\" does not exist (resolved to {}; a relative "
                                   "path is relative to the manifest's directory)",
                                   rel, tp.string()));
  }
  m.trace_path = tp.string();
  if (trace.has("profiler_overhead_per_event_s")) {
    const double c = trace.number("profiler_overhead_per_event_s");
    if (!(c >= 0) || !std::isfinite(c)) {
      trace.fail("profiler_overhead_per_event_s",
                 fmt::format("expected a non-negative time in seconds, got {}", c));
    }
    m.profiler_overhead_per_event_s = c;
  }
}

}  // namespace

double median(std::vector<double> v) {
  if (v.empty()) {
    return 0;
  }
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

Manifest load_manifest(const std::string& path) {
  const nlohmann::json doc = load_json_file(path);
  JsonObject root(doc, path);
  root.allow_unknown();
  Manifest m;
  m.path = path;
  m.case_name =
      root.has("case") ? root.string("case") : fs::path(path).parent_path().filename().string();
  JsonObject fw = root.object("framework");
  fw.allow_unknown();
  m.framework = fw.one_of("name", {"pytorch", "jax"});
  if (fw.has("version")) {
    m.framework_version = fw.string("version");
  }
  JsonObject hw = root.object("hardware");
  hw.allow_unknown();
  m.platform = hw.one_of("platform", {"cpu", "gpu", "tpu"});
  m.threads = opt(hw, "threads", &JsonObject::positive_integer);
  m.model_json = root.raw("model");
  if (!m.model_json.is_object()) {
    root.fail("model", fmt::format("expected the model config inline (an object), got {}",
                                   describe_json(m.model_json)));
  }
  m.model = workloads::parse_model(m.model_json, fmt::format("{} (/model)", path));
  JsonObject batch = root.object("batch");
  batch.allow_unknown();
  m.global_batch = batch.positive_integer("global_batch");
  m.micro_batch = batch.positive_integer("micro_batch");
  m.seq = root.positive_integer("seq_len");
  m.dtype = root.one_of("dtype", enum_choices<Dtype>());
  read_execution(root, m);
  read_mesh(root, path);
  const nlohmann::json& times = root.raw("step_times_s");
  if (!times.is_array() || times.empty()) {
    root.fail("step_times_s", "expected a non-empty list of the timed steps' durations (seconds)");
  }
  for (size_t i = 0; i < times.size(); ++i) {
    if (!times[i].is_number() || !(times[i].get<double>() > 0)) {
      throw InputError(path, fmt::format("/step_times_s/{}", i),
                       fmt::format("expected a positive duration in seconds, got {}",
                                   describe_json(times[i])));
    }
    m.step_times_s.push_back(times[i].get<double>());
  }
  m.median_step_s = root.positive_number("median_step_time_s");
  read_trace(root, m);
  return m;
}

Profile profile_from(const nlohmann::json& document, const std::string& name) {
  Profile p;
  p.path = name;
  p.document = document;
  const topology::Catalogue cat = topology::Catalogue::parse(p.document, name);
  const std::vector<std::string> names = cat.names();
  if (names.size() != 1) {
    throw InputError(name, "/chips",
                     fmt::format("a hardware profile holds exactly one chip, found {}",
                                 names.size()));
  }
  p.chip_name = names.front();
  p.chip = cat.chip(p.chip_name);
  return p;
}

Profile load_profile(const std::string& path) { return profile_from(load_json_file(path), path); }

workloads::ParallelPlan plan_for(const Manifest& m) {
  workloads::ParallelPlan p;
  p.mbs = m.micro_batch;
  p.gbs = m.global_batch;
  p.seq = m.seq;
  p.set_training_dtype(*parse_enum<Dtype>(m.dtype));
  p.attention = *parse_enum<workloads::AttentionKernel>(m.attention);
  p.kernels = *parse_enum<workloads::Kernels>(m.kernels);
  p.optimizer_kernels = *parse_enum<workloads::OptimizerKernels>(m.optimizer_kernels);
  return p;
}

std::vector<StepKernel> step_kernels(const Manifest& m) {
  const workloads::ParallelPlan p = plan_for(m);
  const workloads::StepPlan plan = workloads::plan_step(m.model, p);
  std::vector<StepKernel> out;
  const Program& prog = plan.programs.at(plan.ranks.at(0).program.index());
  for (size_t i = 0; i < prog.size(); ++i) {
    const Op& op = prog.op(OpId(static_cast<uint32_t>(i)));
    if (const auto* w = std::get_if<ComputeWork>(&op.work)) {
      out.push_back({op.name, *w});
    }
  }
  return out;
}

ManifestRun::ManifestRun(const Manifest& m, const topology::Chip& chip)
    : compute_(chip),
      comm_(std::make_unique<NoCommunication>()),
      sim_(std::make_unique<Simulation>(compute_, *comm_)) {
  workloads::StepPlan plan = workloads::plan_step(m.model, plan_for(m));
  load_plan(*sim_, plan);
}

ManifestRun::~ManifestRun() = default;

}  // namespace meshsim::cli
