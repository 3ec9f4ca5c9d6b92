// A measured run, as validation/reference_trainer records it, and the simulation of the same run.
//
// A manifest (schema documented in validation/reference_trainer/runinfo.py) names the hardware,
// the model (inline, meshsim's schema), the batch, the sequence length, the training precision,
// the device mesh, how the step ran ("execution": eager or fused kernels, naive or flash
// attention, the optimizer's kernels), every timed step and their median, and the profiler trace
// (a path relative to the manifest's directory). Only single-device manifests are simulated: a
// mesh whose axes multiply to more than one device is an InputError saying so.
//
// The hardware comes from a hardware profile: a chip catalogue file in topology/chips.json's
// schema holding exactly one chip (validation/profiles/). The step runs on that chip alone
// (ManifestRun), so no communication is simulated.
#pragma once

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "meshsim/sim/program.h"
#include "meshsim/sim/simulation.h"
#include "meshsim/topology/compute_model.h"
#include "meshsim/topology/chip.h"
#include "meshsim/workloads/model.h"
#include "meshsim/workloads/parallel.h"

namespace meshsim::cli {

struct Manifest {
  std::string path;
  std::string case_name;
  std::string framework;          // "pytorch" or "jax"
  std::string framework_version;  // may be empty
  std::string platform;           // "cpu", "gpu", "tpu"
  std::optional<int64_t> threads;
  nlohmann::json model_json;
  workloads::ModelConfig model;
  int64_t global_batch = 0;
  int64_t micro_batch = 0;
  int64_t seq = 0;
  std::string dtype;              // "fp32", "bf16" (or "fp8", "tf32")
  std::string kernels;            // "eager" or "fused"
  std::string attention;          // "naive" or "flash"
  std::string optimizer_kernels;  // "per-tensor", "foreach" or "fused"
  std::vector<double> step_times_s;
  double median_step_s = 0;
  std::string trace_path;  // resolved against the manifest's directory
  // trace/profiler_overhead_per_event_s: what the profiler costs per recorded host event, when
  // the trainer measured it.
  std::optional<double> profiler_overhead_per_event_s;
};

// Reads and checks a manifest. InputError(path, JSON pointer, what was expected) on a missing or
// wrong-typed field, an unreadable file, a trace that does not exist, or a multi-device mesh.
Manifest load_manifest(const std::string& path);

// The hardware profile: a one-chip catalogue file.
struct Profile {
  std::string path;
  nlohmann::json document;  // the whole catalogue file
  std::string chip_name;
  topology::Chip chip;
};
Profile load_profile(const std::string& path);
// A profile from a catalogue document in memory (what calibrate writes, checked before writing).
Profile profile_from(const nlohmann::json& document, const std::string& name);

// The parallel plan of the manifest's step on one device (precision, kernels, attention,
// optimizer kernels as the manifest's execution says).
workloads::ParallelPlan plan_for(const Manifest& m);

// One compute kernel of the simulated step, in program order.
struct StepKernel {
  std::string name;
  ComputeWork work;
};
// The compute kernels of the single device's step (the plan meshsim simulates for `m`).
std::vector<StepKernel> step_kernels(const Manifest& m);

// The manifest's step through the engine on `chip` alone: simulated rank 0 runs the plan's
// program; a single device never communicates (a collective or a send is an internal error).
// Callers may add ranks and subscribe trace writers to simulation() before run().
class ManifestRun {
 public:
  ManifestRun(const Manifest& m, const topology::Chip& chip);
  ~ManifestRun();
  ManifestRun(const ManifestRun&) = delete;
  ManifestRun& operator=(const ManifestRun&) = delete;

  Simulation& simulation() { return *sim_; }
  RunResult run() { return sim_->run(); }

 private:
  topology::RooflineComputeModel compute_;
  std::unique_ptr<CommCostModel> comm_;
  std::unique_ptr<Simulation> sim_;
};

// The median of `v` (0 for an empty list).
double median(std::vector<double> v);

}  // namespace meshsim::cli
