// Private to workloads: reads one Hugging Face config.json object, remembering which keys the
// family's parser read, so that every other key is either named as ignored (it cannot change
// the cost) or rejected (it might).
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "meshsim/sim/json_input.h"
#include "meshsim/workloads/model.h"

namespace meshsim::workloads::detail {

class HfReader {
 public:
  // `value` is the object `obj` reads (JsonObject keeps no handle to it).
  HfReader(const nlohmann::json& value, JsonObject& obj) : value_(value), obj_(obj) {}

  JsonObject& obj() { return obj_; }
  const nlohmann::json& value() const { return value_; }
  // The key is present and not null. Marks it as read.
  bool present(const std::string& key);
  int64_t positive(const std::string& key);  // required
  int64_t positive_or(const std::string& key, int64_t fallback);
  int64_t non_negative_or(const std::string& key, int64_t fallback);
  bool boolean_or(const std::string& key, bool fallback);
  double number_or(const std::string& key, double fallback);
  // The first of `keys` that is present (legacy spellings: Falcon's n_embed for hidden_size).
  std::optional<int64_t> positive_any(const std::vector<std::string>& keys);
  // Marks a key as read by the parser without reading it (its value is checked by hand).
  void read(const std::string& key) {
    read_.insert(key);
    obj_.ignore(key);
  }
  [[noreturn]] void fail(const std::string& key, const std::string& message) {
    obj_.fail(key, message);
  }

  // Every key of the object that the parser did not read: a name in the ignored lists (common or
  // `family_ignored`) joins `ignored` (as a JSON pointer, with the reason when the list gives
  // one); anything else is an InputError naming the key and the family.
  void finish(const std::string& family, const std::vector<std::string>& family_ignored,
              std::vector<std::string>& ignored) const;

 private:
  const nlohmann::json& value_;
  JsonObject& obj_;
  std::set<std::string> read_;
};

// Per-family parsers (hf_families.cc). Each reads the family's cost-changing keys with the
// defaults transformers' configuration_<type>.py uses, and validates the result.
ModelConfig parse_hf_llama_like(HfReader& r, Architecture family);  // llama .. qwen3_moe, phi3
ModelConfig parse_hf_gemma(HfReader& r, Architecture family);       // gemma, gemma2, gemma3_text
ModelConfig parse_hf_nemotron(HfReader& r);
ModelConfig parse_hf_gpt_neox(HfReader& r);
ModelConfig parse_hf_falcon(HfReader& r);
ModelConfig parse_hf_gpt2(HfReader& r);
ModelConfig parse_hf_deepseek(HfReader& r, Architecture family);

// Keys each family ignores beyond the common list (hf_config.cc), "key" or "key: reason".
std::vector<std::string> hf_family_ignored(Architecture family);

}  // namespace meshsim::workloads::detail
