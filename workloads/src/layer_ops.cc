#include "layer_ops.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "meshsim/sim/error.h"

namespace meshsim::workloads::detail {
namespace {

constexpr int64_t kAct = 2;  // bytes per bf16 activation element

ComputeWork matmul(int64_t m, int64_t k, int64_t n, int64_t batch, Dtype dtype) {
  ComputeWork w;
  w.op_class = OpClass::kMatmul;
  w.dtype = dtype;
  w.flops = Flops::of(2.0 * static_cast<double>(m) * static_cast<double>(k) *
                      static_cast<double>(n) * static_cast<double>(batch));
  const int64_t in = bytes_per_element(dtype);
  w.bytes = Bytes::of(batch * ((m * k + k * n) * in + m * n * kAct));
  w.shape = MatmulShape{m, k, n, batch};
  return w;
}

ComputeWork memory_bound(OpClass cls, double flops_per_element, int64_t elements, int64_t bytes) {
  ComputeWork w;
  w.op_class = cls;
  w.dtype = Dtype::kFp32;  // vector units, not tensor cores
  w.flops = Flops::of(flops_per_element * static_cast<double>(elements));
  w.bytes = Bytes::of(bytes);
  return w;
}

// Rank-local sizes of the partitioned layer.
struct Dims {
  int64_t tokens;     // T: tokens of the rank's sequence chunk (b*s/CP)
  int64_t sp_tokens;  // tokens of norms and residuals: T, or T/TP with SP
  int64_t b;
  int64_t s;
  int64_t h;
  int64_t q;      // local query width (heads/TP * d_h)
  int64_t kv;     // local K (= V) width: KV heads/TP, at least one head
  int64_t f;      // local d_ff
  int64_t heads;  // local query heads
  int64_t vocab;  // local vocabulary (vocabulary-parallel head)
};

Dims dims_of(const KernelContext& c) {
  const ModelConfig& m = c.model;
  const int64_t tokens = c.micro_batch * c.seq_len / c.cp;
  const int64_t kv_heads = std::max<int64_t>(1, m.num_kv_heads / c.tp);
  return Dims{tokens,
              c.sp ? tokens / c.tp : tokens,
              c.micro_batch,
              c.seq_len,
              m.d_model,
              m.q_dim() / c.tp,
              kv_heads * m.head_dim,
              m.d_ff / c.tp,
              m.num_heads / c.tp,
              (m.vocab_size + c.tp - 1) / c.tp};
}

// Appends items to a list, with the Megatron TP communication pattern.
class Items {
 public:
  Items(const KernelContext& c, const Dims& d) : c_(c), d_(d) {}
  std::vector<LayerItem> take() { return std::move(items_); }

  void kernel(std::string name, ComputeWork w) { items_.push_back(KernelSpec{std::move(name), w}); }
  void gemm(const std::string& name, int64_t m, int64_t k, int64_t n, int64_t batch = 1) {
    kernel(name, matmul(m, k, n, batch, c_.matmul_dtype));
  }
  void gemm_bwd(const std::string& name, int64_t m, int64_t k, int64_t n, int64_t batch = 1) {
    gemm(name + ".dgrad", m, n, k, batch);
    gemm(name + ".wgrad", k, m, n, batch);
  }
  void comm(std::string name, CommKind kind, CollectiveKind op, Bytes bytes, bool async = false) {
    items_.push_back(CommSpec{std::move(name), kind, op, bytes, async});
  }
  void ring(RingSpec r) { items_.push_back(std::move(r)); }
  Bytes activation_bytes() const { return Bytes::of(d_.tokens * d_.h * kAct); }
  bool tensor_parallel() const { return c_.tp > 1; }

