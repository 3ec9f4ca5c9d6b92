#include "trace_setup.h"

#include <fmt/format.h>

#include <algorithm>
#include <set>

#include "meshsim/collectives/volume.h"
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
    selection_ = traces::RankSelection::of(plan.world(), default_ranks(plan));
    default_selection_ = true;
  }
}

TraceSetup::~TraceSetup() = default;

std::string TraceSetup::description() const {
  if (default_selection_) {
    return fmt::format("{} ranks: the first rank of each pipeline stage and the TP group of rank "
                       "0 (--trace-ranks all | 0-7,64 | stage:0 | node:3 for others)",
                       selection_.size());
  }
  return fmt::format("{} ranks", selection_.size());
}

void TraceSetup::attach(Simulation& sim, std::vector<std::pair<std::string, std::string>> meta) {
  file_ = std::make_unique<OutputFile>(request_.path, "--trace");
  traces::TraceOptions options;
  const traces::RankSelection sel = selection_;
  options.include_rank = [sel, &sim](RankId r) { return sel.contains(sim.global_rank(r)); };
  options.placement = traces::node_placement(cluster_.devices_per_node,
                                             cluster_.device_count() - 1,
                                             [&sim](RankId r) { return sim.global_rank(r); });
  options.metadata = std::move(meta);
  writer_ =
      std::make_unique<traces::TraceWriter>(format_, sim, file_->stream(), std::move(options));
}

namespace {

struct FabricLoad {
  std::string name;
  BytesPerSec per_rank;
  std::vector<double> bins;  // summed utilization x time share, per bin
};

// Whether every rank of `ranks` sits in one scale-up domain.
bool one_domain(const std::vector<RankId>& ranks, int64_t domain) {
  for (const RankId r : ranks) {
    if (r.value() / domain != ranks.front().value() / domain) {
      return false;
    }
  }
  return true;
}

}  // namespace

// Link utilization per fabric, sampled: for each communication op of a traced rank, the bus
// bandwidth it achieves on its rank (nccl-tests' busbw: bytes x factor / duration) over the
// rank's bandwidth into that fabric, averaged over the traced ranks and over each sample bin.
void TraceSetup::finish(const Simulation& sim, const Timeline& timeline, SimTime end) {
  const bool torus = cluster_.scale_up == topology::ScaleUpFabric::kIciTorus;
  std::vector<FabricLoad> fabrics = {
      {torus ? "ICI utilization %" : "NVLink utilization %", cluster_.scale_up_bandwidth(), {}},
      {torus ? "DCN utilization %" : "network (NIC) utilization %", cluster_.inter_node_bandwidth(),
       {}}};
  constexpr int kBins = 500;
  for (auto& f : fabrics) {
    f.bins.assign(kBins, 0.0);
  }
  const double bin_ps = std::max(1.0, static_cast<double>(end.ps()) / kBins);
  const int64_t domain = cluster_.scale_up_domain_size();
  std::set<uint32_t> traced;
  for (const OpRecord& r : timeline.ops) {
    const RankId global = sim.global_rank(r.rank);
    if (!selection_.contains(global) || r.end <= r.start) {
      continue;
    }
    traced.insert(global.value());
    const Op& op = sim.program_of(r.rank).op(r.op);
    double bus_bytes = 0;
    bool intra = false;
    if (const auto* c = std::get_if<CollectiveWork>(&op.work)) {
      const auto& members = sim.cost_group(sim.group_of(r.rank, c->group_slot));
      bus_bytes = c->bytes.as_double() *
                  collectives::bus_bandwidth_factor(c->kind, static_cast<int64_t>(members.size()));
      intra = one_domain(members, domain);
    } else if (const auto* p = std::get_if<PeerWork>(&op.work)) {
      bus_bytes = p->bytes.as_double();
      intra = one_domain({global, sim.global_rank(sim.peer_of(r.rank, p->peer_slot))}, domain);
    } else {
      continue;
    }
    FabricLoad& f = fabrics[intra ? 0 : 1];
    const double util = bus_bytes / (r.end - r.start).seconds() / f.per_rank.value();
    const double a = static_cast<double>(r.start.ps()) / bin_ps;
    const double b = static_cast<double>(r.end.ps()) / bin_ps;
    for (int i = static_cast<int>(a); i <= std::min(kBins - 1, static_cast<int>(b)); ++i) {
      const double overlap = std::min<double>(b, i + 1) - std::max<double>(a, i);
      if (overlap > 0) {
        f.bins[static_cast<size_t>(i)] += util * overlap;
      }
    }
  }
  const double ranks = std::max<double>(1.0, static_cast<double>(traced.size()));
  for (const auto& f : fabrics) {
    for (int i = 0; i < kBins; ++i) {
      const SimTime t = SimTime::from_ps(static_cast<int64_t>(i * bin_ps));
      const double v = std::min(100.0, 100.0 * f.bins[static_cast<size_t>(i)] / ranks);
      writer_->add_counter_sample(f.name, t, v);
    }
  }
  writer_->finish();
  file_->commit();
}

uint64_t TraceSetup::events() const { return writer_ ? writer_->events_written() : 0; }

}  // namespace meshsim::cli
