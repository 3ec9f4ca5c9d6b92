#include "meshsim/validation/manifest.h"

#include <fmt/format.h>

#include <cmath>
#include <filesystem>
#include <limits>

#include "meshsim/sim/checked.h"
#include "meshsim/sim/error.h"
#include "meshsim/sim/json_input.h"
#include "meshsim/sim/provenance.h"
#include "meshsim/workloads/plan_loader.h"
#include "meshsim/workloads/step.h"

namespace meshsim::validation {
namespace {

namespace fs = std::filesystem;

// A measured step lasts at most this long (1e6 s, about 11 days): far above any step, far below
// what int64 picoseconds hold.
constexpr double kMaxMeasuredSeconds = 1e6;

// A single-device step communicates with no one: any communication is a bug.
IsolatedCommModel no_communication() {
  return IsolatedCommModel(
      [](CollectiveKind kind, Bytes, std::span<const RankId>) -> Duration {
        SIM_CHECK(false, "a single-device validation step has no {}", to_string(kind));
      },
      [](RankId, RankId, Bytes) -> Duration {
        SIM_CHECK(false, "a single-device validation step has no send or receive");
      });
}

void read_execution(JsonObject& root, Manifest& m) {
  using workloads::AttentionKernel;
  using workloads::Kernels;
  using workloads::OptimizerKernels;
  m.dtype = root.choice<Dtype>("dtype");
  if (!root.has("execution")) {
    root.fail("execution",
              "missing: how the step ran ({\"kernels\": \"eager\"|\"fused\", \"attention\": "
              "\"naive\"|\"flash\", \"optimizer_kernels\": \"per-tensor\"|\"foreach\"|\"fused\"}); "
              "the reference trainers write it");
  }
  JsonObject ex = root.object("execution");
  m.kernels = ex.choice<Kernels>("kernels");
  m.attention = ex.choice<AttentionKernel>("attention");
  m.optimizer_kernels = ex.choice<OptimizerKernels>("optimizer_kernels");
  ex.finish();
}

void read_mesh(JsonObject& root, const std::string& path) {
  JsonObject mesh = root.object("mesh");
  mesh.allow_unknown();
  int64_t devices = 1;
  for (const char* axis : {"data", "fsdp", "tensor"}) {
    if (mesh.has(axis)) {
      // Saturates: any axis past 1 is refused below, whatever the product.
      devices = try_mul(devices, mesh.positive_integer(axis))
                    .value_or(std::numeric_limits<int64_t>::max());
    }
  }
  if (devices != 1) {
    throw InputError(path, "/mesh",
                     fmt::format("a {}-device mesh is not supported yet (meshsim validate and "
                                 "calibrate simulate single-device manifests only)",
                                 devices));
  }
}

void read_step_times(JsonObject& root, Manifest& m) {
  const nlohmann::json& times = root.raw("step_times_s");
  if (!times.is_array() || times.empty()) {
    root.fail("step_times_s", "expected a non-empty list of the timed steps' durations (seconds)");
  }
  for (size_t i = 0; i < times.size(); ++i) {
    const double t = times[i].is_number() ? times[i].get<double>() : 0.0;
    if (!(t > 0) || t > kMaxMeasuredSeconds) {
      throw InputError(m.path, fmt::format("/step_times_s/{}", i),
                       fmt::format("expected a positive duration in seconds, at most {:g} (about "
                                   "11 days), got {}",
                                   kMaxMeasuredSeconds, describe_json(times[i])));
    }
    m.step_times.push_back(Seconds(t));
  }
  const double median = root.positive_number("median_step_time_s");
  if (median > kMaxMeasuredSeconds) {
    root.fail("median_step_time_s",
              fmt::format("{} s is above the limit of {:g} s (about 11 days) for one step", median,
                          kMaxMeasuredSeconds));
  }
  m.median_step = Seconds(median);
}

void read_trace(JsonObject& root, Manifest& m) {
  JsonObject trace = root.object("trace");
  trace.allow_unknown();
  const std::string rel = trace.string("path");
  fs::path tp(rel);
  if (tp.is_relative()) {
    tp = fs::path(m.path).parent_path() / tp;
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
    if (!(c >= 0) || !std::isfinite(c) || c > 1.0) {
      trace.fail("profiler_overhead_per_event_s",
                 fmt::format("expected a non-negative time in seconds, at most 1 (profilers "
                             "spend microseconds per event), got {}",
                             c));
    }
    m.profiler_overhead_per_event = Seconds(c);
  }
}

void read_model(JsonObject& root, Manifest& m) {
  const nlohmann::json& model = root.raw("model");
  if (!model.is_object()) {
    root.fail("model", fmt::format("expected the model config inline (an object), got {}",
                                   describe_json(model)));
  }
  m.model = workloads::parse_model(model, fmt::format("{} (/model)", m.path));
}

}  // namespace

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
  read_model(root, m);
  JsonObject batch = root.object("batch");
  batch.allow_unknown();
  m.global_batch = batch.positive_integer("global_batch");
  m.micro_batch = batch.positive_integer("micro_batch");
  m.seq = root.positive_integer("seq_len");
  read_execution(root, m);
  read_mesh(root, path);
  read_step_times(root, m);
  read_trace(root, m);
  return m;
}

// The one place a manifest becomes a plan. Every field the manifest sets remembers its JSON
// pointer, so that a plan error (a batch that does not divide, a precision the plan refuses) is
// reported against the manifest file and field.
workloads::ParallelPlan manifest_plan(const Manifest& m) {
  using workloads::PlanField;
  workloads::ParallelPlan p;
  p.mbs = m.micro_batch;
  p.gbs = m.global_batch;
  p.seq = m.seq;
  p.set_training_dtype(m.dtype);
  p.kernels = m.kernels;
  p.attention = m.attention;
  p.optimizer_kernels = m.optimizer_kernels;
  const std::pair<PlanField, const char*> origins[] = {
      {PlanField::kMbs, "/batch/micro_batch"},       {PlanField::kGbs, "/batch/global_batch"},
      {PlanField::kSeq, "/seq_len"},                 {PlanField::kDtype, "/dtype"},
      {PlanField::kKernels, "/execution/kernels"},   {PlanField::kAttention, "/execution/attention"},
      {PlanField::kOptimizerKernels, "/execution/optimizer_kernels"}};
  for (const auto& [field, pointer] : origins) {
    p.origins.set(field, Origin::file(m.path, pointer));
  }
  return p;
}

namespace {

// The step plan of the manifest's single device; plan errors are located in the manifest.
workloads::StepPlan plan_of(const Manifest& m) {
  const workloads::ParallelPlan p = manifest_plan(m);
  try {
    return workloads::plan_step(m.model, p);
  } catch (const workloads::PlanError& e) {
    throw p.origins.locate(e);
  }
}

}  // namespace

std::vector<StepKernel> step_kernels(const Manifest& m) {
  const workloads::StepPlan plan = plan_of(m);
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
      comm_(std::make_unique<IsolatedCommModel>(no_communication())),
      sim_(std::make_unique<Simulation>(compute_, *comm_)) {
  workloads::StepPlan plan = plan_of(m);
  workloads::load_plan(*sim_, plan);
}

ManifestRun::~ManifestRun() = default;

}  // namespace meshsim::validation
