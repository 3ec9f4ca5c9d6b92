// Builds the program of one pipeline stage (see step.h for what it contains). Private.
#pragma once

#include "layer_ops.h"
#include "meshsim/sim/program.h"
#include "meshsim/workloads/parallel.h"
#include "meshsim/workloads/pipeline.h"
#include "slots.h"

namespace meshsim::workloads::detail {

// The program of `stage`'s ranks: the passes of its pipeline order over the stage's layers, the
// gradient reduction and the optimizer; its ledger starts with the stage's model state.
Program build_stage_program(const ModelConfig& model, const ParallelPlan& plan,
                            const StagePartition& stage);

}  // namespace meshsim::workloads::detail
