// The kernels of one transformer layer (and of the embedding and head), forward and backward, on
// one rank of a TP x CP x EP partition, with the communication between them. Private.
//
// Conventions (T = tokens the rank computes on = b*s/CP; e = bytes per activation element, 2 in
// bf16 mixed precision, 4 in fp32):
//  * matmul [m,k]x[k,n]: 2mkn FLOPs; bytes = inputs (m*k + k*n) at the matmul dtype's width plus
//    the output (m*n) at e bytes (bf16 output also for fp8 inputs, as Transformer Engine does).
//  * backward of a matmul: a data-gradient GEMM [m,n]x[n,k] and a weight-gradient GEMM
//    [k,m]x[m,n], each with the forward's FLOPs.
//  * causal attention forward: 2*b*s^2*q FLOPs over the whole sequence (QK^T and PV over the
//    unmasked half), split evenly over TP (heads) and CP (load-balanced chunks); flash backward
//    is 2.5x forward (five GEMMs of the same size: S recomputed, dV, dP, dQ, dK). Naive attention
//    computes the full s^2 scores (twice the FLOPs) and moves the score matrix through HBM four
//    times forward (write S, read S, write P, read P) and six times backward.
//  * elementwise and norm kernels: bytes read plus written; FLOPs a small per-element count (they
//    are memory bound on every accelerator modelled). With sequence parallelism they run on T/TP
//    tokens.
//  * Megatron tensor parallelism (Shoeybi et al. 2019; Korthikanti et al. 2022 for SP): QKV and
//    MLP-up are column parallel, the output projection and MLP-down row parallel. Forward: an
//    all-reduce of the T x h activations after each row-parallel GEMM (with SP: an all-gather
//    before each column-parallel GEMM and a reduce-scatter after each row-parallel one). Backward:
//    an all-reduce of the input gradient after each column-parallel data-gradient GEMM, overlapped
//    with its weight-gradient GEMM (Megatron's default asynchronous grad-input reduction; with SP:
//    an all-gather of the output gradient before each row-parallel backward, an all-gather of the
//    saved input overlapped with the column-parallel data gradient, and a reduce-scatter of the
//    input gradient overlapped with the weight gradient). Vocabulary-parallel embedding
//    (all-reduce of its output) and LM head.
//  * Context parallelism: ring attention (Liu et al. 2023, Megatron's CP): the attention kernel
//    runs as CP chunks; between chunks the rank passes K and V blocks to its ring successor;
//    backward passes K, V and their gradients.
//  * Kernels::kEager (layer_ops_eager.cc) replaces each fused memory-bound kernel above by the
//    tensor operations PyTorch eager mode runs for it, and by autograd's kernels for their
//    backward; the GEMMs, the communication and their order are the same.
//  * Expert parallelism: all-to-all dispatch before the experts and combine after (forward and
//    backward), over the EP group; experts hold E/EP local experts, each seeing T*k*EP/E tokens
//    times the capacity factor.
#pragma once

#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "meshsim/sim/program.h"
#include "meshsim/workloads/model.h"
#include "meshsim/workloads/parallel.h"
#include "meshsim/workloads/partition.h"
#include "slots.h"

