// A fast lower bound on the simulated step time of a plan, for pruning the plan search.
//
// Why it is a lower bound. On every rank the compute stream runs its ops one at a time in program
// order (sim/simulation.h), each for at least the compute model's time of its kernel. So a stage's
// step is at least the sum of its compute ops' times, plus every interval in which the stream must
// wait: (a) before its first layer op, which needs the first microbatch's activation, forwarded
// through the first chunk of every earlier stage (each at least its own compute time), and (b) a
// collective sandwiched on the stream: the compute op before it (in program order) produces its
// input and the compute op after it consumes its output, so the stream idles while it runs. A
// collective of n bytes (nccl-tests' convention) over p ranks moves at least (p - 1)/p * n bytes
// into or out of every rank (an all-gather's rank receives the p - 1 shards it lacks; a
// reduce-scatter's and an all-reduce's rank sends its contribution to the p - 1 others' results,
// also through a switch that reduces; an all-to-all's rank sends the p - 1 parts that are not its
// own), and a device cannot move bytes faster than all its links together: its scale-up links
// plus its NICs. (c) Each data-parallel stream also runs its collectives one at a time, each for
// at least its time alone on the network by the communication model (contention only slows it).
// The data stream: the gradients' reduction (one collective of the stage's dense gradients; the
// buckets that split it take no less together) and ZeRO-1/2's parameter gather, or ZeRO-3's
// reduce-scatter of each layer after every microbatch; under HSDP over the shard group, each
// followed by the all-reduce of its shard across the replicas. The gather stream: ZeRO-3's gather
// of each layer before its forward and its backward for every microbatch (unpadded bytes).
// Pipeline transfers, other traffic, the optimizer and contention only add time, and are left
// out. The bound is the largest of the compute stream's and the data-parallel streams'; (d)
// likewise ring attention's sends, which run one at a time on the context-parallel send stream.
//
// How it is computed. A probe (the plan's TP, SP, CP, EP, microbatch, recompute, precision,
// kernels and TP overlap on two layers, one stage, one microbatch) is planned by workloads' own
// stage builder; its ops give one layer's forward and backward time (compute plus sandwiched TP,
// CP and EP collectives), the embedding's forward, and the head's forward and backward. The
// pipeline's passes (workloads::pipeline_order of every stage) are then scheduled with those
// times, each stage running its passes in order, a forward after the previous virtual stage's, a
// backward after the next one's, communication taking no time: the makespan bounds the step from
// below (the bubble included). Zero-bubble schedules split the backward and reorder its parts, so
// for them the backward's input-gradient pass counts as nothing and its weight pass as the whole
// backward's compute. An uneven split (or a schedule of more than 200,000 passes) uses the weaker
// max over stages of fill(s) + m * (layers(s) * (F + B) + ends), fill(s) being the first chunk's
// forward on every earlier stage. Probes are cached: plans that differ only in PP, VPP, DP, ZeRO or
// the schedule share one. tests/studies/step_bound_test.cc checks the bound against the engine on
// many plans.
#pragma once

#include <map>
#include <memory>
#include <span>
#include <vector>
#include <tuple>

#include "meshsim/collectives/comm_model.h"
#include "meshsim/sim/cost_model.h"
#include "meshsim/sim/units.h"
#include "meshsim/topology/cluster.h"
#include "meshsim/topology/compute_model.h"
#include "meshsim/workloads/model.h"
#include "meshsim/workloads/parallel.h"
#include "meshsim/workloads/partition.h"
#include "meshsim/workloads/step.h"

namespace meshsim::studies {

class StepLowerBound {
 public:
  // `comm` (optional, not owned): the communication model the data-parallel bound asks, with the
  // ranks placed on the cluster's devices in order; asked for collectives alone on the network.
  StepLowerBound(workloads::ModelConfig model, const topology::ClusterSpec& cluster,
                 collectives::NetworkCommModel* comm = nullptr);
  // Sets the communication model (not owned) before the first bound.
  void set_comm(collectives::NetworkCommModel* comm) { comm_ = comm; }
  ~StepLowerBound();