  // Before a column-parallel GEMM (forward): SP gathers the sequence-sharded input.
  void tp_enter(const std::string& where) {
    if (tensor_parallel() && c_.sp) {
      comm(where + ".tp_allgather", CommKind::kTensor, CollectiveKind::kAllGather,
           activation_bytes());
    }
  }
  // After a row-parallel GEMM (forward) or a column-parallel data gradient (backward): sum the
  // partial results across TP (reduce-scatter with SP).
  void tp_exit(const std::string& where) {
    if (!tensor_parallel()) {
      return;
    }
    if (c_.sp) {
      comm(where + ".tp_reducescatter", CommKind::kTensor, CollectiveKind::kReduceScatter,
           activation_bytes());
    } else {
      comm(where + ".tp_allreduce", CommKind::kTensor, CollectiveKind::kAllReduce,
           activation_bytes());
    }
  }
  // Backward of a column-parallel GEMM: with SP the saved (sharded) input is re-gathered while
  // the data gradient runs; the input gradient is reduced across TP while the weight gradient runs.
  void column_bwd(const std::string& name, int64_t m, int64_t k, int64_t n, int64_t batch = 1) {
    if (!tensor_parallel()) {
      gemm_bwd(name, m, k, n, batch);
      return;
    }
    if (c_.sp) {
      comm(name + ".tp_allgather_input", CommKind::kTensor, CollectiveKind::kAllGather,
           activation_bytes(), true);
    }
    gemm(name + ".dgrad", m, n, k, batch);
    comm(name + (c_.sp ? ".tp_reducescatter" : ".tp_allreduce"), CommKind::kTensor,
         c_.sp ? CollectiveKind::kReduceScatter : CollectiveKind::kAllReduce, activation_bytes(),
         true);
    gemm(name + ".wgrad", k, m, n, batch);
  }
  // Backward of a row-parallel GEMM with SP: gather the sequence-sharded output gradient.
  void tp_gather_grad(const std::string& where) {
    if (tensor_parallel() && c_.sp) {
      comm(where + ".tp_allgather_grad", CommKind::kTensor, CollectiveKind::kAllGather,
           activation_bytes());
    }
  }

