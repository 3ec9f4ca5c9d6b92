// `meshsim validate-published FILE`: simulate every published run the file lists that meshsim
// can express, and print the error per point, the summaries (overall, by source, by precision,
// long sequences) and the runs it cannot express with the reason (the library:
// validation/include/meshsim/validation/published.h).
#pragma once

#include <optional>
#include <ostream>
#include <string>

namespace meshsim::cli {

struct PublishedArgs {
  std::string runs;                       // published_runs.json
  std::optional<std::string> json_path;   // the report as JSON
  std::optional<std::string> thresholds;  // thresholds.json: exit 4 beyond its "published" limits
  bool assumptions = false;               // print each point's conversion and assumptions
  // --run ID: that run alone, reported as `meshsim run` reports a step (with --json, its report;
  // with --trace, its timeline), to see where an error comes from.
  std::optional<std::string> run_id;
  std::optional<std::string> trace_path;   // with --run: .pftrace or .json
  std::optional<std::string> trace_ranks;  // with --run: --trace-ranks
  bool full_simulation = false;            // with --run: every rank simulated
};

// Returns the process exit code: 0, or 4 (kExitThresholdExceeded) when a threshold is exceeded;
// with --run, 0 (the run simulated, or why it cannot be printed).
int published_command(const PublishedArgs& args, std::ostream& out);

}  // namespace meshsim::cli
