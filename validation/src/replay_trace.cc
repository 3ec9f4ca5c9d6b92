// Replayed ranks, simulated and measured side by side (comparison_trace.h, write_replay_trace).
#include <fmt/format.h>

#include <utility>

#include "meshsim/sim/simulation.h"
#include "meshsim/validation/comparison_trace.h"

namespace meshsim::validation {

namespace {

// The writer reads programs and groups from a Simulation it never runs.
class NoCompute final : public ComputeCostModel {
 public:
  Duration compute_time(RankId, const ComputeWork&) const override { return Duration::zero(); }
};

}  // namespace

void write_replay_trace(std::ostream& out, traces::TraceFormat format,
                        std::vector<Replay>& replays,
                        std::vector<std::pair<std::string, std::string>> metadata) {
  const NoCompute compute;
  IsolatedCommModel comm([](CollectiveKind, Bytes, std::span<const RankId>) { return Duration::zero(); },
                         [](RankId, RankId, Bytes) { return Duration::zero(); });
  Simulation sim(compute, comm);
  // Simulated rank 2k is replay k as simulated, 2k + 1 the same as measured.
  for (size_t k = 0; k < replays.size(); ++k) {
    const ProgramIndex p = sim.add_program(std::move(replays[k].program));
    for (uint32_t side = 0; side < 2; ++side) {
      const RankId rank(static_cast<uint32_t>(2 * k + side));
      std::vector<GroupId> slots;
      for (const std::vector<RankId>& g : replays[k].groups) {
        slots.push_back(sim.add_group({rank}, g));
      }
      (void)sim.add_rank(p, slots, {}, rank);
    }
  }
  traces::TraceOptions options;
  const int width = traces::rank_label_width(replays.empty() ? 0 : replays.back().rank);
  options.placement = [&replays, width](RankId r) {
    const Replay& rep = replays[r.index() / 2];
    const bool measured = r.index() % 2 == 1;
    return traces::RankPlacement{
        static_cast<int32_t>(r.index() + 1),
        fmt::format("{}: {}, step {}", measured ? "measured" : "simulated",
                    traces::rank_label(rep.rank, width), rep.step),
        fmt::format("{} {}", measured ? "measured" : "simulated",
                    traces::rank_label(rep.rank, width))};
  };
  options.stream_name = [&replays](RankId r, uint8_t stream) {
    const std::vector<std::string>& names = replays[r.index() / 2].stream_names;
    return stream < names.size() ? names[stream] : fmt::format("stream index {}", stream);
  };
  options.metadata = std::move(metadata);
  traces::TraceWriter writer(format, sim, out, std::move(options), traces::TraceFeed::kManual);
  std::vector<OpRecord> records;
  for (size_t k = 0; k < replays.size(); ++k) {
    for (uint32_t side = 0; side < 2; ++side) {
      const Timeline& t = side == 0 ? replays[k].timeline : replays[k].measured_timeline;
      for (OpRecord r : t.ops) {
        r.rank = RankId(static_cast<uint32_t>(2 * k + side));
        if (r.match != 0) {
          r.match += (uint64_t{2 * k + side} << 44);  // each side's collectives apart
        }
        records.push_back(r);
      }
    }
  }
  writer.record_ops(std::move(records));
  writer.finish();
}

}  // namespace meshsim::validation
