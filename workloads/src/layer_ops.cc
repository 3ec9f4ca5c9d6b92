#include "layer_ops.h"

#include <utility>

#include "meshsim/sim/error.h"

namespace meshsim::workloads::detail {
namespace {

constexpr int64_t kAct = 2;  // bytes per bf16 activation element

ComputeWork matmul(int64_t m, int64_t k, int64_t n, int64_t batch, Dtype dtype) {
  ComputeWork w;
  w.op_class = OpClass::kMatmul;
  w.dtype = dtype;
  const double flops = 2.0 * static_cast<double>(m) * static_cast<double>(k) *
                       static_cast<double>(n) * static_cast<double>(batch);
  w.flops = Flops::of(flops);
  const int64_t in = bytes_per_element(dtype);
  w.bytes = Bytes::of(batch * ((m * k + k * n) * in + m * n * kAct));
  w.shape = MatmulShape{m, k, n, batch};
  return w;
}

ComputeWork memory_bound(OpClass cls, double flops_per_element, int64_t elements,
                         int64_t bytes) {
  ComputeWork w;
  w.op_class = cls;
  w.dtype = Dtype::kFp32;  // vector units, not tensor cores
  w.flops = Flops::of(flops_per_element * static_cast<double>(elements));
  w.bytes = Bytes::of(bytes);
  return w;
}

// Forward GEMM named `name` and its backward pair.
void add_matmul_fwd(std::vector<KernelSpec>& out, const std::string& name, int64_t m, int64_t k,
                    int64_t n, int64_t batch, Dtype dt) {
  out.push_back({name, matmul(m, k, n, batch, dt)});
}

void add_matmul_bwd(std::vector<KernelSpec>& out, const std::string& name, int64_t m, int64_t k,
                    int64_t n, int64_t batch, Dtype dt) {
  out.push_back({name + ".dgrad", matmul(m, n, k, batch, dt)});
  out.push_back({name + ".wgrad", matmul(k, m, n, batch, dt)});
}

struct Dims {
  int64_t tokens;  // T = b*s
  int64_t b;
  int64_t s;
  int64_t h;
  int64_t q;
  int64_t kv;
  int64_t f;
  int64_t heads;
};

Dims dims_of(const KernelContext& c) {
  const ModelConfig& m = c.model;
  return Dims{c.micro_batch * c.seq_len, c.micro_batch, c.seq_len, m.d_model, m.q_dim(),
              m.kv_dim(), m.d_ff, m.num_heads};
}

KernelSpec norm_kernel(const std::string& name, const ModelConfig& m, int64_t tokens,
                       bool backward) {
  const int64_t th = tokens * m.d_model;
  // Forward reads x, writes y; backward reads x and dy, writes dx (and reduces dgamma).
  const int64_t passes = backward ? 3 : 2;
  const double flops = m.norm == NormKind::kRmsNorm ? 4.0 : 7.0;
  return {name, memory_bound(OpClass::kNorm, backward ? 2 * flops : flops, th,
                             passes * kAct * th + kAct * m.d_model)};
}

KernelSpec residual_kernel(const std::string& name, int64_t elements) {
  // out = x + y: read two, write one. Its backward is a copy folded into neighbouring kernels.
  return {name, memory_bound(OpClass::kElementwise, 1.0, elements, 3 * kAct * elements)};
}

ComputeWork attention_work(const KernelContext& c, const Dims& d, bool backward) {
  const bool flash = c.attention == AttentionKernel::kFlash;
  // Causal: half of the s x s scores. Naive kernels compute all of them.
  const double s2q = static_cast<double>(d.b) * static_cast<double>(d.s) *
                     static_cast<double>(d.s) * static_cast<double>(d.q);
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
    const int64_t scores = d.b * d.heads * d.s * d.s * kAct;
    bytes += (backward ? 6 : 4) * scores;
  }
  w.bytes = Bytes::of(bytes);
  w.shape = MatmulShape{d.s, c.model.head_dim, d.s, d.b * d.heads};
  return w;
}

// The MLP (dense or mixture of experts), forward or backward, in execution order.
void mlp_kernels(std::vector<KernelSpec>& out, const KernelContext& c, const Dims& d,
                 bool backward) {
  const ModelConfig& m = c.model;
  const bool gated = m.mlp == MlpKind::kGated;
  const int64_t up_n = gated ? 2 * d.f : d.f;
  int64_t rows = d.tokens;  // tokens each expert GEMM sees
  int64_t batch = 1;        // number of GEMMs (experts)
  if (m.moe) {
    batch = m.moe->num_experts;
    // Balanced routing: T*k token-expert pairs spread evenly over E experts (rounded up).
    rows = (d.tokens * m.moe->experts_per_token + batch - 1) / batch;
  }
  const int64_t routed = rows * batch;
  const auto add = backward ? add_matmul_bwd : add_matmul_fwd;
  auto act = [&] {
    // SwiGLU: read gate and up, write h (backward: read both and dh, write both grads).
    const int64_t el = routed * d.f;
    const int64_t bytes = gated ? (backward ? 5 : 3) * kAct * el : (backward ? 3 : 2) * kAct * el;
    out.push_back({gated ? "swiglu" : "gelu",
                   memory_bound(OpClass::kElementwise, gated ? 5.0 : 8.0, el, bytes)});
  };
  auto permute = [&](const char* name) {
    out.push_back({name, memory_bound(OpClass::kCopy, 0.0, routed * d.h, 2 * kAct * routed * d.h)});
  };
  if (!backward) {
    if (m.moe) {
      add(out, "router", d.tokens, d.h, m.moe->num_experts, 1, Dtype::kBf16);
      permute("dispatch");
    }
    add(out, gated ? "mlp_up" : "fc1", rows, d.h, up_n, batch, c.matmul_dtype);
    act();
    add(out, gated ? "mlp_down" : "fc2", rows, d.f, d.h, batch, c.matmul_dtype);
    if (m.moe) {
      permute("combine");
    }
  } else {
    if (m.moe) {
      permute("combine.bwd");
    }
    add(out, gated ? "mlp_down" : "fc2", rows, d.f, d.h, batch, c.matmul_dtype);
    act();
    add(out, gated ? "mlp_up" : "fc1", rows, d.h, up_n, batch, c.matmul_dtype);
    if (m.moe) {
      permute("dispatch.bwd");
      add(out, "router", d.tokens, d.h, m.moe->num_experts, 1, Dtype::kBf16);
    }
  }
}

KernelSpec rope_kernel(const Dims& d, bool backward) {
  const int64_t el = d.tokens * (d.q + d.kv);
  return {backward ? "rope.bwd" : "rope",
          memory_bound(OpClass::kElementwise, 3.0, el, 2 * kAct * el)};
}

}  // namespace

