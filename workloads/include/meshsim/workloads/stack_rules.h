// What each software stack can run: the combinations its framework's own argument checks (or its
// configuration's vocabulary) refuse, each as a rule that names the plan field to change and
// quotes the framework, with the file and commit it was read at.
//
// The plan search enumerates only what the plan's stack runs, and the edge refuses the rest with
// the rule's reason. The `custom` stack (Megatron-Core's kernel set) has no rules: it is how a
// user simulates a combination meshsim knows no framework runs (its report then lists, as caveats,
// the megatron rules the plan breaks).
//
// The rules cover the combinations meshsim's plans can express: ZeRO stages against pipeline
// parallelism and the stack's data-parallel implementations, pipeline schedules, the microbatch
// count of interleaved and circular pipelines, uneven stage splits, activation offloading,
// recompute policies, attention kernels, training precisions, tensor-parallel overlap, the MoE
// routing the framework implements, and which parallelisms it has at all.
// Degrees that do not divide (heads, layers, the sequence) are validate_plan's, for every stack.
#pragma once

#include <span>
#include <string>
#include <string_view>

#include "meshsim/workloads/model.h"
#include "meshsim/workloads/parallel.h"
#include "meshsim/workloads/stack.h"

namespace meshsim::workloads {

struct StackRule {
  // The plan field the framework refuses (the one to change).
  PlanField field;
  // What is refused, in a few words: "ZeRO-2 or 3 with pipeline parallelism".
  std::string_view what;
  // Why: the framework's own words where it has a check, with its file and commit.
  std::string_view says;
  // Whether `plan` (bound to its cluster: stack, attention and kernels set) breaks the rule.
  bool (*refuses)(const ModelConfig& model, const ParallelPlan& plan);
};

// The rules of `stack`, in the order they are checked (empty for custom).
std::span<const StackRule> stack_rules(Stack stack);

// The first rule of the plan's stack that `plan` breaks (nullptr: the stack runs it).
const StackRule* stack_refusal(const ModelConfig& model, const ParallelPlan& plan);

// The sentence a refusal reads as: "megatron does not run ZeRO-2 or 3 with pipeline parallelism:
// ..." (the edge adds how to simulate it anyway).
std::string refusal_text(Stack stack, const StackRule& rule);

// Throws PlanError on the rule's field when the plan's stack refuses the plan.
void check_stack_runs(const ModelConfig& model, const ParallelPlan& plan);

// Whether `stack` runs sequence parallelism with TP (none of its rules on the sp field refuses
// it): the plan search's TP plans take SP where it does, whole-activation TP where it does not
// (Megatron-LM 2021 and DeepSpeed's stacks).
bool runs_sequence_parallelism(Stack stack);
// Whether `stack` runs `recompute` on a dense model (none of its rules on the recompute field
// refuses it): the plan search offers JAX's policies where the stack runs them.
bool runs_recompute(Stack stack, Recompute recompute);

}  // namespace meshsim::workloads
