// Default bandwidth efficiencies of collective traffic, by the chip's NVLink generation.
//
// Why: NVLink line rate is not what a collective achieves. Every NVLink packet carries protocol
// overhead, so NCCL's own topology model (src/graph/topo.h, NVIDIA/nccl) rates one link at
//   SM80_NVLINK_BW 20.0 GB/s (A100, NVLink 3, 25 GB/s line rate)  -> 0.800
//   SM90_NVLINK_BW 20.6 GB/s (H100/H200, NVLink 4, 25 GB/s)        -> 0.824
//   SM100_NVLINK_BW 40.1 GB/s (B200/GB200, NVLink 5, 50 GB/s)      -> 0.802
// and S. Jeaugey (NCCL) states "450GB/s is the line rate. With the protocol overhead (~20%) NCCL
// can get an effective NVLink bandwidth of 370GB/s" (NVIDIA/nccl-tests issue #212, 2024-05-06):
// 18 x 20.6 = 370.8 GB/s. nccl-tests' ring all-reduce busbw on 8x H100 is 365-370 GB/s
// (NVIDIA/nccl issue #1455).
// In-switch reduction (NVLS) reaches a further fraction of that: NCCL's nvlsEfficiency
// (src/tuning/nvls.cc) is 0.85 on Hopper and 0.74 on Blackwell.
// Other link kinds (ICI, PCIe, InfiniBand/RoCE, DCN) keep 1: no sourced figure yet.
//
// These belong with the chip in the hardware catalogue (topology/chips.json, "nvlink"), next to
// the line rate they derate; until the catalogue carries them they live here, keyed by NVLink
// generation.
#include "meshsim/collectives/schedule.h"

namespace meshsim::collectives {

BandwidthEfficiency BandwidthEfficiency::defaults_for(const topology::ClusterSpec& spec) {
  BandwidthEfficiency e;
  if (!spec.chip.nvlink) {
    return e;
  }
  double& nvlink = e.link[static_cast<size_t>(topology::LinkKind::kNvlink)];
  switch (spec.chip.nvlink->generation) {
    case 3:
      nvlink = 20.0 / 25.0;
      break;
    case 4:
      nvlink = 20.6 / 25.0;
      e.in_switch = 0.85;
      break;
    case 5:
      nvlink = 40.1 / 50.0;
      e.in_switch = 0.74;
      break;
    default:
      break;
  }
  return e;
}

}  // namespace meshsim::collectives
