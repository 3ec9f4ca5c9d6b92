// Measured-vs-simulated: reading validation manifests, simulating the step a manifest describes,
// and fitting a chip's efficiency parameters to measured per-op-class times (`meshsim calibrate`).
//
// A manifest (validation/reference_trainer/runinfo.py documents the schema) names the hardware,
// the model (inline, meshsim's schema), the batch, the sequence length, the dtype, the device mesh,
// the measured step times and the profiler trace (a path relative to the manifest's directory).
// Only single-device manifests are simulated for now: a mesh whose axes multiply to more than one
// device is an InputError saying so.
//
// The hardware comes from a hardware profile: a chip catalogue file in topology/chips.json's
// schema holding exactly one chip (validation/profiles/cpu-generic.json describes the CPU machine
// the smoke fixture was measured on). The step runs on a generated one-node, one-device cluster of
// that chip, so no communication is simulated.
//
// Fitting (calibrate): the simulated time of op class c is
//     T_c(e_m, e_b, L) = sum over c's kernels k of max(F_k / (P_k e_m), B_k / (BW e_b)) + n_c L
// (matmul and attention kernels; other classes run on the vector units, whose FLOP term is not
// derated by e_m, exactly as topology::RooflineComputeModel does). The parameters minimize
//     loss = sum over manifests m, classes c with measured and simulated time of (T_mc / M_mc - 1)^2
// over e_m in [1e-4, 1], e_b in [1e-4, 1], L in {0} U [1 ns, 100 ms]: first a coarse grid, log
// spaced in all three (33 x 33 x 34 points), then coordinate descent with golden-section searches
// on the logs of the three parameters (20 sweeps or until nothing moves by 1e-9), each search
// bracketed by the neighbours of the current point on the grid (narrowing on later sweeps). The
// grid makes the method robust to the kinks of the max(); golden section makes it precise.
#pragma once

#include <array>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "meshsim/sim/program.h"
#include "meshsim/topology/chip.h"
#include "meshsim/traces/import.h"
#include "meshsim/workloads/model.h"
#include "report.h"

namespace meshsim::cli {

using ClassTimes = std::array<double, kNumOpClasses>;  // seconds, indexed by OpClass

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
  std::string dtype;  // "fp32", "bf16" (or "fp8")
  int64_t devices = 1;
  double median_step_s = 0;
  std::string trace_path;  // resolved against the manifest's directory
};

// Reads and checks a manifest. InputError(path, JSON pointer, what was expected) on a missing or
// wrong-typed field, an unreadable file, a trace that does not exist, or a multi-device mesh.
Manifest load_manifest(const std::string& path);

// The cluster a single-device manifest runs on, as a cluster JSON: one node with one `chip`
// (an NVSwitch domain of one and a one-switch fat tree, which a step without collectives never
// uses).
nlohmann::json single_device_cluster(const std::string& chip);

// The hardware profile: a one-chip catalogue file.
struct Profile {
  std::string path;
  nlohmann::json document;  // the whole catalogue file
  std::string chip_name;
  topology::Chip chip;
};
Profile load_profile(const std::string& path);

// What the trace measured: medians over its steps.
struct Measured {
  size_t steps = 0;
  std::string op_source;  // "device" or "host"
  double step_s = 0;      // median step duration in the trace
  ClassTimes by_class{};  // median over steps of the summed op time per class
  double unclassified_s = 0;
  std::vector<std::pair<std::string, double>> top_ops;  // name, median-step time (total / steps)
  std::vector<std::pair<std::string, OpClass>> top_op_classes;
};
Measured measure(const traces::MeasuredTrace& trace);

// The compute kernels of the single device's step (the plan meshsim simulates).
std::vector<ComputeWork> step_kernels(const Manifest& m);

// Simulates the manifest's step on `chip` (named `chip_name` in the catalogue JSON `catalogue`).
StepReport simulate_manifest(const Manifest& m, const nlohmann::json& catalogue,
                             const std::string& chip_name);

// One manifest, ready for fitting: per-kernel roofline terms at efficiency 1.
struct FitCase {
  std::string name;
  ClassTimes measured{};
  double measured_step_s = 0;
  struct Kernel {
    uint8_t op_class;
    bool matrix;        // on the matrix units: its FLOP term is derated by e_m
    double flops_s;     // FLOPs / peak
    double memory_s;    // bytes / bandwidth
  };
  std::vector<Kernel> kernels;
};
FitCase make_fit_case(const std::string& name, const std::vector<ComputeWork>& kernels,
                      const topology::Chip& chip, const ClassTimes& measured, double step_s);

struct Params {
  double matmul = 1;
  double memory = 1;
  double launch_s = 0;
};
ClassTimes predict(const FitCase& c, const Params& p);
// Sum of squared relative per-class errors over the cases (classes with measured and simulated
// time only).
double fit_loss(const std::vector<const FitCase*>& cases, const Params& p);
Params fit(const std::vector<const FitCase*>& cases);

struct CalibrateArgs {
  std::vector<std::string> manifests;
  std::string out;
  std::string hardware_profile;
};
int calibrate_command(const CalibrateArgs& args, std::ostream& out);

}  // namespace meshsim::cli
