// `meshsim plan`: the best parallel plans of a model on a cluster (studies/plan_search.h), ranked,
// with --csv / --json and the time to train under a token budget.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "cli11_fwd.h"
#include "meshsim/scenario/scenario.h"
#include "budget.h"
#include "goodput_command.h"

namespace meshsim::cli {

struct PlanArgs {
  std::string model;
  std::string cluster;
  int64_t nodes = 0;
  int64_t gpus = 0;
  std::string shape;
  int64_t slices = 0;  // TPU: slices joined by DCN (0: the preset's)
  std::string hardware_catalogue;
  int64_t seq = 0;
  int64_t gbs = 0;
  std::string tokens_per_step;
  std::string dtype;
  std::string stack;      // empty: the chip's default stack
  std::string attention;  // empty: the stack's
  scenario::FabricKnobs fabric;  // the fat tree's knobs (as meshsim run's)
  // Their options, to tell which were given.
  std::vector<std::pair<CLI::Option*, topology::FabricField>> fabric_options;
  // Degrees and choices the search holds fixed (0 / empty: searched).
  int64_t tp = 0, cp = 0, pp = 0, vpp = 0, dp = 0, ep = 0, mbs = 0, zero = -1;
  int64_t fsdp = -1;  // the HSDP shard group (0: ZeRO over all of DP; -1: searched)
  int64_t dcn_dp = 0;  // replicas across slices (0: searched through fsdp)
  int64_t offload_layers = 0;  // held activation offloading (0: none)
  std::string recompute, schedule, overlap_tp, fp8_param_gather;
  int64_t top = 20;
  std::string objective = "time";
  int64_t max_tp = 0;
  std::string min_headroom;  // empty: studies::kDefaultHeadroom
  int64_t max_simulations = 0;  // 0: kDefaultSimulationsPerTop x `top`
  bool exact = false;
  bool no_mpi = false;
  int64_t jobs = 0;  // 0: the machine's cores
  std::string csv_path;
  std::string json_path;
  BudgetArgs budget;
  std::string rank_by = "time";  // or "goodput" (plan_goodput.h)
  GoodputArgs goodput;           // its checkpoint and failure flags
};

CLI::App* add_plan_command(CLI::App& app, PlanArgs& a);

// Returns the exit code: 0, or 3 when no plan fits.
int plan_command(const PlanArgs& a, std::ostream& out);

}  // namespace meshsim::cli