namespace meshsim::workloads::detail {

// What a kernel is for, where the schedule treats kernels differently: zero-bubble schedules run
// the weight-gradient GEMMs of a backward as a separate pass (W) after the input gradients (B).
// kHostRead: a kernel whose result the framework reads on the host (the global gradient norm,
// fp16's inf/nan check): a host synchronisation where the stack makes one (HostDispatch).
enum class KernelRole : uint8_t { kCompute, kWeightGradient, kHostRead };

struct KernelSpec {
  std::string name;
  ComputeWork work;
  KernelRole role = KernelRole::kCompute;
};

// A collective between two kernels, on the group of `kind`. Blocking: the next kernel waits for
// it. Async: the next kernel runs beside it and the kernel after that waits for it (Megatron's
// backward of a column-parallel linear: the input-gradient reduction overlaps the weight-gradient
// GEMM, and with SP the re-gather of the input overlaps the data-gradient GEMM).
struct CommSpec {
  std::string name;
  CommKind kind = CommKind::kTensor;
  CollectiveKind op = CollectiveKind::kAllReduce;
  Bytes bytes;
  bool async = false;
  // The group, when not the kind's own (the flex dispatcher's two hops).
  std::optional<GroupSlot> slot = std::nullopt;
};

// Ring attention over the CP group: `chunk` runs `steps` times; before every chunk but the first,
// a block of `bytes_per_step` arrives from the ring predecessor (and the rank's own block goes to
// its successor).
struct RingSpec {
  std::string name;
  KernelSpec chunk;
  int64_t steps = 1;
  Bytes bytes_per_step;
};

// A GEMM and the TP collective that Megatron / Transformer Engine can overlap with it: the SP
// all-gather feeding a column-parallel GEMM, or the row-parallel output's gather of the output
// gradient (`comm_first`), or the all-reduce / reduce-scatter of a row-parallel GEMM's output
// (after). Without TP overlap the two run in order, the collective blocking; with it (the plan's
// overlap.tensor_parallel) they run as interleaved pieces.
struct TpOverlapGemm {
  KernelSpec gemm;
  CommSpec comm;
  bool comm_first = false;
};

using LayerItem = std::variant<KernelSpec, CommSpec, RingSpec, TpOverlapGemm>;

// What a layer's kernels depend on: the model, the plan, and the stage's partition (its shard
// widths and tokens). References only: every derived fact is the partition's.
struct LayerContext {
  const ModelConfig& model;
  const ParallelPlan& plan;
  const StagePartition& stage;
  int64_t layer = -1;  // the layer the items are for (global index); -1 outside the layers
};

std::vector<LayerItem> embedding_forward(const LayerContext& c);
std::vector<LayerItem> layer_forward(const LayerContext& c);
std::vector<LayerItem> head_forward(const LayerContext& c);  // final norm, LM head, loss
std::vector<LayerItem> head_backward(const LayerContext& c);
std::vector<LayerItem> layer_backward(const LayerContext& c);
// JAX's remat policies, what the backward re-runs before the layer's backward (their outputs were
// not saved; see layer_activations). Recompute::kDots: everything that is not a weight matmul:
// RoPE, the fused attention kernel's forward, the norms and the MLP's activation function.
// Recompute::kQkvOutProj: the same, and the dense MLP's up projection (with its TP gather under
// SP) before its activation function; the QKV, output and down projections do not re-run.
// Outside parallel blocks each also re-makes the residual sum that the MLP norm reads.
// Recompute::kQkvProj: as kQkvOutProj, and the output projection (with its TP reduction) before
// that sum.
std::vector<LayerItem> recompute_jax_policy(const LayerContext& c);
// Megatron's selective recompute (ParallelPlan::recompute_modules): the forward of the attention
// core (reruns_core_attention), MLA's up-projections, a dense MLP, or the experts' activation,
// re-run before the layer's backward.
std::vector<LayerItem> recompute_selected_modules(const LayerContext& c);
// torchtitan's selective checkpointing by op (ParallelPlan::selective_by_op), what the backward
// re-runs before the layer's backward. The policy (_get_custom_policy in
// torchtitan/parallelisms/parallelize_llama.py @ 9dec370) saves the outputs of the block's
// matmuls except every second one, counted per block in forward order (wq, wk, wv, wo, w1, w3,
// w2 in torchtitan/models/llama/model.py: wk, wo and w3 are not saved), of SDPA's flash and
// efficient kernels, of reduce-scatters, and of abs and max (an FP8 cast's scale); every other
// op's output is recomputed. Compiled (torch.compile's partitioner treats PREFER_RECOMPUTE as
// must-recompute) it re-runs what the backward reads: the attention norm, wk on its output (K for
// RoPE and the attention's backward), RoPE, the residual add (the MLP norm's input, no saved
// output) with wo before it unless TP with SP saved wo's reduce-scatter, the MLP norm, w3 and the
// activation function with its product (the down projection's input), every linear's FP8 input
// cast (no cast's output is saved; its scale is), and under SP the gathers of the re-run
// matmuls' inputs. Eager (checkpoint's replay of the forward) re-runs the same, and in a plain MLP
// also fc2, the block's sixth matmul, whose output the backward does not read.
std::vector<LayerItem> recompute_torchtitan_ops(const LayerContext& c);
std::vector<LayerItem> embedding_backward(const LayerContext& c);
// The per-step work of the plan outside the layers (its stack's StepWork, fp16 loss scaling, FP8
// weight casts) over the rank's `params` local parameters and `layer_weights` elements of its
// layers' linear weights, run before the optimizer.
std::vector<KernelSpec> step_work(const LayerContext& c, int64_t params, int64_t layer_weights);
// AdamW over the parameter tensors the rank updates (element counts, after TP and ZeRO sharding).
std::vector<KernelSpec> optimizer_step(const std::vector<int64_t>& tensors,
                                       const ModelStateBytes& state, OptimizerKernels kernels);
// The kernels that end a rank's step, after its data-parallel communication: the per-step work
// (step_work) over the rank's local parameters, then the optimizer over its tensors, each sharded
// over the ZeRO shard group when the plan shards them.
std::vector<KernelSpec> step_end_kernels(const LayerContext& c);
// The parameter tensors a rank of the stage holds (its layers, the embedding on the first stage,
// the final norm and an untied or copied LM head on the last), each divided over TP as Megatron
// partitions it.
std::vector<int64_t> parameter_tensors(const LayerContext& c);
// The format attention's GEMMs run in (fp8 GEMMs keep bf16 attention).
Dtype attention_dtype(const LayerContext& c);
// Bytes of the activation a pipeline stage sends to the next one per microbatch (and of the
// gradient it receives back): T x h, divided by TP with sequence parallelism.
Bytes pipeline_message_bytes(const LayerContext& c);

}  // namespace meshsim::workloads::detail
