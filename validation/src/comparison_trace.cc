#include "meshsim/validation/comparison_trace.h"

#include <fmt/format.h>

#include <algorithm>
#include <numeric>
#include <utility>

#include "meshsim/sim/simulation.h"

namespace meshsim::validation {
namespace {

// The step whose duration is the median of the trace's (the lower middle one of an even count).
const traces::MeasuredStep& median_step(const traces::MeasuredTrace& trace) {
  std::vector<size_t> order(trace.steps.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return trace.steps[a].duration < trace.steps[b].duration;
  });
  return trace.steps[order[(order.size() - 1) / 2]];
}

}  // namespace

void write_comparison_trace(std::ostream& out, traces::TraceFormat format, const Manifest& m,
                            const Profile& profile, const traces::MeasuredTrace& trace,
                            std::vector<std::pair<std::string, std::string>> metadata) {
  ManifestRun run(m, profile.chip);
  Simulation& sim = run.simulation();
  const RankId measured_rank(1);
  traces::MeasuredTimeline measured = traces::to_timeline(median_step(trace), measured_rank);
  sim.add_rank(sim.add_program(std::move(measured.program)), {}, {}, measured_rank);

  traces::TraceOptions options;
  const std::string sim_name = fmt::format("simulated: meshsim, {}", profile.chip.description);
  const std::string measured_name =
      fmt::format("measured: {} {} trace, {}", m.framework, m.framework_version, m.case_name);
  options.placement = [=](RankId r) {
    return r == measured_rank ? traces::RankPlacement{2, measured_name, "measured"}
                              : traces::RankPlacement{1, sim_name, "simulated"};
  };
  options.metadata = std::move(metadata);
  traces::TraceWriter writer(format, sim, out, std::move(options), traces::TraceFeed::kManual);
  Timeline simulated;
  sim.record_into(simulated);
  (void)run.run();  // the measured rank's ops also run; only its measured records are written

  std::vector<OpRecord> records;
  for (const OpRecord& r : simulated.ops) {
    if (r.rank != measured_rank) {
      records.push_back(r);
    }
  }
  records.insert(records.end(), measured.timeline.ops.begin(), measured.timeline.ops.end());
  writer.record_ops(std::move(records));
  writer.finish();
}

}  // namespace meshsim::validation
