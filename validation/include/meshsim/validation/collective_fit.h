// Calibrating a platform's collectives from measured sweeps (nccl-tests logs, or published
// tables of them): the figures of a cluster that say how collectives run on *this* platform,
// fitted through the same collective model the simulator uses.
//
// The model: collectives::CollectivePlanner (NCCL's tuner choosing algorithm and protocol, the
// runtime's latency and rate cap, the algorithm's traffic on the cluster's links) and the fluid
// network's time for the collective alone (collectives::run_alone), exactly what `meshsim
// collective` prints and what a simulated step pays when nothing else is in flight. A sweep point
// is predicted on the cluster resized to the sweep's nodes, over its ranks in order.
//
// The parameters are the platform figures a cluster file carries (topology/cluster.h), each with a
// physical meaning:
//   launch_floor          collectives.launch_floor: the least time a collective takes;
//   simple_step_overhead  collectives.simple_step_overhead: time per Simple-protocol ring step
//                         inside one NVLink domain (or tree hop along a domain's chain) beyond
//                         NCCL's own per-step latency;
//   ll128_efficiency      collectives.ll128_efficiency: the fraction of NCCL's LL128 rate achieved;
//   scale_up_efficiency   scale_up.efficiency: the fraction of the NVLink (ICI) line rate that
//                         collective traffic achieves;
//   nvls_efficiency       scale_up.nvls_efficiency: the further fraction NVLS traffic achieves;
//   scale_out_efficiency  scale_out.efficiency: the fraction of the NIC line rate achieved.
// A parameter is fitted only when the fitted points pin it down: when moving it across its range
// (bounds below) changes some fitted point's predicted time by more than 0.5 %. The others keep
// the base cluster's value and the result says so (a single-node sweep says nothing of the NICs;
// a sweep where NCCL never runs LL128 nothing of LL128).
//
// The fit: minimise the mean squared log ratio predicted / measured over the fitted points
// (relative error, so that 8 GiB does not outweigh 64 KiB), a bounded derivative-free local search
// (NLopt's Subplex) from the base values and from a launch floor at the smallest fitted time, the
// better result kept. Deterministic: a fixed number of evaluations, no clock, no randomness.
#pragma once

#include <cstdint>
#include <functional>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "meshsim/collectives/nccl.h"
#include "meshsim/collectives/schedule.h"
#include "meshsim/sim/enum_names.h"
#include "meshsim/sim/provenance.h"
#include "meshsim/sim/units.h"
#include "meshsim/topology/cluster.h"
#include "meshsim/traces/nccl_tests.h"

