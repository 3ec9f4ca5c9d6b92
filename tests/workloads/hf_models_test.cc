// Issue 13: the Hugging Face configs of the models trained today load with the parameter counts
// their publishers give, FLOPs per token carry each attention variant's own term, and the KV
// cache is MLA's compressed one. The configs are the public config.json files listed with their
// provenance in hf_configs/README.md.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "meshsim/sim/error.h"
#include "meshsim/workloads/accounting.h"
#include "meshsim/workloads/model.h"
#include "temp_file.h"

namespace meshsim::workloads {
namespace {

ModelConfig hf(const std::string& stem) {
  return load_model(std::string(MESHSIM_SOURCE_DIR) + "/tests/workloads/hf_configs/" + stem +
                    ".json");
}

struct Published {
  const char* config;
  int64_t total;
  const char* source;
};

// Published totals: the Hugging Face Hub's safetensors element count ("Model size") of the repo,
// or the publisher's table where the checkpoint holds extra tensors (see the next tests).
const Published kPublished[] = {
    {"Llama-3.1-8B", 8'030'261'248, "HF safetensors total, meta-llama/Llama-3.1-8B"},
    {"Llama-3.1-70B", 70'553'706'496, "HF safetensors total, meta-llama/Meta-Llama-3-70B"},
    {"Mistral-7B-v0.1", 7'241'732'096, "HF safetensors total, mistralai/Mistral-7B-v0.1"},
    {"Mixtral-8x7B-v0.1", 46'702'792'704, "HF safetensors total, Mixtral-8x7B-Instruct-v0.1"},
    {"Qwen2.5-7B", 7'615'616'512, "HF index total_size 15,231,233,024 B / 2 (bf16)"},
    {"Qwen2.5-72B", 72'706'203'648, "HF safetensors total, Qwen/Qwen2.5-72B"},
    {"Qwen1.5-MoE-A2.7B", 14'315'784'192, "HF total; model card: 14.3B"},
    {"Qwen2-57B-A14B", 57'408'658'944, "HF safetensors total, Qwen/Qwen2-57B-A14B"},
    {"Qwen3-30B-A3B", 30'532'122'624, "HF safetensors total; card: 30.5B"},
    {"Gemma-7B", 8'537'680'896, "keras-hub gemma_7b_en params (= HF total)"},
    {"Gemma-2-9B", 9'241'705'984, "HF safetensors total, google/gemma-2-9b-it"},
    {"Gemma-3-1B-it", 999'885'952, "HF safetensors total, google/gemma-3-1b-it"},
    {"Phi-3-mini-4k-instruct", 3'821'079'552, "HF safetensors total"},
    {"GPT-NeoX-20B", 20'554'567'680, "EleutherAI/gpt-neox-20b model card, n_parameters"},
    {"Pythia-6.9B", 6'857'302'016, "Pythia suite parameter table (Biderman et al. 2023)"},
    {"DeepSeek-V2-Lite", 15'706'484'224, "HF total; paper: 15.7B"},
};

TEST(HfModels, ParameterCountsEqualThePublishedTotals) {
  for (const Published& p : kPublished) {
    EXPECT_EQ(total_parameters(hf(p.config)), p.total) << p.config << " (" << p.source << ")";
  }
}

// Gemma 3 (multimodal): the checkpoint holds the SigLIP vision tower and projector too; the text
// model is what meshsim trains. HF safetensors totals of google/gemma-3-{4b,12b,27b}-it.
TEST(HfModels, Gemma3MultimodalCountsTheVisionTowerApart) {
  const ParameterCounts g4 = count_parameters(hf("Gemma-3-4B-it"));
  EXPECT_EQ(g4.with_vision(), 4'300'079'472);
  EXPECT_EQ(g4.vision, 416'866'032 + 2'950'272);  // SigLIP 417M + projector (tech report)
  EXPECT_EQ(count_parameters(hf("Gemma-3-12B-it")).with_vision(), 12'187'325'040);
  EXPECT_EQ(count_parameters(hf("Gemma-3-27B-it")).with_vision(), 27'432'406'640);
  // 12B: head_dim 256 from Gemma3TextConfig, not 3840 / 16 = 240.
  EXPECT_EQ(hf("Gemma-3-12B-it").head_dim, 256);
}

// DeepSeek-V3: 671B main model and 37.6B activated per token (README_WEIGHTS.md: "671B ...
// activation 36.6B", counted without the input embedding); the MTP module (11.6B unique) is
// counted apart, as the report does.
TEST(HfModels, DeepSeekV3MainModelMtpAndActivated) {
  const ParameterCounts c = count_parameters(hf("DeepSeek-V3"));
  EXPECT_EQ(c.total(), 671'026'419'200);
  EXPECT_EQ(c.active_per_token() - c.token_embedding, 36'625'618'432);
  EXPECT_EQ(c.mtp, 11'610'068'224);
  EXPECT_EQ(c.num_dense_layers, 3);
  // DeepSeek-V2-Lite: "2.4B activated" without the input embedding.
  const ParameterCounts lite = count_parameters(hf("DeepSeek-V2-Lite"));
  EXPECT_EQ(lite.active_per_token() - lite.token_embedding, 2'451'435'008);
}

// Checkpoints that store more than the model's parameters: Falcon keeps lm_head.weight as a
// tensor of its own although FalconForCausalLM ties it to the embedding (HF totals 7.22B and
// 41.8B); GPT-2's safetensors hold the 12 causal-mask buffers attn.bias (1024 x 1024 each).
TEST(HfModels, CheckpointExtrasExplainTheRemainingDifferences) {
  const ModelConfig f7 = hf("Falcon-7B");
  EXPECT_EQ(total_parameters(f7) + f7.vocab_size * f7.d_model, 7'217'189'760);
  const ModelConfig f40 = hf("Falcon-40B");
  EXPECT_EQ(total_parameters(f40) + f40.vocab_size * f40.d_model, 41'835'970'560);
  EXPECT_EQ(total_parameters(hf("GPT-2")) + 12 * 1024 * 1024, 137'022'720);
  // Minitron-4B (nemotron): no published safetensors total was found; the count is the sum of
  // its tensors (squared-ReLU MLP of two matrices, LayerNorm with bias).
  EXPECT_EQ(total_parameters(hf("Minitron-4B-Base")), 4'190'509'056);
}

TEST(HfModels, FamiliesReadTheirVariants) {
  const ModelConfig q = hf("Qwen2.5-7B");  // QKV biases, none on the output projection
  EXPECT_TRUE(q.attention_bias);
  EXPECT_FALSE(q.attention_out_bias);
  const ModelConfig f = hf("Falcon-7B");  // MQA, one norm, parallel attention + MLP
  EXPECT_EQ(f.num_kv_heads, 1);
  EXPECT_EQ(f.norms_per_layer, 1);
  EXPECT_TRUE(f.parallel_blocks);
  const ModelConfig g2 = hf("Gemma-2-9B");  // even layers local (4096), odd global
  EXPECT_EQ(g2.attention_window(0), 4096);
  EXPECT_EQ(g2.attention_window(1), 0);
  EXPECT_TRUE(g2.logit_softcapping);
  EXPECT_EQ(g2.norms_per_layer, 4);
  const ModelConfig g3 = hf("Gemma-3-27B-it");  // 5 local : 1 global, window 1024
  int global = 0;
  for (int64_t i = 0; i < g3.num_layers; ++i) {
    global += g3.attention_window(i) == 0 ? 1 : 0;
  }
  EXPECT_EQ(global, 10);
  EXPECT_EQ(g3.attention_window(0), 1024);
  const ModelConfig qm = hf("Qwen1.5-MoE-A2.7B");
  ASSERT_TRUE(qm.moe);
  EXPECT_EQ(qm.moe->num_shared_experts, 1);
  EXPECT_TRUE(qm.moe->shared_expert_gate);
  EXPECT_EQ(qm.moe->expert_d_ff, 1408);
  EXPECT_FALSE(hf("Mistral-7B-v0.1").attention_window(5) == 0);
  // Ignored fields are named, with a reason where it is not obvious.
  const std::vector<std::string>& ignored = hf("DeepSeek-V3").ignored_fields;
  EXPECT_NE(std::find(ignored.begin(), ignored.end(), "/rope_theta"), ignored.end());
  EXPECT_TRUE(std::any_of(ignored.begin(), ignored.end(),
                          [](const std::string& s) { return s.starts_with("/ep_size ("); }));
  // Group-limited routing is read (it bounds the flex dispatcher's nodes per token).
  EXPECT_FALSE(std::any_of(ignored.begin(), ignored.end(),
                           [](const std::string& s) { return s.starts_with("/n_group"); }));
}

using scratch::write_temp;

void expect_error(const std::string& json, const std::string& pointer, const std::string& what) {
  const std::string path = write_temp("bad.config.json", json);
  try {
    load_model(path);
    ADD_FAILURE() << "no InputError for " << json;
  } catch (const InputError& e) {
    EXPECT_EQ(e.location(), pointer) << e.what();
    EXPECT_NE(e.message().find(what), std::string::npos) << e.what();
  }
}

const char* kLlama =
    R"("hidden_size": 256, "intermediate_size": 512, "num_hidden_layers": 2,
       "num_attention_heads": 8, "vocab_size": 1000, "max_position_embeddings": 128)";

TEST(HfModels, UnknownAndInexpressibleFieldsAreErrors) {
  expect_error(
      std::string(R"({"model_type": "llama", "use_flux_capacitor": true, )") + kLlama + "}",
      "/use_flux_capacitor", "unknown field for model_type llama");
  expect_error(std::string(R"({"model_type": "qwen2_moe", "num_experts": 4, )") +
                   R"("num_experts_per_tok": 2, "moe_intermediate_size": 64, )" +
                   R"("decoder_sparse_step": 2, )" + kLlama + "}",
               "/decoder_sparse_step", "expected 1");
  expect_error(std::string(R"({"model_type": "falcon", "alibi": true, )") + kLlama + "}", "/alibi",
               "ALiBi");
}

// FLOPs per token, by hand. DeepSeek-V3 MLA projections per layer (flops_kv notes): q_a
// 7168x1536, q_b 1536x(128x192), kv_a 7168x(512+64), kv_b 512x(128x(128+128)), o (128x128)x7168.
TEST(HfModels, MlaAndMoeFlopsByHand) {
  const ModelConfig m = hf("DeepSeek-V3");
  const int64_t mla =
      7168 * 1536 + 1536 * 128 * 192 + 7168 * 576 + 512 * 128 * 256 + 128 * 128 * 7168;
  EXPECT_EQ(2 * mla, 374'210'560);
  EXPECT_EQ(layer_matmul_weights_per_token(m, 0), mla + 3 * 7168 * 18432);  // dense layer
  // MoE layer: router 7168 x 256, 8 routed + 1 shared SwiGLU expert of 2048.
  EXPECT_EQ(layer_matmul_weights_per_token(m, 60), mla + 7168 * 256 + 3 * 7168 * 9 * 2048);
  // Core: QK^T over 128 x (128 + 64), PV over 128 x 128, s/2 keys under causal masking.
  EXPECT_DOUBLE_EQ(attention_flops_per_token(m, 0, 4096).count(),
                   2.0 * (128 * 192 + 128 * 128) * 2048);
  // MTP (depth 1, training): one more MoE block, eh_proj 2h x h and another LM head pass.
  const ForwardFlops f = forward_flops_per_token(m, 4096);
  EXPECT_DOUBLE_EQ(f.mtp.count(), 2.0 * static_cast<double>(layer_matmul_weights_per_token(m, 60) +
                                                            2 * 7168 * 7168 + 129280 * 7168) +
                                      2.0 * (128 * 192 + 128 * 128) * 2048);
}

// Sliding windows: a query sees min(i + 1, W) keys, W - W^2 / 2s on average for s > W.
TEST(HfModels, SlidingWindowAttentionFlopsAndKvCache) {
  const ModelConfig g = hf("Gemma-2-9B");  // 16 heads x 256, W = 4096
  EXPECT_DOUBLE_EQ(attention_flops_per_token(g, 0, 8192).count(),
                   2.0 * (4096 + 4096) * (4096.0 - 4096.0 * 4096.0 / (2.0 * 8192.0)));
  EXPECT_DOUBLE_EQ(attention_flops_per_token(g, 1, 8192).count(), 2.0 * (4096 + 4096) * 4096);
  EXPECT_DOUBLE_EQ(attention_flops_per_token(g, 0, 2048).count(),
                   attention_flops_per_token(g, 1, 2048).count());  // window longer than s
  // KV: 8 KV heads x 256 x 2 per layer per token; 21 local layers hold 4096 tokens at s = 8192.
  EXPECT_EQ(kv_cache_bytes(g, 8192, 1, 2).count(), 2 * 8 * 256 * (21 * 4096 + 21 * 8192) * 2);
  // MLA caches the latent and the RoPE key: (512 + 64) x 61 layers x 2 bytes = 70,272 B/token.
  EXPECT_EQ(kv_cache_bytes(hf("DeepSeek-V3"), 1, 1, 2).count(), 70'272);
  // Falcon-7B (MQA): one 64-wide K and V head per layer.
  EXPECT_EQ(kv_cache_bytes(hf("Falcon-7B"), 1, 1, 2).count(), 2 * 64 * 32 * 2);
}

}  // namespace
}  // namespace meshsim::workloads
