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

struct StageMemory {
  Bytes weights;
  Bytes gradients;
  Bytes optimizer;
  Bytes layer_activations;    // saved for backward, per layer per microbatch (no full recompute)
  Bytes layer_checkpoint;     // full recompute: the layer input kept per layer per microbatch
  Bytes first_stage_extra;    // embedding-side activations per microbatch
  Bytes last_stage_extra;     // head-side activations per microbatch
};

struct StageParams {
  int64_t per_layer = 0;         // parameters of one layer held by the rank
  int64_t expert_per_layer = 0;  // of which expert parameters (reduced over expert-DP)
  int64_t embedding = 0;         // token/position embedding held by this stage's rank
  int64_t head = 0;              // final norm and LM head held by this stage's rank
  int64_t total = 0;             // all parameters held by the rank (before ZeRO sharding)
  int64_t dp_group = 1;          // ranks that reduce the dense gradients (DP x CP)
  int64_t expert_dp_group = 1;   // ranks that reduce the expert gradients (DP / EP)
};

Program build_stage_program(const ModelConfig& model, const ParallelPlan& plan, int64_t stage,
                            const StageMemory& memory, const StageParams& params);

}  // namespace meshsim::workloads::detail
