// NCCL's tuner constants by release. The 2.30.7 values first (from src/graph/tuning.cc
// ncclTunerConstantsDefaults), then the changes that earlier releases did not have yet, newest
// first (the diffs of tuning.cc between the release tags
// v2.18.6-1 ... v2.29.7-1). Only the changes that alter a price are modelled; the CollNet
// arity details of 2.20 and the 2.27 multi-node NVLS AG/RS rules are not.
#include "nccl_constants.h"

namespace meshsim::collectives::detail {
namespace {

constexpr int kTree = static_cast<int>(NcclAlgorithm::kTree);
constexpr int kRing = static_cast<int>(NcclAlgorithm::kRing);
constexpr int kCollNetDirect = static_cast<int>(NcclAlgorithm::kCollNetDirect);
constexpr int kCollNetChain = static_cast<int>(NcclAlgorithm::kCollNetChain);
constexpr int kNvls = static_cast<int>(NcclAlgorithm::kNvls);
constexpr int kNvlsTree = static_cast<int>(NcclAlgorithm::kNvlsTree);
constexpr int kPat = static_cast<int>(NcclAlgorithm::kPat);
constexpr int kNvlinkHw = static_cast<int>(HwLink::kNvlink);
constexpr int kPciHw = static_cast<int>(HwLink::kPci);
constexpr int kNetHw = static_cast<int>(HwLink::kNet);
constexpr int kAmpere = 1;
constexpr int kHopper = 2;
constexpr int kBlackwell = 3;

TunerConstants release_2_30() {
  TunerConstants c;
  c.base_latency[kTree] = {6.8, 14.0, 8.4};
  c.base_latency[kRing] = {6.6, 14.0, 8.4};
  c.base_latency[kPat] = {8.0, 8.0, 8.0};  // CollNet, NVLS, NVLSTree: 0
  auto& nvl = c.hw_latency[kNvlinkHw];
  nvl[kTree] = {0.6, 1.25, 4.0};
  nvl[kRing] = {0.6, 1.9, 3.4};
  nvl[kCollNetDirect] = {0, 0, 3.7};
  nvl[kCollNetChain] = {0, 0, 2.8};
  nvl[kNvls] = {0, 0, 25};
  nvl[kNvlsTree] = {0, 0, 25};
  nvl[kPat] = {0, 0, 4.0};
  auto& pci = c.hw_latency[kPciHw];
  pci[kTree] = {1.0, 1.9, 4.0};
  pci[kRing] = {1.0, 2.5, 5.7};
  pci[kCollNetDirect] = {0, 0, 3.7};
  pci[kCollNetChain] = {0, 0, 2.8};
  pci[kPat] = {0, 0, 4.0};
  auto& net = c.hw_latency[kNetHw];
  net[kTree] = {5.0, 8.5, 14};
  net[kRing] = {2.7, 4.0, 14.0};
  net[kCollNetDirect] = {0, 0, 31};
  net[kCollNetChain] = {0, 0, 30};
  net[kNvls] = {0, 0, 18};
  net[kNvlsTree] = {0, 0, 20.9};
  net[kPat] = {0, 0, 14};
  c.ll_max_bw = {
      {{39.0, 39.0, 20.4}, {87.7, 22.5, 19.0}, {141.0, 45.0, 35.0}, {282.0, 90.0, 70.0}}};
  c.ring_ll128_per_channel = {{{20, 20, 20}, {20, 20, 20}, {36.7, 36.7, 36.7}, {40, 40, 40}}};
  c.tree_ll128_per_channel = {
      {{20, 20, 20}, {20, 20, 20}, {36.7, 36.7, 29.0}, {55.6, 31.67, 20.0}}};
  c.tree_per_channel = {
      {{26.5, 18.5, 10.0}, {24.0, 23.6, 17.8}, {38.7, 41.4, 36.0}, {70.0, 42.8, 24.0}}};
  c.nvls_tree_per_channel = {
      {{26.5, 18.5, 10.0}, {24.0, 23.6, 17.8}, {0.0, 57.7, 45.5}, {0.0, 96.0, 80.0}}};
  c.nvls_efficiency = {0.0, 0.0, 0.85, 0.74};
  c.tree_correction = {{
      {1.0, 1.0, 1.0, 1.0, .9, .8, .7, .7, .7, .7, .6, .5, .4, .4, .5, .6, .7, .8, .9, 1.0, 1.0,
       1.0, 1.0, 1.0},
      {1.0, 1.0, 1.0, 1.0, 1.0, .9, .8, .8, .8, .7, .6, .6, .6, .6, .6, .6, .8, .9, .9, .9, .9,
       1.0, 1.0, 1.0},
      {.9, .9, .9, .9, .9, .9, .9, .8, .7, .6, .6, .5, .5, .5, .5, .6, .7, .8, .7, .7, .8, .9, .9,
       .9},
  }};
  return c;
}

// Blackwell rows before 2.28: twice the Hopper row (2.25 added them so); before 2.25 the
// Blackwell architecture did not exist and is priced as Hopper.
void blackwell_from_hopper(TunerConstants& c, double factor) {
  for (ArchTable* t : {&c.ll_max_bw, &c.ring_ll128_per_channel, &c.tree_ll128_per_channel,
                       &c.tree_per_channel}) {
    for (size_t i = 0; i < 3; ++i) {
      (*t)[kBlackwell][i] = (*t)[kHopper][i] * factor;
    }
  }
}

}  // namespace

TunerConstants tuner_constants(NcclVersion v) {
  TunerConstants c = release_2_30();
  if (v < NcclVersion{2, 30}) {
    c.nvls_tree_per_channel[kBlackwell][2] = 43.8;
  }
  if (v < NcclVersion{2, 29}) {
    c.ring_ll128_per_channel[kBlackwell] = {73.4, 34.6, 73.4};
    c.tree_nvls_correction = false;
  }
  if (v < NcclVersion{2, 28}) {
    // The NVLS efficiency model, the NVLSTree cap table and the 20.9 us NVLSTree hop are 2.28's.
    c.nvls_efficiency = {0, 0, 0, 0};
    c.nvls_tree_per_channel = {};
    c.hw_latency[kNetHw][kNvlsTree] = {0, 0, 14};
    blackwell_from_hopper(c, 2.0);
  }
  if (v < NcclVersion{2, 26}) {
    c.tree_pattern_factor = false;
  }
  if (v < NcclVersion{2, 25}) {
    blackwell_from_hopper(c, 1.0);
  }
  if (v < NcclVersion{2, 24}) {
    c.pat_factor = 0.85;
  }
  if (v < NcclVersion{2, 23}) {
    c.pat = false;
    c.ppn1_uses_tree_net = false;
    c.inter_steps_minus_one = false;
    c.ring_ll128_low_ppn = true;
    c.tree_factor_all = true;
    for (auto& hw : c.hw_latency) {
      hw[kTree][2] = 28.0;  // 2.19-2.22: one Tree Simple latency on every link
    }
  }
  if (v < NcclVersion{2, 21}) {
    c.ring_ll_factor = 0.25;
    c.ring_ll_third_single_node = true;
    c.ll_max_bw[kHopper] = c.ll_max_bw[kAmpere];
    c.hw_latency[kNvlinkHw][kNvls][2] = 23;
    c.hw_latency[kNvlinkHw][kNvlsTree][2] = 23;
  }
  if (v < NcclVersion{2, 19}) {
    c.nvls_allgather = false;
    c.hw_latency[kNvlinkHw][kTree][2] = 4.0;
    c.hw_latency[kPciHw][kTree][2] = 6.0;
    c.hw_latency[kNetHw][kTree][2] = 14.0;
    c.hw_latency[kNvlinkHw][kCollNetDirect] = {0, 0, 8};
    c.hw_latency[kPciHw][kCollNetDirect] = {0, 0, 8};
    c.hw_latency[kNetHw][kCollNetDirect] = {0, 0, 10.7};
    c.hw_latency[kNvlinkHw][kCollNetChain] = {0, 0, 4.75};
    c.hw_latency[kPciHw][kCollNetChain] = {0, 0, 8};
    c.hw_latency[kNetHw][kCollNetChain] = {0, 0, 14};
    c.hw_latency[kNetHw][kNvlsTree] = {0, 0, 19};
  }
  return c;
}

}  // namespace meshsim::collectives::detail
