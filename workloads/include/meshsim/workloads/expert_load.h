// How many tokens the experts of an MoE layer receive: the expert GEMMs' rows and the size of
// the EP all-to-all on the busiest rank, which the whole EP group waits for.
//
// Balanced (the plan's moe_load_skew absent): each expert receives exactly T*k*EP/E tokens per
// microbatch, padded to the capacity factor; the idealisation meshsim used before issue 13.
//
// Sampled (moe_load_skew = sigma >= 0): a seeded draw per layer. Expert popularity is lognormal,
// p_e proportional to exp(sigma * z_e), z_e ~ N(0, 1) (stream "moe_popularity.L<layer>"); the
// T*k*EP routing choices of the EP group's microbatch fall on the experts multinomially (stream
// "moe_routing.L<layer>", drawn as conditional binomials; choices are independent, so a token
// may pick an expert twice, which for k << E changes little). sigma = 0 is a uniform router: the
// imbalance left is the sampling floor, E[max/mean] ~ 1 + sqrt(2 ln E / n) for n tokens per
// expert, the regime that auxiliary-loss-free balancing reaches (DeepSeek-V3; Wang et al. 2024,
// arXiv 2408.15664, MaxVio_global ~ 0.04) and that Megatron-Core's dropless default assumes.
// sigma ~ 0.16-0.20 gives the max/mean of 1.5-1.7 reported for auxiliary-loss-controlled routers
// (the notes of issue 13, moe_imbalance.md, simulated).
//
// Token dropping (moe_drop_tokens, Megatron-Core --moe-expert-capacity-factor with
// --moe-pad-expert-input-to-capacity; DeepSpeed-MoE drop_tokens): an expert keeps at most
// C = EP * ceil(T*k*cf/E) tokens (Megatron's per-rank capacity, summed over the EP group's
// ranks), the rest skip it through the residual; every expert computes C rows (padded). Without
// dropping (Megatron-Core's default, DeepSeek-V3), the busiest rank's experts compute all their
// tokens.
#pragma once

#include <cstdint>

#include "meshsim/workloads/model.h"
#include "meshsim/workloads/parallel.h"

namespace meshsim::workloads {

struct ExpertLoad {
  int64_t rows_per_expert = 0;        // GEMM rows of each local expert on the busiest EP rank
  double busiest_over_mean = 1.0;     // tokens the busiest EP rank receives / the balanced share
  double max_expert_over_mean = 1.0;  // the most loaded expert / the mean (before dropping)
  double dropped_fraction = 0.0;      // routing choices dropped at capacity
};

// The load of MoE layer `layer` (0 <= layer < num_layers, an MoE layer) for one microbatch.
ExpertLoad expert_load(const ModelConfig& model, const ParallelPlan& plan, int64_t layer);

}  // namespace meshsim::workloads
