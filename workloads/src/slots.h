// The communication slots of a stage program, in one table each (private to workloads).
//
// A program is rank-agnostic (sim/program.h): a collective names a group slot, a send or receive
// a peer slot, and each simulated rank binds its slots. The stage builder names slots by these
// enums; the step planner binds every slot of every rank from the same tables (what group or peer
// it is, what it is for), so the two never agree on a slot by position.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "meshsim/sim/error.h"
#include "meshsim/workloads/parallel.h"

namespace meshsim::workloads::detail {

enum class GroupSlot : uint16_t {
  kTensor,
  kData,
  kExpert,
  kExpertData,
  kShard,
  kReplica,
  kExpertRail,
  kExpertNode
};
inline constexpr size_t kNumGroupSlots = 8;

struct GroupSlotInfo {
  GroupSlot slot;
  CommKind kind;  // what its collectives are for (reports, concurrent families)
  std::vector<int64_t> (*members)(const RankLayout& layout, int64_t rank);  // in rank order
};

inline constexpr std::array<GroupSlotInfo, kNumGroupSlots> kGroupSlots = {{
    {GroupSlot::kTensor, CommKind::kTensor,
     [](const RankLayout& l, int64_t r) { return l.group_along(r, Axis::kTensor); }},
    // Dense gradients reduce (and ZeRO shards) over DP x CP: CP ranks hold the same parameters.
    {GroupSlot::kData, CommKind::kData,
     [](const RankLayout& l, int64_t r) { return l.dp_cp_group(r); }},
    {GroupSlot::kExpert, CommKind::kExpert,
     [](const RankLayout& l, int64_t r) { return l.expert_group(r); }},
    {GroupSlot::kExpertData, CommKind::kData,
     [](const RankLayout& l, int64_t r) { return l.expert_dp_group(r); }},
    // HSDP: ZeRO's shard group and the replicas across (without HSDP, both the DP x CP group,
    // so that they add no groups; the stage builder uses them only with HSDP).
    {GroupSlot::kShard, CommKind::kData,
     [](const RankLayout& l, int64_t r) { return l.shard_group(r); }},
    {GroupSlot::kReplica, CommKind::kData,
     [](const RankLayout& l, int64_t r) { return l.replica_group(r); }},
    // The flex dispatcher's network and NVLink hops (the EP group itself otherwise, so that they
    // add no groups).
    {GroupSlot::kExpertRail, CommKind::kExpert,
     [](const RankLayout& l, int64_t r) { return l.expert_rail_group(r); }},
    {GroupSlot::kExpertNode, CommKind::kExpert,
     [](const RankLayout& l, int64_t r) { return l.expert_node_group(r); }},
}};

enum class PeerSlot : uint16_t { kPipelineNext, kPipelinePrevious, kContextNext, kContextPrevious };
inline constexpr size_t kNumPeerSlots = 4;

struct PeerSlotInfo {
  PeerSlot slot;
  Axis axis;     // the neighbour along this axis ...
  int64_t step;  // ... this many positions on, cyclically
  CommKind kind;
};

inline constexpr std::array<PeerSlotInfo, kNumPeerSlots> kPeerSlots = {{
    {PeerSlot::kPipelineNext, Axis::kPipeline, +1, CommKind::kPipeline},
    {PeerSlot::kPipelinePrevious, Axis::kPipeline, -1, CommKind::kPipeline},
    {PeerSlot::kContextNext, Axis::kContext, +1, CommKind::kContext},
    {PeerSlot::kContextPrevious, Axis::kContext, -1, CommKind::kContext},
}};

constexpr uint16_t index(GroupSlot s) { return static_cast<uint16_t>(s); }
constexpr uint16_t index(PeerSlot s) { return static_cast<uint16_t>(s); }

constexpr const GroupSlotInfo& info(GroupSlot s) { return kGroupSlots[index(s)]; }
constexpr const PeerSlotInfo& info(PeerSlot s) { return kPeerSlots[index(s)]; }

// Every table entry sits at its enumerator's index.
static_assert([] {
  for (size_t i = 0; i < kNumGroupSlots; ++i) {
    if (index(kGroupSlots[i].slot) != i) {
      return false;
    }
  }
  for (size_t i = 0; i < kNumPeerSlots; ++i) {
    if (index(kPeerSlots[i].slot) != i) {
      return false;
    }
  }
  return true;
}());

// The group slot that carries collectives of `kind` by default (expert gradients name
// kExpertData explicitly).
inline GroupSlot group_slot_for(CommKind kind) {
  for (const GroupSlotInfo& g : kGroupSlots) {
    if (g.kind == kind) {
      return g.slot;
    }
  }
  SIM_CHECK(false, "no group slot carries {} collectives", to_string(kind));
  return GroupSlot::kTensor;
}

// Streams of a rank. Each communication channel gets its own stream, as NCCL communicators do,
// so that a send waiting for its receiver never blocks another channel.
enum class Stream : uint8_t {
  kCompute,
  kTensor,
  kData,
  kPipeSendActivation,
  kPipeSendGradient,
  kPipeReceiveActivation,
  kPipeReceiveGradient,
  kContextSend,
  kContextReceive,
  kExpert,
  // ZeRO-3 / FSDP parameter all-gathers, apart from the gradient reduce-scatters on kData, as
  // FSDP and DeepSpeed issue them (FSDP's all-gather stream; DeepSpeed's prefetch stream), so
  // that a prefetched gather never queues behind the previous layer's reduce-scatter.
  kDataGather,
  // zbv's return leg (chunk 1 of the V, whose activations flow to rank s-1 and gradients to s+1):
  // its own channels, so that a send to one neighbour never waits behind one to the other.
  kPipeSendActivationReturn,
  kPipeSendGradientReturn,
  kPipeReceiveActivationReturn,
  kPipeReceiveGradientReturn,
  // Activation offloading's copies to and from host memory (Transformer Engine's d2h and h2d
  // streams; copy engines, apart from the compute stream).
  kHostOffload,
  kHostReload,
};
constexpr uint8_t index(Stream s) { return static_cast<uint8_t>(s); }

// Tags of point-to-point messages.
enum class Tag : uint16_t { kActivation, kGradient, kKv };
constexpr uint16_t index(Tag t) { return static_cast<uint16_t>(t); }

}  // namespace meshsim::workloads::detail
