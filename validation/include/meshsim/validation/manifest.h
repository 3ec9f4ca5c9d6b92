// A measured run, as validation/reference_trainer records it, and the simulation of the same run.
//
// A manifest (schema documented in validation/reference_trainer/runinfo.py) names the hardware,
// the model (inline, meshsim's schema), the batch, the sequence length, the training precision,
// the device mesh, how the step ran ("execution": eager or fused kernels, naive or flash
// attention, the optimizer's kernels), every timed step and their median, and the profiler trace
// (a path relative to the manifest's directory). Only single-device manifests are simulated: a
// mesh whose axes multiply to more than one device is an InputError saying so.
//
// The step runs on the one chip of a hardware profile (profile.h) alone (ManifestRun), so no
// communication is simulated.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "meshsim/sim/program.h"
#include "meshsim/sim/simulation.h"
#include "meshsim/sim/units.h"
#include "meshsim/topology/chip.h"
#include "meshsim/topology/compute_model.h"
#include "meshsim/workloads/model.h"
#include "meshsim/workloads/parallel.h"

namespace meshsim::validation {

struct Manifest {
  std::string path;
  std::string case_name;
  std::string framework;          // "pytorch" or "jax"
  std::string framework_version;  // may be empty
  std::string platform;           // "cpu", "gpu", "tpu"
  std::optional<int64_t> threads;
  workloads::ModelConfig model;
  int64_t global_batch = 0;
  int64_t micro_batch = 0;
  int64_t seq = 0;
  // The training precision ("dtype") and how the step ran ("execution").
  Dtype dtype = Dtype::kBf16;
  workloads::Kernels kernels = workloads::Kernels::kFused;
  workloads::AttentionKernel attention = workloads::AttentionKernel::kFlash;
  workloads::OptimizerKernels optimizer_kernels = workloads::OptimizerKernels::kFused;
  std::vector<Duration> step_times;  // every timed, unprofiled step
  Duration median_step;              // their median, as the trainer computed it
  std::string trace_path;            // resolved against the manifest's directory
  // trace/profiler_overhead_per_event_s: what the profiler costs per recorded host event, when
  // the trainer measured it.
  std::optional<Duration> profiler_overhead_per_event;
};

// Reads and checks a manifest. InputError(path, JSON pointer, what was expected) on a missing or
// wrong-typed field, an unreadable file, a trace that does not exist, or a multi-device mesh.
Manifest load_manifest(const std::string& path);

// "naive" or "flash", as manifests (and scenarios) name the attention kernel; workloads/ has no
// name for it yet.

// The parallel plan of the manifest's step on one device: every degree 1, the manifest's batch,
// sequence, precision, kernels, attention and optimizer kernels, everything else the plan's
// defaults.
workloads::ParallelPlan manifest_plan(const Manifest& m);

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
  std::unique_ptr<CommModel> comm_;
  std::unique_ptr<Simulation> sim_;
};

}  // namespace meshsim::validation
