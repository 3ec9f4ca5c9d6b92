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
// nccl/README.md @ 841f5466, 2 MiB to 16 GiB; nccl_runtime.h).
constexpr double kNvlsBaseUs = 9.0;
constexpr double kNvlsChunkOverheadUs = 0.7;
constexpr int kNvlsPipelineDepth = 15;
constexpr double kNvlsMaxChunk = 128 * 1024;  // NCCL_NVLS_CHUNKSIZE default (src/init.cc)

// calcCollChunking for NVLS (src/enqueue.cc, NCCL 2.30.7): the 128 KiB chunk shrinks to 64 KiB
// below 64 x ops chunks, then to 32 KiB below 8 x ops, to 16 KiB below 2 x ops, ops being the
// channels times the NVLS heads; NVLSTree caps it at 64 KiB from 4 nodes on.
double nvls_chunk(double bytes, int channels, int heads, bool tree, int nodes) {
  const double ops = static_cast<double>(channels) * heads;
  double c = kNvlsMaxChunk;
  if (bytes < 64 * ops * c) {
    c /= 2;
  }
  if (bytes < 8 * ops * c) {
    c /= 2;
  }
  if (bytes < 2 * ops * c) {
    c /= 2;
  }
  if (tree && nodes >= 4) {
    c = std::min(c, 64.0 * 1024);
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

// Simple protocol steps whose overhead the platform adds: ring steps; chain and tree hops.
int simple_steps(const NcclSystem& s, A a, C coll) {
  const int n = s.ranks;
  if (a == A::kRing) {
    return coll == C::kAllReduce                                    ? 2 * (n - 1)
           : (coll == C::kAllGather || coll == C::kReduceScatter) ? n - 1
                                                                    : n;
  }
  if (a == A::kTree) {
    const int log_nodes = s.nodes > 1 ? static_cast<int>(std::floor(std::log2(s.nodes))) : 0;
    return 2 * (s.ranks_per_node() - 1 + log_nodes);
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
  if (choice.protocol == P::kLL128) {
    bw *= platform.ll128_efficiency;
  }
  if (choice.algorithm == A::kNvls || choice.algorithm == A::kNvlsTree) {
    const TunerConstants k = tuner_constants(s.version);
    const auto nvlink = static_cast<size_t>(HwLink::kNvlink);
    const double hop = k.hw_latency[nvlink][static_cast<size_t>(choice.algorithm)][2];
    const double per_channel = bw / t.channels;
    const double c = nvls_chunk(n, t.channels, s.ranks_per_node(),
                                choice.algorithm == A::kNvlsTree, s.nodes);
    const double k0 = kNvlsChunkOverheadUs * 1e-6 * per_channel;  // bytes per chunk overhead
    const double g = (c / (c + k0)) / (kNvlsMaxChunk / (kNvlsMaxChunk + k0));
    bw *= g;
    const double fill_us = (kNvlsPipelineDepth - 1) * c / (bw / t.channels) * 1e6;
    lat_us = lat_us - hop + kNvlsBaseUs + fill_us;
  }
  t.latency = Microseconds(lat_us);
  t.rate_cap = BytesPerSec::of(bw);
  return t;
}

P2pTiming nccl_p2p(NcclVersion version, bool network, Bytes bytes) {
  // NCCL_P2P_LL_THRESHOLD: 16 KiB per channel; nccl-tests' sendrecv runs on the channels of one
  // peer, so LL up to 64 KiB (4 channels across the network, nccl_model.md section 8).
  const bool ll = bytes.count() <= 64 * 1024;
  const TunerConstants k = tuner_constants(version);
  const auto ring = static_cast<size_t>(A::kRing);
  const auto proto = static_cast<size_t>(ll ? P::kLL : P::kSimple);
  const auto link = static_cast<size_t>(network ? HwLink::kNet : HwLink::kNvlink);
  return {Microseconds(k.base_latency[ring][proto] + k.hw_latency[link][ring][proto]), ll};
}

}  // namespace meshsim::collectives::detail
