// Private to layer_ops*.cc: the sizes of a rank's share of a layer and the list the layer's
// kernels and communication are appended to.
#pragma once

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "layer_ops.h"
#include "meshsim/workloads/accounting.h"

namespace meshsim::workloads::detail {

// [m,k]x[k,n], `batch` times: inputs at the matmul dtype's width, the output at `out_bytes` per
// element (the activation width).
inline ComputeWork matmul(int64_t m, int64_t k, int64_t n, int64_t batch, Dtype dtype,
                          int64_t out_bytes) {
  return matmul_work(MatmulShape{m, k, n, batch}, dtype, out_bytes);
}

inline ComputeWork memory_bound(OpClass cls, double flops_per_element, int64_t elements, int64_t bytes) {
  ComputeWork w;
  w.op_class = cls;
  w.dtype = Dtype::kFp32;  // vector units, not tensor cores
  w.flops = Flops::of(flops_per_element * static_cast<double>(elements));
  w.bytes = Bytes::of(bytes);
  return w;
}

// A cast, amax or transpose kernel of an FP8 recipe over `elements` values moving `bytes`.
inline ComputeWork quantize_work(int64_t elements, int64_t bytes) {
  return memory_bound(OpClass::kQuantize, 2.0, elements, bytes);
}

// Rank-local sizes of the partitioned layer.
struct Dims {
  int64_t tokens;     // T: tokens of the rank's sequence chunk (b*s/CP)
  int64_t sp_tokens;  // tokens of norms and residuals: T, or T/TP with SP
  int64_t b;
  int64_t s;
  int64_t h;
  int64_t q;      // local query width (heads/TP * d_h)
  int64_t kv;     // local K width: KV heads/TP, at least one head
  int64_t v;      // local V width (= kv; MLA: heads/TP * v_head_dim)
  int64_t o;      // local attention output width (= q; MLA: heads/TP * v_head_dim)
  int64_t f;      // local d_ff (of the layer's dense MLP)
  int64_t heads;  // local query heads
  int64_t vocab;  // local vocabulary (vocabulary-parallel head)
};

// The partition's widths and tokens, in the names the kernel formulas use.
inline Dims dims_of(const LayerContext& c) {
  const ModelConfig& m = c.model;
  const ShardWidths& w = c.stage.widths;
  const int64_t kv = w.kv_heads * m.head_dim;
  const int64_t v_head = m.mla ? m.mla->v_head_dim : m.head_dim;
  return Dims{c.stage.tokens.per_rank,
              c.stage.tokens.sequence,
              c.plan.mbs,
              c.plan.seq,
              m.d_model,
              w.q_heads * m.head_dim,
              kv,
              m.mla ? w.q_heads * v_head : kv,
              w.q_heads * v_head,
              w.d_ff,
              w.q_heads,
              w.vocab};
}

// Megatron-LM's legacy layer with its fused kernels (ParallelPlan::megatron_legacy_layer): the
// plain PyTorch kernels its code issues around them (legacy_* below, and Items' delay kernel).
inline bool legacy(const LayerContext& c) {
  return c.plan.megatron_legacy_layer && c.plan.kernels != Kernels::kEager;
}

// Appends items to a list, with the Megatron TP communication pattern.
class Items {
 public:
  Items(const LayerContext& c, const Dims& d) : c_(c), d_(d) {}
  std::vector<LayerItem> take() { return std::move(items_); }

  void kernel(std::string name, ComputeWork w, KernelRole role = KernelRole::kCompute) {
    items_.push_back(KernelSpec{std::move(name), w, role});
  }
  KernelSpec gemm_spec(const std::string& name, int64_t m, int64_t k, int64_t n, int64_t batch = 1,
                       KernelRole role = KernelRole::kCompute) const {
    ComputeWork w = matmul(m, k, n, batch, c_.plan.matmul_dtype, c_.plan.activation_bytes);
    // The FP8 recipe's forward GEMMs with fast accumulation; a data gradient (".dgrad") or a
    // weight gradient is a backward GEMM.
    w.fast_accumulation = w.dtype == Dtype::kFp8 && c_.plan.fp8_fprop_fast_accumulation &&
                          role == KernelRole::kCompute && !name.ends_with(".dgrad");
    return {name, w, role};
  }

