// The MLP of a layer: dense (column-parallel up, row-parallel down), or a mixture of experts
// (router, shared experts, dispatch, routed experts, combine). Conventions in layer_ops.h.
#include <cmath>
#include <string>

#include "layer_items.h"
#include "meshsim/sim/error.h"

namespace meshsim::workloads::detail {
namespace {

bool eager(const LayerContext& c) { return c.plan.kernels == Kernels::kEager; }

struct MoeDims {
  int64_t tokens;   // tokens the rank routes (ParallelPlan::moe_tokens)
  int64_t rows;     // tokens per local expert GEMM
  int64_t batch;    // local experts
  int64_t routed;   // token-expert pairs on the rank
  int64_t f;        // local width of one routed expert
  double exchange;  // busiest EP rank's tokens / the balanced share: scales the all-to-all
};

MoeDims moe_dims(const LayerContext& c, const Dims& d) {
  if (!c.model.is_moe_layer(c.layer)) {
    return {d.tokens, d.tokens, 1, d.tokens, d.f, 1.0};
  }
  // The partition's expert load (expert_load.h): rows of each local expert on the busiest EP
  // rank, and how much more than its balanced share that rank exchanges.
  const ExpertLoad& load = *c.stage.params.of(c.layer).load;
  const int64_t tokens = c.plan.moe_tokens();
  return {tokens,
          load.rows_per_expert,
          c.model.moe->num_experts / c.plan.ep,
          tokens * c.model.moe->experts_per_token,
          c.stage.widths.expert_d_ff,
          load.busiest_over_mean};
}

// The shared experts of an MoE layer: every token, the summed width of the shared experts split
// over TP like a dense MLP; their partial outputs join the layer's TP reduction. `gather`: the
// routed experts do not gather the TP group's tokens (expert TP 1), so the shared experts do,
// as Megatron-Core's SharedExpertMLP, a TP-parallel MLP, does under SP.
void shared_expert_items(Items& it, bool backward, bool gather) {
  const LayerContext& c = it.context();
  const Dims& d = it.dims();
  const int64_t f = c.stage.widths.shared_d_ff;
  if (f == 0) {
    return;
  }
  const int64_t up_n = is_gated(c.model.mlp) ? 2 * f : f;
  // FP8: their input is the router's (cast once), the output gradient the routed experts' (cast
  // once); their own activations are cast as the dense MLP's.
  if (!backward) {
    if (gather) {
      it.column_gemm("mlp", "shared_up", d.tokens, d.h, up_n);
    } else {
      it.gemm("shared_up", d.tokens, d.h, up_n);
    }
    activation_items(it, d.tokens * f, false);
    it.fp8_cast("shared_down.input", d.tokens * f);
    it.gemm("shared_down", d.tokens, f, d.h);
    return;
  }
  it.gemm_bwd("shared_down", d.tokens, f, d.h);
  activation_items(it, d.tokens * f, true);
  it.fp8_cast("shared_up.grad_output", d.tokens * up_n);
  if (gather) {
    it.column_bwd("shared_up", d.tokens, d.h, up_n);
  } else {
    it.gemm_bwd("shared_up", d.tokens, d.h, up_n);
  }
}

// Router outputs: one score per expert, and Qwen2-MoE's shared-expert gate.
int64_t router_outputs(const ModelConfig& m) {
  return m.moe->num_experts + (m.moe->num_shared_experts > 0 && m.moe->shared_expert_gate ? 1 : 0);
}

// The MoE layer's entry: the router, on the TP group's gathered tokens (experts split over TP) or
// the rank's own `tokens` (expert TP 1), and the shared experts.
void moe_entry(Items& it, int64_t tokens) {
  const LayerContext& c = it.context();
  const Dims& d = it.dims();
  const bool tp_split = c.plan.experts_tp_split();
  if (tp_split) {
    it.column_gemm("mlp", "router", d.tokens, d.h, router_outputs(c.model));
  } else {
    it.gemm("router", tokens, d.h, router_outputs(c.model));
  }
  shared_expert_items(it, false, !tp_split);
}

}  // namespace

// The MLP's activation function between the up and down projections, on `el` elements.
void activation_items(Items& it, int64_t el, bool backward) {
  const LayerContext& c = it.context();
  const bool gated = is_gated(c.model.mlp);
  if (eager(c)) {
    eager_activation(it, el, backward);
    return;
  }
  const ComputeWork act = memory_bound(
      OpClass::kElementwise, gated ? 5.0 : 8.0, el,
      (gated ? (backward ? 5 : 3) : (backward ? 3 : 2)) * c.plan.activation_bytes * el);
  it.kernel(std::string(gated ? "swiglu" : "gelu") + (backward ? ".bwd" : ""), act);
}

void mlp_items(Items& it, bool backward) {
  const LayerContext& c = it.context();
  const Dims& d = it.dims();
  const ModelConfig& m = c.model;
  const bool moe = m.is_moe_layer(c.layer);
  const bool gated = is_gated(m.mlp);
  const MoeDims md = moe_dims(c, d);
  // Expert TP 1: only the shared experts (if any) enter and leave the TP group.
  const bool tp_moe = c.plan.experts_tp_split() || c.stage.widths.shared_d_ff > 0;
  const int64_t up_n = gated ? 2 * md.f : md.f;
  const int64_t act_el = md.rows * md.batch * md.f;
  // The all-to-all finishes with its busiest receiver: sized by its share (1 when balanced).
  const int64_t routed =
      md.exchange == 1.0 ? md.routed : std::llround(static_cast<double>(md.routed) * md.exchange);
  const Bytes routed_bytes = Bytes::of(routed * d.h * c.plan.activation_bytes);
  const ComputeWork permute =
      memory_bound(OpClass::kCopy, 0.0, routed * d.h, 2 * routed_bytes.count());
  auto a2a = [&](const std::string& name, bool to_experts) {
    if (moe && c.plan.ep > 1) {
      ep_exchange(it, name, to_experts, md.tokens, md.exchange);
    }
  };
  const char* up = gated ? "mlp_up" : "fc1";
  const char* down = gated ? "mlp_down" : "fc2";
  // The MLP is column-parallel in (up, or the router with MoE) and row-parallel out (down, or
  // MoE's combine).
  if (!backward) {
    if (!it.norm_casts_fp8()) {
      it.fp8_cast(std::string(up) + ".input", d.sp_tokens * d.h);
    }
    if (moe) {
      moe_entry(it, md.tokens);
      it.kernel("dispatch", permute);
      a2a("dispatch", true);
      it.gemm(up, md.rows, d.h, up_n, md.batch);
    } else {
      it.column_gemm("mlp", up, md.rows, d.h, up_n, md.batch);
    }
    activation_items(it, act_el, false);
    it.fp8_cast(std::string(down) + ".input", act_el);
    if (moe) {
      it.gemm(down, md.rows, md.f, d.h, md.batch);
      a2a("combine", false);
      it.kernel("combine", permute);
      if (tp_moe) {
        it.tp_exit("mlp");
      }
    } else {
      it.row_gemm(down, "mlp", md.rows, md.f, d.h, md.batch);
    }
    return;
  }
  // Megatron-LM's legacy layer: the biases' gradients as reductions (mlp_bias.expand_as(residual)'s
  // sum; the bias-GeLU function returns its input gradient for the bias too, which autograd sums).
  const bool bias_grads = legacy(c) && m.mlp_bias && !moe;
  if (bias_grads) {
    legacy_bias_grad(it, std::string(down) + ".bias.grad", d.sp_tokens, d.h);
  }
  it.fp8_cast(std::string(down) + ".grad_output", d.sp_tokens * d.h);
  if (moe) {
    if (tp_moe) {
      it.tp_gather_grad("mlp.bwd");
    }
    shared_expert_items(it, true, !c.plan.experts_tp_split());
    it.kernel("combine.bwd", permute);
    a2a("combine.bwd", true);
    it.gemm_bwd(down, md.rows, md.f, d.h, md.batch);
  } else {
    it.row_gemm_bwd("mlp.bwd", down, md.rows, md.f, d.h, md.batch);
  }
  activation_items(it, act_el, true);
  if (eager(c) && gated) {
    layout_copy(it, "mlp_up.split.bwd", md.rows * md.batch * up_n);
  }
  if (bias_grads) {
    legacy_bias_grad(it, std::string(up) + ".bias.grad", md.rows * md.batch, up_n);
  }
  it.fp8_cast(std::string(up) + ".grad_output", md.rows * md.batch * up_n);
  it.column_bwd(up, md.rows, d.h, up_n, md.batch);
  if (moe) {
    a2a("dispatch.bwd", false);
    it.kernel("dispatch.bwd", permute);
    it.gemm_bwd("router", md.tokens, d.h, router_outputs(m));
  }
}

void moe_activation_recompute(Items& it) {
  const MoeDims md = moe_dims(it.context(), it.dims());
  activation_items(it, md.rows * md.batch * md.f, false);
}

void mlp_activation_recompute(Items& it) {
  const LayerContext& c = it.context();
  const MoeDims md = moe_dims(c, it.dims());
  activation_items(it, md.rows * md.batch * md.f, false);
  if (c.stage.widths.shared_d_ff > 0 && c.model.is_moe_layer(c.layer)) {
    activation_items(it, it.dims().tokens * c.stage.widths.shared_d_ff, false);
  }
}

void mlp_up_recompute(Items& it) {
  const LayerContext& c = it.context();
  const Dims& d = it.dims();
  SIM_CHECK(!c.model.is_moe_layer(c.layer), "qkv_out_proj on an MoE layer (the plan refuses it)");
  const bool gated = is_gated(c.model.mlp);
  const int64_t up_n = gated ? 2 * d.f : d.f;
  const char* up = gated ? "mlp_up" : "fc1";
  if (!it.norm_casts_fp8()) {
    it.fp8_cast(std::string(up) + ".input", d.sp_tokens * d.h);
  }
  if (c.model.parallel_blocks) {
    it.gemm(up, d.tokens, d.h, up_n);
  } else {
    it.column_gemm("mlp", up, d.tokens, d.h, up_n);
  }
  activation_items(it, d.tokens * d.f, false);
}

// Parallel blocks (GPT-NeoX, Falcon): the dense MLP on the input the attention's QKV GEMM
// gathered; its partial output joins the attention's in the layer's one TP reduction.
void parallel_mlp_items(Items& it, bool backward) {
  const LayerContext& c = it.context();
  const Dims& d = it.dims();
  const bool gated = is_gated(c.model.mlp);
  const int64_t up_n = gated ? 2 * d.f : d.f;
  const char* up = gated ? "mlp_up" : "fc1";
  const char* down = gated ? "mlp_down" : "fc2";
  // FP8: with one norm the up projection reads the QKV GEMM's (cast) input; the output gradient
  // is the attention projection's (cast by the layer).
  if (!backward) {
    if (c.model.norms_per_layer == 2 && !it.norm_casts_fp8()) {
      it.fp8_cast(std::string(up) + ".input", d.sp_tokens * d.h);
    }
    it.gemm(up, d.tokens, d.h, up_n);
    activation_items(it, d.tokens * d.f, false);
    it.fp8_cast(std::string(down) + ".input", d.tokens * d.f);
    it.gemm(down, d.tokens, d.f, d.h);
    return;
  }
  it.gemm_bwd(down, d.tokens, d.f, d.h);
  activation_items(it, d.tokens * d.f, true);
  if (eager(c) && gated) {
    layout_copy(it, "mlp_up.split.bwd", d.tokens * up_n);
  }
  it.fp8_cast(std::string(up) + ".grad_output", d.tokens * up_n);
  it.gemm_bwd(up, d.tokens, d.h, up_n);
}

}  // namespace meshsim::workloads::detail
