// Private: the constants of NCCL's tuner, per release (nccl.h).
//
// Values are those of NVIDIA/nccl 2.30.7 src/graph/tuning.cc (ncclTunerConstantsDefaults and the
// tables of ncclTopoTuneModel), with the differences of earlier releases (the diffs of tuning.cc
// between release tags).
// Units are NCCL's: microseconds and GB/s.
#pragma once

#include <array>

#include "meshsim/collectives/nccl.h"

namespace meshsim::collectives::detail {

using ProtoRow = std::array<double, kNumNcclProtocols>;     // LL, LL128, Simple
using NodeRow = std::array<double, 3>;                       // 1 node, 2 nodes, >= 3 nodes
using ArchTable = std::array<NodeRow, 4>;                     // Volta, Ampere, Hopper, Blackwell
enum class HwLink : uint8_t { kNvlink, kPci, kNet };

struct TunerConstants {
  std::array<ProtoRow, kNumNcclAlgorithms> base_latency{};
  std::array<std::array<ProtoRow, kNumNcclAlgorithms>, 3> hw_latency{};  // by HwLink
  ArchTable ll_max_bw{};          // row: arch on one node, CPU vendor across nodes (see .cc)
  ArchTable ring_ll128_per_channel{};
  ArchTable tree_ll128_per_channel{};
  ArchTable tree_per_channel{};
  ArchTable nvls_tree_per_channel{};  // 0: no cap (releases before 2.28)
  std::array<double, 4> nvls_efficiency{};  // 0: the pre-2.28 NVLS model
  std::array<std::array<double, 24>, kNumNcclProtocols> tree_correction{};

  // Release-dependent behaviour of ncclTopoTuneModel (tuning.cc at each release tag).
  double ring_ll_factor = 0.5;         // Ring LL bus bandwidth factor (2.18-2.20: 1/4)
  bool ring_ll_third_single_node = false;  // 2.18-2.20: 1/3 for single-node AG/RS/broadcast
  bool ring_ll128_low_ppn = false;     // 2.18-2.22: x0.7 (not 0.92) with one rank per node
  bool tree_factor_all = false;        // 2.18-2.22: x0.92 for every collective, not only AR
  bool tree_pattern_factor = true;     // 2.26+: x0.85 for the one-GPU-per-node tree pattern
  bool ppn1_uses_tree_net = true;      // 2.23+: one rank per node prices NET hops as Tree
  bool inter_steps_minus_one = true;   // 2.23+: all-reduce ring has 2(N-1) network steps, not 2N
  bool nvls_allgather = true;          // 2.19+: NVLS for all-gather and reduce-scatter
  bool pat = true;                     // 2.23+
  double pat_factor = 0.75;            // 2.23: 0.85; 2.24+: 0.75
  bool tree_nvls_correction = true;    // 2.29+: tree correction on NVLSTree (Blackwell, x86)
};

TunerConstants tuner_constants(NcclVersion version);

}  // namespace meshsim::collectives::detail
