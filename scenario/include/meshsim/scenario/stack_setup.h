// The software stack of a run, applied to its plan for the chip it runs on (above both
// workloads/, which knows the stacks, and topology/, which knows the chips).
#pragma once

#include <optional>

#include "meshsim/topology/chip.h"
#include "meshsim/topology/cluster.h"
#include "meshsim/workloads/parallel.h"
#include "meshsim/workloads/stack.h"

namespace meshsim::scenario {

// The accelerator family a chip's frameworks key their kernel choices on: its GPU architecture, or
// TPU; std::nullopt for a device profile that names no architecture (the CPU profiles of
// validation/profiles/).
std::optional<workloads::DeviceFamily> device_family(const topology::Chip& chip);

// The plan's stack (the one the user named, else the family's default: megatron on GPUs, maxtext
// on TPUs) applied to the kernel, attention and optimizer fields the user did not set, and its FP8
// scaling and step work. Then the attention kernel is checked against the chip: a fused
// implementation must be one the catalogue has measurements of. A device without a family runs
// the plan as given (no stack; naming one is an error). Throws workloads::PlanError on kStack or
// kAttention; the edge locates it where the field came from.
void apply_stack_for(workloads::ParallelPlan& plan, const topology::Chip& chip);

// The plan as `cluster` runs it: the stack applied for its chip (apply_stack_for) and its ranks
// per node (node_ranks: the scale-up domain, which the flex MoE dispatcher's hops follow).
// simulate_step and the plan search both run plans through this one function.
void bind_to_cluster(workloads::ParallelPlan& plan, const topology::ClusterSpec& cluster);

}  // namespace meshsim::scenario
