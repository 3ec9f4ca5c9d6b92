#include "plan_command.h"

#include <fmt/format.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <set>
#include <thread>

#include "meshsim/sim/error.h"
#include "meshsim/sim/unit_parse.h"
#include "meshsim/studies/plan_search.h"
#include "meshsim/studies/plan_table.h"
#include "plan_goodput.h"
#include "progress.h"
#include "report.h"
#include "scenario_flags.h"

namespace meshsim::cli {

using scenario::ScenarioField;
using workloads::PlanField;

CLI::App* add_plan_command(CLI::App& app, PlanArgs& a) {
  CLI::App* c = app.add_subcommand(
      "plan", "Search every valid parallel plan of a model on a cluster; rank the best");
  c->add_option("--model", a.model, "Model preset or file (default: llama3-70b)");
  c->add_option("--cluster", a.cluster, "Cluster preset or file (default: dgx-h100, 256 nodes)");
  c->add_option("--nodes", a.nodes, "Resize a GPU cluster to this many nodes")
      ->check(positive_number());
  c->add_option("--gpus", a.gpus,
                "Resize a GPU cluster to this many devices: whole nodes, or part of one node")
      ->check(positive_number());
  c->add_option("--shape", a.shape, "Resize a TPU slice to this torus, e.g. 8x16x16");
  c->add_option("--slices", a.slices, "TPU: this many identical slices joined by DCN")
      ->check(positive_number());
  c->add_option("--hardware-catalogue", a.hardware_catalogue, "Chip catalogue JSON");
  c->add_option("--seq", a.seq, "Sequence length (default 8192)")->check(positive_number());
  c->add_option("--gbs", a.gbs, "Global batch in sequences (default 512)")
      ->check(positive_number());
  c->add_option("--tokens-per-step", a.tokens_per_step,
                "Or the global batch in tokens (e.g. 4M); a multiple of --seq");
  c->add_option("--dtype", a.dtype, "Training precision: bf16, fp16, fp8, fp32, tf32");
  c->add_option("--stack", a.stack,
                "Software stack whose plans are searched (as meshsim run's --stack; custom: "
                "Megatron's kernels without its capability checks); default: the chip's")
      ->check(CLI::IsMember(enum_spellings<workloads::Stack>()));
  c->add_option("--attention", a.attention,
                "Attention kernel (as meshsim run's --attention); default: the stack's")
      ->check(CLI::IsMember(enum_spellings<workloads::AttentionKernel>()));
  add_fabric_options(c, a.fabric, [&a](CLI::Option* o, topology::FabricField f) {
    a.fabric_options.emplace_back(o, f);
  });
  c->add_option("--tp", a.tp, "Hold TP at this degree")->check(positive_number());
  c->add_option("--cp", a.cp, "Hold CP at this degree")->check(positive_number());
  c->add_option("--pp", a.pp, "Hold PP at this degree")->check(positive_number());
  c->add_option("--vpp", a.vpp, "Hold the virtual stages at this count")->check(positive_number());
  c->add_option("--dp", a.dp, "Hold DP at this degree")->check(positive_number());
  c->add_option("--ep", a.ep, "Hold EP at this degree")->check(positive_number());
  c->add_option("--mbs", a.mbs, "Hold the microbatch at this size")->check(positive_number());
  c->add_option("--zero", a.zero, "Hold the ZeRO stage (0-3)")->check(CLI::Range(0, 3));
  c->add_option("--fsdp", a.fsdp,
                "Hold the HSDP shard group at this many DP ranks (ZeRO 1-3 only; 0: ZeRO over "
                "all of DP, no HSDP)")
      ->check(CLI::NonNegativeNumber);
  c->add_option("--dcn-dp", a.dcn_dp,
                "MaxText dcn_data_parallelism: this many replicas (across slices), ZeRO/FSDP "
                "over dp / this inside each")
      ->check(positive_number());
  c->add_option("--offload-layers", a.offload_layers,
                "Hold activation offloading at this many layers per model chunk (Megatron-Core's "
                "cpu_offloading_num_layers; recompute none; chips with a host link)")
      ->check(positive_number());
  c->add_option(
       "--recompute", a.recompute,
       "Hold recompute: none, selective, full, dots, qkv_out_proj, qkv_proj (as meshsim run's "
       "--recompute)")
      ->check(CLI::IsMember(enum_spellings<workloads::Recompute>()));
  c->add_option("--schedule", a.schedule, "Hold the schedule: gpipe, 1f1b, interleaved, zb, zbv")
      ->check(CLI::IsMember(enum_spellings<workloads::PipelineSchedule>()));
  c->add_option("--overlap-tp", a.overlap_tp, "Hold TP overlap: on or off")
      ->check(CLI::IsMember({"on", "off"}));
  c->add_option("--fp8-param-gather", a.fp8_param_gather,
                "Hold FP8 parameter gathers: on or off (searched where the plan can take them: "
                "fp8 training with ZeRO 1-3 on Megatron-Core)")
      ->check(CLI::IsMember({"on", "off"}));
  c->add_option("--top", a.top, "How many plans to rank (default 20)")
      ->check(CLI::Range(int64_t{1}, studies::kMaxTop));
  c->add_option("--objective", a.objective, "Rank by time, cost or mfu")
      ->check(CLI::IsMember(enum_choices<studies::Objective>()));
  c->add_option("--max-tp", a.max_tp, "Largest TP (default: the scale-up domain)")
      ->check(positive_number());
  c->add_option("--min-headroom", a.min_headroom,
                "Memory to leave free, e.g. 5% or 0.05 (default 5%: the CUDA context, NCCL "
                "buffers and allocator fragmentation meshsim does not model; 0 turns it off)");
  c->add_option("--max-simulations", a.max_simulations,
                "Stop after this many simulations (default: 4 x --top, and earlier once no plan "
                "left is estimated to enter; the output says whether the ranking is proven)")
      ->check(CLI::Range(int64_t{1}, studies::kMaxSimulations));
  add_bool_flag(c, "--exact", a.exact,
              "Simulate until the lower bound proves the ranking: no unsimulated plan can enter "
              "the top (may take many simulations)");
  c->add_option("--jobs", a.jobs, "Simulations at once (default: the machine's cores)")
      ->check(CLI::Range(int64_t{1}, studies::kMaxJobs));
  c->add_option("--csv", a.csv_path, "Write the ranked plans as CSV to FILE");
  c->add_option("--json", a.json_path, "Write the search and the ranked plans as JSON to FILE");
  add_budget_options(c, a.budget);
  c->add_option("--rank-by", a.rank_by,
                "time (the search's objective) or goodput: the top plans re-ranked by expected "
                "days to train under failures and checkpoints (needs --tokens)")
      ->check(CLI::IsMember({"time", "goodput"}));
  add_checkpoint_options(c, a.goodput);
  add_bool_flag(c, "--no-mpi", a.no_mpi, "Run in one process even under mpirun");
  return c;
}

namespace {

double parse_headroom(const std::string& text) {
  if (text.empty()) {
    return studies::kDefaultHeadroom;
  }
  std::string t = text;
  double scale = 1.0;
  if (!t.empty() && t.back() == '%') {
    t.pop_back();
    scale = 0.01;
  }
  if (const std::optional<double> v = parse_number(t); v && *v * scale >= 0.0 && *v * scale < 1.0) {
    return *v * scale;
  }
  throw InputError("--min-headroom", "",
                   fmt::format("\"{}\": expected a fraction of memory in [0, 1) such as 0.05 or "
                               "5%",
                               text));
}

// The problem: the default scenario's, with the model, cluster, size, sequence, batch and
// precision the flags give.
scenario::Scenario base_scenario(const PlanArgs& a) {
  scenario::Scenario s = scenario::default_scenario();
  const auto set = [&](ScenarioField f) { s.origins.set(f, Origin::flag(flag_of(f))); };
  if (!a.model.empty()) {
    s.model = a.model;
    set(ScenarioField::kModel);
  }
  if (!a.cluster.empty()) {
    s.cluster = a.cluster;
    s.nodes.reset();  // the preset at its own size unless resized
    set(ScenarioField::kCluster);
  }
  if (!a.hardware_catalogue.empty()) {
    s.hardware_catalogue = a.hardware_catalogue;
    set(ScenarioField::kHardwareCatalogue);
  }
  if (!a.shape.empty()) {
    s.shape = a.shape;
    s.nodes.reset();
    set(ScenarioField::kShape);
  }
  if (a.slices > 0) {
    s.slices = a.slices;
    set(ScenarioField::kSlices);
  }
  if (a.nodes > 0 && a.gpus > 0) {
    throw InputError("--gpus", "", "give --nodes or --gpus, not both");
  }
  if (a.nodes > 0) {
    s.nodes = a.nodes;
    set(ScenarioField::kNodes);
  }
  if (a.gpus > 0) {
    resize_to_devices(s, a.gpus);
  }
  // The fabric knobs given.
  using topology::FabricField;
  std::set<FabricField> given;
  for (const auto& [option, f] : a.fabric_options) {
    if (option->count() > 0) {
      given.insert(f);
      s.fabric.origins.set(f, Origin::flag(flag_of(f)));
    }
  }
  const auto knob = [&](FabricField f, auto member) {
    if (given.count(f) > 0) {
      s.fabric.*member = a.fabric.*member;
    }
  };
  knob(FabricField::kOversubscription, &scenario::FabricKnobs::oversubscription);
  knob(FabricField::kTiers, &scenario::FabricKnobs::tiers);
  knob(FabricField::kRailOptimized, &scenario::FabricKnobs::rail_optimized);
  knob(FabricField::kNicsPerDevice, &scenario::FabricKnobs::nics_per_device);
  knob(FabricField::kNicBandwidth, &scenario::FabricKnobs::nic_bandwidth);
  knob(FabricField::kSharp, &scenario::FabricKnobs::sharp);
  workloads::ParallelPlan& p = s.plan;
  if (!a.stack.empty()) {
    p.stack = *parse_enum<workloads::Stack>(a.stack);
    p.origins.set(PlanField::kStack, Origin::flag("--stack"));
  }
  if (!a.attention.empty()) {
    p.attention = *parse_enum<workloads::AttentionKernel>(a.attention);
    p.origins.set(PlanField::kAttention, Origin::flag("--attention"));
  }
  if (a.seq > 0) {
    p.seq = a.seq;
    p.origins.set(PlanField::kSeq, Origin::flag("--seq"));
  }
  if (!a.tokens_per_step.empty()) {
    const std::optional<double> t = studies::parse_token_count(a.tokens_per_step);
    const auto tokens = t ? static_cast<int64_t>(*t) : 0;
    if (a.gbs > 0 || tokens <= 0 || tokens % p.seq != 0) {
      throw InputError("--tokens-per-step", "",
                       a.gbs > 0 ? std::string("give --gbs or --tokens-per-step, not both")
                                 : fmt::format("\"{}\": expected a token count that is a "
                                               "multiple of the sequence length {}",
                                               a.tokens_per_step, p.seq));
    }
    p.gbs = tokens / p.seq;
    p.origins.set(PlanField::kGbs, Origin::flag("--tokens-per-step"));
  } else if (a.gbs > 0) {
    p.gbs = a.gbs;
    p.origins.set(PlanField::kGbs, Origin::flag("--gbs"));
  }
  if (!a.dtype.empty()) {
    const std::optional<Dtype> d = parse_enum<Dtype>(a.dtype);
    if (!d) {
      throw InputError("--dtype", "",
                       fmt::format("\"{}\" is not one of {}", a.dtype, describe_choices<Dtype>()));
    }
    p.set_training_dtype(*d);
    p.origins.set(PlanField::kDtype, Origin::flag("--dtype"));
  }
  return s;
}

studies::SearchOptions search_options(const PlanArgs& a) {
  studies::SearchOptions o;
  o.top = a.top;
  o.objective = *parse_enum<studies::Objective>(a.objective);
  o.max_tp = a.max_tp;
  o.min_headroom = parse_headroom(a.min_headroom);
  o.max_simulations =
      a.exact ? 0
              : (a.max_simulations > 0 ? a.max_simulations
                                       : studies::kDefaultSimulationsPerTop * a.top);
  o.jobs = a.jobs > 0 ? static_cast<int>(a.jobs)
                      : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  studies::Fixed& f = o.fixed;
  const auto degree = [](int64_t v) { return v > 0 ? std::optional<int64_t>(v) : std::nullopt; };
  f.tp = degree(a.tp);
  f.cp = degree(a.cp);
  f.pp = degree(a.pp);
  f.vpp = degree(a.vpp);
  f.dp = degree(a.dp);
  f.ep = degree(a.ep);
  f.mbs = degree(a.mbs);
  f.dcn_dp = degree(a.dcn_dp);
  f.offload_layers = degree(a.offload_layers);
  if (a.fsdp >= 0) {
    if (f.dcn_dp) {
      throw InputError("--dcn-dp", "",
                       "give --fsdp or --dcn-dp, not both (--dcn-dp K makes the shard group "
                       "dp / K of each plan)");
    }
    f.fsdp = a.fsdp;
  }
  if (a.zero >= 0) {
    f.zero = static_cast<workloads::ZeroStage>(a.zero);
  }
  if (!a.recompute.empty()) {
    f.recompute = parse_enum<workloads::Recompute>(a.recompute);
  }
  if (!a.schedule.empty()) {
    f.schedule = parse_enum<workloads::PipelineSchedule>(a.schedule);
  }
  if (!a.overlap_tp.empty()) {
    f.overlap_tp = a.overlap_tp == "on";
  }
  if (!a.fp8_param_gather.empty()) {
    f.fp8_param_gather = a.fp8_param_gather == "on";
  }
  return o;
}

// 1st, 2nd, 3rd, 4th, 11th, 12th, 13th, 21st, ...
std::string ordinal(int64_t n) {
  const int64_t tens = n % 100;
  const char* suffix = "th";
  if (tens < 11 || tens > 13) {
    suffix = n % 10 == 1 ? "st" : n % 10 == 2 ? "nd" : n % 10 == 3 ? "rd" : "th";
  }
  return fmt::format("{}{}", n, suffix);
}

std::string invalid_text(const std::map<std::string, int64_t>& invalid) {
  int64_t total = 0;
  std::string by;
  for (const auto& [field, n] : invalid) {
    total += n;
    by += fmt::format("{}{} {}", by.empty() ? "" : ", ", field, n);
  }
  return total == 0 ? "0 invalid" : fmt::format("{} invalid ({})", total, by);
}

void print_counts(const studies::SearchResult& r, const studies::SearchOptions& o,
                  std::ostream& out) {
  int64_t refused = 0;
  for (const auto& [what, n] : r.refused) {
    refused += n;
  }
  out << fmt::format("  searched    {} plans: {} the stack does not run, {}, {} over memory, {} "
                     "within the {:.0f} % headroom, {} pruned by the lower bound, {} simulated "
                     "({} out of memory, {} within the headroom)\n",
                     r.considered, refused, invalid_text(r.invalid), r.pruned_memory,
                     r.pruned_headroom, 100.0 * o.min_headroom, r.pruned_bound, r.simulated,
                     r.simulated_oom, r.simulated_headroom);
  if (r.exact) {
    out << fmt::format("  ranking     proven: every plan not simulated has a lower bound above "
                       "the {} best\n",
                       ordinal(o.top));
  } else {
    out << fmt::format("  ranking     not proven: {} plans whose lower bound is below the {} "
                       "best were not simulated ({}; --exact simulates them)\n",
                       r.not_simulated, ordinal(o.top),
                       r.capped ? fmt::format("the cap of {} simulations was reached",
                                              o.max_simulations)
                                : std::string("none was estimated to enter the ranking"));
  }
}

std::string ms(const scenario::StepReport& r, std::string_view kind) {
  for (const auto& [k, d] : r.exposed_by_kind) {
    if (k == kind) {
      return fmt::format("{:.0f}", d.milliseconds());
    }
  }
  return "0";
}

void print_table(const std::vector<studies::PlanRow>& rows, std::ostream& out) {
  // The plan column as wide as its longest plan (46 at least), so every row stays aligned.
  size_t width = 46;
  for (const studies::PlanRow& row : rows) {
    width = std::max(width, studies::short_plan(row.plan).size());
  }
  out << fmt::format("\n  {:>4}  {:<{}} {:>9} {:>10} {:>6} {:>10} {:>8}  {:<22} {:>6}\n", "rank",
                     "plan", width, "step", "tokens/s", "MFU", "peak mem", "headroom",
                     "exposed ms tp/cp/dp/pp/ep", "bubble");
  for (size_t i = 0; i < rows.size(); ++i) {
    const scenario::StepReport& r = rows[i].report;
    const std::string exposed = fmt::format("{}/{}/{}/{}/{}", ms(r, "tp"), ms(r, "cp"), ms(r, "dp"),
                                            ms(r, "pp"), ms(r, "ep"));
    out << fmt::format(
        "  {:>4}  {:<{}} {:>9} {:>10.0f} {:>5.1f}% {:>10} {:>7.1f}%  {:<22} "
        "{:>5.1f}%\n",
        i + 1, studies::short_plan(rows[i].plan), width, format_duration(r.step_time),
        r.tokens_per_s, 100.0 * r.mfu, format_bytes(r.peak_memory),
        100.0 * (1.0 - r.peak_memory.as_double() / r.memory_capacity.as_double()), exposed,
        100.0 * r.bubble_fraction);
  }
  out << "  (exposed communication by kind: each kind's time not hidden by compute; kinds may "
         "overlap each other, so they need not add up to the step's exposed total)\n";
}

}  // namespace

int plan_command(const PlanArgs& a, std::ostream& out) {
  check_budget(a.budget);
  if (a.rank_by == "goodput") {
    goodput_tokens(a.budget);  // before the search: it cannot rank without them
  }
  const scenario::Scenario base = base_scenario(a);
  studies::SearchOptions o = search_options(a);
  if (o.objective == studies::Objective::kCost) {
    // The price the cost objective ranks by: --usd-per-device-hour, else the price table's.
    const topology::ClusterSpec cluster =
        located(base, [&] { return scenario::load_cluster(base); });
    const studies::PriceTable table = price_table(a.budget);
    const studies::DevicePrice listed = table.device(cluster.chip.name);
    std::optional<double> price = listed.usd_per_device_hour;
    if (a.budget.usd_per_device_hour > 0) {
      price = a.budget.usd_per_device_hour;
    }
    if (!price) {
      throw InputError("--objective", "",
                       fmt::format("cost: the price table ({}) has no price per device-hour of "
                                   "{} ({}); give --usd-per-device-hour or --price-table",
                                   table.source, cluster.chip.name,
                                   listed.price_source.empty() ? "it does not list the chip"
                                                               : listed.price_source));
    }
    o.usd_per_device_hour = price;
  }
  // Under mpirun every process follows the same search, sharing its simulations; rank 0 reports.
  const std::unique_ptr<studies::Distributor> dist =
      a.no_mpi ? studies::make_single_process() : studies::make_distributor();
  o.distributor = dist.get();
  const bool lead = dist->rank() == 0;
  studies::SearchResult r;
  {
    Progress progress("plan search", lead ? Progress::mode_here(true) : Progress::Mode::kOff);
    r = located(base, [&] {
      return studies::search_plans(base, o, [&](std::string_view phase, int64_t done,
                                                int64_t total) {
        progress.update(phase, done, total);
      });
    });
  }
  if (!lead) {
    return r.top.empty() ? 3 : 0;
  }
  std::vector<studies::PlanRow> rows;
  for (const studies::RankedPlan& p : r.top) {
    rows.push_back({p.plan, p.report, p.lower_bound, time_to_train(a.budget, p.report)});
  }
  const std::vector<studies::PlanGoodput> goodput =
      a.rank_by == "goodput" ? rank_by_goodput(base, a.goodput, a.budget, rows)
                             : std::vector<studies::PlanGoodput>{};
  out << "meshsim: plan search\n";
  if (!rows.empty()) {
    const scenario::StepReport& best = rows.front().report;
    out << fmt::format("  model       {}\n  cluster     {}\n", best.model_description,
                       best.cluster_description);
  }
  out << fmt::format("  problem     sequence {}, global batch {} sequences ({} tokens per step), "
                     "{}; objective {}\n",
                     base.plan.seq, base.plan.gbs, base.plan.seq * base.plan.gbs,
                     to_string(base.plan.matmul_dtype),
                     a.rank_by == "goodput"
                         ? fmt::format("{}, re-ranked by goodput", to_string(o.objective))
                         : std::string(to_string(o.objective)));
  if (dist->size() > 1) {
    out << fmt::format("  run on      {}\n", dist->describe());
  }
  print_counts(r, o, out);
  if (rows.empty()) {
    out << "\n  " << studies::no_plan_reason(r) << "\n";
  } else {
    print_table(rows, out);
    if (!goodput.empty()) {
      print_goodput_table(rows, goodput, out);
    }
    if (rows.front().time_to_train) {
      out << fmt::format("\n  the best plan, {}:\n", studies::short_plan(rows.front().plan));
      print_time_to_train(*rows.front().time_to_train, out);
    }
  }
  if (!a.csv_path.empty()) {
    OutputFile f(a.csv_path, "--csv");
    studies::write_rows_csv(rows, f.stream());
    f.commit();
  }
  if (!a.json_path.empty()) {
    nlohmann::json j = {{"search", studies::search_counts_json(r)},
                        {"plans", nlohmann::json::array()}};
    for (size_t i = 0; i < rows.size(); ++i) {
      j["plans"].push_back(row_json(rows[i]));
      if (!goodput.empty()) {
        j["plans"].back()["goodput"] = goodput_json(goodput[i]);
      }
    }
    write_json_file(a.json_path, j, "--json");
  }
  return rows.empty() ? 3 : 0;
}

}  // namespace meshsim::cli
