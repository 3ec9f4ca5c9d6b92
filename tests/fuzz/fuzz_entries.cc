#include "fuzz_entries.h"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <stdexcept>

#include "meshsim/collectives/comm_model.h"
#include "meshsim/scenario/located.h"
#include "meshsim/scenario/scenario.h"
#include "meshsim/sim/error.h"
#include "meshsim/sim/json_input.h"
#include "meshsim/studies/chakra_run.h"
#include "meshsim/studies/failures.h"
#include "meshsim/studies/goodput.h"
#include "meshsim/studies/sweep.h"
#include "meshsim/topology/cluster.h"
#include "meshsim/topology/compute_model.h"
#include "meshsim/topology/network.h"
#include "meshsim/traces/chakra.h"
#include "meshsim/traces/import.h"
#include "meshsim/traces/kineto.h"
#include "meshsim/traces/nccl_tests.h"
#include "meshsim/traces/rank_steps.h"
#include "meshsim/validation/collective_fit.h"
#include "meshsim/validation/manifest.h"
#include "meshsim/validation/profile.h"
#include "meshsim/validation/published.h"
#include "meshsim/validation/trace_replay.h"
#include "meshsim/workloads/accounting.h"
#include "meshsim/workloads/parallel.h"

namespace meshsim::fuzz {
namespace {

namespace fs = std::filesystem;

constexpr const char* kSource = "fuzz-input.json";

// Limits small enough for a fuzzer's memory budget (libFuzzer's -rss_limit_mb); the defaults are
// exercised by tools/hostile_inputs.py on the real binary.
constexpr JsonLimits kJsonLimits{.max_bytes = int64_t{4} << 20, .max_depth = 128};
constexpr traces::ImportLimits kTraceLimits{
    .max_file_bytes = int64_t{4} << 20, .max_text_bytes = int64_t{16} << 20, .max_depth = 128};
// Networks are built (and traced) only for clusters this small, and collectives timed on them
// only for the smaller ones, to keep each run short.
constexpr int64_t kMaxNetworkDevices = 512;
constexpr int64_t kMaxCollectiveDevices = 64;

void remove_scratch_dir();

// A scratch directory of this process, for the loaders that read a path; removed at exit (the
// handler is registered after the path is made, so it runs before the path is destroyed).
const fs::path& scratch_dir() {
  static const fs::path dir = [] {
    fs::path d = fs::temp_directory_path() / ("meshsim-fuzz-" + std::to_string(getpid()));
    fs::create_directories(d);
    return d;
  }();
  static const int registered = std::atexit(remove_scratch_dir);
  (void)registered;
  return dir;
}

void remove_scratch_dir() {
  std::error_code ec;
  fs::remove_all(scratch_dir(), ec);
}

fs::path write_scratch(const std::string& name, std::string_view data) {
  const fs::path p = scratch_dir() / name;
  std::ofstream(p, std::ios::binary | std::ios::trunc)
      .write(data.data(), static_cast<std::streamsize>(data.size()));
  return p;
}

nlohmann::json parse(std::string_view data) {
  if (static_cast<int64_t>(data.size()) > kJsonLimits.max_bytes) {
    throw InputError(kSource, "", "larger than the fuzzing limit");
  }
  return parse_json(data, kSource, kJsonLimits.max_depth);
}

void exercise_chip(const topology::Chip& chip) {
  const topology::RooflineComputeModel model(chip);
  ComputeWork gemm;
  gemm.op_class = OpClass::kMatmul;
  gemm.flops = Flops::of(2.0 * 4096 * 4096 * 4096);
  gemm.bytes = Bytes::of(3 * 4096 * 4096 * 2);
  gemm.shape = MatmulShape{4096, 4096, 4096, 8};
  (void)model.kernel_time(gemm).total();
  ComputeWork copy;
  copy.op_class = OpClass::kCopy;
  copy.bytes = Bytes::of(int64_t{1} << 30);
  (void)model.kernel_time(copy).total();
}

void run_model(std::string_view data) {
  using namespace workloads;
  const ModelConfig m = parse_model(parse(data), kSource);
  const ParameterCounts p = count_parameters(m);
  (void)p.total();
  (void)p.active_per_token();
  (void)p.attention();
  (void)p.mlp();
  (void)p.experts();
  (void)p.norms();
  const int64_t seq = std::min<int64_t>(4096, m.max_position_embeddings);
  (void)training_flops_per_token(m, seq);
  (void)kv_cache_bytes(m, seq, 1, 2);
  ParallelPlan one_device;  // what `meshsim calc` accounts: bf16, flash attention, one device
  one_device.seq = seq;
  one_device.mbs = 1;
  one_device.gbs = 1;
  (void)training_memory(m, one_device, 0, 1).total();
}

// What `meshsim collective` does with a cluster: NCCL's tuner picks an algorithm and protocol
// from the cluster's figures (its "collectives" section too), and the fluid network runs it.
void exercise_collectives(const topology::Network& net, int64_t devices) {
  const collectives::CollectivePlanner planner(net);
  const auto network = collectives::make_network(collectives::NetworkBackend::kAnalytical, planner);
  std::vector<std::vector<DeviceId>> all(1);
  for (int64_t d = 0; d < devices; ++d) {
    all[0].emplace_back(static_cast<uint32_t>(d));
  }
  for (const CollectiveKind kind : {CollectiveKind::kAllReduce, CollectiveKind::kAllGather}) {
    for (const Bytes bytes : {Bytes::of(int64_t{1} << 20), Bytes::of(int64_t{1} << 30)}) {
      (void)collectives::run_alone(*network, planner.collective(kind, bytes, all));
    }
  }
  const std::pair<DeviceId, DeviceId> pair{all[0].front(), all[0].back()};
  (void)collectives::run_alone(*network, planner.send_recv({&pair, 1}, Bytes::of(1 << 20)));
}

void run_cluster(std::string_view data) {
  const topology::ClusterSpec spec =
      topology::parse_cluster(parse(data), kSource, topology::Catalogue::builtin());
  (void)spec.scale_up_bandwidth();
  (void)spec.inter_node_bandwidth();
  if (spec.device_count() <= kMaxNetworkDevices) {
    const topology::Network net = topology::Network::build(spec);
    if (spec.device_count() >= 2 && spec.device_count() <= kMaxCollectiveDevices) {
      exercise_collectives(net, spec.device_count());
    }
  }
}

void run_chips(std::string_view data) {
  const topology::Catalogue catalogue = topology::Catalogue::parse(parse(data), kSource);
  for (const std::string& name : catalogue.names()) {
    exercise_chip(catalogue.chip(name));
  }
}

void run_scenario(std::string_view data) {
  const fs::path path = write_scratch("scenario.json", data);
  (void)scenario::scenario_file_names_workload(path.string());
  scenario::Scenario s = scenario::load_scenario(path.string(), scenario::default_scenario());
  scenario::complete(s);
  // The cluster it names, resized and with its fabric knobs applied (no network is built: the
  // size may be up to kMaxDevices); the library's field errors located as the edge does.
  (void)scenario::located(s, [&] { return scenario::load_cluster(s); });
}

// A sweep spec (meshsim sweep): its axes checked against the scenario, the points counted and the
// first and last point's coordinates; no point is simulated.
void run_sweep_spec(std::string_view data) {
  const fs::path path = write_scratch("sweep.json", data);
  const studies::SweepSpec spec = studies::load_sweep_spec(path.string());
  const int64_t n = spec.points();
  (void)spec.coordinates(0);
  (void)spec.coordinates(n - 1);
}

// A failure table (meshsim goodput --failure-table): its rates for a 16,384-GPU cluster (Llama
// 3's), the closed forms and a four-run Monte Carlo of 54 days of work.
void run_failure_table(std::string_view data) {
  const studies::FailureTable table = studies::FailureTable::parse(parse(data), kSource);
  studies::GoodputModel m;
  m.work_s = 54 * 86400.0;
  m.costs.write = Seconds(600);
  m.costs.blocking = Seconds(600);
  m.costs.load = Seconds(600);
  m.costs.restart = Seconds(1200);
  m.categories = table.categories;
  m.rates = studies::failure_rates(table, studies::ComponentCounts{16384, 2048, 600});
  try {
    (void)studies::young_interval_s(600, m.rates.mtbf_s());
    const double interval = studies::optimal_interval_s(m);
    (void)studies::expected_goodput(m, interval);
    (void)studies::to_json(studies::monte_carlo(m, interval, 4, 1), m);
  } catch (const studies::GoodputError& e) {
    throw InputError(kSource, "", e.what());  // meshsim goodput locates it at a flag
  }
}

void run_manifest(std::string_view data) {
  write_scratch("trace.json.gz", "");  // the file a manifest's trace.path may name
  const fs::path path = write_scratch("manifest.json", data);
  const validation::Manifest m = validation::load_manifest(path.string());
  // Within the fuzzing budget (10 s, 2 GiB): the committed manifests' steps are one microbatch of
  // at most 12 layers; meshsim's own limits (2^20 microbatch-layer pairs, 2^24 ops) allow programs
  // of gigabytes, which a fuzz input is not given.
  if (m.global_batch / std::max<int64_t>(m.micro_batch, 1) >
      4096 / std::max<int64_t>(m.model.num_layers, 1)) {
    return;
  }
  (void)validation::step_kernels(m);
}

void run_profile(std::string_view data) {
  const validation::Profile p = validation::profile_from(parse(data), kSource);
  exercise_chip(p.chip);
  (void)validation::profile_document(p, p.chip.efficiency, "fuzz");
}

void run_trace(std::string_view data) {
  const traces::MeasuredTrace t = traces::import_trace_bytes(data, kSource, kTraceLimits);
  for (const traces::MeasuredStep& step : t.steps) {
    (void)traces::time_by_class(step);
    (void)traces::unclassified_time(step);
    (void)traces::to_timeline(step, RankId(0));
  }
}

// One rank of a multi-GPU profiler trace (meshsim validate TRACE...): streamed, cut into steps,
// each step measured and replayed on an H100 with collectives that take a fixed time.
void run_kineto_trace(std::string_view data) {
  traces::KinetoLimits limits;
  limits.max_kept_events = int64_t{1} << 16;
  const traces::RankTrace t = traces::read_kineto_bytes(data, kSource, limits);
  const traces::RankSteps steps = traces::find_steps(t);
  (void)traces::host_dispatch(t, steps);
  static const topology::Chip chip = topology::Catalogue::builtin().chip("h100-sxm");
  const validation::RankIdentity id = validation::rank_identity(t, 0, 1);
  for (const traces::RankStep& step : steps.steps) {
    IsolatedCommModel comm(
        [](CollectiveKind, Bytes, std::span<const RankId>) { return Microseconds(10); },
        [](RankId, RankId, Bytes) { return Microseconds(10); });
    const validation::Replay r = validation::replay_step(t, step, id.rank, id.world, chip, comm);
    (void)validation::kernel_rows(t, {&r});
  }
}

// A published-runs file (meshsim validate-published): every run mapped to a scenario with the
// builtin catalogue, or refused with its reason (the first refusal is the outcome); nothing is
// simulated.
void run_published_runs(std::string_view data) {
  const fs::path path = write_scratch("runs.json", data);
  const topology::Catalogue catalogue = topology::Catalogue::builtin();
  std::string refused;
  for (const validation::PublishedRun& r : validation::load_published_runs(path.string())) {
    const validation::PublishedMapping m = validation::map_published_run(r, catalogue);
    if (const auto* no = std::get_if<validation::NotExpressible>(&m); no && refused.empty()) {
      refused = r.id + ": " + no->reason;
    }
  }
  if (!refused.empty()) {
    throw InputError(kSource, "", refused);
  }
}

// A facts file (validation/published/run_facts.json's format): parsed, then a few runs of every
// kind of record the rules read (a GPT on A100s, a Llama on H100s, an MPT, a MaxText slice, an MoE)
// mapped with it; a refusal is a run's outcome, anything else escaping is a bug.
void run_published_facts(std::string_view data) {
  const validation::PublishedFacts facts = validation::PublishedFacts::parse(data, kSource);
  const topology::Catalogue catalogue = topology::Catalogue::builtin();
  const auto run = [](std::string id, std::string hw, int64_t devices, std::string model,
                      std::string framework, int64_t tp, int64_t pp) {
    validation::PublishedRun r;
    r.id = std::move(id);
    r.citation = "Narayanan et al. arXiv:2104.04473; NVIDIA/dgxc-benchmarking nemotron/README.md";
    r.hardware_key = std::move(hw);
    r.devices = devices;
    r.intra_slice = "v5p-128 = 64 chips per slice";
    r.model.name = std::move(model);
    r.model.arch_notes = "SwiGLU";
    r.model.layers = 8;
    r.model.hidden = 1024;
    r.model.heads = 8;
    r.model.ffn = 4096;
    r.model.vocab = 32000;
    r.model.seq_len = 2048;
    r.parallelism.tp = tp;
    r.parallelism.pp = pp;
    r.parallelism.notes = "sharding_strategy=FULL_SHARD VP flex";
    r.batch.sequences = 256;
    r.batch.micro_batch = 1;
    r.precision_class = "bf16";
    r.framework = std::move(framework);
    r.measured = {"tokens_per_second_per_gpu", 1000, "tokens/s/GPU"};
    return r;
  };
  std::vector<validation::PublishedRun> runs = {
      run("a", "A100-SXM4-80GB", 64, "GPT-1B", "Megatron-LM (2021)", 8, 2),
      run("b", "H100-SXM5-80GB", 16, "Llama 3 8B", "NeMo 24.07", 2, 1),
      run("c", "A100-SXM4-40GB", 8, "MPT-1b", "MosaicML Composer", 1, 1),
      run("d", "TPU-v5p", 64, "MaxText 1B", "MaxText", 4, 1),
      run("e", "GB200 (B200 GPU in GB200 NVL72)", 144, "Mixtral 8x7B", "Megatron-Bridge", 1, 1)};
  runs.back().model.moe = true;
  runs.back().model.experts = 8;
  runs.back().model.top_k = 2;
  runs.back().model.expert_ffn = 4096;
  runs.back().parallelism.ep = 8;
  for (const validation::PublishedRun& r : runs) {
    (void)validation::map_published_run(r, catalogue, facts);
  }
}

const topology::ClusterSpec& dgx_h100() {
  static const topology::ClusterSpec kCluster =
      topology::load_cluster("dgx-h100", topology::Catalogue::builtin());
  return kCluster;
}

// An nccl-tests log (meshsim calibrate-collectives), or a sweep table in meshsim's JSON form: its
// sweeps, with what a log may leave out given as the command line would, and the first points of
// each (at most 64 ranks) predicted on dgx-h100 as the fit does; the fit itself is not run (its
// hundreds of predictions per input are too slow for fuzzing).
void run_nccl_tests_log(std::string_view data) {
  std::vector<validation::CollectiveSweep> sweeps;
  try {
    if (validation::looks_like_sweep_json(data)) {
      sweeps = validation::read_sweep_file(write_scratch("sweep.json", data).string());
    } else {
      validation::SweepDefaults d;
      d.test = traces::NcclTest::kAllReduce;
      d.nccl = collectives::NcclVersion{2, 30};
      d.ranks = 8;
      d.nodes = 1;
      sweeps = validation::sweeps_from_log(traces::parse_nccl_tests_log(data, kSource), d);
    }
  } catch (const validation::SweepError& e) {
    throw InputError(kSource, "", e.what());  // calibrate-collectives locates it at a flag
  }
  for (size_t s = 0; s < std::min<size_t>(sweeps.size(), 2); ++s) {
    if (sweeps[s].ranks > kMaxCollectiveDevices) {
      continue;
    }
    for (size_t i = 0; i < std::min<size_t>(sweeps[s].points.size(), 4); ++i) {
      (void)validation::predict_collective(dgx_h100(), sweeps[s],
                                           Bytes::of(sweeps[s].points[i].bytes));
    }
  }
}

// A Chakra execution trace of one rank (meshsim run --workload): imported, written back out and
// simulated on dgx-h100, within limits small enough for fuzzing (4 MiB, 4,096 nodes).
void run_chakra_trace(std::string_view data) {
  const fs::path dir = scratch_dir() / "chakra";
  fs::remove_all(dir);
  fs::create_directories(dir);
  std::ofstream(dir / "rank.0.et", std::ios::binary)
      .write(data.data(), static_cast<std::streamsize>(data.size()));
  traces::ChakraLimits limits;
  limits.max_file_bytes = int64_t{4} << 20;
  limits.max_nodes = 4096;
  traces::ChakraWorkload w = traces::read_chakra_workload(dir.string(), limits);
  studies::export_workload(w, dgx_h100(), (scratch_dir() / "chakra-out").string());
  (void)studies::simulate_workload(std::move(w), dgx_h100(), {});
}

using Entry = std::function<void(std::string_view)>;

const std::map<std::string, Entry, std::less<>>& entries() {
  static const std::map<std::string, Entry, std::less<>> kEntries = {
      {"model", run_model},     {"hf_config", run_model},     {"cluster", run_cluster},
      {"chips", run_chips},     {"scenario", run_scenario},   {"manifest", run_manifest},
      {"profile", run_profile}, {"pytorch_trace", run_trace}, {"jax_trace", run_trace},
      {"sweep_spec", run_sweep_spec}, {"failure_table", run_failure_table},
      {"kineto_trace", run_kineto_trace},
      {"published_runs", run_published_runs}, {"published_facts", run_published_facts},
      {"nccl_tests_log", run_nccl_tests_log}, {"chakra_trace", run_chakra_trace}};
  return kEntries;
}

}  // namespace

const std::vector<std::string>& target_names() {
  static const std::vector<std::string> kNames = [] {
    std::vector<std::string> names;
    for (const auto& [name, entry] : entries()) {
      names.push_back(name);
    }
    return names;
  }();
  return kNames;
}

Outcome run_target(std::string_view target, std::string_view data) {
  const auto it = entries().find(target);
  if (it == entries().end()) {
    throw std::invalid_argument("unknown fuzz target " + std::string(target));
  }
  try {
    it->second(data);
  } catch (const InputError& e) {
    return Outcome{false, e.what()};
  } catch (const InfeasibleError& e) {
    return Outcome{false, e.what()};
  }
  return Outcome{true, ""};
}

}  // namespace meshsim::fuzz
