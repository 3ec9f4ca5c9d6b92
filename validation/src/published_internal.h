// Private to published_*.cc: the pieces of mapping a published run.
#pragma once

#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "meshsim/validation/published.h"

namespace meshsim::validation::detail {

// Why a run cannot be expressed; caught by map_published_run.
class Unmappable : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The value, or Unmappable("<what> is not stated").
int64_t stated(const std::optional<int64_t>& v, const char* what);
bool contains(const std::string& text, const char* word);

// The parallel plan of the run (degrees, batch, precision, recompute, the framework's kernels),
// with the framework defaults it applies appended to `assumptions`.
workloads::ParallelPlan plan_of(const PublishedRun& r, const topology::ClusterSpec& cluster,
                                std::vector<std::string>& assumptions);

struct MeasuredStep {
  Duration step;
  std::string how;
};
// The measured metric as a step time, in the source's own convention.
MeasuredStep measured_step(const PublishedRun& r, const workloads::ModelConfig& model,
                           const workloads::ParallelPlan& plan);

}  // namespace meshsim::validation::detail
