// NcclTuner: NCCL's latency and bandwidth tables (ncclTopoTuneModel) and its choice
// (ncclTopoGetAlgoTime, topoGetAlgoInfo), NCCL 2.30.7, restated in our own code.
//
// Notation below: n ranks on N nodes, ppn = n / N, col = min(N, 3) - 1 (the column of the
// per-architecture tables), g the algorithm's graph (PAT prices on the tree graph, NVLSTree on the
// NVLS graph, CollNet on the tree graph as meshsim has no separate CollNet search), nsteps the
// ring steps of the collective (2(n-1) all-reduce, n-1 all-gather / reduce-scatter, n otherwise).
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "meshsim/collectives/nccl.h"
#include "meshsim/sim/error.h"
#include "nccl_constants.h"

namespace meshsim::collectives {
namespace {

using detail::HwLink;
using detail::TunerConstants;
using A = NcclAlgorithm;
using P = NcclProtocol;
using C = NcclCollective;

int idx(A a) { return static_cast<int>(a); }
int idx(P p) { return static_cast<int>(p); }
int log2_floor(double x) { return x >= 1.0 ? static_cast<int>(std::floor(std::log2(x))) : -1; }

// Which (collective, algorithm) pairs exist on the system (section 3.1).
bool applies(C coll, A a, const NcclSystem& s, const TunerConstants& k) {
  const bool ag_rs = coll == C::kAllGather || coll == C::kReduceScatter;
  if ((coll == C::kBroadcast || coll == C::kReduce) && a != A::kRing) {
    return false;
  }
  if (ag_rs && a != A::kPat && a != A::kRing && a != A::kNvls && a != A::kCollNetDirect) {
    return false;
  }
  const bool nvls_family = a == A::kNvls || a == A::kNvlsTree;
  const bool collnet = a == A::kCollNetDirect || a == A::kCollNetChain;
  if ((coll == C::kAllReduce && a == A::kPat) || (a == A::kNvlsTree && s.nodes == 1) ||
      (nvls_family && !s.has_nvls) || (collnet && !s.has_collnet) ||
      (a == A::kNvls && s.nodes > 1 && !s.has_collnet) || (nvls_family && ag_rs && s.nodes > 1) ||
      (nvls_family && ag_rs && !k.nvls_allgather)) {
    return false;
  }
  if (a == A::kPat && (!k.pat || s.nodes != s.ranks)) {
    return false;
  }
  return true;
}

const NcclGraph& graph_of(A a, const NcclSystem& s) {
  switch (a) {
    case A::kRing:
      return s.ring;
    case A::kNvls:
    case A::kNvlsTree:
      return s.nvls;
    default:
      return s.tree;
  }
}

struct Ctx {
  const NcclSystem& s;
  const TunerConstants& k;
  int col;
  double ll_max;
  double ppn;
  int arch;
};

// NVLS and NVLSTree per-channel bandwidth (section 3.2; the pre-2.28 form where the release has
// no NVLS efficiency).
double nvls_channel_bw(C coll, A a, const NcclGraph& g, const Ctx& c) {
  const double eff = c.k.nvls_efficiency[static_cast<size_t>(c.arch)];
  const int nodes = c.s.nodes;
  if (eff <= 0.0) {
    const double inter = a == A::kNvlsTree && nodes > 2 ? g.bw_inter / 2 : g.bw_inter;
    return std::min(g.bw_intra, inter);
  }
  const double intra = g.bw_intra * eff * (g.channels - 1) / g.channels *
                       (coll == C::kAllReduce ? 2.0 : (c.ppn - 1) / c.ppn);
  const double inter = g.bw_inter * (a == A::kNvlsTree && nodes <= 2 ? 2.0 : 1.0);
  double bw = std::min(intra, inter);
  const double cap =
      c.k.nvls_tree_per_channel[static_cast<size_t>(c.arch)][static_cast<size_t>(c.col)];
  if (a == A::kNvlsTree && cap > 0) {
    bw = std::min(bw, cap);
  }
  return bw;
}

// Bus bandwidth after the per-algorithm refinements, then converted to algorithm bandwidth.
double algorithm_bw(C coll, A a, P p, int nsteps, const Ctx& c) {
  const NcclGraph& g = graph_of(a, c.s);
  const auto arch = static_cast<size_t>(c.arch);
  const auto col = static_cast<size_t>(c.col);
  const bool collnet = a == A::kCollNetDirect || a == A::kCollNetChain;
  const bool nvls = a == A::kNvls || a == A::kNvlsTree;
  double bw = c.s.nodes <= 2 || collnet ? g.bw_intra : g.bw_inter;
  if (nvls) {
    bw = nvls_channel_bw(coll, a, g, c);
  }
  const double ch = g.channels;
  double bus = ch * bw;
  if (a == A::kRing && p == P::kLL) {
    const bool third =
        c.k.ring_ll_third_single_node && c.s.nodes == 1 &&
        (coll == C::kAllGather || coll == C::kReduceScatter || coll == C::kBroadcast);
    bus = std::min(c.ll_max, bus * (third ? 1.0 / 3.0 : c.k.ring_ll_factor));
  }
  if (a == A::kRing && p == P::kLL128) {
    const double f = c.k.ring_ll128_low_ppn && c.ppn < 2 ? 0.7 : 0.92;
    bus = std::min(bus * f, ch * c.k.ring_ll128_per_channel[arch][col]);
  }
  if (a == A::kTree && (coll == C::kAllReduce || c.k.tree_factor_all)) {
    bus = std::min(bus * 0.92, ch * c.k.tree_per_channel[arch][col]);
  }
  if (a == A::kTree && p == P::kLL) {
    bus = std::min(bus / 3.8, c.ll_max);
  }
  if (a == A::kTree && p == P::kLL128) {
    bus = std::min(bus * (c.s.nodes == 1 ? 7.0 / 9.0 : 120.0 / 128.0),
                   ch * c.k.tree_ll128_per_channel[arch][col]);
  }
  if (a == A::kTree && g.tree_pattern && c.k.tree_pattern_factor) {
    bus *= 0.85;
  }
  if (a == A::kPat) {
    bus *= c.k.pat_factor;
  }
  const bool ag_rs = coll == C::kAllGather || coll == C::kReduceScatter;
  if (a == A::kCollNetDirect) {
    if (ag_rs) {
      bus = c.ppn * std::min(g.bw_intra, 0.9 * g.bw_inter);
    } else {
      double f = c.ppn / ch;
      f -= (f - 1) / 2;
      bus /= f;
      if (c.s.arch >= GpuArch::kHopper) {
        bus *= 0.85;
      }
    }
  }
  if (a != A::kRing && ag_rs) {
    return bus;  // non-ring AG/RS: the bus bandwidth prices nBytes directly
  }
  const double n = c.s.ranks;
  double ratio = 0.5;
  if (a == A::kRing) {
    ratio = n / nsteps;
  } else if (nvls) {
    ratio = c.k.nvls_efficiency[arch] > 0 ? n / nsteps : 5.0 / 6.0;
  }
  return bus * ratio;
}

double latency_us(C coll, A a, P p, int nsteps, const Ctx& c, double net_overhead) {
  const NcclGraph& g = graph_of(a, c.s);
  const auto& hw = c.k.hw_latency;
  const auto intra_hw = static_cast<size_t>(g.nvlink ? HwLink::kNvlink : HwLink::kPci);
  const auto net = static_cast<size_t>(HwLink::kNet);
  const int nodes = c.s.nodes;
  const double local = c.ppn - 1;  // other ranks of the node
  const double intra = hw[intra_hw][static_cast<size_t>(idx(a))][static_cast<size_t>(idx(p))];
  const A inter_row = c.ppn == 1 && c.k.ppn1_uses_tree_net ? A::kTree : a;
  const double inter = hw[net][static_cast<size_t>(idx(inter_row))][static_cast<size_t>(idx(p))];
  double lat = c.k.base_latency[static_cast<size_t>(idx(a))][static_cast<size_t>(idx(p))];
  const int log_nodes = log2_floor(nodes);
  switch (a) {
    case A::kRing: {
      const size_t link = nodes == 1 ? intra_hw : net;
      if (coll == C::kBroadcast || coll == C::kReduce) {
        const A row = g.same_channels || p != P::kSimple ? A::kRing : A::kTree;
        const double l = hw[link][static_cast<size_t>(idx(row))][static_cast<size_t>(idx(p))];
        lat += g.same_channels ? l : nsteps * l;
        break;
      }
      const double overhead = nodes > 1 ? net_overhead * (p == P::kSimple ? 3 : 1) : 0;
      const double il = std::max(intra, overhead);
      int inter_steps = 0;
      if (nodes > 1) {
        inter_steps = coll == C::kAllReduce
                          ? (c.k.inter_steps_minus_one ? 2 * (nodes - 1) : 2 * nodes)
                          : nodes - 1;
      }
      lat += (nsteps - inter_steps) * il + inter_steps * inter;
      break;
    }
    case A::kTree:
      lat += 2 * (local * intra + log_nodes * inter);
      break;
    case A::kCollNetDirect:
      lat += 2 * (std::min(1.0, local) * intra + local * 0.4) + inter;
      break;
    case A::kCollNetChain:
      lat += 2 * local * intra + inter;
      break;
    case A::kNvls:
      lat = intra + (nodes > 1 ? inter : 0);
      break;
    case A::kNvlsTree:
      lat += intra + 2 * log_nodes * inter;
      break;
    case A::kPat:
      lat += log_nodes * inter / 3.5 + 2.8 * c.s.ranks;
      break;
  }
  return lat;
}

}  // namespace

std::optional<NcclVersion> parse_nccl_version(std::string_view s) {
  // Two or three dot-separated decimal numbers, 2.18 or later.
  std::vector<int> parts;
  size_t start = 0;
  while (start <= s.size() && parts.size() < 4) {
    const size_t dot = std::min(s.find('.', start), s.size());
    const std::string_view part = s.substr(start, dot - start);
    if (part.empty() || part.size() > 4 ||
        !std::all_of(part.begin(), part.end(), [](char ch) { return ch >= '0' && ch <= '9'; })) {
      return std::nullopt;
    }
    parts.push_back(std::stoi(std::string(part)));
    start = dot + 1;
  }
  if (parts.size() < 2 || parts.size() > 3 || parts[0] != 2 || parts[1] < 18) {
    return std::nullopt;
  }
  return NcclVersion{parts[0], parts[1]};
}

std::string to_string(NcclVersion v) { return fmt::format("{}.{}", v.major, v.minor); }

std::optional<NcclCollective> nccl_collective(CollectiveKind kind) {
  switch (kind) {
    case CollectiveKind::kAllReduce:
      return C::kAllReduce;
    case CollectiveKind::kReduceScatter:
      return C::kReduceScatter;
    case CollectiveKind::kAllGather:
      return C::kAllGather;
    case CollectiveKind::kBroadcast:
      return C::kBroadcast;
    case CollectiveKind::kReduce:
      return C::kReduce;
    case CollectiveKind::kAllToAll:
      return std::nullopt;
  }
  return std::nullopt;
}

NcclTuner::NcclTuner(const NcclSystem& system) : system_(system) {
  const NcclSystem& s = system_;
  // Ranks may spread unevenly over the nodes (60 on 8): NCCL's tuner keeps ppn = nRanks / nNodes
  // as a float (src/graph/tuning.cc ncclTopoTuneModel, "float ppn = (float)nRanks / nNodes").
  SIM_CHECK(s.ranks >= 1 && s.nodes >= 1 && s.ranks >= s.nodes,
            "NCCL system of {} ranks on {} nodes", s.ranks, s.nodes);
  const TunerConstants k = detail::tuner_constants(s.version);
  tree_correction_ = k.tree_correction;
  nvls_tree_correction_ = k.tree_nvls_correction;
  const int col = std::min(s.nodes, 3) - 1;
  // The low-latency cap row: the GPU architecture on one node; across nodes NCCL keys it on the
  // CPU vendor (Intel and others row 0, AMD row 1).
  const int ll_row = s.nodes == 1 ? static_cast<int>(s.arch)
                                  : (s.cpu == topology::HostCpu::kAmd ? 1 : 0);
  const Ctx c{s, k, col, k.ll_max_bw[static_cast<size_t>(ll_row)][static_cast<size_t>(col)],
              static_cast<double>(s.ranks) / s.nodes, static_cast<int>(s.arch)};
  const double net_overhead = s.cpu == topology::HostCpu::kAmd ? 2.0 : 1.0;  // getNetOverhead
  for (int ci = 0; ci < 5; ++ci) {
    const auto coll = static_cast<C>(ci);
    const int n = s.ranks;
    const int nsteps = coll == C::kAllReduce ? 2 * (n - 1)
                       : (coll == C::kAllGather || coll == C::kReduceScatter) ? n - 1
                                                                               : n;
    for (int ai = 0; ai < kNumNcclAlgorithms; ++ai) {
      const auto a = static_cast<A>(ai);
      const NcclGraph& g = graph_of(a, s);
      if (g.channels <= 0 || !applies(coll, a, s, k)) {
        continue;
      }
      for (int pi = 0; pi < kNumNcclProtocols; ++pi) {
        const auto p = static_cast<P>(pi);
        const bool simple_only = a != A::kTree && a != A::kRing;
        if ((simple_only && p != P::kSimple) || (p == P::kLL128 && !s.has_ll128) ||
            ((a == A::kNvls || a == A::kNvlsTree) && g.channels < 2)) {
          continue;
        }
        Cell& cell =
            table_[static_cast<size_t>(ci)][static_cast<size_t>(ai)][static_cast<size_t>(pi)];
        cell.bandwidth_gbps = algorithm_bw(coll, a, p, nsteps, c);
        cell.latency_us = latency_us(coll, a, p, nsteps, c, net_overhead);
      }
    }
  }
}

const NcclTuner::Cell& NcclTuner::cell(NcclCollective c, NcclAlgorithm a, NcclProtocol p) const {
  return table_[static_cast<size_t>(c)][static_cast<size_t>(idx(a))][static_cast<size_t>(idx(p))];
}

std::optional<NcclTuner::Entry> NcclTuner::entry(NcclCollective coll, NcclAlgorithm a,
                                                 NcclProtocol p) const {
  const Cell& x = cell(coll, a, p);
  if (x.bandwidth_gbps <= 0) {
    return std::nullopt;
  }
  return Entry{Microseconds(x.latency_us), GBps(x.bandwidth_gbps)};
}

std::optional<NcclTuner::Entry> NcclTuner::priced(NcclCollective coll, NcclAlgorithm a,
                                                  NcclProtocol p, Bytes bytes) const {
  const Cell& x = cell(coll, a, p);
  if (x.bandwidth_gbps <= 0) {
    return std::nullopt;
  }
  const NcclSystem& s = system_;
  double bw = x.bandwidth_gbps;
  double lat = x.latency_us;
  const double n = bytes.as_double();
  const int step = bytes.count() >= 64 ? log2_floor(n / 64.0) : -1;
  const auto& corr = tree_correction_[static_cast<size_t>(idx(p))];
  if (a == A::kTree && coll == C::kAllReduce && step >= 0 && step < 23) {
    bw *= corr[static_cast<size_t>(step)];
  }
  if (a == A::kNvlsTree && coll == C::kAllReduce && step >= 0 && step < 24 &&
      s.arch == GpuArch::kBlackwell && s.cpu != topology::HostCpu::kArm && nvls_tree_correction_) {
    bw *= corr[static_cast<size_t>(step)];
  }
  if (a == A::kRing && p == P::kSimple && s.nodes > 1 && coll == C::kAllReduce &&
      n / (static_cast<double>(s.comm_channels) * s.ranks) >= 64) {
    lat *= s.arch < GpuArch::kAmpere ? 1.9 : 1.4;
  }
  return Entry{Microseconds(lat), GBps(bw)};
}

std::optional<Duration> NcclTuner::estimate(NcclCollective coll, NcclAlgorithm a, NcclProtocol p,
                                            Bytes bytes) const {
  const auto e = priced(coll, a, p, bytes);
  if (!e) {
    return std::nullopt;
  }
  // NCCL's arithmetic in microseconds, rounded once.
  return Microseconds(e->latency.microseconds() + bytes.as_double() / e->bandwidth.value() * 1e6);
}

std::optional<NcclTuner::Choice> NcclTuner::choose(NcclCollective coll, Bytes bytes,
                                                   NcclAllowed allowed) const {
  std::optional<Choice> best;
  for (int ai = 0; ai < kNumNcclAlgorithms; ++ai) {
    for (int pi = 0; pi < kNumNcclProtocols; ++pi) {
      const auto a = static_cast<A>(ai);
      const auto p = static_cast<P>(pi);
      if (!allowed.allows(a) || !allowed.allows(p)) {
        continue;
      }
      const auto t = estimate(coll, a, p, bytes);
      if (t && (!best || *t < best->estimate)) {
        best = Choice{a, p, *t};
      }
    }
  }
  return best;
}

}  // namespace meshsim::collectives
