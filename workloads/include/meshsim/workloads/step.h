// Planning one training step: a model plus a parallel plan become per-rank programs.
//
// A planner is a pure function (docs/style.md A.4): no clock, no engine. It returns the distinct
// programs (one per pipeline stage), the communication groups, the simulated ranks with their
// bindings, and the families of groups that communicate at the same time (for contention). The
// composition root (cli/) hands that to sim::Simulation and the collective cost model.
//
// Each stage's program follows its pipeline schedule (workloads/pipeline.h): forward passes
// receive the activation from the previous stage (or embed the tokens), run every layer as
// separate kernels with the TP / CP / EP communication Megatron issues (workloads/src/layer_ops.h),
// and send the activation on (or run the head and the loss); backward passes run in reverse, with
// full recompute re-running a layer's forward kernels first and zero-bubble schedules deferring
// the weight-gradient GEMMs. Gradients are reduced over the data-parallel group in buckets as the
// last microbatch's backward produces them (all-reduce, or reduce-scatter with ZeRO-1/2/3),
// overlapped unless turned off; ZeRO-1/2 gather the updated parameters bucket by bucket ahead of
// the forward (the previous step's gather, prefetched); ZeRO-3 gathers each layer's parameters
// before its forward and backward (prefetching one layer ahead) and reduce-scatters its gradients
// after every backward. The optimizer step runs on the rank's shard at the end.
// Memory: model state is resident from the start (sharded as the plan says); each layer's saved
// activations are allocated by its forward and freed by its backward (full recompute keeps only the
// layer input and re-materialises one layer at a time); ZeRO-3 gathered parameters and gradient
// buckets are transient.
#pragma once

#include <cstdint>
#include <vector>

#include "meshsim/sim/program.h"
#include "meshsim/workloads/model.h"
#include "meshsim/workloads/parallel.h"
#include "meshsim/workloads/partition.h"
#include "meshsim/workloads/training_memory.h"

namespace meshsim::workloads {

// kRepresentative simulates one rank per (pipeline stage, CP index): every TP and DP peer of a
// rank behaves the same in SPMD training, so their collectives are costed over the full groups
// without simulating them. kFull simulates every rank.
enum class SimulationMode { kRepresentative, kFull };

// A communication group: the simulated ranks that meet at its rendezvous and the global ranks it
// spans (what the cost model is asked about).
struct PlannedGroup {
  CommKind kind = CommKind::kTensor;
  std::vector<RankId> members;  // simulated ranks (indices into StepPlan::ranks)
  std::vector<RankId> global;   // global ranks
  // Representative mode: groups of its family that are not simulated and run its collectives at
  // the same moments (global ranks, same size); empty in full mode. See add_images.
  std::vector<std::vector<RankId>> images;
};

// A simulated rank: the program it runs and what its program's slots are bound to. Slot i of
// `groups` (`peers`) is the group (simulated rank) the program's group (peer) slot i names; the
// slots and what they mean are one table in workloads/src/slots.h.
struct RankBinding {
  ProgramIndex program;  // index into StepPlan::programs
  RankId global_rank;
  int64_t stage = 0;
  std::vector<GroupId> groups;  // by group slot; GroupId = index into StepPlan::groups
  std::vector<RankId> peers;    // by peer slot; simulated ranks
  // Representative mode: the global ranks it stands for besides itself, aligned so that image i
  // of two simulated ranks of different stages (or context indices) are peers; empty in full
  // mode.
  std::vector<RankId> images;
};

struct StepPlan {
  std::vector<Program> programs;  // one per pipeline stage
  std::vector<PlannedGroup> groups;
  std::vector<RankBinding> ranks;  // the simulated ranks, RankId i = ranks[i]
  // Groups that run the same collectives at the same moment (one family per kind and stage),
  // as lists of global ranks.
  std::vector<std::vector<std::vector<RankId>>> families;
  int64_t world = 0;
  int64_t microbatches = 0;
  int64_t tokens_per_step = 0;
  Flops model_flops_per_step;  // training FLOPs of the model (causal attention), all ranks
  // Closed-form memory per rank of each stage (model state and activations at the schedule's
  // peak), for the OOM pre-check.
  std::vector<TrainingMemory> memory_estimate;
};

// The closed-form memory of one rank of each stage at the schedule's peak (StepPlan's
// memory_estimate) without building the programs: the plan search's exact memory check. Checks
// the split (validate_split: PlanError).
std::vector<TrainingMemory> estimate_step_memory(const ModelConfig& model,
                                                 const ParallelPlan& plan);

// Validates the plan (validate_plan: PlanError) and builds the step for plan.world() ranks. In
// representative mode, `also_simulate` names global ranks that must be simulated too (e.g. the
// ranks a trace shows): every rank of their (TP, DP) column is simulated, so that pipeline and
// context peers are always present.
StepPlan plan_step(const ModelConfig& model, const ParallelPlan& plan,
                   SimulationMode mode = SimulationMode::kRepresentative,
                   const std::vector<int64_t>& also_simulate = {});

// What a rank of `stage` runs outside its passes, as its program has it (for bounds on the step:
// studies/step_bound.h): the compute work that ends the step, in program order after every pass
// and after the data-parallel communication (the per-step work and the optimizer over the rank's
// ZeRO-sharded parameters), and the bytes of one pipeline message (the activation a stage sends
// per microbatch, and the gradient it gets back).
struct StageExtras {
  std::vector<ComputeWork> step_end;
  Bytes pipeline_message;
};
StageExtras stage_extras(const ModelConfig& model, const ParallelPlan& plan,
                         const StagePartition& stage);

}  // namespace meshsim::workloads
