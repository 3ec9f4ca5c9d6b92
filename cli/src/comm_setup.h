// Wiring of the cluster and its communication model for a run (the composition root's job).
#pragma once

#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "meshsim/collectives/comm_model.h"
#include "meshsim/collectives/schedule.h"
#include "meshsim/topology/cluster.h"
#include "meshsim/workloads/step.h"
#include "scenario.h"

namespace meshsim::cli {

struct CommOptions {
  std::string backend = "analytical";  // analytical | simgrid
  std::string algorithm = "auto";
  std::string protocol = "auto";       // auto | ll | ll128 | simple
  std::string nccl = "2.30";           // the NCCL release whose tuner decides
};

// The network backend named by --backend; InputError("--backend") otherwise.
collectives::NetworkBackend parse_backend_flag(const std::string& name);

// The algorithm named by --algo; InputError("--algo") for an unknown name.
collectives::Algorithm parse_algo_flag(const std::string& name);

// --algo, --proto and --nccl as the collective planner's options; InputError naming the flag.
collectives::CollectiveOptions collective_options(const std::string& algorithm,
                                                  const std::string& protocol,
                                                  const std::string& nccl);

// A collective model's complaint about one of its options, at the flag that set it.
InputError locate(const collectives::CommError& e);

// The scenario's cluster: preset or file, resized by --nodes (GPU) or --shape (TPU).
topology::ClusterSpec load_cluster_for(const Scenario& s);

// The scenario as echoed in reports and trace metadata.
nlohmann::json scenario_json(const Scenario& s, const topology::ClusterSpec& cluster);

// Owns the communication model of a run: ranks placed on devices in order; the images of the
// plan's simulated groups and ranks (representative mode) declared so that they load the links.
class CommSetup {
 public:
  CommSetup(const topology::ClusterSpec& cluster, const workloads::StepPlan& plan,
            const CommOptions& options);
  ~CommSetup();
  collectives::NetworkCommModel& model();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace meshsim::cli
