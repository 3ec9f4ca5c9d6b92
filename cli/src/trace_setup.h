// The trace of a run: which ranks it shows (--trace-ranks), which format (by file extension:
// .pftrace native Perfetto, .json Chrome JSON), and the link-utilisation counters: the share of
// each kind of link's capacity (NVLink, ICI, PCIe, network, DCN) that the network model actually
// assigned to the transfers in flight, the images of representative mode included, averaged over
// 500 bins of the step.
//
// Default selection (kept small, and said so in the summary): the first rank of every pipeline
// stage plus the whole TP group of rank 0. The traced ranks are simulated (see plan_step's
// also_simulate); --trace-ranks all needs every rank, so the run switches to full simulation.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "meshsim/collectives/comm_model.h"
#include "meshsim/sim/simulation.h"
#include "meshsim/topology/cluster.h"
#include "meshsim/traces/rank_selection.h"
#include "meshsim/traces/trace_writer.h"
#include "meshsim/workloads/parallel.h"
#include "output_file.h"
#include "trace_limits.h"

namespace meshsim::cli {

// The format `path` asks for (.pftrace native Perfetto, .json Chrome JSON); any other extension is
// an InputError on `flag`.
traces::TraceFormat trace_format_of(const std::string& path, const std::string& flag);

struct TraceRequest {
  std::string path;
  std::optional<std::string> ranks;  // --trace-ranks; default selection when unset
  std::vector<int64_t> also;         // added to the default selection (slow ranks)
  TraceLimit limit;
};

class TraceSetup {
 public:
  TraceSetup(const TraceRequest& request, const workloads::ParallelPlan& plan,
             const topology::ClusterSpec& cluster);
  ~TraceSetup();

  bool needs_full_simulation() const { return selection_.is_all(); }
  std::vector<int64_t> ranks_to_simulate() const { return selection_.ranks(); }
  // "3 ranks (the first rank of each pipeline stage and the TP group of rank 0; ...)"
  std::string description() const;

  // Opens the file (a temporary one beside it, see output_file.h) and subscribes a writer to `sim`,
  // and the utilisation counters to `comm` (before Simulation::run).
  void attach(Simulation& sim, collectives::NetworkCommModel& comm,
              std::vector<std::pair<std::string, std::string>> metadata);
  // Adds a utilisation counter per degraded NIC or link (what the network model assigned on its
  // links over their degraded capacity), and per failed one over the links its traffic was
  // rerouted to (Network::detour_links); after attach, before Simulation::run.
  void watch_degraded(collectives::NetworkCommModel& comm, const topology::Network& net,
                      const std::vector<topology::LinkFault>& faults);
  // Adds the link-utilisation counters (what the network model assigned, per link kind, averaged
  // over 500 bins of the step), and closes the file and renames it into place; InputError on
  // --trace naming the file when a write failed.
  void finish(SimTime end);
  uint64_t events() const;
  const std::string& path() const { return request_.path; }

 private:
  TraceRequest request_;
  traces::TraceFormat format_;
  const topology::ClusterSpec& cluster_;
  traces::RankSelection selection_;
  bool default_selection_ = false;
  std::unique_ptr<OutputFile> file_;
  std::unique_ptr<traces::TraceWriter> writer_;
  // Per link kind: the utilisation from each time on (one sample per instant).
  std::array<std::vector<std::pair<SimTime, double>>, topology::kNumLinkKinds> utilisation_;
  // Per degraded NIC or link: its counter's name and utilisation from each time on.
  std::vector<std::pair<std::string, std::vector<std::pair<SimTime, double>>>> degraded_;
};

}  // namespace meshsim::cli