namespace meshsim::validation {

// One measured operation: `bytes` in nccl-tests' size convention, its time, and which column it
// came from ("out-of-place", "in-place", or "busbw" for a table of bus bandwidths).
struct CollectivePoint {
  int64_t bytes = 0;
  Duration time;
  std::string column;
  std::string where;  // "all_reduce_perf.log: line 54"
};

// One sweep of one test on one platform.
struct CollectiveSweep {
  std::string label;  // "all_reduce_perf.log (all_reduce, line 37)"
  traces::NcclTest test = traces::NcclTest::kAllReduce;
  int64_t ranks = 0;
  int64_t nodes = 1;  // hosts; ranks / nodes per host
  collectives::NcclVersion nccl;
  collectives::Algorithm algorithm = collectives::Algorithm::kAuto;  // forced by NCCL_ALGO
  std::optional<collectives::NcclProtocol> protocol;                 // forced by NCCL_PROTO
  std::vector<CollectivePoint> points;
};

enum class PlatformParameter : uint8_t {
  kLaunchFloor,
  kSimpleStepOverhead,
  kLl128Efficiency,
  kScaleUpEfficiency,
  kNvlsEfficiency,
  kScaleOutEfficiency,
};
inline constexpr int kNumPlatformParameters = 6;
constexpr auto enum_names(PlatformParameter) {
  using P = PlatformParameter;
  return std::to_array<EnumName<P>>({{P::kLaunchFloor, "launch_floor"},
                                     {P::kSimpleStepOverhead, "simple_step_overhead"},
                                     {P::kLl128Efficiency, "ll128_efficiency"},
                                     {P::kScaleUpEfficiency, "scale_up_efficiency"},
                                     {P::kNvlsEfficiency, "nvls_efficiency"},
                                     {P::kScaleOutEfficiency, "scale_out_efficiency"}});
}
// Where the parameter lives in a cluster file: "/collectives/launch_floor", "/scale_up/efficiency".
std::string cluster_pointer(PlatformParameter p);
// The parameter's value in `spec` (durations in seconds) and `spec` with it set.
double parameter_value(const topology::ClusterSpec& spec, PlatformParameter p);
void set_parameter(topology::ClusterSpec& spec, PlatformParameter p, double value);
// Whether `spec` has the parameter at all (no NVLS efficiency on a chip without NVLS).
bool has_parameter(const topology::ClusterSpec& spec, PlatformParameter p);
// The range the fit searches: durations 0 to 1 ms (floor) or 100 us (per step); fractions 0.05
// to 1.
std::pair<double, double> parameter_bounds(PlatformParameter p);

struct ParameterResult {
  PlatformParameter parameter = PlatformParameter::kLaunchFloor;
  double base = 0;
  double fitted = 0;  // = base when not pinned
  bool pinned = false;
};

struct PointResult {
  size_t sweep = 0;  // index into the sweeps
  CollectivePoint point;
  bool fitted = false;  // among the points the fit used
  Duration base;        // the model on the base cluster
  Duration calibrated;  // the model on the fitted cluster
  std::string algorithm;  // what the model runs on the fitted cluster ("nvls/simple")
};

struct FitOptions {
  // Points with bytes below this are predicted and reported but not fitted (see the CLI's
  // --min-size); 0 fits every point with bytes > 0.
  Bytes min_bytes = Bytes::zero();
  Bytes max_bytes = Bytes::of(int64_t{1} << 50);
  // Only the points this says yes to are fitted (the held-out tests); empty: all in range.
  std::function<bool(size_t sweep, const CollectivePoint&)> use;
};

struct CollectiveFit {
  topology::ClusterSpec fitted;
  std::vector<ParameterResult> parameters;
  std::vector<PointResult> points;
  int64_t fitted_points = 0;
  double rms_base = 0;        // root mean square of log(predicted / measured) over fitted points
  double rms_calibrated = 0;  // the same after the fit
  int64_t evaluations = 0;
};

// Fits the platform parameters of `base` to `sweeps`. Throws InputError (source "--cluster") when
// the cluster cannot hold a sweep (ranks per node above its devices per node, too many nodes),
// and when no point is left to fit.
CollectiveFit fit_collective_platform(const topology::ClusterSpec& base,
                                      std::span<const CollectiveSweep> sweeps,
                                      const FitOptions& options);

// The time the model gives for `bytes` of `sweep`'s test on `cluster` (resized to the sweep's
// nodes); `what` receives "algorithm/protocol". A sweep the cluster cannot hold, or whose forced
// algorithm it cannot run (NVLS across nodes without SHARP), is an InputError naming the sweep.
Duration predict_collective(const topology::ClusterSpec& cluster, const CollectiveSweep& sweep,
                            Bytes bytes, std::string* what = nullptr);

// The facts of a sweep that a log may leave out or that the caller may state: which test, which
// NCCL release, which forced algorithm or protocol, how many ranks on how many hosts, which
// columns to read. A SweepError names the fact; the edge names where the caller states it.
enum class SweepField : uint8_t { kTest, kNccl, kAlgorithm, kProtocol, kRanks, kNodes, kColumns };
constexpr auto enum_names(SweepField) {
  using F = SweepField;
  return std::to_array<EnumName<F>>({{F::kTest, "test"},
                                     {F::kNccl, "nccl"},
                                     {F::kAlgorithm, "algorithm"},
                                     {F::kProtocol, "protocol"},
                                     {F::kRanks, "ranks"},
                                     {F::kNodes, "nodes"},
                                     {F::kColumns, "columns"}});
}
using SweepError = FieldError<SweepField>;

// How a log's measurements become sweeps: what the log may not say, from the caller.
struct SweepDefaults {
  std::optional<traces::NcclTest> test;              // --collective
  std::optional<collectives::NcclVersion> nccl;      // --nccl
  std::optional<collectives::Algorithm> algorithm;   // --algo
  std::optional<collectives::NcclProtocol> protocol; // --proto
  std::optional<int64_t> ranks;                      // --ranks
  std::optional<int64_t> nodes;                      // --nodes
  bool in_place = true;                              // read the in-place column
  bool out_of_place = true;                          // read the out-of-place column
};

// The sweeps of a parsed nccl-tests log: one per run with rows, its points the rows with bytes > 0
// (the columns `defaults` asks for). The test comes from the log's "Collective test" line, else
// from `defaults`, else from the log's file name; the rest from the log, else from `defaults`. A
// default that contradicts the log, and a fact neither gives, are SweepErrors on that fact whose
// message names the log. A run timed on the host (-C 1) is refused: host time is not the
// collective's.
std::vector<CollectiveSweep> sweeps_from_log(const traces::NcclTestsLog& log,
                                             const SweepDefaults& defaults);

// The release a log names, "2.18.5" -> 2.18; nullopt (and `why`) for a release before 2.18, whose
// tuner meshsim does not model.
std::optional<collectives::NcclVersion> modelled_release(const std::string& version,
                                                         std::string* why = nullptr);

// The cluster fragment (topology/cluster.h) a fit gives: {"base": base, "description": ...} and
// each pinned parameter as a sourced figure at its cluster_pointer, `source` its citation. Values
// are written as the fit's ClusterSpec holds them (rounded there, so the file gives the same
// predictions).
nlohmann::json cluster_fragment(const CollectiveFit& fit, const std::string& base,
                                const std::string& description, const std::string& source);

// meshsim's JSON form of a published sweep (a table of busbw or times by size, as benchmark
// reports print them), read strictly:
//   {"source": "...", "test": "all_reduce", "ranks": 8, "nodes": 1, "nccl": "2.18.5",
//    "algorithm": "nvls" (optional), "protocol": "simple" (optional),
//    "points": [{"bytes": 65536, "busbw_gbps": 2.72} or {"bytes": ..., "time_us": ...}, ...]}
// busbw becomes a time with nccl-tests' bus factor. At most kMaxNcclTestsRows points.
std::vector<CollectiveSweep> read_sweep_file(const std::string& path);

// Whether `text` (a file's first bytes) is a JSON sweep rather than a log.
bool looks_like_sweep_json(std::string_view text);

// The CollectiveKind of a test (sendrecv: nullopt, a point-to-point ring shift).
std::optional<CollectiveKind> collective_kind(traces::NcclTest test);

}  // namespace meshsim::validation
