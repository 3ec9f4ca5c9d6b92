#include "trace_setup.h"

#include <fmt/format.h>

#include <algorithm>
#include <set>

#include "meshsim/sim/error.h"

namespace meshsim::cli {

namespace {

// The first rank of every pipeline stage and the TP group of rank 0.
std::vector<int64_t> default_ranks(const workloads::ParallelPlan& plan) {
  const workloads::RankLayout layout(plan);
  std::set<int64_t> ranks;
  for (int64_t s = 0; s < plan.pp; ++s) {
    ranks.insert(layout.rank(workloads::RankCoords{0, 0, 0, s}));
  }
  for (const int64_t r : layout.group_along(0, workloads::Axis::kTensor)) {
    ranks.insert(r);
  }
  return {ranks.begin(), ranks.end()};
}

// Keeps `fraction` as the value from `from` on (one sample per instant).
void record_step(std::vector<std::pair<SimTime, double>>& v, SimTime from, double fraction) {
  if (!v.empty() && v.back().first == from) {
    v.back().second = fraction;
  } else {
    v.emplace_back(from, fraction);
  }
}

}  // namespace

traces::TraceFormat trace_format_of(const std::string& path, const std::string& flag) {
  const std::optional<traces::TraceFormat> format = traces::trace_format_for_path(path);
  if (!format) {
    throw InputError(flag, "",
                     fmt::format("\"{}\": expected a file ending in .pftrace (native Perfetto) or "
                                 ".json (Chrome JSON)",
                                 path));
  }
  return *format;
}

TraceSetup::TraceSetup(const TraceRequest& request, const workloads::ParallelPlan& plan,
                       const topology::ClusterSpec& cluster)
    : request_(request),
      format_(trace_format_of(request.path, "--trace")),
      cluster_(cluster),
      selection_(traces::RankSelection::all(1)) {
  const workloads::RankLayout layout(plan);
  const int64_t per_node = cluster.devices_per_node;
  if (request.ranks) {
    traces::RankLayout where{[layout](int64_t r) { return layout.coords(r).pp; },
                             [per_node](int64_t r) { return r / per_node; }};
    selection_ = traces::parse_rank_selection(*request.ranks, plan.world(), where);
  } else {
    std::vector<int64_t> ranks = default_ranks(plan);
    ranks.insert(ranks.end(), request.also.begin(), request.also.end());
    std::sort(ranks.begin(), ranks.end());
    ranks.erase(std::unique(ranks.begin(), ranks.end()), ranks.end());
    selection_ = traces::RankSelection::of(plan.world(), ranks);
    default_selection_ = true;
  }
}

TraceSetup::~TraceSetup() = default;

std::string TraceSetup::description() const {
  if (default_selection_) {
    return fmt::format("{} ranks: the first rank of each pipeline stage and the TP group of rank "
                       "0{} (--trace-ranks all | 0-7,64 | stage:0 | node:3 for others)",
                       selection_.size(), request_.also.empty() ? "" : ", and the slow ranks");
  }
  return fmt::format("{} ranks", selection_.size());
}

void TraceSetup::attach(Simulation& sim, collectives::NetworkCommModel& comm,
                        std::vector<std::pair<std::string, std::string>> meta) {
  file_ = std::make_unique<OutputFile>(request_.path, "--trace");
  const TraceLimit& limit = request_.limit;
  file_->set_limit(
      limit.bytes, limit.flag.empty() ? "--trace-ranks" : limit.flag,
      fmt::format("the trace holds {} of the ranks; trace fewer (--trace-ranks 0-7,64, stage:0 "
                  "or node:3){}",
                  selection_.size(),
                  limit.flag.empty() ? std::string() : fmt::format(", or raise {}", limit.flag)));
  traces::TraceOptions options;
  const traces::RankSelection sel = selection_;
  options.include_rank = [sel, &sim](RankId r) { return sel.contains(sim.global_rank(r)); };
  options.placement = traces::node_placement(cluster_.devices_per_node,
                                             cluster_.device_count() - 1,
                                             [&sim](RankId r) { return sim.global_rank(r); });
  options.metadata = std::move(meta);
  writer_ =
      std::make_unique<traces::TraceWriter>(format_, sim, file_->stream(), std::move(options));
  comm.on_utilisation([this](const collectives::LinkUtilisation& u) {
    record_step(utilisation_[static_cast<size_t>(u.kind)], u.from, u.fraction);
  });
}

namespace {

std::string_view counter_name(topology::LinkKind kind) {
  switch (kind) {
    case topology::LinkKind::kNvlink:
      return "NVLink utilization %";
    case topology::LinkKind::kIci:
      return "ICI utilization %";
    case topology::LinkKind::kPcie:
      return "PCIe utilization %";
    case topology::LinkKind::kNetwork:
      return "network utilization %";
    case topology::LinkKind::kDcn:
      return "DCN utilization %";
  }
  return "?";
}

// The time-weighted mean of a step function (value from each time on, 0 before the first) over
// each of `bins` equal bins of [0, end).
std::vector<double> bin_means(const std::vector<std::pair<SimTime, double>>& steps, SimTime end,
                              int bins) {
  std::vector<double> out(static_cast<size_t>(bins), 0.0);
  const double width = std::max(1.0, static_cast<double>(end.ps()) / bins);
  for (size_t i = 0; i < steps.size(); ++i) {
    const double a = static_cast<double>(steps[i].first.ps());
    const double b = i + 1 < steps.size() ? static_cast<double>(steps[i + 1].first.ps())
                                          : static_cast<double>(end.ps());
    for (int k = static_cast<int>(a / width); k < bins && k * width < b; ++k) {
      const double overlap = std::min(b, (k + 1) * width) - std::max(a, k * width);
      if (overlap > 0) {
        out[static_cast<size_t>(k)] += steps[i].second * overlap / width;
      }
    }
  }
  return out;
}

}  // namespace

void TraceSetup::watch_degraded(collectives::NetworkCommModel& comm, const topology::Network& net,
                                const std::vector<topology::LinkFault>& faults) {
  if (faults.empty()) {
    return;
  }
  std::vector<std::vector<LinkId>> sets;
  for (const topology::LinkFault& f : faults) {
    if (f.down()) {  // the links that carry its traffic now
      sets.push_back(net.detour_links(f));
      degraded_.emplace_back(
          fmt::format("failed: {} down, utilization % of its detour",
                      topology::describe(f)),
          std::vector<std::pair<SimTime, double>>{});
      continue;
    }
    sets.push_back(net.device_links(f.device, f.kind));
    degraded_.emplace_back(fmt::format("degraded: device {} {} at x{:.2f}, utilization %",
                                       f.device.value(), to_string(f.kind), f.factor),
                           std::vector<std::pair<SimTime, double>>{});
  }
  comm.watch_links(std::move(sets), [this](const collectives::WatchedUtilisation& u) {
    record_step(degraded_[u.set].second, u.from, u.fraction);
  });
}

void TraceSetup::finish(SimTime end) {
  constexpr int kBins = 500;
  const double width = std::max(1.0, static_cast<double>(end.ps()) / kBins);
  const auto write = [&](std::string_view name, const std::vector<std::pair<SimTime, double>>& s) {
    const std::vector<double> means = bin_means(s, end, kBins);
    for (int k = 0; k < kBins; ++k) {
      writer_->add_counter_sample(name, SimTime::from_ps(static_cast<int64_t>(k * width)),
                                  std::min(100.0, 100.0 * means[static_cast<size_t>(k)]));
    }
  };
  for (int kind = 0; kind < topology::kNumLinkKinds; ++kind) {
    const auto& steps = utilisation_[static_cast<size_t>(kind)];
    if (!steps.empty()) {
      write(counter_name(static_cast<topology::LinkKind>(kind)), steps);
    }
  }
  for (const auto& [name, steps] : degraded_) {
    write(name, steps);
  }
  writer_->finish();
  file_->commit();
}

uint64_t TraceSetup::events() const { return writer_ ? writer_->events_written() : 0; }

}  // namespace meshsim::cli