std::vector<KernelSpec> embedding_forward(const KernelContext& c) {
  const Dims d = dims_of(c);
  const int64_t th = d.tokens * d.h;
  // Gather T rows of the table and write them; learned positions add a second gather and a sum.
  const bool learned = c.model.positions == PositionKind::kLearned;
  const int64_t bytes = (learned ? 5 : 2) * kAct * th;
  return {{"embedding", memory_bound(OpClass::kEmbedding, learned ? 1.0 : 0.0, th, bytes)}};
}

std::vector<KernelSpec> embedding_backward(const KernelContext& c) {
  const Dims d = dims_of(c);
  const int64_t th = d.tokens * d.h;
  // Scatter-add of T gradient rows into the table's gradient (read-modify-write of each row).
  const bool learned = c.model.positions == PositionKind::kLearned;
  return {{"embedding.bwd",
           memory_bound(OpClass::kEmbedding, learned ? 2.0 : 1.0, th,
                        (learned ? 6 : 3) * kAct * th)}};
}

std::vector<KernelSpec> layer_forward(const KernelContext& c) {
  const Dims d = dims_of(c);
  const ModelConfig& m = c.model;
  std::vector<KernelSpec> out;
  out.push_back(norm_kernel("attn_norm", m, d.tokens, false));
  add_matmul_fwd(out, "qkv", d.tokens, d.h, d.q + 2 * d.kv, 1, c.matmul_dtype);
  if (m.positions == PositionKind::kRope) {
    out.push_back(rope_kernel(d, false));
  }
  out.push_back({"attention", attention_work(c, d, false)});
  add_matmul_fwd(out, "attn_out", d.tokens, d.q, d.h, 1, c.matmul_dtype);
  out.push_back(residual_kernel("residual_attn", d.tokens * d.h));
  out.push_back(norm_kernel("mlp_norm", m, d.tokens, false));
  mlp_kernels(out, c, d, false);
  out.push_back(residual_kernel("residual_mlp", d.tokens * d.h));
  return out;
}

std::vector<KernelSpec> layer_backward(const KernelContext& c) {
  const Dims d = dims_of(c);
  const ModelConfig& m = c.model;
  std::vector<KernelSpec> out;
  mlp_kernels(out, c, d, true);
  out.push_back(norm_kernel("mlp_norm.bwd", m, d.tokens, true));
  out.push_back(residual_kernel("residual.bwd", d.tokens * d.h));
  add_matmul_bwd(out, "attn_out", d.tokens, d.q, d.h, 1, c.matmul_dtype);
  out.push_back({"attention.bwd", attention_work(c, d, true)});
  if (m.positions == PositionKind::kRope) {
    out.push_back(rope_kernel(d, true));
  }
  add_matmul_bwd(out, "qkv", d.tokens, d.h, d.q + 2 * d.kv, 1, c.matmul_dtype);
  out.push_back(norm_kernel("attn_norm.bwd", m, d.tokens, true));
  return out;
}

std::vector<KernelSpec> head_forward(const KernelContext& c) {
  const Dims d = dims_of(c);
  const int64_t v = c.model.vocab_size;
  std::vector<KernelSpec> out;
  out.push_back(norm_kernel("final_norm", c.model, d.tokens, false));
  add_matmul_fwd(out, "lm_head", d.tokens, d.h, v, 1, c.matmul_dtype);
  // Fused cross entropy: read the bf16 logits, write fp32 softmax statistics and the gradient of
  // the logits (computed in the forward pass, as fused kernels do).
  const int64_t tv = d.tokens * v;
  out.push_back({"cross_entropy", memory_bound(OpClass::kLoss, 5.0, tv, 2 * kAct * tv)});
  return out;
}

std::vector<KernelSpec> head_backward(const KernelContext& c) {
  const Dims d = dims_of(c);
  std::vector<KernelSpec> out;
  add_matmul_bwd(out, "lm_head", d.tokens, d.h, c.model.vocab_size, 1, c.matmul_dtype);
  out.push_back(norm_kernel("final_norm.bwd", c.model, d.tokens, true));
  return out;
}

KernelSpec optimizer_step(int64_t params, const ModelStateBytes& state) {
  // AdamW: read gradient, master weight, m, v; write master weight, m, v and the bf16 working
  // copy. About 12 FLOPs per parameter (moments, bias correction, sqrt, divide, decay, update).
  const int64_t bytes = params * (state.gradient + 2 * state.optimizer + state.weight);
  return {"adamw", memory_bound(OpClass::kOptimizer, 12.0, params, bytes)};
}

}  // namespace meshsim::workloads::detail
