// Private to workloads: the two model schemas and the shared validation.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "meshsim/sim/json_input.h"
#include "meshsim/workloads/model.h"

namespace meshsim::workloads {

// The preset files, compiled in by meshsim_embed (file stem -> contents). The preset's name is the
// "name" field inside the file, because file stems cannot carry dots (llama3.2-1b).
const std::vector<std::pair<std::string_view, std::string_view>>& embedded_model_files();

// JSON pointers of the fields validate_model_fields points at, spelled as the schema being read.
struct ModelFieldNames {
  std::string num_layers = "/num_layers";
  std::string d_model = "/d_model";
  std::string num_heads = "/num_heads";
  std::string num_kv_heads = "/num_kv_heads";
  std::string head_dim = "/head_dim";
  std::string d_ff = "/d_ff";
  std::string vocab_size = "/vocab_size";
  std::string max_position_embeddings = "/max_position_embeddings";
  std::string num_experts = "/moe/num_experts";
  std::string experts_per_token = "/moe/experts_per_token";
  std::string architecture = "/architecture";
  std::string expert_d_ff = "/moe/expert_d_ff";
  std::string shared_experts = "/moe/num_shared_experts";
  std::string first_dense_layers = "/moe/first_dense_layers";
  std::string routing_groups = "/moe/routing_groups";
  std::string mla = "/mla";
  std::string sliding_window = "/sliding_window";
  std::string norms_per_layer = "/norms_per_layer";
  std::string parallel_blocks = "/parallel_blocks";
  std::string mtp_layers = "/mtp_layers";
};

// meshsim's own schema (strict: unknown keys are errors). `default_name` is used when the file
// has no "name".
ModelConfig parse_meshsim_model(JsonObject& obj, const std::string& default_name);

// A Hugging Face config.json of a supported model_type (hf_config.cc lists them); keys that do
// not affect performance are named in ModelConfig::ignored_fields, unknown keys are errors.
// Absent optional keys take the Hugging Face library's defaults.
ModelConfig parse_hf_config(const nlohmann::json& value, JsonObject& obj,
                            const std::string& default_name);

// Fills head_dim = d_model / num_heads when the schema did not give it, and rejects a d_model that
// the heads do not divide.
void derive_head_dim(ModelConfig& model, bool head_dim_given, const std::string& source,
                     const ModelFieldNames& fields);

// Cross-field checks shared by both schemas (see validate_model in model.h).
void validate_model_fields(const ModelConfig& model, const std::string& source,
                           const ModelFieldNames& fields);

}  // namespace meshsim::workloads
