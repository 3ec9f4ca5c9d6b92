// The run-time side of NCCL's collectives: channels, chunks and the terms its tuner leaves out
// (nccl_runtime.h).
#include "nccl_runtime.h"

#include <algorithm>
#include <cmath>

#include "meshsim/sim/error.h"
#include "nccl_constants.h"

namespace meshsim::collectives::detail {
namespace {

using A = NcclAlgorithm;
using P = NcclProtocol;
using C = NcclCollective;

// The NVLS chunk model, fitted to the dev sweep of 8x H100 NVLS all-reduce (dgxc-benchmarking
// nccl/README.md @ 841f5466, 2 MiB to 16 GiB; nccl_runtime.h). The pipeline fill was fitted as
// 14 chunks on 8 heads; it is counted in loops of the NVLS kernel (a loop = one chunk per head,
// src/device/all_reduce.h RunWorkColl<..., NCCL_ALGO_NVLS, ...>: loopCount = nHeads x chunk), so
// 1.75 loops.
constexpr double kNvlsBaseUs = 9.0;
constexpr double kNvlsChunkOverheadUs = 0.7;
constexpr double kNvlsFillLoops = 14.0 / 8;
constexpr double kNvlsMaxChunk = 128 * 1024;  // NCCL_NVLS_CHUNKSIZE default (src/init.cc)

// calcCollChunking (src/enqueue.cc, NCCL 2.30.7; the same at v2.20.5-1 and v2.25.1-1), ops
// being the channels times the NVLS heads (channels[0].nvls.nHeads: one head per channel of the
// NVLS graph, at most NCCL_MAX_NVLS_ARITY = 32, src/graph/search.cc ncclTopoCompute and
// src/graph/connect.cc connectNvls):
//  * NVLS: the 128 KiB chunk (NCCL_NVLS_CHUNKSIZE, src/init.cc) shrinks to 64 KiB below 64 x ops
//    chunks, then to 32 KiB below 8 x ops, to 16 KiB below 2 x ops;
//  * NVLSTree: 128 KiB, capped at 64 KiB from 4 nodes on (NCCL_NVLSTREE_MAX_CHUNKSIZE default),
//    shrinks to 64 KiB below 4 x ops chunks and to 32 KiB below 1 x ops, never further.
double nvls_chunk(double bytes, int channels, int heads, bool tree, int nodes) {
  const double ops = static_cast<double>(channels) * heads;
  double c = kNvlsMaxChunk;
  if (tree) {
    c = nodes >= 4 ? 64.0 * 1024 : c;
    if (bytes < 4 * ops * c && c > 64 * 1024) {
      c = 64.0 * 1024;
    }
    if (bytes < ops * c && c > 32 * 1024) {
      c = 32.0 * 1024;
    }
    return c;
  }
  if (bytes < 64 * ops * c) {
    c /= 2;
  }
  if (bytes < 8 * ops * c) {
    c /= 2;
  }
  if (bytes < 2 * ops * c) {
    c /= 2;
  }
  return c;
}

// Channels used for one operation (topoGetAlgoInfo): ring and tree drop channels while the
// operation has fewer than channels x threads x threshold bytes (512 threads; threshold 8 bytes
// for LL, times the ranks for the ring, 8 for LL128 with 640 threads, 64 for Simple).
int channels_used(const NcclSystem& s, A a, P p, double bytes) {
  if (a == A::kNvls || a == A::kNvlsTree) {
    return s.nvls_channels;
  }
  int nc = s.comm_channels;
  const double threads = p == P::kLL128 ? 640 : 512;
  double threshold = p == P::kSimple ? 64 : 8;
  if (a == A::kRing && p == P::kLL) {
    threshold *= s.ranks;
  }
  while (nc > 1 && bytes < nc * threads * threshold) {
    --nc;
  }
  return std::max(nc, 1);
}

// Bus bandwidth of an algorithm bandwidth: NCCL's own conversion in ncclTopoTuneModel (ring
// n / nsteps, tree 1/2).
double bus_per_algorithm(const NcclSystem& s, A a, C coll) {
  const int n = s.ranks;
  if (a == A::kTree) {
    return 2.0;
  }
  return coll == C::kAllReduce                                    ? 2.0 * (n - 1) / n
         : (coll == C::kAllGather || coll == C::kReduceScatter) ? (n - 1.0) / n
                                                                  : 1.0;
}

// What Blackwell's low-latency protocols achieve. NCCL 2.25 added Blackwell's rows as twice
// Hopper's (src/graph/tuning.cc at v2.25.1-1: `2*141.0`, `2*36.7`, ...); 2.28 and 2.29 replaced
// the LL128 and tree rows with re-measured values (ring LL128 per channel 2 x 36.7 -> 40, tree
// LL128 2 x 36.7 -> 55.6 on one node, tree 2 x 38.7 -> 70), about Hopper's per channel rather than
// twice it: the low-latency protocols are bound per channel (one CTA polling its flags), not by
// the link. The run still chooses with its release's table; the rate it runs at is
//  * the newest modelled release's figure where that is lower (its re-measured rows), and
//  * for LL on one node, whose Blackwell row (2 x 141) no release re-measured, Hopper's per-CTA
//    rate: NCCL's 141 GB/s busbw over the 24 CTAs of 8x H100 (llMaxBws, 2.21+), which the dev
//    sweep of 8x H100 all-reduce confirms (137 GB/s marginal busbw at 0.5-1 MiB, NVIDIA/dgxc-
//    benchmarking nccl/README.md @ 841f5466).
// Across nodes NCCL keys the LL cap on the CPU vendor (not a placeholder): unchanged.
constexpr double kHopperLlBusPerCta = 141.0 / 24;

double blackwell_rate(const NcclTuner& tuner, C coll, NcclTuner::Choice choice, Bytes bytes,
                      double bw) {
  const NcclSystem& s = tuner.system();
  NcclSystem newest_system = s;
  newest_system.version = kDefaultNcclVersion;
  const auto newest =
      NcclTuner(newest_system).priced(coll, choice.algorithm, choice.protocol, bytes);
  if (newest) {
    bw = std::min(bw, newest->bandwidth.value());
  }
  if (choice.protocol == P::kLL && s.nodes == 1) {
    const double per_cta_bus = s.comm_channels * kHopperLlBusPerCta * 1e9;
    bw = std::min(bw, per_cta_bus / bus_per_algorithm(s, choice.algorithm, coll));
  }
  return bw;
}

// Simple protocol steps whose overhead the platform adds: the steps of a ring inside one NVLink
// domain, and a tree's hops along its chain inside each domain. The overhead is measured there
// (single-node sweeps); across domains every ring step has a network hop, whose latency NCCL's
// own per-step figure (hwLat[NET]) already prices, and the NVLink hops of the same step run
// beside it.
int simple_steps(const NcclSystem& s, A a, C coll) {
  const int n = s.ranks;
  if (a == A::kRing) {
    if (s.nodes > 1) {
      return 0;
    }
    return coll == C::kAllReduce                                    ? 2 * (n - 1)
           : (coll == C::kAllGather || coll == C::kReduceScatter) ? n - 1
                                                                    : n;
  }
  if (a == A::kTree) {
    return 2 * (s.ranks_per_node() - 1);
  }
  return 0;
}

}  // namespace

RuntimeTiming nccl_runtime(const NcclTuner& tuner, NcclCollective coll, NcclTuner::Choice choice,
                           Bytes bytes, const topology::CollectivePlatform& platform) {
  const NcclSystem& s = tuner.system();
  const auto entry = tuner.priced(coll, choice.algorithm, choice.protocol, bytes);
  SIM_CHECK(entry.has_value(), "NCCL chose {} / {}, which has no entry",
            to_string(choice.algorithm), to_string(choice.protocol));
  const double n = bytes.as_double();
  double lat_us = entry->latency.microseconds();
  double bw = entry->bandwidth.value();  // bytes/s
  RuntimeTiming t;
  t.channels = channels_used(s, choice.algorithm, choice.protocol, n);
  if (choice.protocol == P::kSimple) {
    lat_us +=
        simple_steps(s, choice.algorithm, coll) * platform.simple_step_overhead.microseconds();
  }
  if (s.arch == GpuArch::kBlackwell) {
    bw = blackwell_rate(tuner, coll, choice, bytes, bw);
  }
  if (choice.protocol == P::kLL128) {
    bw *= platform.ll128_efficiency;
  }
  if (choice.algorithm == A::kNvls || choice.algorithm == A::kNvlsTree) {
    const TunerConstants k = tuner_constants(s.version);
    const auto nvlink = static_cast<size_t>(HwLink::kNvlink);
    const double hop = k.hw_latency[nvlink][static_cast<size_t>(choice.algorithm)][2];
    const double per_channel = bw / t.channels;
    const double c =
        nvls_chunk(n, t.channels, s.nvls.channels, choice.algorithm == A::kNvlsTree, s.nodes);
    const double k0 = kNvlsChunkOverheadUs * 1e-6 * per_channel;  // bytes per chunk overhead
    const double g = (c / (c + k0)) / (kNvlsMaxChunk / (kNvlsMaxChunk + k0));
    bw *= g;
    const double fill_us = kNvlsFillLoops * s.nvls.channels * c / (bw / t.channels) * 1e6;
    lat_us = lat_us - hop + kNvlsBaseUs + fill_us;
  }
  t.latency = Microseconds(lat_us);
  t.rate_cap = BytesPerSec::of(bw);
  return t;
}

P2pTiming nccl_p2p(NcclVersion version, bool network, Bytes bytes) {
  // NCCL_P2P_LL_THRESHOLD: 16 KiB per channel; nccl-tests' sendrecv runs on the channels of one
  // peer, so LL up to 64 KiB (4 channels across the network).
  const bool ll = bytes.count() <= 64 * 1024;
  const TunerConstants k = tuner_constants(version);
  const auto ring = static_cast<size_t>(A::kRing);
  const auto proto = static_cast<size_t>(ll ? P::kLL : P::kSimple);
  const auto link = static_cast<size_t>(network ? HwLink::kNet : HwLink::kNvlink);
  return {Microseconds(k.base_latency[ring][proto] + k.hw_latency[link][ring][proto]), ll};
}

}  // namespace meshsim::collectives::detail
