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

}  // namespace meshsim::validation
