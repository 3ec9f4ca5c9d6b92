// Parameter counts by component, FLOPs per token and KV cache.
#include "meshsim/workloads/accounting.h"

#include <gtest/gtest.h>

namespace meshsim::workloads {
namespace {

TEST(Parameters, Gpt2SmallByComponent) {
  const ParameterCounts c = count_parameters(load_model("gpt2-small"));
  EXPECT_EQ(c.token_embedding, 50257 * 768);
  EXPECT_EQ(c.position_embedding, 1024 * 768);
  EXPECT_EQ(c.layer.q, 768 * 768 + 768);
  EXPECT_EQ(c.layer.attention(), 4 * 768 * 768 + 4 * 768);
  EXPECT_EQ(c.layer.mlp, 2 * 768 * 3072 + 3072 + 768);
  EXPECT_EQ(c.layer.norms, 4 * 768);
  EXPECT_EQ(c.final_norm, 2 * 768);
  EXPECT_EQ(c.lm_head, 0);  // tied
  EXPECT_EQ(c.total(), 124'439'808);
  EXPECT_EQ(c.active_per_token(), c.total());
}

TEST(Parameters, Llama3_70bByComponent) {
  const ParameterCounts c = count_parameters(load_model("llama3-70b"));
  EXPECT_EQ(c.layer.q, 8192LL * 8192);
  EXPECT_EQ(c.layer.k, 8192LL * 1024);  // 8 KV heads of 128
  EXPECT_EQ(c.layer.v, 8192LL * 1024);
  EXPECT_EQ(c.layer.mlp, 3LL * 8192 * 28672);
  EXPECT_EQ(c.layer.norms, 2 * 8192);
  EXPECT_EQ(c.position_embedding, 0);
  EXPECT_EQ(c.lm_head, 128256LL * 8192);
  EXPECT_EQ(c.total(), 70'553'706'496);
}

TEST(Parameters, MixtralRouterAndExperts) {
  const ParameterCounts c = count_parameters(load_model("mixtral-8x7b"));
  EXPECT_EQ(c.layer.mlp, 0);
  EXPECT_EQ(c.layer.router, 4096 * 8);
  EXPECT_EQ(c.layer.expert, 3LL * 4096 * 14336);
  EXPECT_EQ(c.experts(), 32LL * 8 * 3 * 4096 * 14336);
  EXPECT_EQ(c.total() - c.active_per_token(), 32LL * 6 * 3 * 4096 * 14336);
}

TEST(Flops, Llama3_70bForwardMatmulIsTwiceTheNonEmbeddingWeights) {
  const ModelConfig m = load_model("llama3-70b");
  const ParameterCounts c = count_parameters(m);
  const int64_t n = c.total();
  // Norm weights scale, they do not multiply matrices: exact matmul weights are N minus the
  // embedding and the norms.
  const int64_t matmul = n - c.token_embedding - c.norms();
  EXPECT_EQ(matmul_weights_per_token(m), matmul);
  const ForwardFlops f = forward_flops_per_token(m, 8192);
  EXPECT_DOUBLE_EQ(f.matmul.count(), 2.0 * static_cast<double>(matmul));
  // The common statement "2 x (N - embedding)" is the same to 2e-5.
  EXPECT_NEAR(f.matmul.count() / (2.0 * static_cast<double>(n - c.token_embedding)), 1.0, 2e-5);
}

TEST(Flops, TiedHeadStillMultipliesAndBiasesAndPositionsDoNot) {
  const ModelConfig m = load_model("gpt2-small");
  const ParameterCounts c = count_parameters(m);
  const int64_t biases = 12 * (4 * 768 + 3072 + 768);
  const int64_t matmul = c.total() - c.position_embedding - c.norms() - biases;
  EXPECT_EQ(matmul_weights_per_token(m), matmul);  // the tied LM head counts once, as the head
}

TEST(Flops, MoeCountsRouterAndTopKExperts) {
  const ModelConfig m = load_model("mixtral-8x7b");
  const ParameterCounts c = count_parameters(m);
  EXPECT_EQ(matmul_weights_per_token(m), c.active_per_token() - c.token_embedding - c.norms());
}

TEST(Flops, CausalAttentionTerm) {
  const ModelConfig m = load_model("llama3-70b");
  // Per layer per token: 4*s*q unmasked (QK^T and PV), halved by the causal mask.
  const ForwardFlops causal = forward_flops_per_token(m, 8192);
  EXPECT_DOUBLE_EQ(causal.attention.count(), 2.0 * 8192 * 8192 * 80);
  const ForwardFlops full = forward_flops_per_token(m, 8192, AttentionMask::kFull);
  EXPECT_DOUBLE_EQ(full.attention.count(), 2.0 * causal.attention.count());
  EXPECT_DOUBLE_EQ(full.matmul.count(), causal.matmul.count());
}

TEST(Flops, TrainingIsThreeTimesForward) {
  const ModelConfig m = load_model("llama3-8b");
  const double fwd = forward_flops_per_token(m, 4096).total().count();
  EXPECT_DOUBLE_EQ(training_flops_per_token(m, 4096).count(), 3.0 * fwd);
}

TEST(Flops, WorkbookConventions) {
  EXPECT_DOUBLE_EQ(forward_flops_per_token_2n(70'553'706'496).count(), 141'107'412'992.0);
  EXPECT_DOUBLE_EQ(training_flops_per_token_6n(1'000).count(), 6'000.0);
  EXPECT_NEAR(training_flops_6nd(70'553'706'496, 15'000'000'000'000).count(), 6.34983358464e24,
              1e12);
}

TEST(KvCache, Llama3_70bAt8kTokensBatch32) {
  const ModelConfig m = load_model("llama3-70b");
  EXPECT_EQ(kv_cache_bytes(m, 8192, 32, 2).count(), 85'899'345'920);
  EXPECT_EQ(kv_cache_bytes(KvCacheShape{80, 8, 128}, 8192, 32, 2).count(), 85'899'345'920);
  // GQA is the saving: multi-head attention would need 8x.
  ModelConfig mha = m;
  mha.num_kv_heads = mha.num_heads;
  EXPECT_EQ(kv_cache_bytes(mha, 8192, 32, 2).count(), 8 * 85'899'345'920);
}

}  // namespace
}  // namespace meshsim::workloads