  void gemm(const std::string& name, int64_t m, int64_t k, int64_t n, int64_t batch = 1,
            KernelRole role = KernelRole::kCompute) {
    items_.push_back(gemm_spec(name, m, k, n, batch, role));
  }
  // The weight gradient [k,m]x[m,n] of a forward [m,k]x[k,n]: a kernel of its own role.
  void wgrad(const std::string& name, int64_t m, int64_t k, int64_t n, int64_t batch = 1) {
    gemm(name + ".wgrad", k, m, n, batch, KernelRole::kWeightGradient);
  }
  void gemm_bwd(const std::string& name, int64_t m, int64_t k, int64_t n, int64_t batch = 1) {
    gemm(name + ".dgrad", m, n, k, batch);
    wgrad(name, m, k, n, batch);
  }
  void comm(std::string name, CommKind kind, CollectiveKind op, Bytes bytes, bool async = false,
            std::optional<GroupSlot> slot = std::nullopt) {
    items_.push_back(CommSpec{std::move(name), kind, op, bytes, async, slot});
  }
  void ring(RingSpec r) { items_.push_back(std::move(r)); }
  // FP8 runs (the linear layers' GEMMs in FP8): the recipe's cast of `elements` bf16 values to
  // FP8, with the transposed copy the other GEMM layout needs (Transformer Engine's
  // cast_transpose: read 2 bytes, write 1 + 1 per element), preceded under current scaling by the
  // amax pass that reads them once more. Row-wise scaling, as torchao's roofline model lists its
  // kernels (torchao/testing/float8/roofline_utils.py, get_tensor_memory_traffic_ovhd_s,
  // "rowwise"): one pass casts along rows and writes a bf16 transpose (read 2, write 1 + 2), a
  // second casts that along its rows (read 2, write 1); each computes its row scales as it goes.
  // (Its weights take a third pass there, a separate bf16 transpose: not counted.) Nothing in
  // other precisions.
  void fp8_cast(const std::string& name, int64_t elements) {
    if (c_.plan.matmul_dtype != Dtype::kFp8) {
      return;
    }
    if (c_.plan.fp8_scaling == Fp8Scaling::kCurrent) {
      kernel(name + ".amax", quantize_work(elements, 2 * elements));
    }
    fp8_recast(name, elements);
  }
  // The cast again, in a recompute whose policy kept the scale (no amax pass).
  void fp8_recast(const std::string& name, int64_t elements) {
    if (c_.plan.matmul_dtype != Dtype::kFp8) {
      return;
    }
    if (c_.plan.fp8_scaling == Fp8Scaling::kRowwise) {
      kernel(name + ".cast_rows", quantize_work(elements, 5 * elements));
      kernel(name + ".cast_columns", quantize_work(elements, 3 * elements));
      return;
    }
    kernel(name + ".cast_transpose", quantize_work(elements, 4 * elements));
  }
  // Whether the norm before a column-parallel GEMM writes its FP8 input itself (Transformer
  // Engine's LayerNormLinear, under fused kernels) rather than a cast kernel doing it.
  bool norm_casts_fp8() const {
    return c_.plan.kernels == Kernels::kFused && c_.plan.fp8_scaling == Fp8Scaling::kDelayed;
  }
  Bytes activation_bytes() const { return Bytes::of(d_.tokens * d_.h * c_.plan.activation_bytes); }
  // A column-parallel layer's gathered input: its FP8 cast where the stack gathers that
  // (ParallelPlan::fp8_gathers_quantized_inputs), otherwise the 16-bit activation.
  Bytes gathered_input_bytes() const {
    const bool quantized = c_.plan.matmul_dtype == Dtype::kFp8 &&
                           c_.plan.fp8_gathers_quantized_inputs &&
                           c_.plan.fp8_scaling != Fp8Scaling::kRowwise;
    return quantized ? Bytes::of(d_.tokens * d_.h) : activation_bytes();
  }
  bool tensor_parallel() const { return c_.plan.tp > 1; }
  const LayerContext& context() const { return c_; }
  const Dims& dims() const { return d_; }

