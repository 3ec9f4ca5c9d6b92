#include "calc_command.h"

#include <fmt/format.h>

#include <tuple>

#include "meshsim/sim/error.h"
#include "meshsim/workloads/accounting.h"
#include "meshsim/workloads/parallel.h"
#include "meshsim/workloads/training_memory.h"
#include "report.h"

namespace meshsim::cli {
namespace {

std::string count(int64_t n) {
  // 70553706496 -> "70,553,706,496"
  std::string digits = std::to_string(n);
  std::string out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) {
      out += ',';
    }
    out += digits[i];
  }
  return out;
}

void row(std::ostream& out, const std::string& name, const std::string& value) {
  out << fmt::format("  {:<38} {:>24}\n", name, value);
}

// "GQA (8 KV heads)", "MLA (kv_lora_rank 512, q_lora_rank 1536)", with the window pattern.
std::string attention_kind(const workloads::ModelConfig& m) {
  std::string kind;
  if (m.mla) {
    kind = fmt::format("MLA (kv_lora_rank {}, q_lora_rank {}, rope {}, v_head_dim {})",
                       m.mla->kv_lora_rank, m.mla->q_lora_rank, m.mla->qk_rope_head_dim,
                       m.mla->v_head_dim);
  } else if (m.num_kv_heads == m.num_heads) {
    kind = "MHA";
  } else if (m.num_kv_heads == 1) {
    kind = "MQA";
  } else {
    kind = fmt::format("GQA ({} KV heads)", m.num_kv_heads);
  }
  if (m.sliding_window) {
    int64_t windowed = 0;
    for (int64_t i = 0; i < m.num_layers; ++i) {
      windowed += m.attention_window(i) > 0 ? 1 : 0;
    }
    kind += fmt::format(", sliding window {} on {} of {} layers", m.sliding_window->size, windowed,
                        m.num_layers);
  }
  if (m.parallel_blocks) {
    kind += ", parallel attention + MLP";
  }
  return kind;
}

void print_moe(const workloads::ModelConfig& m, std::ostream& out) {
  const workloads::MoeConfig& e = *m.moe;
  out << fmt::format("experts: {} routed of width {}, top-{}", e.num_experts, e.expert_d_ff,
                     e.experts_per_token);
  if (e.num_shared_experts > 0) {
    out << fmt::format(", {} shared of width {}{}", e.num_shared_experts, e.shared_expert_d_ff,
                       e.shared_expert_gate ? " (gated)" : "");
  }
  if (e.first_dense_layers > 0) {
    out << fmt::format(", first {} layers dense (d_ff {})", e.first_dense_layers, m.d_ff);
  }
  out << (m.mtp_layers > 0 ? fmt::format(", {} MTP module(s)", m.mtp_layers) : "") << "\n";
}

}  // namespace

void print_accounting(const std::string& model_name, int64_t seq_len, int64_t micro_batch,
                      std::ostream& out) {
  using namespace workloads;
  // The bounds `meshsim run` holds a plan to (workloads::PlanLimits).
  for (const auto& [flag, v, max, what] :
       {std::tuple{"--seq", seq_len, PlanLimits::kSeq, "tokens per sequence"},
        std::tuple{"--mbs", micro_batch, PlanLimits::kMbs, "sequences per microbatch"}}) {
    if (v > max) {
      throw InputError(flag, "", fmt::format("{} is above the limit of {} {}", v, max, what));
    }
  }
  const ModelConfig m = load_model(model_name);
  if (m.positions == PositionKind::kLearned && seq_len > m.max_position_embeddings) {
    seq_len = m.max_position_embeddings;
    out << fmt::format("(--seq capped at {}, the length of {}'s learned position table)\n", seq_len,
                       m.name);
  }
  const ParameterCounts p = count_parameters(m);
  out << fmt::format(
      "{}: {} layers, d_model {}, {} heads ({} KV), head_dim {}, d_ff {}, vocab {}\n", m.name,
      m.num_layers, m.d_model, m.num_heads, m.num_kv_heads, m.head_dim, m.d_ff, m.vocab_size);
  out << "attention: " << attention_kind(m) << "\n";
  if (m.moe) {
    print_moe(m, out);
  }
  out << "\nParameters\n";
  row(out, "token embedding", count(p.token_embedding));
  row(out, "position embedding", count(p.position_embedding));
  row(out, "attention (all layers)", count(p.attention()));
  row(out, "mlp (all layers)", count(p.mlp()));
  if (m.is_moe()) {
    row(out, "router (all layers)", count(p.router()));
    row(out, "experts (all layers)", count(p.experts()));
    if (p.shared_experts() > 0) {
      row(out, "shared experts (all layers)", count(p.shared_experts()));
    }
  }
  row(out, "norms", count(p.norms()));
  row(out, "lm head", p.lm_head == 0 ? std::string("tied") : count(p.lm_head));
  row(out, "total", count(p.total()));
  row(out, "active per token", count(p.active_per_token()));
  if (p.mtp > 0) {
    row(out, "MTP modules (not in total)", count(p.mtp));
  }
  if (p.vision > 0) {
    row(out, "vision tower (not simulated)", count(p.vision));
    row(out, "checkpoint total with vision", count(p.with_vision()));
  }

  const ForwardFlops f = forward_flops_per_token(m, seq_len);
  out << fmt::format("\nFLOPs per token at sequence length {}\n", seq_len);
  row(out, "forward, matmuls", fmt::format("{:.4g}", f.matmul.count()));
  row(out, "forward, causal attention", fmt::format("{:.4g}", f.attention.count()));
  if (m.mtp_layers > 0) {
    row(out, "forward, MTP modules", fmt::format("{:.4g}", f.mtp.count()));
  }
  row(out, "training (3 x forward)",
      fmt::format("{:.4g}", training_flops_per_token(m, seq_len).count()));
  row(out, "6N (workbook convention)",
      fmt::format("{:.4g}", training_flops_per_token_6n(p.active_per_token()).count()));

  out << "\nMemory\n";
  row(out, m.mla ? "KV cache per token (bf16, MLA latent)" : "KV cache per token (bf16)",
      fmt::format("{} B", count(kv_cache_bytes(m, 1, 1, 2).count())));
  row(out, fmt::format("KV cache, {} tokens x {} seq", seq_len, micro_batch),
      format_bytes(kv_cache_bytes(m, seq_len, micro_batch, 2)));
  ParallelPlan one_device;  // bf16 mixed precision, flash attention, no recompute
  one_device.seq = seq_len;
  one_device.mbs = micro_batch;
  one_device.gbs = micro_batch;
  const TrainingMemory tm = training_memory(m, one_device, 0, 1);
  row(out, "weights (bf16)", format_bytes(tm.weights));
  row(out, "gradients (bf16)", format_bytes(tm.gradients));
  row(out, "optimizer (fp32 master + Adam m, v)", format_bytes(tm.optimizer_states));
  row(out, fmt::format("activations, 1 x {} tokens, flash", seq_len), format_bytes(tm.activations));
  row(out, "total on one device, no sharding", format_bytes(tm.total()));
  if (!m.ignored_fields.empty()) {
    out << "\nIgnored fields of the config (they do not change the cost)\n";
    for (const std::string& field : m.ignored_fields) {
      out << "  " << field << "\n";
    }
  }
}

}  // namespace meshsim::cli
