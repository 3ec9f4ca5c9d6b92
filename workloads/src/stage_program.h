// Builds the program of one pipeline stage (see step.h for what it contains). Private.
#pragma once

#include "layer_ops.h"
#include "meshsim/sim/program.h"
#include "meshsim/workloads/parallel.h"
#include "meshsim/workloads/pipeline.h"

namespace meshsim::workloads::detail {

// Streams of a rank. Each communication channel gets its own stream, as NCCL communicators do,
// so that a send waiting for its receiver never blocks another channel.
enum Stream : uint8_t {
  kCompute = 0,
  kTensorStream = 1,
  kDataStream = 2,
  kPipeSendAct = 3,
  kPipeSendGrad = 4,
  kPipeRecvAct = 5,
  kPipeRecvGrad = 6,
  kContextSend = 7,
  kContextRecv = 8,
  kExpertStream = 9,
};

// Group slots of a stage program.
enum GroupSlot : uint16_t { kTpSlot = 0, kDpSlot = 1, kEpSlot = 2, kExpertDpSlot = 3 };
// Peer slots of a stage program.
enum PeerSlot : uint16_t { kPpNext = 0, kPpPrev = 1, kCpNext = 2, kCpPrev = 3 };
// Tags of point-to-point messages.
enum Tag : uint16_t { kActivationTag = 0, kGradientTag = 1, kKvTag = 2, kKvGradTag = 3 };

// The program of `stage`'s ranks: the passes of its pipeline order over the stage's layers, the
// gradient reduction and the optimizer; its ledger starts with the stage's model state.
Program build_stage_program(const ModelConfig& model, const ParallelPlan& plan,
                            const StagePartition& stage);

}  // namespace meshsim::workloads::detail
