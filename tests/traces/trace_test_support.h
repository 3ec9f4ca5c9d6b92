// A small engine run for trace tests, and helpers that write it in both formats.
//
// Four ranks on two "nodes" of two ranks. Ranks 0 and 2 run the sender program, 1 and 3 the
// receiver program:
//   stream 0 (compute): fwd qkv (matmul with a shape and labels, allocates activations),
//                       fwd mlp, bwd (frees the activations)
//   stream 1 (comm 1):  an all-reduce over all four ranks, then an all-gather over the pair
//   stream 2 (comm 2):  a send 0->1 and 2->3 (the receivers' matching recv)
// Durations are odd picosecond counts (e.g. 1'234'567 ps) so that ns flooring is exercised, and
// a long op on one stream ends after shorter ops that began later on another, so the file is
// not globally sorted by time.
#pragma once

#include <sstream>
#include <string>

#include "meshsim/sim/simulation.h"
#include "meshsim/traces/trace_writer.h"
#include "test_models.h"

namespace meshsim::traces::test {

inline Op compute(std::string name, int64_t ps, int32_t layer, int32_t microbatch) {
  Op op = testing::compute_op(std::move(name), static_cast<double>(ps));
  auto& w = std::get<ComputeWork>(op.work);
  w.bytes = Bytes::of(ps / 3);
  w.shape = MatmulShape{128, 256, 512, 1};
  op.labels.layer = layer;
  op.labels.microbatch = microbatch;
  op.labels.stage = layer / 2;
  return op;
}

inline Op collective(std::string name, CollectiveKind kind, int64_t bytes, uint16_t slot) {
  Op op = testing::collective_op(std::move(name), bytes, slot, 1);
  std::get<CollectiveWork>(op.work).kind = kind;
  return op;
}

inline Program make_program(bool sender) {
  Program p;
  p.set_initial_memory(MemoryCategory::kWeights, MiB(64));
  p.set_initial_memory(MemoryCategory::kOptimizerState, MiB(128));
  Op qkv = compute(sender ? "fwd qkv \"L0\"" : "fwd qkv L1", sender ? 1'234'567 : 2'345'671, 0, 0);
  qkv.memory.push_back(MemoryEffect{MemoryCategory::kActivations, MiB(8), false});
  const OpId a = p.add(std::move(qkv));
  const OpId b = p.add(compute("fwd mlp", 3'000'001, 1, 0));
  const OpId d = p.add(collective("grad all-reduce", CollectiveKind::kAllReduce, 500'000, 0));
  const OpId e = p.add(collective("tp all-gather", CollectiveKind::kAllGather, 300'000, 1));
  const OpId c = p.add(testing::peer_op(sender ? "send act" : "recv act", sender, 700'003, 0, 2));
  Op bwd = compute("bwd", 2'000'003, 1, 0);
  bwd.memory.push_back(MemoryEffect{MemoryCategory::kActivations, Bytes::zero() - MiB(8), true});
  const OpId f = p.add(std::move(bwd));
  p.add_dependency(a, b);
  p.add_dependency(a, d);
  p.add_dependency(d, e);
  p.add_dependency(sender ? b : a, c);
  p.add_dependency(sender ? c : b, f);
  if (!sender) {
    p.add_dependency(c, f);
  }
  return p;
}

// The four-rank run; construct in place, attach writers, then call sim.run().
struct SmallCluster {
  testing::PsSimulation sim;

  SmallCluster() {
    const auto sender = sim.add_program(make_program(true));
    const auto receiver = sim.add_program(make_program(false));
    const GroupId world = sim.add_group({RankId(0), RankId(1), RankId(2), RankId(3)});
    const GroupId left = sim.add_group({RankId(0), RankId(1)});
    const GroupId right = sim.add_group({RankId(2), RankId(3)});
    sim.add_rank(sender, {world, left}, {RankId(1)});
    sim.add_rank(receiver, {world, left}, {RankId(0)});
    sim.add_rank(sender, {world, right}, {RankId(3)});
    sim.add_rank(receiver, {world, right}, {RankId(2)});
  }
};

inline TraceOptions test_options() {
  TraceOptions o;
  o.placement = node_placement(2, 3);
  o.metadata = {{"model", "tiny \"test\" model"}, {"meshsim_version", "0.1.0"}};
  return o;
}

// Runs the small cluster with a writer of `format` and returns the file.
inline std::string write_trace(TraceFormat format, TraceOptions options = test_options()) {
  SmallCluster c;
  std::ostringstream out;
  TraceWriter writer(format, c.sim, out, std::move(options));
  c.sim.run();
  writer.add_counter_sample("nvlink utilization %", SimTime::zero(), 0.0);
  writer.add_counter_sample("nvlink utilization %", SimTime::from_ps(2'000'000), 37.5);
  writer.finish();
  return out.str();
}

}  // namespace meshsim::traces::test
