// The model checker's scenario generator (model_check.h): a seed to a scenario file.
//
// The draws aim at plans the checks accept (degrees that multiply to the devices, microbatch
// counts the schedule wants, ZeRO only with data parallelism) without restating the checks: the
// plan checks themselves (scenario::load_and_check) decide, and what they refuse is counted, not
// simulated. Small on purpose, so that one seed simulates in milliseconds: 1 to 4 GPU nodes or a
// TPU slice of 4 to 16 chips (sometimes two slices), models of 2 to 27 layers.
#include <fmt/format.h>

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "meshsim/sim/rng.h"
#include "meshsim/workloads/model.h"
#include "model_check.h"

namespace meshsim::model_check {
namespace {

// Draws for one scenario.
class Draw {
 public:
  explicit Draw(uint64_t seed) : rng_(seed, "model-check") {}

  bool coin(double p) { return rng_.uniform() < p; }
  // One of `items`, with probability proportional to its weight.
  template <typename T>
  T pick(const std::vector<std::pair<T, int>>& items) {
    int total = 0;
    for (const auto& [item, weight] : items) {
      total += weight;
    }
    auto r = static_cast<int>(rng_.below(static_cast<uint64_t>(total)));
    for (const auto& [item, weight] : items) {
      if (r < weight) {
        return item;
      }
      r -= weight;
    }
    return items.back().first;
  }
  int64_t below(int64_t n) { return static_cast<int64_t>(rng_.below(static_cast<uint64_t>(n))); }

