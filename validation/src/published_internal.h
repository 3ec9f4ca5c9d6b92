// Private to published_*.cc: the pieces of mapping a published run.
#pragma once

#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "meshsim/validation/published.h"
#include "meshsim/validation/published_facts.h"

namespace meshsim::validation::detail {

// Why a run cannot be expressed; caught by map_published_run.
class Unmappable : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The value, or Unmappable("<what> is not stated").
int64_t stated(const std::optional<int64_t>& v, const char* what);
bool contains(std::string_view text, std::string_view word);
// Case-insensitive (ASCII) substring: how the facts' texts are looked for in a record.
bool icontains(std::string_view text, std::string_view word);

// When the run was: from the framework text (a year, or an NGC container version YY.MM), else
// from the citation (an arXiv id YYMM.NNNNN, else a year, with its month where "YYYY-MM"
// follows); a year alone reads as its July. `basis` says which.
struct RunDate {
  YearMonth when;
  std::string basis;
};
std::optional<RunDate> run_date(const PublishedRun& r);

// A run resolved against the facts: its framework, its model entry and the source facts that
// match it, in file order.
struct RunFacts {
  const PublishedRun& run;
  const PublishedFacts& facts;
  std::optional<RunDate> date;
  const FrameworkFact* framework = nullptr;  // never null once resolved
  const ModelFact* model = nullptr;          // null: the architecture from the notes or default
  ModelArchitecture architecture = ModelArchitecture::kGpt;
  std::string architecture_basis;  // why, when not a model entry
  std::vector<const SourceFact*> source_facts;

  // The first matching source fact that sets `field` (a member of SourceFact::Set whose
  // optional is engaged), or null.
  template <class Field>
  const SourceFact* setting(Field SourceFact::Set::*field) const {
    for (const SourceFact* f : source_facts) {
      if (f->set.*field) {
        return f;
      }
    }
    return nullptr;
  }
  // The first matching source fact with the flag `field` set.
  const SourceFact* flag(bool SourceFact::Set::*field) const {
    for (const SourceFact* f : source_facts) {
      if (f->set.*field) {
        return f;
      }
    }
    return nullptr;
  }
  // Whether the notes say the source's table left `field` out.
  bool unstated_in_source(UnstatedField field) const;
};

// Resolves the framework, the model and the source facts; Unmappable when the framework or the
// model family is unknown.
RunFacts resolve_run(const PublishedRun& r, const PublishedFacts& facts);

// The parallel plan of the run (degrees, batch, precision, recompute, the framework's kernels),
// with the framework defaults and facts it applies appended to `assumptions`.
workloads::ParallelPlan plan_of(const RunFacts& rf, const workloads::ModelConfig& model,
                                const topology::ClusterSpec& cluster,
                                std::vector<std::string>& assumptions);

struct MeasuredStep {
  Duration step;
  std::string how;
};
// The measured metric as a step time, in the source's own convention.
MeasuredStep measured_step(const RunFacts& rf, const workloads::ModelConfig& model,
                           const workloads::ParallelPlan& plan);

}  // namespace meshsim::validation::detail
