// Private: generalised max-min fairness by progressive filling, for coupled transfers.
//
// Entity i (a transfer) at progress rate r_i uses w_il r_i of every link l it crosses and never
// exceeds its cap. Progressive filling (Bertsekas & Gallager, Data Networks, 6.5.2, with weights):
// raise every unfrozen entity's level together; a link fills at the level (C_l - used_l) / (sum
// of the unfrozen normalised weights on it), an entity's cap at its cap; the lowest level freezes
// the entities of that link (or the capped entity) at it; continue with the rest. Caps are
// private links of weight 1.
// What rises together is an entity's rate on its most loaded resource, r_i x W_i with
// W_i = max_l w_il (normalised weights w_il / W_i): fairness in bytes per second on each
// transfer's bottleneck, not in progress. Two transfers sharing a link that is each one's most
// loaded get half of its bytes each whatever their weights (a ring all-reduce putting 2 bytes on
// a NIC per byte of progress and a send putting 1 each get 24 of a 48 GB/s NIC), as per-link
// arbitration shares bytes and as SimGrid's L07 parallel tasks do (the cross-check). Freezing an
// entity only raises the levels of the other links it crosses
// ((C' - w r) / (W - w) >= C' / W when r <= C' / W), so a min-heap of levels with lazy
// re-insertion visits each link O(1 + its entities) times: O(nnz log links) per solve, nnz the
// number of (entity, link) pairs. Ties go to the link first listed, so results are deterministic.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace meshsim::collectives::detail {

struct FluidEntity {
  std::span<const uint32_t> links;   // indices into the problem's capacities
  std::span<const double> weights;   // > 0, one per link
  double cap = 0;                    // <= 0: no cap
};

// Rates (bytes of progress per second) of `entities` sharing links of `capacities`. An entity
// that crosses no link and has no cap gets +infinity. Alone, an entity gets
// min(cap, min_l C_l / w_l) (up to rounding: isolated_rate computes it with this function).
std::vector<double> max_min_rates(std::span<const FluidEntity> entities,
                                  std::span<const double> capacities);

}  // namespace meshsim::collectives::detail
