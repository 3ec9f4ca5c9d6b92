// The kernels of one transformer layer (and of the embedding and head), forward and backward, as
// compute work items with FLOPs, HBM bytes and GEMM shapes. Private to workloads/.
//
// Conventions (T = tokens in the microbatch = b*s, e = bytes per activation element):
//  * matmul [m,k]x[k,n]: 2mkn FLOPs; bytes = inputs (m*k + k*n) at the matmul dtype's width plus
//    the output (m*n) at 2 bytes (bf16 output, also for fp8 inputs, as Transformer Engine does).
//  * backward of a matmul: a data-gradient GEMM [m,n]x[n,k] and a weight-gradient GEMM
//    [k,m]x[m,n], each with the forward's FLOPs.
//  * causal attention forward: 2*b*s^2*q FLOPs (QK^T and PV over the unmasked half); flash
//    backward 5*b*s^2*q (five GEMMs of the same size: S recomputed, dV, dP, dQ, dK). Naive
//    attention computes the full s^2 scores (twice the FLOPs) and moves the score matrix
//    through HBM four times forward (write S, read S, write P, read P) and six times backward.
//  * elementwise and norm kernels: bytes read plus written; FLOPs are a small per-element count
//    (they are memory bound on every accelerator modelled).
#pragma once

#include <string>
#include <vector>

#include "meshsim/sim/program.h"
#include "meshsim/workloads/model.h"
#include "meshsim/workloads/training_memory.h"

namespace meshsim::workloads::detail {

struct KernelSpec {
  std::string name;
  ComputeWork work;
};

struct KernelContext {
  const ModelConfig& model;
  int64_t micro_batch = 1;
  int64_t seq_len = 0;
  Dtype matmul_dtype = Dtype::kBf16;
  AttentionKernel attention = AttentionKernel::kFlash;
};

std::vector<KernelSpec> embedding_forward(const KernelContext& c);
std::vector<KernelSpec> layer_forward(const KernelContext& c);
std::vector<KernelSpec> head_forward(const KernelContext& c);  // final norm, LM head, loss
std::vector<KernelSpec> head_backward(const KernelContext& c);
std::vector<KernelSpec> layer_backward(const KernelContext& c);
std::vector<KernelSpec> embedding_backward(const KernelContext& c);
// AdamW over `params` parameters held by the rank.
KernelSpec optimizer_step(int64_t params, const ModelStateBytes& state);

}  // namespace meshsim::workloads::detail
