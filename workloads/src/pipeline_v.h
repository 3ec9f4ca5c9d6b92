// The ZB-V schedule's construction (pipeline.h states the rule and its sources).
#pragma once

#include <cstdint>
#include <vector>

#include "meshsim/workloads/pipeline.h"

namespace meshsim::workloads::detail {

// Every rank's order for ZB-V with `stages` >= 2 ranks and `microbatches` >= 1: the greedy list
// schedule at unit pass costs, one order per rank. Cost: O(stages * (6 * microbatches + stages)).
std::vector<std::vector<PipelinePass>> zero_bubble_v_orders(int64_t stages, int64_t microbatches);

}  // namespace meshsim::workloads::detail