 private:
  Rng rng_;
};

std::string source_file(const std::string& relative) {
  return std::string(MESHSIM_SOURCE_DIR) + "/" + relative;
}

// Small models of every kind the planner lowers: dense Llama-style (with GQA), GPT-2 (learned
// positions, LayerNorm, tied embeddings), Gemma 3 (local and global attention, sandwich norms),
// Qwen-MoE (routed and gated shared experts) and DeepSeek-V2-Lite (MLA, a dense first layer).
std::string draw_model(Draw& d) {
  return d.pick<std::string>({
      {"llama3.2-1b", 5},
      {"gpt2-small", 2},
      {source_file("validation/models/val-tiny.json"), 2},
      {source_file("validation/models/val-10m.json"), 2},
      {source_file("tests/golden/pp2_tp2_dp2_1f1b/model.json"), 2},
      {source_file("tests/workloads/hf_configs/Gemma-3-1B-it.json"), 1},
      {source_file("tests/workloads/hf_configs/Qwen1.5-MoE-A2.7B.json"), 1},
      {source_file("tests/workloads/hf_configs/DeepSeek-V2-Lite.json"), 1},
  });
}

// The cluster and its size; returns the device count.
int64_t draw_cluster(Draw& d, nlohmann::json& j) {
  if (d.coin(0.2)) {  // a TPU slice (or two, joined by DCN)
    const auto [cluster, shape, chips] = d.pick<std::tuple<std::string, std::string, int64_t>>({
        {{"tpu-v4", "2x2x1", 4}, 1},
        {{"tpu-v4", "2x2x2", 8}, 2},
        {{"tpu-v4", "2x2x4", 16}, 1},
        {{"tpu-v5e", "2x4", 8}, 2},
        {{"tpu-v5e", "4x4", 16}, 1},
        {{"tpu-v5p", "2x2x2", 8}, 1},
    });
    j["cluster"] = cluster;
    j["shape"] = shape;
    if (chips <= 8 && d.coin(0.2)) {
      j["slices"] = 2;
      return 2 * chips;
    }
    return chips;
  }
  j["cluster"] = d.pick<std::string>({{"dgx-h100", 6}, {"dgx-a100", 3}, {"h200", 1}});
  const int64_t nodes = d.pick<int64_t>({{1, 5}, {2, 4}, {3, 1}, {4, 2}});
  j["nodes"] = nodes;
  if (nodes > 1) {  // the fabric between nodes: contention, in-network reduction, slower NICs
    if (d.coin(0.2)) {
      j["oversubscription"] = d.pick<int64_t>({{2, 1}, {4, 1}});
    }
    if (d.coin(0.1)) {
      j["sharp"] = true;
    }
    if (d.coin(0.1)) {
      j["nic_bandwidth"] = "200Gbps";
    }
    if (d.coin(0.1)) {
      j["rail_optimized"] = false;
    }
  }
  return 8 * nodes;
}

struct Degrees {
  int64_t tp = 1, cp = 1, pp = 1, dp = 1;
};

// Whether the stack's framework has context or pipeline parallelism (stack_rules.h), and runs
// CP's ring attention with its own kernels (the 2021-22 stacks' materialised scores and the FSDP
// stacks' eager kernels do not).
bool runs_cp(const std::string& stack) {
  return stack == "megatron" || stack == "custom" || stack == "fsdp-compile" || stack == "maxtext";
}
bool runs_pp(const std::string& stack) { return stack != "fsdp" && stack != "llm-foundry-2023"; }

Degrees draw_degrees(Draw& d, int64_t devices, const workloads::ModelConfig& m,
                     const std::string& stack) {
  for (int attempt = 0; attempt < 32; ++attempt) {
    Degrees g;
    g.tp = d.pick<int64_t>({{1, 3}, {2, 3}, {4, 2}, {8, 1}});
    g.cp = d.pick<int64_t>({{1, 6}, {2, runs_cp(stack) ? 2 : 0}});
    g.pp = d.pick<int64_t>({{1, 4}, {2, runs_pp(stack) ? 3 : 0}, {4, runs_pp(stack) ? 2 : 0}});
    const int64_t others = g.tp * g.cp * g.pp;
    if (devices % others == 0 && g.pp <= m.num_layers) {
      g.dp = devices / others;
      return g;
    }
  }
  return Degrees{1, 1, 1, devices};
}

// The schedules a stack's framework runs (stack_rules.h; the custom stack any), each weighted.
std::vector<std::pair<std::string, int>> schedules(const std::string& stack) {
  if (stack == "maxtext" || stack == "paxml") {
    return {{"gpipe", 1}};
  }
  if (stack == "megatron-deepspeed-2022") {
    return {{"1f1b", 1}};  // DeepSpeed's TrainSchedule
  }
  if (stack == "custom") {
    return {{"gpipe", 2}, {"1f1b", 3}, {"interleaved", 3}, {"zb", 1}, {"zbv", 1}};
  }
  return {{"1f1b", 1}, {"interleaved", 1}};
}

// `layers` split over `parts` parts of at least one layer each, at random.
std::vector<int64_t> uneven_split(Draw& d, int64_t layers, int64_t parts) {
  std::vector<int64_t> out(static_cast<size_t>(parts), 1);
  for (int64_t left = layers - parts; left > 0; --left) {
    ++out[static_cast<size_t>(d.below(parts))];
  }
  return out;
}

// Schedule, virtual stages, microbatches and an occasional uneven split (always one where the
// stages do not divide the layers).
void draw_pipeline(Draw& d, const Degrees& g, const workloads::ModelConfig& m, nlohmann::json& j) {
  const std::string stack = j["stack"];
  if (g.pp == 1) {
    j["schedule"] = stack == "custom" ? d.pick<std::string>({{"1f1b", 4}, {"zb", 1}}) : "1f1b";
  } else {
    std::string schedule = d.pick(schedules(stack));
    int64_t vpp = schedule == "zbv" ? 2 : 1;
    if (schedule == "interleaved") {
      vpp = m.num_layers % (g.pp * 4) == 0 && d.coin(0.3) ? 4 : 2;
      if (m.num_layers < g.pp * vpp) {  // fewer layers than virtual stages
        schedule = "1f1b";
        vpp = 1;
      }
    }
    j["schedule"] = schedule;
    if (vpp > 1) {
      j["vpp"] = vpp;
    }
    const int64_t parts = g.pp * vpp;
    if (m.num_layers >= parts && (m.num_layers % parts != 0 || d.coin(0.15))) {
      j["stage_layers"] = uneven_split(d, m.num_layers, parts);
    }
  }
  const int64_t mbs = d.pick<int64_t>({{1, 3}, {2, 2}});
  const int64_t microbatches = g.pp > 1 && d.coin(0.7)
                                   ? g.pp * d.pick<int64_t>({{1, 2}, {2, 2}, {3, 1}})
                                   : d.pick<int64_t>({{1, 2}, {2, 2}, {3, 1}, {4, 2}, {8, 1}});
  j["mbs"] = mbs;
  j["gbs"] = g.dp * mbs * microbatches;
}

// The ZeRO stages the stack runs with data parallelism (stack_rules.h), now and then any.
std::vector<std::pair<int64_t, int>> zero_stages(const std::string& stack, const Degrees& g) {
  const bool pipeline = g.pp > 1;
  const bool model_parallel = g.tp > 1 || g.cp > 1 || pipeline;
  std::vector<std::pair<int64_t, int>> w = {{0, 1}, {1, 1}, {2, 1}, {3, 1}};
  const auto favour = [&w](std::initializer_list<int64_t> stages) {
    for (const int64_t z : stages) {
      w[static_cast<size_t>(z)].second += 8;
    }
  };
  if (stack == "megatron" || stack == "megatron-2022") {
    pipeline ? favour({0, 1}) : favour({0, 1, 2, 3});
  } else if (stack == "megatron-2023") {
    favour({0, 1});  // its distributed optimizer only
  } else if (stack == "megatron-2021" || stack == "paxml") {
    favour({0});
  } else if (stack == "megatron-deepspeed-2022") {
    favour({0, 1});  // DeepSpeed's pipeline engine: ZeRO-1 at most (bf16 always sharded)
  } else if (stack == "maxtext") {
    favour({0, 1, 3});
  } else if (stack == "fsdp" || stack == "llm-foundry-2023" || stack == "deepspeed-zero3-2021") {
    favour({2, 3});
  } else if (stack == "fsdp-compile") {
    pipeline ? favour({1}) : (model_parallel ? favour({3}) : favour({0, 3}));
  } else {
    favour({0, 1, 2, 3});
  }
  return w;
}

void draw_memory_and_precision(Draw& d, const Degrees& g, nlohmann::json& j) {
  const std::string stack = j["stack"];
  const bool jax = stack == "maxtext" || stack == "paxml";
  if (g.dp > 1) {
    const int64_t zero = d.pick(zero_stages(stack, g));
    j["zero"] = zero;
    if (zero > 0 && g.dp >= 4 && d.coin(0.1)) {
      j["fsdp"] = g.dp / 2;  // HSDP: two replicas of the sharded state
    }
  }
  const std::string recompute =
      stack == "maxtext"
          ? d.pick<std::string>(
                {{"none", 3}, {"full", 2}, {"dots", 1}, {"qkv_out_proj", 1}, {"qkv_proj", 1}})
      : jax ? d.pick<std::string>({{"none", 3}, {"full", 2}, {"dots", 1}, {"qkv_out_proj", 1}})
            : d.pick<std::string>({{"none", 5}, {"selective", 2}, {"full", 2}});
  j["recompute"] = recompute;
  if (recompute == "full" && d.coin(0.3)) {
    j["recompute_num_layers"] = 1;
  }
  if (recompute == "none" && d.coin(0.05)) {
    j["offload_layers"] = 1;
  }
  const std::string cluster = j["cluster"];
  const bool fp8 = cluster == "dgx-h100" || cluster == "h200";  // chips with an fp8 rate
  j["dtype"] = d.pick<std::string>(
      {{"bf16", 7}, {"fp8", fp8 ? 2 : 0}, {"fp16", j.contains("shape") ? 0 : 1}, {"fp32", 1}});
  if (g.cp == 1 && !jax && d.coin(0.05)) {  // eager and naive kernels run without CP
    j["kernels"] = "eager";
  }
  if (g.cp == 1 && !jax && d.coin(0.1)) {
    j["attention"] = d.pick<std::string>({{"naive", 1}, {"flash", 2}});
  }
  if (j["dtype"] == "fp8" && d.coin(0.3)) {  // else the stack's recipe
    j["fp8_recipe"] = d.pick<std::string>({{"delayed", 1}, {"current", 1}, {"rowwise", 1}});
  }
}

// The stack: the GPU stacks, or on a TPU slice the JAX ones. Megatron's and the custom stack most
// often, as they run the most kinds of plans.
void draw_stack(Draw& d, bool gpu, nlohmann::json& j) {
  j["stack"] = gpu ? d.pick<std::string>({{"megatron", 6},
                                          {"custom", 4},
                                          {"megatron-2021", 1},
                                          {"megatron-2022", 1},
                                          {"deepspeed-zero3-2021", 1},
                                          {"megatron-deepspeed-2022", 1},
                                          {"fsdp", 1},
                                          {"llm-foundry-2023", 1},
                                          {"fsdp-compile", 1},
                                          {"paxml", 1}})
                   : d.pick<std::string>({{"maxtext", 3}, {"paxml", 1}});
}

void draw_overlap(Draw& d, const Degrees& g, bool gpu, nlohmann::json& j) {
  if (g.tp > 1) {
    const bool sp = d.coin(0.6);
    j["sp"] = sp;
    if (sp && d.coin(0.3)) {  // Megatron overlaps TP communication only with SP
      j["overlap_tp"] = true;
    }
  }
  if (d.coin(0.2)) {
    j["overlap_grad_reduce"] = false;
  }
  if (d.coin(0.2)) {
    j["overlap_param_gather"] = false;
  }
  if (g.pp > 1 && d.coin(0.15)) {
    j["overlap_p2p"] = false;
  }
  if (gpu && j["stack"] != "paxml" && d.coin(0.1)) {
    j["cuda_graphs"] = d.pick<std::string>({{"layers", 1}, {"step", 1}});
  }
  if (d.coin(0.15)) {  // against the stack's default either way
    j["grad_reduce_fp32"] = d.coin(0.5);
  }
  if (d.coin(0.1)) {
    j["cross_entropy_fusion"] = d.coin(0.5);
  }
}

void draw_experts(Draw& d, const Degrees& g, const workloads::ModelConfig& m, nlohmann::json& j) {
  std::vector<std::pair<int64_t, int>> eps;
  for (int64_t ep = 1; ep <= g.dp; ep *= 2) {
    if (g.dp % ep == 0 && m.moe->num_experts % ep == 0) {
      eps.emplace_back(ep, ep == 1 ? 1 : 3);
    }
  }
  j["ep"] = d.pick(eps);
  if (g.tp > 1 && d.coin(0.2)) {
    j["etp"] = 1;
  }
  if (d.coin(0.3)) {
    j["moe_dispatcher"] = "flex";
  }
  if (d.coin(0.3)) {  // a skewed router, sometimes dropping what passes the capacity
    j["moe_load_skew"] = 0.5;
    j["moe_seed"] = d.below(1000);
    if (d.coin(0.5)) {
      j["capacity_factor"] = 1.25;
      j["moe_drop_tokens"] = true;
    }
  }
}

// Now and then a fault: a slow rank, kernel jitter or a degraded link (each makes ranks differ,
// so the run simulates every rank).
void draw_faults(Draw& d, int64_t devices, bool gpu, nlohmann::json& j) {
  if (!d.coin(0.1)) {
    return;
  }
  nlohmann::json f = {{"seed", d.below(1000)}};
  switch (d.below(3)) {
    case 0:
      f["slow_ranks"] = {{{"rank", d.below(devices)}, {"factor", 1.3}}};
      break;
    case 1:
      f["kernel_jitter"] = 0.05;
      break;
    default:
      f["degraded_links"] = {{{"device", d.below(devices)},
                              {"link", gpu ? (devices > 8 ? "network" : "nvlink") : "ici"},
                              {"factor", 0.5}}};
      break;
  }
  j["faults"] = f;
}

}  // namespace

nlohmann::json generate_scenario(uint64_t seed) {
  Draw d(seed);
  nlohmann::json j = nlohmann::json::object();
  const std::string model = draw_model(d);
  j["model"] = model;
  const workloads::ModelConfig m = workloads::load_model(model);
  const int64_t devices = draw_cluster(d, j);
  const bool gpu = !j.contains("shape");
  draw_stack(d, gpu, j);
  if (j["stack"] == "megatron-2022" && seed % 2 == 1) {
    // Megatron-LM of 2023 shares 2022's layers; half of 2022's seeds take it, by the seed's parity
    // rather than a draw, so that every other seed's scenario stays what it was.
    j["stack"] = "megatron-2023";
  }
  const Degrees g = draw_degrees(d, devices, m, j["stack"]);
  j["tp"] = g.tp;
  j["cp"] = g.cp;
  j["pp"] = g.pp;
  j["dp"] = g.dp;
  if (j.contains("slices") && g.dp % 2 == 0 && d.coin(0.5)) {
    j["dcn_dp"] = 2;  // MaxText multi-slice: replicas across the slices, FSDP inside each
  }
  const int64_t longest = std::min<int64_t>(4096, m.max_position_embeddings);
  std::vector<std::pair<int64_t, int>> seqs;
  for (int64_t seq = 256; seq <= longest; seq *= 2) {
    seqs.emplace_back(seq, 1);
  }
  j["seq"] = seqs.empty() ? m.max_position_embeddings : d.pick(seqs);
  draw_pipeline(d, g, m, j);
  draw_memory_and_precision(d, g, j);
  draw_overlap(d, g, gpu, j);
  if (m.is_moe()) {
    draw_experts(d, g, m, j);
  }
  draw_faults(d, devices, gpu, j);
  return j;
}

scenario::Scenario to_scenario(const nlohmann::json& doc) {
  scenario::Scenario s =
      scenario::apply_scenario_json(doc, "model-check scenario", "", scenario::Scenario{});
  scenario::complete(s);
  return s;
}

nlohmann::json for_display(const nlohmann::json& doc) {
  const std::string root = std::string(MESHSIM_SOURCE_DIR) + "/";
  nlohmann::json out = doc;
  for (auto& [key, value] : out.items()) {
    if (value.is_string() && value.get<std::string>().starts_with(root)) {
      value = value.get<std::string>().substr(root.size());
    }
  }
  return out;
}

std::string run_flags(const nlohmann::json& doc) {
  std::string out = "meshsim run";
  const nlohmann::json shown = for_display(doc);  // named: items() does not extend its life
  for (const auto& [key, value] : shown.items()) {
    if (key == "faults") {
      continue;  // no one-line form: the scenario file carries them
    }
    std::string flag = "--" + key;
    std::replace(flag.begin(), flag.end(), '_', '-');
    std::string text;
    if (value.is_string()) {
      text = value.get<std::string>();
    } else if (value.is_array()) {
      for (const auto& v : value) {
        text += (text.empty() ? "" : ",") + v.dump();
      }
    } else {
      text = value.dump();
    }
    out +=
        value.is_boolean() ? fmt::format(" {}={}", flag, text) : fmt::format(" {} {}", flag, text);
  }
  if (doc.contains("faults")) {
    out += " (plus the scenario's faults block)";
  }
  return out;
}

}  // namespace meshsim::model_check
