// Model presets, the meshsim and Hugging Face loaders, and their error messages.
#include "meshsim/workloads/model.h"

#include <gtest/gtest.h>

#include <functional>
#include <string>

#include "meshsim/sim/error.h"
#include "meshsim/workloads/accounting.h"
#include "temp_file.h"
#include "thrown.h"

namespace meshsim::workloads {
namespace {

using scratch::write_temp;

// The meshsim schema for a small Llama-like model, with `field` set to `value` (replaced if the
// field exists, added otherwise).
std::string meshsim_json(const std::string& field = "", const std::string& value = "") {
  std::string fields[][2] = {{"architecture", "\"llama\""},
                             {"num_layers", "2"},
                             {"d_model", "256"},
                             {"num_heads", "8"},
                             {"num_kv_heads", "2"},
                             {"d_ff", "512"},
                             {"vocab_size", "1000"},
                             {"max_position_embeddings", "128"},
                             {"mlp", "\"swiglu\""},
                             {"norm", "\"rmsnorm\""},
                             {"position_embedding", "\"rope\""},
                             {"attention_bias", "false"},
                             {"mlp_bias", "false"},
                             {"tied_embeddings", "false"},
                             {"dropout", "false"}};
  std::string out = "{";
  bool replaced = false;
  for (auto& [k, v] : fields) {
    if (k == field) {
      v = value;
      replaced = true;
    }
    out += "\"" + k + "\": " + v + ",";
  }
  if (!replaced && !field.empty()) {
    out += "\"" + field + "\": " + value + ",";
  }
  out.back() = '}';
  return out;
}

// Asserts that `load` throws an InputError naming the file, the JSON pointer and the expectation.
void expect_input_error(const std::function<void()>& load, const std::string& file,
                        const std::string& pointer, const std::string& expectation) {
  SCOPED_TRACE("an InputError expected at " + pointer);
  testing::expect_error(testing::capture_input_error(load), file, pointer, expectation);
}

// The meshsim-schema model with `field` set to `value`, written to `name`, is refused at the
// field, saying `expectation`.
void expect_field_refused(const std::string& name, const std::string& field,
                          const std::string& value, const std::string& expectation) {
  const std::string path = write_temp(name, meshsim_json(field, value));
  expect_input_error([&] { load_model(path); }, path, "/" + field, expectation);
}

TEST(ModelPresets, AllSevenLoadWithTheirNames) {
  const std::vector<std::string> expected = {"gpt2-small",  "gpt3-175b", "llama3-405b",
                                             "llama3-70b",  "llama3-8b", "llama3.2-1b",
                                             "mixtral-8x7b"};
  EXPECT_EQ(model_preset_names(), expected);
  for (const auto& name : expected) {
    const ModelConfig m = load_model(name);
    EXPECT_EQ(m.name, name);
    EXPECT_FALSE(m.source.empty()) << name << " must cite its source";
  }
}

TEST(ModelPresets, ExactParameterCounts) {
  EXPECT_EQ(total_parameters(load_model("gpt2-small")), 124'439'808);
  EXPECT_EQ(total_parameters(load_model("gpt3-175b")), 174'604'259'328);
  EXPECT_EQ(total_parameters(load_model("llama3.2-1b")), 1'235'814'400);
  EXPECT_EQ(total_parameters(load_model("llama3-8b")), 8'030'261'248);
  EXPECT_EQ(total_parameters(load_model("llama3-70b")), 70'553'706'496);
  EXPECT_EQ(total_parameters(load_model("llama3-405b")), 405'853'388'800);
  const ModelConfig mixtral = load_model("mixtral-8x7b");
  EXPECT_EQ(total_parameters(mixtral), 46'702'792'704);
  EXPECT_EQ(active_parameters_per_token(mixtral), 12'879'925'248);
}

TEST(ModelPresets, PublishedHyperparameters) {
  const ModelConfig m = load_model("llama3-70b");
  EXPECT_EQ(m.architecture, Architecture::kLlama);
  EXPECT_EQ(m.num_layers, 80);
  EXPECT_EQ(m.d_model, 8192);
  EXPECT_EQ(m.num_heads, 64);
  EXPECT_EQ(m.num_kv_heads, 8);
  EXPECT_EQ(m.head_dim, 128);
  EXPECT_EQ(m.d_ff, 28672);
  EXPECT_EQ(m.vocab_size, 128256);
  EXPECT_EQ(m.mlp, MlpKind::kGated);
  EXPECT_EQ(m.norm, NormKind::kRmsNorm);
  EXPECT_FALSE(m.tied_embeddings);
  const ModelConfig x = load_model("mixtral-8x7b");
  ASSERT_TRUE(x.moe.has_value());
  EXPECT_EQ(x.moe->num_experts, 8);
  EXPECT_EQ(x.moe->experts_per_token, 2);
  const ModelConfig g = load_model("gpt2-small");
  EXPECT_EQ(g.positions, PositionKind::kLearned);
  EXPECT_EQ(g.norm, NormKind::kLayerNorm);
  EXPECT_TRUE(g.tied_embeddings);
}

TEST(ModelLoader, MeshsimFileWithDerivedHeadDim) {
  const std::string path = write_temp("small.json", meshsim_json());
  const ModelConfig m = load_model(path);
  EXPECT_EQ(m.name, "small");
  EXPECT_EQ(m.head_dim, 32);
  EXPECT_EQ(m.kv_dim(), 64);
}

const char* kHfLlama3_8b = R"({
  "architectures": ["LlamaForCausalLM"], "attention_bias": false, "attention_dropout": 0.0,
  "bos_token_id": 128000, "eos_token_id": 128001, "hidden_act": "silu", "hidden_size": 4096,
  "initializer_range": 0.02, "intermediate_size": 14336, "max_position_embeddings": 8192,
  "model_type": "llama", "num_attention_heads": 32, "num_hidden_layers": 32,
  "num_key_value_heads": 8, "pretraining_tp": 1, "rms_norm_eps": 1e-05, "rope_scaling": null,
  "rope_theta": 500000.0, "tie_word_embeddings": false, "torch_dtype": "bfloat16",
  "transformers_version": "4.40.0.dev0", "use_cache": true, "vocab_size": 128256})";

const char* kHfLlama32_1b = R"({
  "architectures": ["LlamaForCausalLM"], "hidden_size": 2048, "intermediate_size": 8192,
  "head_dim": 64, "max_position_embeddings": 131072, "mlp_bias": false, "model_type": "llama",
  "num_attention_heads": 32, "num_hidden_layers": 16, "num_key_value_heads": 8,
  "rope_scaling": {"factor": 32.0, "rope_type": "llama3"}, "tie_word_embeddings": true,
  "vocab_size": 128256})";

const char* kHfMixtral = R"({
  "architectures": ["MixtralForCausalLM"], "attention_dropout": 0.0, "hidden_act": "silu",
  "hidden_size": 4096, "intermediate_size": 14336, "max_position_embeddings": 32768,
  "model_type": "mixtral", "num_attention_heads": 32, "num_experts_per_tok": 2,
  "num_hidden_layers": 32, "num_key_value_heads": 8, "num_local_experts": 8,
  "output_router_logits": false, "rms_norm_eps": 1e-05, "rope_theta": 1000000.0,
  "router_aux_loss_coef": 0.02, "sliding_window": null, "tie_word_embeddings": false,
  "vocab_size": 32000})";

const char* kHfGpt2 = R"({
  "activation_function": "gelu_new", "architectures": ["GPT2LMHeadModel"], "attn_pdrop": 0.1,
  "embd_pdrop": 0.1, "layer_norm_epsilon": 1e-05, "model_type": "gpt2", "n_ctx": 1024,
  "n_embd": 768, "n_head": 12, "n_inner": null, "n_layer": 12, "n_positions": 1024,
  "resid_pdrop": 0.1, "vocab_size": 50257})";

TEST(ModelLoader, HuggingFaceConfigsMatchThePresets) {
  const struct {
    const char* file;
    const char* json;
    const char* preset;
  } cases[] = {{"llama3-8b.config.json", kHfLlama3_8b, "llama3-8b"},
               {"llama3.2-1b.config.json", kHfLlama32_1b, "llama3.2-1b"},
               {"mixtral.config.json", kHfMixtral, "mixtral-8x7b"},
               {"gpt2.config.json", kHfGpt2, "gpt2-small"}};
  for (const auto& c : cases) {
    SCOPED_TRACE(c.preset);
    const ModelConfig hf = load_model(write_temp(c.file, c.json));
    const ModelConfig preset = load_model(c.preset);
    EXPECT_EQ(hf.architecture, preset.architecture);
    EXPECT_EQ(hf.head_dim, preset.head_dim);
    EXPECT_EQ(hf.d_ff, preset.d_ff);
    EXPECT_EQ(hf.tied_embeddings, preset.tied_embeddings);
    EXPECT_EQ(hf.dropout, preset.dropout);
    EXPECT_EQ(total_parameters(hf), total_parameters(preset));
    EXPECT_EQ(active_parameters_per_token(hf), active_parameters_per_token(preset));
  }
}

TEST(ModelErrors, UnknownKeyInMeshsimSchema) {
  expect_field_refused("typo.json", "num_layer", "3", "unknown field");
}

TEST(ModelErrors, NegativeLayers) {
  expect_field_refused("negative.json", "num_layers", "-3", "expected a positive integer, got -3");
}

TEST(ModelErrors, WrongType) {
  expect_field_refused("string.json", "d_model", "\"4096\"", "expected an integer, got \"4096\"");
  expect_field_refused("bool.json", "tied_embeddings", "1", "expected true or false");
}

TEST(ModelErrors, HeadsNotDivisibleByKvHeads) {
  expect_field_refused("gqa.json", "num_kv_heads", "3", "expected a divisor of num_heads");
  std::string hf = kHfLlama3_8b;
  hf.replace(hf.find("\"num_key_value_heads\": 8"), 24, "\"num_key_value_heads\": 5");
  const std::string hf_path = write_temp("gqa.config.json", hf);
  expect_input_error([&] { load_model(hf_path); }, hf_path, "/num_key_value_heads",
                     "expected a divisor of num_attention_heads");
}

TEST(ModelErrors, DModelNotDivisibleByHeadsWithoutHeadDim) {
  expect_field_refused("width.json", "d_model", "250", "expected d_model = num_heads * head_dim");
}

TEST(ModelErrors, ExplicitHeadDimMayDifferFromDModelOverHeads) {
  const std::string path = write_temp("head_dim.json", meshsim_json("head_dim", "64"));
  EXPECT_EQ(load_model(path).q_dim(), 512);
}

TEST(ModelErrors, TopKAboveExperts) {
  std::string json = meshsim_json("architecture", "\"mixtral\"");
  json.back() = ',';
  json += R"("moe": {"num_experts": 4, "experts_per_token": 5}})";
  const std::string path = write_temp("topk.json", json);
  expect_input_error([&] { load_model(path); }, path, "/moe/experts_per_token",
                     "expected 1 <= k <= num_experts");
  const std::string dense = write_temp("nomoe.json", meshsim_json("architecture", "\"mixtral\""));
  expect_input_error([&] { load_model(dense); }, dense, "/moe/num_experts",
                     "expected a mixture-of-experts section");
}

TEST(ModelErrors, MissingField) {
  std::string json = meshsim_json();
  json.replace(json.find("\"d_ff\": 512,"), 12, "");
  const std::string path = write_temp("missing.json", json);
  expect_input_error([&] { load_model(path); }, path, "/d_ff", "required field is missing");
}

TEST(ModelErrors, UnknownModelType) {
  const std::string path =
      write_temp("bloom.config.json", R"({"model_type": "bloom", "hidden_size": 896})");
  expect_input_error([&] { load_model(path); }, path, "/model_type",
                     "expected one of: llama, mistral, mixtral, qwen2");
}

TEST(ModelErrors, UnknownPresetListsThePresets) {
  expect_input_error([] { load_model("llama9-1t"); }, "llama9-1t", "",
                     "expected one of: gpt2-small, gpt3-175b");
  try {
    load_model("llama9-1t");
  } catch (const InputError& e) {
    EXPECT_NE(e.message().find("mixtral-8x7b"), std::string::npos) << e.what();
    EXPECT_NE(e.message().find("Hugging Face config.json"), std::string::npos) << e.what();
  }
}

TEST(ModelErrors, MissingFileIsNamed) {
  const std::string path = "/nonexistent/dir/model.json";
  expect_input_error([&] { load_model(path); }, path, "", "cannot open file");
}

TEST(ModelErrors, ValidateModelRejectsHandBuiltNonsense) {
  ModelConfig m = load_model("llama3-8b");
  m.num_layers = 0;
  expect_input_error([&] { validate_model(m, "api"); }, "api", "/num_layers",
                     "expected a positive integer, got 0");
}

}  // namespace
}  // namespace meshsim::workloads
