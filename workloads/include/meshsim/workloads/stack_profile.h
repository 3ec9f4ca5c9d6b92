// The profiles of the software stacks (stack.h): what each framework runs, and on what it is
// based.
//
// A stack's choices are defaults: the edge (cli/, validation/) applies a profile to the fields of
// a plan the user did not set (apply_stack); a field the user set keeps its value. Workloads knows
// no hardware: the accelerator family the framework keys its choices on is the edge's input.
#pragma once

#include <string_view>

#include "meshsim/workloads/parallel.h"
#include "meshsim/workloads/stack.h"

namespace meshsim::workloads {

struct StackProfile {
  Stack stack = Stack::kMegatron;
  // What the profile is based on: framework sources and documentation, with versions.
  std::string_view basis;
  Kernels kernels = Kernels::kFused;
  OptimizerKernels optimizer = OptimizerKernels::kFused;
  AttentionKernel attention = AttentionKernel::kFlash;
  Fp8Scaling fp8 = Fp8Scaling::kDelayed;
  StepWork step;
  BackwardPrefetch backward_prefetch = BackwardPrefetch::kPre;  // ZeRO-3 runs
  // FP8 through Transformer Engine: a linear layer saves its input for the weight gradient as
  // the FP8 cast it computed with (column-wise data, 1 byte per element), not in 16 bits
  // (transformer_engine/pytorch/module/linear.py, saved_inputmat = the quantized inputmat, @
  // d0067d0d). torchao's float8 and XLA's are not assumed to.
  bool fp8_saves_quantized_inputs = false;
  // FP8 with SP: a column-parallel layer's input all-gathered as its FP8 cast. Transformer
  // Engine's LayerNormLinear quantizes the norm's output and gathers the FP8 data, forward and
  // again for the weight gradient (transformer_engine/pytorch/module/layernorm_linear.py @ v1.13:
  // ln_out in uint8 before gather_along_first_dim; @ v2.2: gather_along_first_dim(ln_out, ...,
  // quantizer=input_quantizer), an FP8 all-gather for delayed and current scaling). torchtitan's
  // tensorwise float8 with TP uses torchao's Float8ColwiseParallel, which casts before the
  // all-gather (apply_tp, torchtitan/models/llama3/parallelize_llama.py @ 820504e:
  // enable_float8_tensorwise_tp); its rowwise recipe keeps the plain ColwiseParallel (16 bits).
  bool fp8_gathers_quantized_inputs = false;
  // FP8: the forward GEMMs with fast accumulation, dgrad and wgrad without. Transformer Engine:
  // fprop without the split accumulator, dgrad and wgrad with it (transformer_engine/pytorch/
  // module/base.py _2X_ACC_FPROP = False, _2X_ACC_DGRAD = _2X_ACC_WGRAD = True, the defaults of
  // DelayedScaling and Float8CurrentScaling in common/recipe/__init__.py @ d0067d0d; the same
  // constants in TE's first module code). torchao's float8: Float8LinearConfig's
  // gemm_config_output use_fast_accum=True, grad_input and grad_weight without
  // (torchao/float8/config.py). XLA's choice is not assumed.
  bool fp8_fprop_fast_accumulation = false;
  // A column-parallel layer's input-gradient reduction overlaps its weight-gradient GEMM
  // (ParallelPlan::tp_backward_async).
  bool tp_backward_async = true;
  // llm-foundry calls FlashAttention through its varlen interface (ParallelPlan::attention_unpads).
  bool attention_unpads = false;
  // Selective recompute is torchtitan's checkpointing by op (ParallelPlan::selective_by_op), not
  // Megatron's of the attention core.
  bool selective_by_op = false;
  // ParallelPlan::fused_attention_checkpointed.
  bool fused_attention_checkpointed = true;
  // ParallelPlan::recompute_skips_unread_outputs (JAX's remat: XLA stacks).
  bool recompute_skips_unread_outputs = false;
  // What the host spends issuing the step, and where it waits (ParallelPlan::host).
  HostDispatch host;
  // Pipeline sends and receives hold the compute stream until they complete (OverlapOptions::
  // pipeline_p2p off): Megatron-LM 2021-22's p2p_communication._communicate waits on
  // batch_isend_irecv's requests and then calls torch.cuda.synchronize().
  bool pipeline_p2p_blocking = false;
  // ParallelPlan::pipeline_scatter_gather (Megatron-LM's scatter/gather of pipeline tensors).
  bool pipeline_scatter_gather = false;
  // ParallelPlan::wgrad_accumulation_fused.
  bool wgrad_accumulation_fused = true;
  // ParallelPlan::megatron_legacy_layer.
  bool megatron_legacy_layer = false;
  // ParallelPlan::persistent_layer_norm.
  bool persistent_layer_norm = false;
  // ParallelPlan::zero3_regather_for_recompute.
  bool zero3_regather_for_recompute = false;
  // By default the data-parallel gradients are reduced after the last backward of the step and
  // the updated parameters gathered after the optimizer step, neither overlapped with compute
  // (DeepSpeed's pipeline engine, whose ReduceGrads and OptimizerStep instructions end the
  // schedule; Megatron-LM's local DDP until 2023). The plan's overlap_grad_reduce and
  // overlap_param_gather default to off; where the framework has no overlapping path at all,
  // its rules (stack_rules.cc) refuse on.
  bool reduces_grads_after_backward = false;
  // bf16 training keeps and all-reduces fp32 gradients (DeepSpeed's BF16_Optimizer;
  // ParallelPlan::optimizer_all_reduces_grads).
  bool bf16_optimizer_all_reduces_fp32_grads = false;
  // bf16 training (and fp8 on bf16 parameters) accumulates, keeps and reduces its gradients in
  // fp32 (ParallelPlan::grad_reduce_fp32, where each framework's rule is cited).
  bool bf16_grads_in_fp32 = false;
  // ParallelPlan::cross_entropy_fusion.
  bool cross_entropy_fusion = true;
  // ParallelPlan::fused_cross_entropy.
  FusedCrossEntropy fused_cross_entropy = FusedCrossEntropy::kOnePass;
};

// The profile of `stack` on chips of `family`. Throws PlanError on the stack field for a stack the
// family does not run (a PyTorch stack on a TPU, MaxText on a family it has no attention for).
StackProfile stack_profile(Stack stack, DeviceFamily family);

// The default stack of a family: megatron on GPUs, maxtext on TPUs.
Stack default_stack(DeviceFamily family);

// Which fields of the plan the user set (the rest take the profile's values).
struct StackOverrides {
  bool kernels = false;
  bool optimizer_kernels = false;
  bool attention = false;
  bool fp8_recipe = false;
  bool overlap_grad_reduce = false;
  bool overlap_param_gather = false;
  bool grad_reduce_fp32 = false;
  bool cross_entropy_fusion = false;
};

// Applies `profile` to `plan`: the kernels, optimizer kernels, attention and FP8 scaling unless
// `given` says the user set them; the step work always.
void apply_stack(ParallelPlan& plan, const StackProfile& profile, const StackOverrides& given);

}  // namespace meshsim::workloads
