// The FLOP conventions published training runs state their throughput in, each as its source
// computes it, so that a TFLOP/s figure converts back to the step time the source measured
// (step = FLOPs the source counts / the TFLOP/s it printed). Conventions differ: some count the
// recompute, some halve the causal attention, some count the LM head; none is meshsim's own.
#pragma once

#include <cstdint>

#include "meshsim/sim/units.h"

namespace meshsim::validation {

// Narayanan et al., "Efficient Large-Scale Language Model Training on GPU Clusters Using
// Megatron-LM" (SC'21), equation 3: the FLOPs of one iteration of a GPT model with full
// activation recompute (four passes: forward, recomputed forward, backward's two GEMMs):
//   F = 96 B s l h^2 (1 + s / (6 h) + V / (16 l h))
// for global batch B sequences of s tokens, l layers, hidden size h, vocabulary V.
Flops megatron2021_iteration_flops(int64_t batch, int64_t seq, int64_t layers, int64_t hidden,
                                   int64_t vocab);

// Megatron-DeepSpeed's TFLOPs log (bigscience-workshop/Megatron-DeepSpeed megatron/training.py
// training_log @ 0f23a729): equation 3 with the recompute factor the run has, 4 with
// --checkpoint-activations and 3 without, and coefficient 32 instead of 24 for a GLU MLP:
//   F = c k B s l h^2 (1 + s / (6 h) + V / (16 l h)),  c = 24 or 32, k = 4 or 3,
// V the padded vocabulary.
Flops megatron_deepspeed_iteration_flops(int64_t batch, int64_t seq, int64_t layers, int64_t hidden,
                                         int64_t vocab, bool glu, bool checkpointed);

// MaxText at commit 76bd53b0f (AI-Hypercomputer/maxtext MaxText/train.py,
// calculate_training_tflops, after PaLM's appendix B): per device and step
//   6 N L b + 12 a l d L^2 b / 2
// with N the model's parameters (the whole pytree), L the sequence, b the per-device batch,
// a query heads, l layers, d the head dimension; the attention term is halved for causality.
Flops maxtext2023_flops_per_device(int64_t parameters, int64_t per_device_batch, int64_t seq,
                                   int64_t heads, int64_t layers, int64_t head_dim);

// The parameters of MaxText's decoder at that commit (MaxText/layers/models.py): a shared
// embedding V x E (also the LM head: logits_via_embedding), per layer one RMSNorm scale E,
// query, key, value and output projections E x a d each, and an MLP of one input matrix per
// activation (mlp_activations: ["relu"] by default) and an output matrix, E x F each; a final
// RMSNorm E.
int64_t maxtext2023_parameters(int64_t vocab, int64_t emb, int64_t heads, int64_t head_dim,
                               int64_t mlp, int64_t layers, int64_t mlp_activations);

// Megatron-LM's model FLOPs per iteration at core_r0.8.0 (megatron/training/training.py,
// num_floating_point_operations), which its training log divides by the iteration time and the
// world size to print "throughput per GPU (TFLOP/s/GPU)":
//   12 B s l h^2 ((1 + g/a + s/h) (a k / h) + (f / h) e m + V / (2 l h))
// for global batch B, sequence s, l layers, hidden h, a query heads of k channels, g query groups
// (KV heads), MLP width f, e experts routed to (1 for a dense model), m = 3/2 for a gated (SwiGLU)
// MLP else 1, padded vocabulary V. No recompute and no causal halving are counted.
struct MegatronCoreShape {
  int64_t layers = 0, hidden = 0, heads = 0, query_groups = 0, kv_channels = 0, ffn = 0,
          vocab = 0, experts_routed_to = 1;
  bool gated = false;
};
Flops megatron_core08_iteration_flops(int64_t batch, int64_t seq, const MegatronCoreShape& m);

}  // namespace meshsim::validation