  // The bound for a plan that passed workloads::validate_plan, bound to the cluster
  // (bind_to_cluster: its stack and ranks per node, as simulate_step and enumerate_plans do).
  Duration operator()(const workloads::ParallelPlan& plan);
  // The same with the plan's stage partition (workloads::partition_stages) at hand.
  Duration operator()(const workloads::ParallelPlan& plan,
                      const std::vector<workloads::StagePartition>& parts);
  // Probes built so far (each costs one two-layer stage program), and their keys.
  size_t probes() const { return cache_.size(); }
  // tp, sp, cp, ep, mbs, recompute, TP overlap, stack, attention, matmul dtype
  using ProbeKey = std::tuple<int64_t, bool, int64_t, int64_t, int64_t, int, bool, int, int, int>;
  std::vector<ProbeKey> probe_keys() const {
    std::vector<ProbeKey> out;
    for (const auto& [k, c] : cache_) {
      out.push_back(k);
    }
    return out;
  }

  // One layer's and the ends' times from a probe.
  struct LayerCosts {
    Duration forward;
    Duration backward;
    // The same while one collective holds the device's SMs (topology's interference model).
    Duration forward_slowed;
    Duration backward_slowed;
    Duration backward_compute_only;  // without sandwiched collectives (zero-bubble schedules)
    Duration embedding_forward;
    Duration head;  // forward and backward of the final norm, LM head and loss
    Duration context_sends;  // one layer's ring-attention sends, forward and backward
  };
  // Where each op of a probe sits, and what it costs the compute stream (defined and used in
  // step_bound.cc only).
  struct ProbeOps;
  struct OpCosts;

 private:
  using Key = ProbeKey;
  const LayerCosts& costs(const workloads::ParallelPlan& plan);
  OpCosts op_costs(const workloads::StepPlan& probe, const ProbeOps& ops);
  // The least time a collective op of the probe can take (the file comment's bandwidth bound).
  Duration collective_bound(const workloads::StepPlan& probe, const Op& op);
  // The communication model's time for a collective alone on the network, memoized (plans share
  // their groups and sizes).
  Duration alone(CollectiveKind kind, Bytes bytes, std::span<const RankId> group);
  // The least time of the data-parallel stream (the file comment's (c)).
  Duration data_parallel_bound(const workloads::ParallelPlan& plan,
                               const std::vector<workloads::StagePartition>& parts);
  // By pipeline stage: the least wait before its first forward's layers (the first parameter
  // gather) and after its last pass (the last gradients' reduction and the step's end kernels);
  // by virtual stage: the transfers to the next and the previous one (the file comment's (e)).
  struct StageTerms {
    std::vector<Duration> start;
    std::vector<Duration> window;  // ZeRO-1/2: how long the step's parameter gathers hold SMs
    std::vector<Duration> tail;
    std::vector<Duration> to_next;
    std::vector<Duration> to_prev;
  };
  StageTerms stage_terms(const workloads::ParallelPlan& plan,
                         const std::vector<workloads::StagePartition>& parts);

  workloads::ModelConfig model_;
  collectives::NetworkCommModel* comm_ = nullptr;
  workloads::ModelConfig probe_model_;  // model_ with two layers
  topology::RooflineComputeModel compute_;
  int64_t domain_size_ = 1;
  BytesPerSec scale_up_bandwidth_;  // scale-up links of one device
  BytesPerSec device_bandwidth_;  // scale-up links plus NICs of one device
  std::map<Key, LayerCosts> cache_;
  // kind, bytes, group size, first rank, stride (or hash) of the group
  using AloneKey = std::tuple<int, int64_t, size_t, uint32_t, uint64_t>;
  std::map<AloneKey, Duration> alone_;
  std::map<std::tuple<uint32_t, uint32_t, int64_t>, Duration> p2p_;  // (from, to, bytes)
};

}  // namespace meshsim::studies
