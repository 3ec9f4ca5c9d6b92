#include <fmt/format.h>

#include "layer_ops.h"
#include "meshsim/sim/error.h"
#include "meshsim/workloads/accounting.h"
#include "meshsim/workloads/step.h"

namespace meshsim::workloads {
namespace {

void require_positive(int64_t value, const char* flag) {
  if (value <= 0) {
    throw InputError(flag, "", fmt::format("expected a positive integer, got {}", value));
  }
}

// A learned position table has no rows past max_position_embeddings (RoPE models have no table
// and may run longer sequences, as context extension does).
void validate_seq(const ModelConfig& m, int64_t seq) {
  if (m.positions == PositionKind::kLearned && seq > m.max_position_embeddings) {
    throw InputError("--seq", "",
                     fmt::format("{} tokens, but {} has learned positions for at most {} tokens",
                                 seq, m.name, m.max_position_embeddings));
  }
}

void validate(const StepConfig& c) {
  require_positive(c.data_parallel, "--dp");
  require_positive(c.micro_batch, "--mbs");
  require_positive(c.global_batch, "--gbs");
  require_positive(c.seq_len, "--seq");
  if (c.global_batch % (c.data_parallel * c.micro_batch) != 0) {
    throw InputError("--gbs", "",
                     fmt::format("global batch {} is not divisible by dp {} x mbs {} = {}; each "
                                 "data-parallel rank needs a whole number of microbatches",
                                 c.global_batch, c.data_parallel, c.micro_batch,
                                 c.data_parallel * c.micro_batch));
  }
}

// Appends kernels in a chain on the compute stream; returns the last op.
class ChainBuilder {
 public:
  explicit ChainBuilder(Program& p) : p_(p) {}

  OpId append(Op op) {
    const OpId id = p_.add(std::move(op));
    if (last_) {
      p_.add_dependency(*last_, id);
    }
    last_ = id;
    return id;
  }

  std::optional<OpId> last() const { return last_; }

 private:
  Program& p_;
  std::optional<OpId> last_;
};

// Adds `kernels` to the chain, with `alloc` attached to the first kernel's start and `free`
// to the last kernel's end.
void add_kernels(ChainBuilder& chain, std::vector<detail::KernelSpec> kernels, OpLabels labels,
                 const std::string& prefix, std::optional<MemoryEffect> alloc,
                 std::optional<MemoryEffect> release) {
  for (size_t i = 0; i < kernels.size(); ++i) {
    Op op;
    op.name = prefix + kernels[i].name;
    op.stream = 0;
    op.work = std::move(kernels[i].work);
    op.labels = labels;
    if (i == 0 && alloc) {
      op.memory.push_back(*alloc);
    }
    if (i + 1 == kernels.size() && release) {
      op.memory.push_back(*release);
    }
    chain.append(std::move(op));
  }
}

struct MicrobatchMemory {
  Bytes per_layer;
  Bytes outside;
};

void add_microbatch(ChainBuilder& chain, const detail::KernelContext& ctx, int32_t mb,
                    const MicrobatchMemory& mem) {
  const int32_t layers = static_cast<int32_t>(ctx.model.num_layers);
  const auto act = [](Bytes b, bool free) {
    return MemoryEffect{MemoryCategory::kActivations, free ? Bytes::zero() - b : b, free};
  };
  const std::string mb_prefix = fmt::format("mb{}.", mb);
  add_kernels(chain, detail::embedding_forward(ctx), {std::nullopt, mb, 0}, mb_prefix + "fwd.",
              act(mem.outside, false), std::nullopt);
  for (int32_t l = 0; l < layers; ++l) {
    add_kernels(chain, detail::layer_forward(ctx), {l, mb, 0}, fmt::format("{}fwd.L{}.", mb_prefix, l),
                act(mem.per_layer, false), std::nullopt);
  }
  add_kernels(chain, detail::head_forward(ctx), {std::nullopt, mb, 0}, mb_prefix + "fwd.",
              std::nullopt, std::nullopt);
  add_kernels(chain, detail::head_backward(ctx), {std::nullopt, mb, 0}, mb_prefix + "bwd.",
              std::nullopt, std::nullopt);
  for (int32_t l = layers - 1; l >= 0; --l) {
    add_kernels(chain, detail::layer_backward(ctx), {l, mb, 0},
                fmt::format("{}bwd.L{}.", mb_prefix, l), std::nullopt, act(mem.per_layer, true));
  }
  add_kernels(chain, detail::embedding_backward(ctx), {std::nullopt, mb, 0}, mb_prefix + "bwd.",
              std::nullopt, act(mem.outside, true));
}

}  // namespace

StepPlan plan_data_parallel_step(const ModelConfig& model, const StepConfig& config) {
  validate(config);
  validate_seq(model, config.seq_len);
  StepPlan plan;
  plan.microbatches_per_rank = config.global_batch / (config.data_parallel * config.micro_batch);
  plan.tokens_per_step = config.global_batch * config.seq_len;
  plan.model_flops_per_step = training_flops_per_token(model, config.seq_len) *
                              static_cast<double>(plan.tokens_per_step);

  TrainingMemoryOptions mo;
  mo.layout.data_parallel = config.data_parallel;
  mo.activations = ActivationOptions{config.seq_len, config.micro_batch, config.attention,
                                     Recompute::kNone, 2};
  mo.state = config.state;
  mo.in_flight_microbatches = 1;
  plan.memory_estimate = training_memory_per_rank(model, mo);
  const MicrobatchMemory mem{layer_activations(model, mo.activations, mo.layout).total(),
                             outside_layer_activations(model, mo.activations, mo.layout).total()};

  Program p;
  const int64_t params = parameters_per_rank(model, mo.layout).total();
  p.set_initial_memory(MemoryCategory::kWeights, Bytes::of(params * config.state.weight));
  p.set_initial_memory(MemoryCategory::kGradients, Bytes::of(params * config.state.gradient));
  p.set_initial_memory(MemoryCategory::kOptimizerState,
                       Bytes::of(params * config.state.optimizer));
  ChainBuilder chain(p);
  const detail::KernelContext ctx{model, config.micro_batch, config.seq_len, config.matmul_dtype,
                                  config.attention};
  for (int64_t mb = 0; mb < plan.microbatches_per_rank; ++mb) {
    add_microbatch(chain, ctx, static_cast<int32_t>(mb), mem);
  }
  std::optional<OpId> before_optimizer = chain.last();
  if (config.data_parallel > 1) {
    Op ar;
    ar.name = "grad_allreduce";
    ar.stream = 1;
    ar.work = CollectiveWork{CollectiveKind::kAllReduce, Bytes::of(params * config.state.gradient), 0};
    const OpId id = p.add(std::move(ar));
    p.add_dependency(*chain.last(), id);
    before_optimizer = id;
  }
  Op opt;
  detail::KernelSpec k = detail::optimizer_step(params, config.state);
  opt.name = k.name;
  opt.work = std::move(k.work);
  const OpId opt_id = p.add(std::move(opt));
  p.add_dependency(*before_optimizer, opt_id);

  plan.programs.push_back(std::move(p));
  std::vector<uint32_t> dp_group;
  for (uint32_t r = 0; r < config.data_parallel; ++r) {
    dp_group.push_back(r);
  }
  plan.groups.push_back(dp_group);
  for (uint32_t r = 0; r < config.data_parallel; ++r) {
    plan.ranks.push_back(RankBinding{0, {0}, {}});
  }
  return plan;
}

}  // namespace meshsim::workloads
