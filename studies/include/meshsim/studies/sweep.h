// Sweeps: one question over many scenarios (GPU count, cluster, model, sequence, batch, any
// scenario field), each point simulated with its given plan or its best plans searched
// (plan_search.h); the result as CSV, JSON and a self-contained HTML report (report_html.h).
//
// The spec (strict JSON; unknown keys are errors naming the file and pointer):
//   { "base":   { scenario fields, as a scenario file (scenario.h) },   optional
//     "axes":   { "gpus": [64, 128, 256], "model": ["llama3-8b", "llama3-70b"], ... },
//     "zip":    [["cluster", "gpus"]],                                   optional
//     "plans":  "search" | "given",                                      default "search"
//     "search": { "top": 3, "max_simulations": 12, "objective": "time",
//                 "max_tp": 8, "min_headroom": 0.05 },                   optional
//     "title":  "..." }                                                  optional
// Axes take any scenario field, and "gpus" (the cluster resized to that many devices: whole nodes
// of a GPU cluster, or a TPU slice of that many chips, the most balanced torus of the preset's
// dimensions, said in the point's notes). Points are the cartesian product of the axes, the axes
// in the order of their names, each axis's values in the order given; the axes of one "zip" group
// advance together instead (equal lengths: value i of each), as one dimension of the product,
// e.g. {"cluster": ["dgx-h100", "tpu-v5p"], "gpus": [2048, 2048]} zipped is GPU against TPU at
// 2048 chips. A base that names neither a model nor a
// cluster starts from the default scenario, like a scenario file. With "given" plans a point
// whose device count differs from the plan's world takes dp = devices / (tp x cp x pp) (said in
// the point's notes); with "search" each point ranks its own best plans.
//
// Distribution: `run_sweep` does the points `part` owns (part.index, part.index + part.count, ...)
// and returns them serialized; `merge_sweep` puts every part's points back in point order. The
// single-process path goes through the same serialization, so a sweep split over MPI ranks
// (distribute.h) writes the same bytes as one process.
#pragma once

#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "meshsim/studies/plan_search.h"
#include "meshsim/scenario/scenario.h"

namespace meshsim::studies {

struct SweepAxis {
  std::string field;                 // a scenario key or "gpus"
  std::vector<nlohmann::json> values;
};

// The most points a sweep spec may ask for (the product of its axes' lengths), checked when the
// spec is read: 2^16 points, each a step's simulation (0.1 to 1 s) or a plan search (hundreds),
// is a day or more of CPU; more is a typo or a hostile file (eight axes of 256 values wrapped the
// product to zero in 64 bits).
inline constexpr int64_t kMaxSweepPoints = int64_t{1} << 16;

struct SweepSpec {
  std::string source;  // the spec file, for errors
  scenario::Scenario base;
  std::vector<SweepAxis> axes;  // sorted by field
  // The dimensions of the product: each a set of axes (indices into `axes`) of equal length that
  // advance together; an axis in no zip group is a dimension alone. Ordered by first axis.
  std::vector<std::vector<size_t>> dimensions;
  bool search = true;
  SearchOptions search_options;  // top, max_simulations, objective, max_tp, min_headroom
  std::string title = "meshsim sweep";

  int64_t points() const;
  // The axis values of point `i` (mixed radix over the axes, the last axis fastest).
  nlohmann::json coordinates(int64_t i) const;
};

// The most balanced torus of `dims` dimensions holding `chips` chips (largest extent first; the
// least largest extent, then the least next one): 2048 chips in 3 dimensions are 16x16x8.
std::vector<int64_t> balanced_torus(int64_t chips, size_t dims);

// Reads a spec file (InputError naming the file, the JSON pointer and what was expected).
SweepSpec load_sweep_spec(const std::string& path);

// Which points this process runs: every `count`-th from `index`.
struct SweepPart {
  int64_t index = 0;
  int64_t count = 1;
};

// Runs the points of `part`. Each point is a JSON object: {"index", "point" (its coordinates),
// "rows" (one per plan, best first: plan_table.h's columns plus "stages"), "notes", and "error"
// when the point cannot run (bad input for that point, or no plan fits)}. Returned as one JSON
// array text per part.
using SweepProgress = std::function<void(int64_t done, int64_t total)>;
std::string run_sweep(const SweepSpec& spec, const SweepPart& part,
                      const scenario::StepOptions& step,
                      const SweepProgress& progress = {});

// The parts' outputs merged in point order: {"title", "axes", "plans", "points": [...]}.
nlohmann::json merge_sweep(const SweepSpec& spec, const std::vector<std::string>& parts);

// One CSV row per plan of every point: the axes' columns, "rank", then plan_table.h's columns.
void write_sweep_csv(const nlohmann::json& sweep, std::ostream& out);

}  // namespace meshsim::studies