  // A column-parallel GEMM (forward): with SP, the all-gather of its sequence-sharded input
  // (`where`.tp_allgather) first, overlappable with it.
  void column_gemm(const std::string& where, const std::string& name, int64_t m, int64_t k,
                   int64_t n, int64_t batch = 1) {
    if (tensor_parallel() && c_.plan.sp) {
      overlapped(gemm_spec(name, m, k, n, batch),
                 sp_gather(where + ".tp_allgather", gathered_input_bytes()), true);
    } else {
      gemm(name, m, k, n, batch);
    }
  }
  // A row-parallel GEMM (forward) and the sum of its partial outputs across TP
  // (`where`.tp_allreduce, or .tp_reducescatter with SP), overlappable with it.
  void row_gemm(const std::string& name, const std::string& where, int64_t m, int64_t k, int64_t n,
                int64_t batch = 1) {
    if (tensor_parallel()) {
      overlapped(gemm_spec(name, m, k, n, batch), tp_sum(where), false);
    } else {
      gemm(name, m, k, n, batch);
    }
  }
  // After a row-parallel part that ends in something other than its GEMM (MoE's combine): the
  // sum across TP on its own.
  void tp_exit(const std::string& where) {
    if (tensor_parallel()) {
      items_.push_back(tp_sum(where));
    }
  }
  // Backward of a row-parallel GEMM: with SP the all-gather of the sequence-sharded output
  // gradient (`where`.tp_allgather_grad), overlappable with the data gradient; then the weight
  // gradient.
  void row_gemm_bwd(const std::string& where, const std::string& name, int64_t m, int64_t k,
                    int64_t n, int64_t batch = 1) {
    if (tensor_parallel() && c_.plan.sp) {
      overlapped(gemm_spec(name + ".dgrad", m, n, k, batch), sp_gather(where + ".tp_allgather_grad"),
                 true);
      wgrad(name, m, k, n, batch);
    } else {
      gemm_bwd(name, m, k, n, batch);
    }
  }
  // Before a row-parallel part whose backward does not start with its GEMM (MoE's combine): the
  // all-gather of the output gradient on its own.
  void tp_gather_grad(const std::string& where) {
    if (tensor_parallel() && c_.plan.sp) {
      items_.push_back(sp_gather(where + ".tp_allgather_grad"));
    }
  }
  // Backward of a column-parallel GEMM: with SP the saved (sharded) input is re-gathered while
  // the data gradient runs; then the weight gradient and the input gradient's sum across TP
  // (wgrad_and_reduce).
  void column_bwd(const std::string& name, int64_t m, int64_t k, int64_t n, int64_t batch = 1) {
    if (!tensor_parallel()) {
      gemm_bwd(name, m, k, n, batch);
      return;
    }
    if (c_.plan.sp) {
      // The saved shard again: the FP8 cast where the layer both saves and gathers that
      // (Transformer Engine), else 16 bits.
      comm(name + ".tp_allgather_input", CommKind::kTensor, CollectiveKind::kAllGather,
           c_.plan.fp8_saves_quantized_inputs ? gathered_input_bytes() : activation_bytes(), true);
    }
    gemm(name + ".dgrad", m, n, k, batch);
    wgrad_and_reduce(tp_sum(name), name, m, k, n, batch);
  }
  // A column-parallel layer's weight gradient and `reduce`, the reduction of its input gradient
  // across TP: beside the GEMM (Megatron's async TP all-reduce), or after it with the compute
  // stream waiting (ParallelPlan::tp_backward_async).
  void wgrad_and_reduce(CommSpec reduce, const std::string& name, int64_t m, int64_t k, int64_t n,
                        int64_t batch = 1) {
    reduce.async = c_.plan.tp_backward_async;
    if (reduce.async) {
      items_.push_back(std::move(reduce));
      if (legacy(c_)) {
        // Megatron-LM's "delay" kernel, so that the all-reduce is scheduled first: `_ =
        // torch.empty(1, device=grad_output.device) + 1` (megatron/mpu/layers.py @ cfd2e21607,
        // LinearWithGradAccumulationAndAsyncCommunication.backward). One element.
        kernel(name + ".delay", memory_bound(OpClass::kElementwise, 1.0, 1, 8));
      }
      wgrad(name, m, k, n, batch);
    } else {
      wgrad(name, m, k, n, batch);
      items_.push_back(std::move(reduce));
    }
  }

