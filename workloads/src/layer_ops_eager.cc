// Kernels::kEager: the tensor operations PyTorch eager mode runs for a Llama-style layer, and the
// kernels autograd runs for their backward. The reference is Hugging Face transformers'
// LlamaForCausalLM with attn_implementation "eager" (or "sdpa"), which
// validation/reference_trainer/train_torch.py follows line by line; the op lists below were read
// off its torch.profiler traces (torch 1.13, CPU) and name the aten operator behind each kernel.
//
// Byte counts: every operator reads each input once and writes its output once (e bytes per
// activation element; the fp32 internals of RMSNorm, softmax and the loss at 4 bytes). Views
// (view, reshape of a contiguous tensor, transpose, slice, split, expand, t) launch no kernel and
// are not listed. Classes are those the trace importer gives the operators: the class of the
// record_function range they run in ("rmsnorm", "attention", "loss", "embedding", the optimizer)
// or, outside any, the class of their name (cat and slice_backward are copies).
#include <array>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "layer_items.h"

namespace meshsim::workloads::detail {
namespace {

constexpr int64_t kF32 = 4;

// One operator: `flops` in total, `read` and `written` bytes.
void op(Items& it, const std::string& name, OpClass cls, double flops, int64_t read,
        int64_t written) {
  ComputeWork w;
  w.op_class = cls;
  w.dtype = Dtype::kFp32;  // vector units
  w.flops = Flops::of(flops);
  w.bytes = Bytes::of(read + written);
  it.kernel(name, w);
}

double to_d(int64_t v) { return static_cast<double>(v); }

// A batched GEMM of attention ([m,k]x[k,n], `batch` times), on the matrix units.
void attention_gemm(Items& it, const std::string& name, int64_t m, int64_t k, int64_t n,
                    int64_t batch) {
  const LayerContext& c = it.context();
  ComputeWork w = matmul(m, k, n, batch, attention_dtype(c), c.plan.activation_bytes);
  w.op_class = OpClass::kAttention;
  it.kernel(name, w);
}

// A cast between the activation format and fp32 (absent when activations are fp32).
void cast(Items& it, const std::string& name, OpClass cls, int64_t elements, bool to_fp32) {
  const int64_t e = it.context().plan.activation_bytes;
  if (e != kF32) {
    op(it, name, cls, 0, elements * (to_fp32 ? e : kF32), elements * (to_fp32 ? kF32 : e));
  }
}

}  // namespace

// RMSNorm as Hugging Face writes it: x.float(); variance = x.pow(2).mean(-1); x * rsqrt(variance
// + eps); weight * x; back to the input's format. (Eager LayerNorm is one aten::native_layer_norm
// kernel each way: layer_ops.cc gives LayerNorm models the fused kernel.) Backward: autograd's MulBackward (x2, each two
// products and a reduction for the broadcast operand), RsqrtBackward, MeanBackward, PowBackward
// and the sum of the two gradients of the fp32 input.
void eager_norm(Items& it, const std::string& name, int64_t tokens, bool backward) {
  const int64_t h = it.dims().h;
  const int64_t x = tokens * h * kF32;  // one fp32 pass over the tokens' hidden states
  const int64_t r = tokens * kF32;      // one fp32 value per token
  const double el = to_d(tokens * h);
  const OpClass n = OpClass::kNorm;
  if (!backward) {
    cast(it, name + ".to_fp32", n, tokens * h, true);
    op(it, name + ".pow", n, el, x, x);
    op(it, name + ".mean", n, el, x, r);
    op(it, name + ".add_eps", n, to_d(tokens), r, r);
    op(it, name + ".rsqrt", n, to_d(tokens), r, r);
    op(it, name + ".mul_rsqrt", n, el, x + r, x);
    op(it, name + ".mul_weight", n, el, x + h * kF32, x);
    cast(it, name + ".to_act", n, tokens * h, false);
    return;
  }
  cast(it, name + ".to_fp32", n, tokens * h, true);
  op(it, name + ".mul_weight.dx", n, el, x + h * kF32, x);
  op(it, name + ".mul_weight.dw", n, el, 2 * x, x);
  op(it, name + ".mul_weight.sum", n, el, x, h * kF32);
  op(it, name + ".mul_rsqrt.dx", n, el, x + r, x);
  op(it, name + ".mul_rsqrt.dr", n, el, 2 * x, x);
  op(it, name + ".mul_rsqrt.sum", n, el, x, r);
  op(it, name + ".rsqrt.pow", n, to_d(tokens), r, r);
  op(it, name + ".rsqrt.mul", n, to_d(tokens), r, r);
  op(it, name + ".rsqrt.mul2", n, to_d(tokens), 2 * r, r);
  op(it, name + ".mean.div", n, el, r, x);
  op(it, name + ".pow.pow", n, el, x, x);
  op(it, name + ".pow.mul", n, el, x, x);
  op(it, name + ".pow.mul2", n, el, 2 * x, x);
  op(it, name + ".accumulate", n, el, 2 * x, x);
  cast(it, name + ".to_act", n, tokens * h, false);
}

// apply_rotary_pos_emb on Q, then K: rotate_half (neg of one half, cat), x * cos, rotated * sin,
// the sum. Backward (K first): the two products' input gradients, slice_backward of each half
// (a zero-filled tensor with the half copied in) summed into the gradient, and the neg.
void eager_rope(Items& it, bool backward) {
  const Dims& d = it.dims();
  const int64_t e = it.context().plan.activation_bytes;
  const int64_t table = d.s * it.context().model.head_dim * kF32;  // cos or sin, [s, d_h]
  const OpClass ew = OpClass::kElementwise;
  const OpClass copy = OpClass::kCopy;
  auto one = [&](const std::string& name, int64_t elements) {
    const int64_t x = elements * e;
    const double el = to_d(elements);
    if (!backward) {
      op(it, name + ".neg", ew, el / 2, x / 2, x / 2);
      op(it, name + ".cat", copy, 0, x, x);
      op(it, name + ".mul_cos", ew, el, x + table, x);
      op(it, name + ".mul_sin", ew, el, x + table, x);
      op(it, name + ".add", ew, el, 2 * x, x);
      return;
    }
    op(it, name + ".mul_sin.dx", ew, el, x + table, x);
    op(it, name + ".mul_cos.dx", ew, el, x + table, x);
    op(it, name + ".slice_backward", copy, 0, x / 2, x + x / 2);
    op(it, name + ".accumulate", copy, el, 2 * x, x);
    op(it, name + ".neg", ew, el / 2, x / 2, x / 2);
    op(it, name + ".slice_backward2", copy, 0, x / 2, x + x / 2);
    op(it, name + ".accumulate2", copy, el, 2 * x, x);
  };
  if (!backward) {
    one("rope.q", d.tokens * d.q);
    one("rope.k", d.tokens * d.kv);
  } else {
    one("rope.bwd.k", d.tokens * d.kv);
    one("rope.bwd.q", d.tokens * d.q);
  }
}

// FlashAttention's varlen kernel as llm-foundry calls it (flash_attn_fn), with flash-attn's
// bert_padding around it (flash_attn/bert_padding.py @ v2.4.2): unpad_input gathers the rows of
// Q, K and V (index_first_axis: torch.gather, each read and written once); pad_input writes a
// zeroed output and puts the rows back (index_put_first_axis). Backward: pad_input's backward
// gathers the output gradient's rows; index_first_axis's backward zero-fills each of dQ, dK and dV
// and scatters the rows into it. (unpad_input also syncs with the host twice, nonzero and
// .item(), which is not modelled.)
void flash_varlen(Items& it, const std::string& p, bool backward) {
  const LayerContext& c = it.context();
  const Dims& d = it.dims();
  const int64_t e = c.plan.activation_bytes;
  const OpClass a = OpClass::kAttention;
  const int64_t o = d.tokens * d.o * e;
  const std::array<std::pair<const char*, int64_t>, 3> qkv = {
      {{"q", d.tokens * d.q * e}, {"k", d.tokens * d.kv * e}, {"v", d.tokens * d.v * e}}};
  if (!backward) {
    for (const auto& [t, x] : qkv) {
      op(it, p + ".unpad_" + t, a, 0, x, x);
    }
    it.kernel(p + ".varlen", attention_work(c, d, false));
    op(it, p + ".pad_output.zeros", a, 0, 0, o);
    op(it, p + ".pad_output.index_put", a, 0, o, o);
    return;
  }
  op(it, p + ".pad_output.bwd", a, 0, o, o);
  it.kernel(p + ".varlen", attention_work(c, d, true));
  for (const auto& [t, x] : qkv) {
    op(it, p + ".unpad_" + t + ".bwd.zeros", a, 0, 0, x);
    op(it, p + ".unpad_" + t + ".bwd.scatter", a, 0, x, x);
  }
}

// Attention. GQA: repeat_interleave of K and V to the query heads (a contiguous copy and an
// index_select each). "eager" (AttentionKernel::kNaive): softmax(Q K^T / sqrt(d_h) + causal mask)
// V over the full s x s scores: the copy of the non-contiguous Q that matmul makes, a batched
// GEMM, the scale, the mask (ones, triu, masked_fill), the softmax (in fp32), the second batched
// GEMM. Backward: the four GEMMs' counterparts, softmax backward, masked_fill and scale of the
// gradient, and index_select_backward (a zero-filled K/V gradient with the query heads'
// gradients added in). With dropout, a dropout kernel on the probabilities each way. "sdpa"
// (kFlash): the GQA copies around one flash kernel (which applies dropout inside).
void eager_attention(Items& it, bool backward) {
  const LayerContext& c = it.context();
  const Dims& d = it.dims();
  const int64_t e = c.plan.activation_bytes;
  const int64_t dh = c.model.head_dim;
  const int64_t bn = d.b * d.heads;
  const int64_t scores = bn * d.s * d.s;  // elements of the score matrix
  const int64_t mask = d.s * d.s;         // the bool causal mask, one byte per element
  const bool gqa = d.kv < d.q;
  const OpClass a = OpClass::kAttention;
  const std::string p = backward ? "attention.bwd" : "attention";
  if (!backward && gqa) {
    for (const char* t : {".repeat_k", ".repeat_v"}) {
      op(it, p + t + ".contiguous", a, 0, d.tokens * d.kv * e, d.tokens * d.kv * e);
      op(it, p + t + ".index_select", a, 0, d.tokens * d.kv * e, d.tokens * d.q * e);
    }
  }
  if (c.plan.attention == AttentionKernel::kFlash && c.plan.attention_unpads) {
    flash_varlen(it, p, backward);
  } else if (c.plan.attention != AttentionKernel::kNaive) {
    it.kernel(p + ".sdpa", attention_work(c, d, backward));
  } else if (!backward) {
    op(it, p + ".q_contiguous", a, 0, d.tokens * d.q * e, d.tokens * d.q * e);
    attention_gemm(it, p + ".qk", d.s, dh, d.s, bn);
    op(it, p + ".scale", a, to_d(scores), scores * e, scores * e);
    op(it, p + ".mask_ones", a, 0, 0, mask);
    op(it, p + ".mask_triu", a, 0, mask, mask);
    op(it, p + ".masked_fill", a, 0, scores * e + mask, scores * e);
    cast(it, p + ".scores_to_fp32", a, scores, true);
    op(it, p + ".softmax", a, 5.0 * to_d(scores), 2 * scores * kF32, scores * kF32);
    cast(it, p + ".probs_to_act", a, scores, false);
    if (c.model.dropout) {  // aten native_dropout: the dropped probabilities and a bool mask
      op(it, p + ".dropout", a, to_d(scores), scores * e, scores * e + scores);
    }
    attention_gemm(it, p + ".pv", d.s, d.s, dh, bn);
  } else {
    attention_gemm(it, p + ".pv.dprobs", d.s, dh, d.s, bn);
    attention_gemm(it, p + ".pv.dv", d.s, d.s, dh, bn);
    if (c.model.dropout) {  // native_dropout_backward: the gradient times the mask
      op(it, p + ".dropout", a, to_d(scores), scores * e + scores, scores * e);
    }
    cast(it, p + ".dprobs_to_fp32", a, scores, true);
    op(it, p + ".softmax", a, 3.0 * to_d(scores), 2 * scores * kF32, scores * kF32);
    cast(it, p + ".dscores_to_act", a, scores, false);
    op(it, p + ".masked_fill", a, 0, scores * e + mask, scores * e);
    op(it, p + ".scale", a, to_d(scores), scores * e, scores * e);
    attention_gemm(it, p + ".qk.dq", d.s, d.s, dh, bn);
    attention_gemm(it, p + ".qk.dk", d.s, d.s, dh, bn);
  }
  if (backward && gqa) {
    for (const char* t : {".repeat_v", ".repeat_k"}) {
      op(it, p + t + ".index_select_backward", a, to_d(d.tokens * d.q),
         d.tokens * (d.q + d.kv) * e, 2 * d.tokens * d.kv * e);
    }
  }
}

// SwiGLU: silu(gate) * up (the gate and up halves are views of one GEMM's output). Backward: the
// product's two input gradients and silu_backward. GELU (non-gated MLP): gelu, gelu_backward.
void eager_activation(Items& it, int64_t elements, bool backward) {
  const int64_t x = elements * it.context().plan.activation_bytes;
  const double el = to_d(elements);
  const OpClass ew = OpClass::kElementwise;
  if (!is_gated(it.context().model.mlp)) {
    op(it, backward ? "gelu.bwd" : "gelu", ew, (backward ? 12.0 : 8.0) * el,
       (backward ? 2 : 1) * x, x);
    return;
  }
  if (!backward) {
    op(it, "swiglu.silu", ew, 4.0 * el, x, x);
    op(it, "swiglu.mul", ew, el, 2 * x, x);
    return;
  }
  op(it, "swiglu.bwd.mul.dup", ew, el, 2 * x, x);
  op(it, "swiglu.bwd.mul.dsilu", ew, el, 2 * x, x);
  op(it, "swiglu.bwd.silu_backward", ew, 6.0 * el, 2 * x, x);
}

// Cross entropy over the (local) vocabulary: logits.float(), log_softmax, nll_loss. Backward:
// nll_loss_backward (a zero-filled T x V gradient with -1/T scattered at the targets) and
// log_softmax_backward.
void eager_loss(Items& it, bool backward) {
  const Dims& d = it.dims();
  const int64_t tv = d.tokens * d.vocab;
  const int64_t x = tv * kF32;
  const OpClass l = OpClass::kLoss;
  if (!backward) {
    cast(it, "loss.logits_to_fp32", l, tv, true);
    op(it, "loss.log_softmax", l, 5.0 * to_d(tv), 2 * x, x);
    op(it, "loss.nll_loss", l, to_d(d.tokens), 2 * d.tokens * kF32, kF32);
    return;
  }
  op(it, "loss.bwd.nll_loss_backward", l, 0, 2 * d.tokens * kF32, x);
  op(it, "loss.bwd.log_softmax_backward", l, 3.0 * to_d(tv), 2 * x, x);
  cast(it, "loss.bwd.to_act", l, tv, false);
}

// torch.optim.AdamW (torch 1.13 _single_tensor_adamw; torch 2's _multi_tensor_adamw runs the same
// updates as _foreach_ kernels over all tensors): param *= 1 - lr*wd; exp_avg = b1*exp_avg +
// (1-b1)*g; exp_avg_sq = b2*exp_avg_sq + (1-b2)*g*g; denom = sqrt(exp_avg_sq)/bc2 + eps;
// param -= lr/bc1 * exp_avg/denom. Per tensor, the step count is incremented and read back on the
// host (two tiny operators). fp32 parameters and moments; with bf16 weights (mixed precision) the
// updated fp32 master copy is cast back to the bf16 working weights.
std::vector<KernelSpec> eager_adamw(const std::vector<int64_t>& tensors,
                                    const ModelStateBytes& state, OptimizerKernels kernels) {
  std::vector<KernelSpec> out;
  auto emit = [&](const std::string& name, int64_t p) {
    const int64_t x = p * kF32;
    const int64_t g = p * state.gradient;
    const double el = to_d(p);
    auto add = [&](const std::string& what, double flops, int64_t read, int64_t written) {
      ComputeWork w;
      w.op_class = OpClass::kOptimizer;
      w.dtype = Dtype::kFp32;
      w.flops = Flops::of(flops);
      w.bytes = Bytes::of(read + written);
      out.push_back({name + what, w});
    };
    if (kernels == OptimizerKernels::kPerTensor) {
      add(".step", 1, 8, 8);
    }
    add(".decay", el, x, x);
    add(".exp_avg.mul", el, x, x);
    add(".exp_avg.add", 2 * el, x + g, x);
    add(".exp_avg_sq.mul", el, x, x);
    add(".exp_avg_sq.addcmul", 3 * el, x + g, x);
    if (kernels == OptimizerKernels::kPerTensor) {
      add(".step.item", 0, 8, 8);
    }
    add(".sqrt", el, x, x);
    add(".div", el, x, x);
    add(".add_eps", el, x, x);
    add(".addcdiv", 3 * el, 3 * x, x);
    if (state.weight != kF32) {
      add(".to_weights", 0, x, p * state.weight);
    }
  };
  if (kernels == OptimizerKernels::kPerTensor) {
    for (size_t i = 0; i < tensors.size(); ++i) {
      emit("adamw.t" + std::to_string(i), tensors[i]);
    }
  } else {
    int64_t all = 0;
    for (const int64_t t : tensors) {
      all += t;
    }
    emit("adamw.foreach", all);
  }
  return out;
}

namespace {

// Models built from the blocks the tensor list below names one by one (Llama, Mixtral, GPT).
bool plain_blocks(const ModelConfig& m) {
  const bool plain_moe = !m.moe || (m.moe->num_shared_experts == 0 &&
                                    m.moe->first_dense_layers == 0 && !m.moe->router_bias &&
                                    m.moe->expert_d_ff == m.d_ff);
  return !m.mla && !m.qk_norm && m.norms_per_layer == 2 && !m.parallel_blocks &&
         m.attention_out_bias == m.attention_bias && m.mtp_layers == 0 && plain_moe;
}

// Other variants: per layer, its non-expert parameters as one tensor and each local expert as
// one (the per-tensor optimizer's launch count is then a lower bound; its bytes are exact).
std::vector<int64_t> coarse_tensors(const LayerContext& c) {
  const StageParameters& p = c.stage.params;
  std::vector<int64_t> out;
  if (p.embedding > 0) {
    out.push_back(p.embedding);
  }
  const int64_t local_experts = c.model.moe ? c.model.moe->num_experts / c.plan.ep : 1;
  for (const LayerShare& l : p.by_layer) {
    out.push_back(l.dense);
    for (int64_t x = 0; l.expert > 0 && x < local_experts; ++x) {
      out.push_back(l.expert / local_experts);
    }
  }
  for (const int64_t t : {p.head, p.mtp}) {
    if (t > 0) {
      out.push_back(t);
    }
  }
  return out;
}

}  // namespace

std::vector<int64_t> parameter_tensors(const LayerContext& c) {
  const ModelConfig& m = c.model;
  if (!plain_blocks(m)) {
    return coarse_tensors(c);
  }
  const int64_t layers = c.stage.params.layers;
  const bool embedding = c.stage.first;
  const bool head = c.stage.last;
  const Dims d = dims_of(c);
  // A norm is a weight (RMSNorm) or a weight and a bias (LayerNorm): one or two tensors of h.
  const std::vector<int64_t> norm(static_cast<size_t>(norm_parameters(m) / d.h), d.h);
  std::vector<int64_t> layer = norm;
  layer.insert(layer.end(), {d.h * (d.q + 2 * d.kv), d.q * d.h});
  if (m.attention_bias) {
    layer.insert(layer.end(), {d.q + 2 * d.kv, d.h});
  }
  layer.insert(layer.end(), norm.begin(), norm.end());
  const bool gated = is_gated(m.mlp);
  const int64_t experts = m.moe ? m.moe->num_experts / c.plan.ep : 1;
  if (m.moe) {
    layer.push_back(d.h * m.moe->num_experts);  // the router (replicated)
  }
  for (int64_t x = 0; x < experts; ++x) {
    layer.push_back(d.h * (gated ? 2 : 1) * d.f);
    layer.push_back(d.f * d.h);
    if (m.mlp_bias) {
      layer.insert(layer.end(), {(gated ? 2 : 1) * d.f, d.h});
    }
  }
  std::vector<int64_t> out;
  if (embedding) {
    out.push_back(d.vocab * d.h);
    if (m.positions == PositionKind::kLearned) {
      out.push_back(m.max_position_embeddings * d.h);
    }
  }
  for (int64_t l = 0; l < layers; ++l) {
    out.insert(out.end(), layer.begin(), layer.end());
  }
  if (head) {
    out.insert(out.end(), norm.begin(), norm.end());
    if (!m.tied_embeddings || !embedding) {
      out.push_back(d.vocab * d.h);
    }
  }
  return out;
}

}  // namespace meshsim::workloads::detail
