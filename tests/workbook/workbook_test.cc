// Every case of validation/workbook/workbook_cases.json, checked through the project's functions.
//
// One test per case id (Workbook/Case.Check/case_3_1, ...). The case's `quantity` picks the
// function; a quantity with no function here is a failure, never a skip. rel_tol 0 means exact.
// Case 3.6 has an impossible premise (MFU 1.368): it passes only if MFU raises InfeasibleError
// naming the peak and carrying the ratio. Where the workbook's own answer is wrong, the file holds
// the corrected value and a note saying why (validation/workbook/README.md).
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cctype>
#include <cmath>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <ostream>
#include <string>
#include <vector>

#include "meshsim/collectives/volume.h"
#include "meshsim/sim/error.h"
#include "meshsim/sim/json_input.h"
#include "meshsim/topology/roofline.h"
#include "meshsim/workloads/accounting.h"
#include "meshsim/workloads/analytic.h"

namespace meshsim {
namespace {

namespace wl = workloads;
using nlohmann::json;

constexpr size_t kExpectedCases = 41;
const char* const kCasesFile = MESHSIM_SOURCE_DIR "/validation/workbook/workbook_cases.json";

struct WorkbookCase {
  std::string id;
  std::string quantity;
  json inputs;
  double expected = 0.0;
  double rel_tol = 0.0;
  std::string load_error;  // set when the file could not be read: the case then fails
};

// gtest prints a failing parameter; the id is what names it.
void PrintTo(const WorkbookCase& c, std::ostream* os) { *os << c.id << " (" << c.quantity << ")"; }

std::vector<WorkbookCase> load_cases() {
  try {
    const json file = load_json_file(kCasesFile);
    std::vector<WorkbookCase> cases;
    for (const json& c : file.at("cases")) {
      cases.push_back({c.at("id").get<std::string>(), c.at("quantity").get<std::string>(),
                       c.at("inputs"), c.at("expected").get<double>(),
                       c.at("rel_tol").get<double>(), ""});
    }
    return cases;
  } catch (const std::exception& e) {
    return {WorkbookCase{"load_error", "", json::object(), 0.0, 0.0, e.what()}};
  }
}

const std::vector<WorkbookCase>& all_cases() {
  static const std::vector<WorkbookCase> cases = load_cases();
  return cases;
}

int64_t count(const json& in, const char* key) { return std::llround(in.at(key).get<double>()); }
double num(const json& in, const char* key) { return in.at(key).get<double>(); }
Bytes bytes(const json& in, const char* key) { return Bytes::of(count(in, key)); }
FlopsPerSec flops_rate(const json& in, const char* key) { return FlopsPerSec::of(num(in, key)); }
BytesPerSec bandwidth(const json& in, const char* key) { return BytesPerSec::of(num(in, key)); }

// Builds the model the case describes from its inputs (not from the preset name), so the case
// checks the accounting; the preset is compared separately.
wl::ModelConfig model_from_inputs(const json& in) {
  wl::ModelConfig m;
  m.name = in.at("model").get<std::string>();
  m.architecture = wl::Architecture::kLlama;
  m.num_layers = count(in, "layers");
  m.d_model = count(in, "d_model");
  m.num_heads = count(in, "heads");
  m.num_kv_heads = in.contains("kv_heads") ? count(in, "kv_heads") : m.num_heads;
  m.head_dim = in.contains("head_dim") ? count(in, "head_dim") : m.d_model / m.num_heads;
  m.d_ff = count(in, "d_ff");
  m.vocab_size = count(in, "vocab");
  const bool learned = in.contains("max_positions");
  m.positions = learned ? wl::PositionKind::kLearned : wl::PositionKind::kRope;
  // RoPE models have no position table; the value only has to be valid.
  m.max_position_embeddings = learned ? count(in, "max_positions") : 8192;
  m.mlp = in.at("mlp") == "swiglu" ? wl::MlpKind::kGated : wl::MlpKind::kGelu;
  m.norm = in.at("norm") == "rmsnorm" ? wl::NormKind::kRmsNorm : wl::NormKind::kLayerNorm;
  m.attention_bias = m.attention_out_bias = m.mlp_bias = in.at("biases").get<bool>();
  m.tied_embeddings = in.at("tied_embeddings").get<bool>();
  wl::validate_model(m, "workbook case");
  return m;
}

double parameter_count(const json& in) {
  const wl::ModelConfig m = model_from_inputs(in);
  const int64_t n = wl::total_parameters(m);
  EXPECT_EQ(n, wl::total_parameters(wl::load_model(m.name))) << "preset " << m.name;
  return static_cast<double>(n);
}

topology::KernelResources kernel(const json& in) {
  return {count(in, "threads_per_block"), KiB(num(in, "smem_per_block_kb"))};
}
topology::SmLimits sm(const json& in) {
  // Hopper (sm_90) allows 32 resident blocks per SM; the case leaves that limit out.
  return {count(in, "max_threads_per_sm"), KiB(num(in, "smem_per_sm_kb")), 32};
}

using Quantity = std::function<double(const json&)>;

// Chapters 0, 1 and 8: roofline arithmetic and kernel occupancy.
void add_roofline_quantities(std::map<std::string, Quantity>& table) {
  table.insert({
      {"matmul_arithmetic_intensity",
       [](const json& in) {
         return wl::matmul_arithmetic_intensity(count(in, "M"), count(in, "K"), count(in, "N"),
                                                count(in, "bytes_per_element"));
       }},
      {"ridge_point",
       [](const json& in) {
         return topology::ridge_point(flops_rate(in, "peak_flops"), bandwidth(in, "hbm_bandwidth"));
       }},
      {"matmul_time_compute_bound",
       [](const json& in) {
         return wl::matmul_time_compute_bound(count(in, "M"), count(in, "K"), count(in, "N"),
                                              flops_rate(in, "peak_flops"))
             .seconds();
       }},
      {"elementwise_arithmetic_intensity",
       [](const json& in) {
         return wl::elementwise_arithmetic_intensity(num(in, "flops_per_element"),
                                                     count(in, "bytes_per_element"),
                                                     count(in, "reads"), count(in, "writes"));
       }},
      {"systolic_peak_flops",
       [](const json& in) {
         return topology::systolic_peak(count(in, "rows"), count(in, "cols"), num(in, "clock_hz"))
             .value();
       }},
      {"memory_bound_time",
       [](const json& in) {
         const Bytes traffic = wl::elementwise_traffic(in.at("shape").get<std::vector<int64_t>>(),
                                                       count(in, "bytes_per_element"),
                                                       count(in, "reads"), count(in, "writes"));
         return wl::memory_bound_time(traffic, bandwidth(in, "hbm_bandwidth")).seconds();
       }},
      {"max_params_in_memory",
       [](const json& in) {
         return static_cast<double>(
             wl::max_params_in_memory(bytes(in, "hbm_bytes"), count(in, "bytes_per_param")));
       }},
      {"blocks_per_sm",
       [](const json& in) {
         return static_cast<double>(topology::blocks_per_sm(kernel(in), sm(in)));
       }},
      {"occupancy", [](const json& in) { return topology::occupancy(kernel(in), sm(in)); }},
  });
}

// Chapters 2 and 4: collective volumes and times; chapter 8: overlap.
void add_communication_quantities(std::map<std::string, Quantity>& table) {
  table.insert({
      {"ring_allreduce_bytes_per_device",
       [](const json& in) {
         return collectives::ring_allreduce_bytes_per_rank(bytes(in, "tensor_bytes"),
                                                           count(in, "devices"))
             .as_double();
       }},
      {"comm_time",
       [](const json& in) { return (bytes(in, "bytes") / bandwidth(in, "bandwidth")).seconds(); }},
      {"fsdp_allgather_bytes_per_device",
       [](const json& in) {
         const Bytes layer = Bytes::of(count(in, "layer_params") * count(in, "bytes_per_param"));
         return collectives::allgather_bytes_per_rank(layer, count(in, "devices")).as_double();
       }},
      {"tp_allreduce_bytes_per_device_two_per_layer",
       [](const json& in) {
         const Bytes activation =
             Bytes::of(count(in, "tokens") * count(in, "d_model") * count(in, "bytes_per_element"));
         const Bytes one =
             collectives::ring_allreduce_bytes_per_rank(activation, count(in, "devices"));
         return (one * count(in, "allreduces")).as_double();
       }},
      {"speedup_after_removing",
       [](const json& in) {
         return wl::speedup_after_removing(Milliseconds(num(in, "total_ms")),
                                           Milliseconds(num(in, "removed_ms")));
       }},
      {"hidden_comm_fraction",
       [](const json& in) {
         return wl::hidden_comm_fraction(Milliseconds(num(in, "comm_ms")),
                                         Milliseconds(num(in, "overlapping_compute_ms")));
       }},
  });
}

// Chapters 3 and 4: parameters, FLOPs, KV cache, MFU and training memory.
void add_training_quantities(std::map<std::string, Quantity>& table) {
  table.insert({
      {"parameter_count", parameter_count},
      {"forward_flops_per_token_2N",
       [](const json& in) { return wl::forward_flops_per_token_2n(count(in, "params")).count(); }},
      {"training_flops_6ND",
       [](const json& in) {
         return wl::training_flops_6nd(count(in, "params"), count(in, "tokens")).count();
       }},
      {"kv_cache_bytes",
       [](const json& in) {
         const wl::KvCacheShape shape{count(in, "layers"), count(in, "kv_heads"),
                                      count(in, "head_dim")};
         return wl::kv_cache_bytes(shape, count(in, "seq_len"), count(in, "batch"),
                                   count(in, "bytes_per_element"))
             .as_double();
       }},
      {"mfu_6N",
       [](const json& in) {
         return wl::model_flops_utilization(num(in, "tokens_per_second_per_device"),
                                            wl::training_flops_per_token_6n(count(in, "params")),
                                            flops_rate(in, "peak_flops"));
       }},
      {"fsdp_model_state_bytes_per_device",
       [](const json& in) {
         return wl::fsdp_model_state_bytes_per_device(
                    count(in, "params"), count(in, "bytes_per_param"), count(in, "devices"))
             .as_double();
       }},
      {"min_microbatches_for_bubble_below",
       [](const json& in) {
         return static_cast<double>(wl::min_microbatches_for_bubble_below(
             count(in, "pipeline_stages"), num(in, "max_bubble_fraction")));
       }},
      {"pipeline_bubble_fraction",
       [](const json& in) {
         return wl::pipeline_bubble_fraction(count(in, "pipeline_stages"),
                                             count(in, "microbatches"));
       }},
      {"activation_bytes_per_layer_simplified",
       [](const json& in) {
         return wl::activation_bytes_per_layer_simplified(count(in, "batch"), count(in, "seq"),
                                                          count(in, "d_model"), count(in, "heads"),
                                                          count(in, "bytes_per_element"))
             .as_double();
       }},
  });
}

// Chapters 5 and 10: time, cost and scaling laws.
void add_time_and_scaling_quantities(std::map<std::string, Quantity>& table) {
  table.insert({
      {"training_days",
       [](const json& in) {
         return wl::training_days(wl::training_flops_6nd(count(in, "params"), count(in, "tokens")),
                                  count(in, "devices"), flops_rate(in, "peak_flops"),
                                  num(in, "mfu"));
       }},
      {"training_cost_usd",
       [](const json& in) {
         return wl::training_cost_usd(count(in, "devices"), num(in, "days"),
                                      num(in, "usd_per_device_hour"));
       }},
      {"chinchilla_tokens",
       [](const json& in) {
         return static_cast<double>(wl::chinchilla_tokens(count(in, "params")));
       }},
      {"chinchilla_optimal_params",
       [](const json& in) {
         return static_cast<double>(
             wl::chinchilla_optimal_params(Flops::of(num(in, "compute_flops"))));
       }},
      {"parameter_count_simplified_12Ld2",
       [](const json& in) {
         return static_cast<double>(
             wl::parameter_count_12ld2(count(in, "layers"), count(in, "d_model")));
       }},
      {"training_time",
       [](const json& in) {
         const Flops total = wl::training_flops_6nd(count(in, "params"), count(in, "tokens"));
         return wl::training_time(total, 1, flops_rate(in, "peak_flops"), num(in, "mfu")).seconds();
       }},
      {"tokens_for_budget",
       [](const json& in) {
         return static_cast<double>(wl::tokens_for_budget(Flops::of(num(in, "compute_flops")),
                                                          count(in, "active_params")));
       }},
  });
}

// Chapter 6: prefill and decode.
void add_inference_quantities(std::map<std::string, Quantity>& table) {
  table.insert({
      {"prefill_tokens_per_second",
       [](const json& in) {
         return wl::prefill_tokens_per_second(count(in, "params"), flops_rate(in, "peak_flops"));
       }},
      {"decode_time_per_token_batch1",
       [](const json& in) {
         return wl::decode_time_per_token(count(in, "params"), count(in, "bytes_per_param"),
                                          bandwidth(in, "hbm_bandwidth"))
             .seconds();
       }},
      {"decode_tokens_per_second_batch1",
       [](const json& in) {
         return wl::decode_tokens_per_second(count(in, "params"), count(in, "bytes_per_param"),
                                             bandwidth(in, "hbm_bandwidth"));
       }},
      {"decode_compute_bound_batch",
       [](const json& in) {
         return wl::decode_compute_bound_batch(flops_rate(in, "peak_flops"),
                                               bandwidth(in, "hbm_bandwidth"));
       }},
  });
}

const std::map<std::string, Quantity>& quantities() {
  static const std::map<std::string, Quantity> table = [] {
    std::map<std::string, Quantity> t;
    add_roofline_quantities(t);
    add_communication_quantities(t);
    add_training_quantities(t);
    add_time_and_scaling_quantities(t);
    add_inference_quantities(t);
    return t;
  }();
  return table;
}

void expect_close(double actual, const WorkbookCase& c) {
  const double expected = c.expected;
  if (c.rel_tol == 0.0) {
    EXPECT_EQ(actual, expected) << fmt::format("case {} ({}): exact", c.id, c.quantity);
  } else {
    EXPECT_LE(std::fabs(actual - expected), c.rel_tol * std::fabs(expected))
        << fmt::format("case {} ({}): got {:.10g}, expected {:.10g} within {}", c.id, c.quantity,
                       actual, expected, c.rel_tol);
  }
}

// Case 3.6: the premise is impossible, so the answer is an error that reports the ratio.
void expect_infeasible_mfu(const Quantity& mfu, const WorkbookCase& c) {
  try {
    const double value = mfu(c.inputs);
    ADD_FAILURE() << fmt::format("case {}: MFU {} accepted; expected InfeasibleError", c.id, value);
  } catch (const InfeasibleError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("peak"), std::string::npos) << what;
    EXPECT_NE(what.find(fmt::format("{:.3f}", c.expected)), std::string::npos) << what;
  }
}

class Case : public testing::TestWithParam<WorkbookCase> {};

TEST_P(Case, Check) {
  const WorkbookCase& c = GetParam();
  ASSERT_TRUE(c.load_error.empty()) << kCasesFile << ": " << c.load_error;
  const auto it = quantities().find(c.quantity);
  ASSERT_NE(it, quantities().end())
      << fmt::format("case {}: quantity \"{}\" has no implementation", c.id, c.quantity);
  if (c.quantity == "mfu_6N" && c.expected > 1.0) {
    expect_infeasible_mfu(it->second, c);
    return;
  }
  expect_close(it->second(c.inputs), c);
}

std::string case_name(const testing::TestParamInfo<WorkbookCase>& info) {
  std::string name = "case_" + info.param.id;
  for (char& ch : name) {
    if (!std::isalnum(static_cast<unsigned char>(ch))) {
      ch = '_';
    }
  }
  return name;
}

INSTANTIATE_TEST_SUITE_P(Workbook, Case, testing::ValuesIn(all_cases()), case_name);

TEST(Workbook, HasEveryCase) { EXPECT_EQ(all_cases().size(), kExpectedCases); }

}  // namespace
}  // namespace meshsim
