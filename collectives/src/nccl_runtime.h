// Private: how long what NCCL chose really takes, as a latency and a rate cap (comm_shape.h).
//
// NCCL's tuner is a selection model: its constants put the switch points in the right place and
// match the asymptotes, but at 2-256 MiB measured runs are up to 1.5x slower than its lat + n/bw
// (the nccl-tests sweeps of validation/collectives/). What it leaves out, and what this adds, each
// a physical term:
//  * NVLS and NVLSTree run in chunks (src/enqueue.cc calcCollChunking: 128 KiB, shrunk to 64, 32
//    and 16 KiB for smaller operations) on `nvls_channels` channels; every chunk pays a fixed
//    synchronisation cost c0 per channel, so a channel moving chunks of c at NCCL's per-channel
//    rate r runs at r c / (c + c0 r), and the first L loops of the kernel (a loop is one chunk
//    per NVLS head, h heads) fill the pipeline. With the rate normalised so that NCCL's own
//    bandwidth holds at the largest chunk:
//        cap  = bw x g(c),   g(c) = [c / (c + c0 r)] / [c_max / (c_max + c0 r)]
//        lat  = NCCL's latency - its NVLink NVLS hop (25 us) + base + L h c / (cap / channels)
//    Fitted on the dev sweep of 8x H100 all-reduce (NVIDIA/dgxc-benchmarking, 2 MiB to 16 GiB:
//    every point within 3.2 %): base 9 us, c0 0.7 us, L h = 14 chunks on h = 8 heads (L = 1.75).
//    Blackwell is assumed to behave the same (the same NVLS kernels); no Blackwell sweep is in
//    the dev set.
//  * Blackwell's low-latency protocols run at the per-channel rates NCCL re-measured after 2.25's
//    placeholder rows (twice Hopper's), and LL on one node at Hopper's per-CTA rate (see
//    blackwell_rate in the .cc); the choice stays the run's release's.
//  * The platform (topology::CollectivePlatform, measured per cluster): a per-step overhead of
//    the Simple protocol beyond NCCL's (ring: one per ring step; tree: one per chain or tree hop
//    up and down), and the fraction of LL128's bandwidth achieved.
// The launch floor is the shape's `floor`, applied by the network model.
#pragma once

#include "meshsim/collectives/nccl.h"

namespace meshsim::collectives::detail {

struct RuntimeTiming {
  Duration latency;
  BytesPerSec rate_cap;
  int channels = 0;
};

RuntimeTiming nccl_runtime(const NcclTuner& tuner, NcclCollective coll, NcclTuner::Choice choice,
                           Bytes bytes, const topology::CollectivePlatform& platform);

// Latency of one send/recv of `bytes` between GPUs on NVLink (`network` false) or across nodes,
// with the protocol NCCL's p2p engine uses (LL up to its threshold, else Simple):
// base + one hop of NCCL's ring latency for that link and protocol. `ll` tells which protocol.
struct P2pTiming {
  Duration latency;
  bool ll = false;
};
P2pTiming nccl_p2p(NcclVersion version, bool network, Bytes bytes);

}  // namespace meshsim::collectives::detail