 private:
  const KernelContext& c_;
  const Dims& d_;
  std::vector<LayerItem> items_;
};

ComputeWork norm_work(const ModelConfig& m, int64_t tokens, bool backward) {
  const int64_t th = tokens * m.d_model;
  // Forward reads x, writes y; backward reads x and dy, writes dx (and reduces dgamma).
  const int64_t passes = backward ? 3 : 2;
  const double flops = m.norm == NormKind::kRmsNorm ? 4.0 : 7.0;
  return memory_bound(OpClass::kNorm, backward ? 2 * flops : flops, th,
                      passes * kAct * th + kAct * m.d_model);
}

ComputeWork residual_work(int64_t elements) {
  // out = x + y: read two, write one.
  return memory_bound(OpClass::kElementwise, 1.0, elements, 3 * kAct * elements);
}

ComputeWork rope_work(const Dims& d) {
  const int64_t el = d.tokens * (d.q + d.kv);
  return memory_bound(OpClass::kElementwise, 3.0, el, 2 * kAct * el);
}

// The attention core of the rank: its heads (1/TP) over its query chunk (1/CP of the causal work).
ComputeWork attention_work(const KernelContext& c, const Dims& d, bool backward) {
  const bool flash = c.attention == AttentionKernel::kFlash;
  const double s2q = static_cast<double>(d.b) * static_cast<double>(d.s) *
                     static_cast<double>(d.s) * static_cast<double>(d.q) /
                     static_cast<double>(c.cp);
  const double fwd_flops = flash ? 2.0 * s2q : 4.0 * s2q;
  ComputeWork w;
  w.op_class = OpClass::kAttention;
  w.dtype = c.matmul_dtype == Dtype::kFp8 ? Dtype::kBf16 : c.matmul_dtype;
  w.flops = Flops::of(backward ? 2.5 * fwd_flops : fwd_flops);
  const int64_t qkv = d.tokens * (d.q + 2 * d.kv) * kAct;
  const int64_t o = d.tokens * d.q * kAct;
  // Forward reads Q, K, V and writes O; backward reads Q, K, V, O, dO and writes dQ, dK, dV.
  int64_t bytes = backward ? 2 * qkv + 2 * o : qkv + o;
  if (!flash) {
    const int64_t scores = d.b * d.heads * d.tokens * d.s * kAct;
    bytes += (backward ? 6 : 4) * scores;
  }
  w.bytes = Bytes::of(bytes);
  w.shape = MatmulShape{d.tokens, c.model.head_dim, d.s, d.b * d.heads};
  return w;
}

void attention_items(Items& it, const KernelContext& c, const Dims& d, bool backward) {
  const std::string name = backward ? "attention.bwd" : "attention";
  ComputeWork w = attention_work(c, d, backward);
  if (c.cp == 1) {
    it.kernel(name, w);
    return;
  }
  // Ring attention: CP chunks, each against one K/V block; K and V (and, backward, their
  // gradients) travel around the ring.
  w.flops = w.flops * (1.0 / static_cast<double>(c.cp));
  w.bytes = w.bytes / c.cp;
  const Bytes kv_block = Bytes::of(2 * d.tokens * d.kv * kAct);
  it.ring(RingSpec{name, KernelSpec{name + ".chunk", w}, c.cp, backward ? kv_block * 2 : kv_block});
}

struct MoeDims {
  int64_t rows;   // tokens per local expert GEMM
  int64_t batch;  // local experts
  int64_t routed; // token-expert pairs on the rank
};

MoeDims moe_dims(const KernelContext& c, const Dims& d) {
  if (!c.model.moe) {
    return {d.tokens, 1, d.tokens};
  }
  const int64_t e = c.model.moe->num_experts;
  const int64_t k = c.model.moe->experts_per_token;
  // Balanced routing: each local expert receives T*k/E tokens from each of the EP ranks, padded
  // to the capacity factor.
  const auto rows = static_cast<int64_t>(
      std::ceil(static_cast<double>(d.tokens * k * c.ep) / static_cast<double>(e) * c.capacity_factor));
  return {rows, e / c.ep, d.tokens * k};
}

void mlp_items(Items& it, const KernelContext& c, const Dims& d, bool backward) {
  const ModelConfig& m = c.model;
  const bool gated = m.mlp == MlpKind::kGated;
  const int64_t up_n = gated ? 2 * d.f : d.f;
  const MoeDims md = moe_dims(c, d);
  const int64_t act_el = md.rows * md.batch * d.f;
  const ComputeWork act = memory_bound(
      OpClass::kElementwise, gated ? 5.0 : 8.0, act_el,
      (gated ? (backward ? 5 : 3) : (backward ? 3 : 2)) * kAct * act_el);
  const Bytes routed_bytes = Bytes::of(md.routed * d.h * kAct);
  const ComputeWork permute = memory_bound(OpClass::kCopy, 0.0, md.routed * d.h, 2 * routed_bytes.count());
  auto a2a = [&](const std::string& name) {
    if (m.moe && c.ep > 1) {
      it.comm(name, CommKind::kExpert, CollectiveKind::kAllToAll, routed_bytes);
    }
  };
  const char* up = gated ? "mlp_up" : "fc1";
  const char* down = gated ? "mlp_down" : "fc2";
  if (!backward) {
    if (m.moe) {
      it.gemm("router", d.tokens, d.h, m.moe->num_experts);
      it.kernel("dispatch", permute);
      a2a("dispatch.ep_alltoall");
    }
    it.gemm(up, md.rows, d.h, up_n, md.batch);
    it.kernel(gated ? "swiglu" : "gelu", act);
    it.gemm(down, md.rows, d.f, d.h, md.batch);
    if (m.moe) {
      a2a("combine.ep_alltoall");
      it.kernel("combine", permute);
    }
    return;
  }
  if (m.moe) {
    it.kernel("combine.bwd", permute);
    a2a("combine.bwd.ep_alltoall");
  }
  it.gemm_bwd(down, md.rows, d.f, d.h, md.batch);
  it.kernel(gated ? "swiglu.bwd" : "gelu.bwd", act);
  it.column_bwd(up, md.rows, d.h, up_n, md.batch);
  if (m.moe) {
    a2a("dispatch.bwd.ep_alltoall");
    it.kernel("dispatch.bwd", permute);
    it.gemm_bwd("router", d.tokens, d.h, m.moe->num_experts);
  }
}

}  // namespace

KernelContext context_for(const ModelConfig& model, const ParallelPlan& plan) {
  return KernelContext{model,   plan.mbs, plan.seq, plan.matmul_dtype, plan.attention,
                       plan.tp, plan.sp,  plan.cp,  plan.ep,           plan.capacity_factor};
}

Bytes pipeline_message_bytes(const KernelContext& c) {
  const Dims d = dims_of(c);
  return Bytes::of(d.sp_tokens * d.h * kAct);
}

std::vector<LayerItem> embedding_forward(const KernelContext& c) {
  const Dims d = dims_of(c);
  Items it(c, d);
  const int64_t th = d.tokens * d.h;
  // Gather T rows of the (vocabulary-parallel) table; learned positions add a second gather.
  const bool learned = c.model.positions == PositionKind::kLearned;
  it.kernel("embedding", memory_bound(OpClass::kEmbedding, learned ? 1.0 : 0.0, th,
                                      (learned ? 5 : 2) * kAct * th));
  it.tp_exit("embedding");
  return it.take();
}

std::vector<LayerItem> embedding_backward(const KernelContext& c) {
  const Dims d = dims_of(c);
  Items it(c, d);
  const int64_t th = d.tokens * d.h;
  it.tp_gather_grad("embedding.bwd");
  // Scatter-add of T gradient rows into the table's gradient (read-modify-write of each row).
  const bool learned = c.model.positions == PositionKind::kLearned;
  it.kernel("embedding.bwd", memory_bound(OpClass::kEmbedding, learned ? 2.0 : 1.0, th,
                                          (learned ? 6 : 3) * kAct * th));
  return it.take();
}

std::vector<LayerItem> layer_forward(const KernelContext& c) {
  const Dims d = dims_of(c);
  Items it(c, d);
  const ModelConfig& m = c.model;
  it.kernel("attn_norm", norm_work(m, d.sp_tokens, false));
  it.tp_enter("qkv");
  it.gemm("qkv", d.tokens, d.h, d.q + 2 * d.kv);
  if (m.positions == PositionKind::kRope) {
    it.kernel("rope", rope_work(d));
  }
  attention_items(it, c, d, false);
  it.gemm("attn_out", d.tokens, d.q, d.h);
  it.tp_exit("attn_out");
  it.kernel("residual_attn", residual_work(d.sp_tokens * d.h));
  it.kernel("mlp_norm", norm_work(m, d.sp_tokens, false));
  it.tp_enter("mlp");
  mlp_items(it, c, d, false);
  it.tp_exit("mlp");
  it.kernel("residual_mlp", residual_work(d.sp_tokens * d.h));
  return it.take();
}

std::vector<LayerItem> layer_backward(const KernelContext& c) {
  const Dims d = dims_of(c);
  Items it(c, d);
  const ModelConfig& m = c.model;
  it.tp_gather_grad("mlp.bwd");
  mlp_items(it, c, d, true);
  it.kernel("mlp_norm.bwd", norm_work(m, d.sp_tokens, true));
  it.kernel("residual.bwd", residual_work(d.sp_tokens * d.h));
  it.tp_gather_grad("attn_out.bwd");
  it.gemm_bwd("attn_out", d.tokens, d.q, d.h);
  attention_items(it, c, d, true);
  if (m.positions == PositionKind::kRope) {
    it.kernel("rope.bwd", rope_work(d));
  }
  it.column_bwd("qkv", d.tokens, d.h, d.q + 2 * d.kv);
  it.kernel("attn_norm.bwd", norm_work(m, d.sp_tokens, true));
  return it.take();
}

std::vector<LayerItem> head_forward(const KernelContext& c) {
  const Dims d = dims_of(c);
  Items it(c, d);
  it.kernel("final_norm", norm_work(c.model, d.sp_tokens, false));
  it.tp_enter("lm_head");
  it.gemm("lm_head", d.tokens, d.h, d.vocab);
  // Fused (vocabulary-parallel) cross entropy: read the bf16 logits, write fp32 statistics and
  // the gradient of the logits; TP ranks all-reduce the max, the sum of exponentials and the
  // target logit, 3 fp32 values per token.
  const int64_t tv = d.tokens * d.vocab;
  it.kernel("cross_entropy", memory_bound(OpClass::kLoss, 5.0, tv, 2 * kAct * tv));
  if (it.tensor_parallel()) {
    it.comm("cross_entropy.tp_allreduce", CommKind::kTensor, CollectiveKind::kAllReduce,
            Bytes::of(3 * 4 * d.tokens));
  }
  return it.take();
}

std::vector<LayerItem> head_backward(const KernelContext& c) {
  const Dims d = dims_of(c);
  Items it(c, d);
  it.column_bwd("lm_head", d.tokens, d.h, d.vocab);
  it.kernel("final_norm.bwd", norm_work(c.model, d.sp_tokens, true));
  return it.take();
}

KernelSpec optimizer_step(int64_t params, const ModelStateBytes& state) {
  // AdamW: read gradient, master weight, m, v; write master weight, m, v and the bf16 working
  // copy. About 12 FLOPs per parameter (moments, bias correction, sqrt, divide, decay, update).
  const int64_t bytes = params * (state.gradient + 2 * state.optimizer + state.weight);
  return {"adamw", memory_bound(OpClass::kOptimizer, 12.0, params, bytes)};
}

}  // namespace meshsim::workloads::detail