 private:
  // The all-gather of a sequence-sharded tensor over TP: an activation (or its gradient) in 16
  // bits unless `bytes` says otherwise.
  CommSpec sp_gather(std::string name) const {
    return sp_gather(std::move(name), activation_bytes());
  }
  CommSpec sp_gather(std::string name, Bytes bytes) const {
    return {std::move(name), CommKind::kTensor, CollectiveKind::kAllGather, bytes};
  }
  CommSpec tp_sum(const std::string& where) const {
    return c_.plan.sp ? CommSpec{where + ".tp_reducescatter", CommKind::kTensor,
                                 CollectiveKind::kReduceScatter, activation_bytes()}
                      : CommSpec{where + ".tp_allreduce", CommKind::kTensor,
                                 CollectiveKind::kAllReduce, activation_bytes()};
  }
  void overlapped(KernelSpec gemm, CommSpec comm, bool comm_first) {
    items_.push_back(TpOverlapGemm{std::move(gemm), std::move(comm), comm_first});
  }

  const LayerContext& c_;
  const Dims& d_;
  std::vector<LayerItem> items_;
};

// The fused attention kernel of the rank: its heads (1/TP) over its query chunk (1/CP of the causal
// work); flash or naive as the context says.
ComputeWork attention_work(const LayerContext& c, const Dims& d, bool backward);

// The MLP of the context's layer (layer_ops_mlp.cc): dense or MoE (router, shared experts,
// dispatch, experts, combine), forward or backward, with its TP and EP communication.
void mlp_items(Items& it, bool backward);
// The EP exchange of `tokens` routed tokens (moe_dispatch.cc), towards the experts (dispatch and
// the combine's gradient) or back; nothing without EP.
void ep_exchange(Items& it, const std::string& name, bool to_experts, int64_t tokens,
                 double exchange);
// The dense MLP of a parallel block, without communication of its own.
void parallel_mlp_items(Items& it, bool backward);
// The forward activation function of the context's layer over its MLP width (the dots policy's
// recompute).
void mlp_activation_recompute(Items& it);
// The dense MLP's up projection and activation function, forward (the qkv_out_proj policy's
// recompute): its FP8 input cast, the GEMM (column-parallel, gathered under SP, unless a parallel
// block's), the activation.
void mlp_up_recompute(Items& it);
// The forward activation function of the routed experts only (the moe_act recompute module).
void moe_activation_recompute(Items& it);
// The activation function between the MLP's up and down projections, on `elements`.
void activation_items(Items& it, int64_t elements, bool backward);

// Kernels::kEager blocks (layer_ops_eager.cc): what PyTorch eager mode launches for each fused
// kernel of layer_ops.cc, forward or (autograd's) backward.
void eager_norm(Items& it, const std::string& name, int64_t tokens, bool backward);
void eager_rope(Items& it, bool backward);
void eager_attention(Items& it, bool backward);
void eager_activation(Items& it, int64_t elements, bool backward);
void eager_loss(Items& it, bool backward);
// A layout copy (a .contiguous() of a permuted view, torch.cat of gradient slices) of `elements`
// activation elements: read one, write one. PyTorch eager's, and Megatron-LM's legacy layer's.
inline void layout_copy(Items& it, const std::string& name, int64_t elements) {
  const int64_t e = it.context().plan.activation_bytes;
  it.kernel(name, memory_bound(OpClass::kCopy, 0.0, elements, 2 * e * elements));
}

// One element-wise pass over `elements`, reading one and writing one: ColumnParallelLinear's
// `output = output + bias` (megatron/mpu/layers.py @ cfd2e21607), baddbmm's backward multiplying
// a gradient by alpha.
inline void elementwise_pass(Items& it, const std::string& name, int64_t elements) {
  const int64_t e = it.context().plan.activation_bytes;
  it.kernel(name, memory_bound(OpClass::kElementwise, 1.0, elements, 2 * e * elements));
}

// A bias's gradient: the output gradient summed over the rank's tokens
// (LinearWithGradAccumulation's grad_output.sum(dim=0); autograd's sum behind
// bias.expand_as(residual) and behind the bias-GeLU's bias): reads tokens x width, writes width.
inline void legacy_bias_grad(Items& it, const std::string& name, int64_t tokens, int64_t width) {
  const int64_t e = it.context().plan.activation_bytes;
  it.kernel(name,
            memory_bound(OpClass::kElementwise, 1.0, tokens * width, e * (tokens * width + width)));
}

std::vector<KernelSpec> eager_adamw(const std::vector<int64_t>& tensors,
                                    const ModelStateBytes& state, OptimizerKernels kernels);

}  // namespace meshsim::workloads::detail
