// The SimGrid backend: SimGrid's flow-level max-min model on meshsim's graph and routes, checked
// against closed forms and against the analytical backend, for determinism, and for running many
// times in one process (SimGrid's singleton engine lives in a forked child per batch).
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <stdexcept>
#include <vector>

#include "meshsim/collectives/algorithms.h"
#include "meshsim/collectives/comm_model.h"
#include "meshsim/collectives/schedule.h"
#include "meshsim/sim/error.h"
#include "meshsim/topology/chip.h"
#include "meshsim/topology/cluster.h"
#include "meshsim/topology/network.h"

// The backend's private layers, tested on their own (tests may include module internals).
#include "../../collectives/src/simgrid_fork.h"
#include "../../collectives/src/simgrid_plan.h"
#include "../../collectives/src/simgrid_run.h"

namespace meshsim::collectives {
namespace {

using topology::ClusterSpec;
using topology::Network;
using topology::VertexId;

const topology::Catalogue& catalogue() {
  static const topology::Catalogue cat = topology::Catalogue::builtin();
  return cat;
}

ClusterSpec preset(const std::string& name) { return topology::load_cluster(name, catalogue()); }

ClusterSpec dgx_h100(int64_t nodes) { return topology::resize_nodes(preset("dgx-h100"), nodes); }

VertexId gpu(const Network& net, int64_t node, int64_t local) {
  return net.device_vertex(DeviceId(static_cast<uint32_t>(node * 8 + local)));
}

Step step_of(std::vector<Flow> flows) {
  Step s;
  s.flows = std::move(flows);
  return s;
}

double relative_error(Duration got, Duration want) {
  return std::abs(got.seconds() - want.seconds()) / want.seconds();
}

Duration one_step(NetworkBackend& backend, const Step& step) {
  const std::vector<Duration> t = backend.step_times(std::span<const Step>(&step, 1));
  EXPECT_EQ(t.size(), 1u);
  return t.at(0);
}

// Every GPU (n, g) of an n-node DGX sends to GPU (n + 1, g + shift) (nodes and GPUs wrapping),
// listed rail by rail so that the flows leaving one leaf take consecutive ECMP salts and spread
// over the spines. shift 0 stays on the rail (NIC -> leaf -> NIC); any other shift crosses rails
// (NIC -> leaf -> spine -> leaf -> NIC).
Step cross_node_step(const Network& net, int64_t nodes, int64_t shift, Bytes bytes) {
  std::vector<Flow> flows;
  for (int64_t g = 0; g < 8; ++g) {
    for (int64_t n = 0; n < nodes; ++n) {
      flows.push_back(Flow{gpu(net, n, g), gpu(net, (n + 1) % nodes, (g + shift) % 8), bytes});
    }
  }
  return step_of(std::move(flows));
}

TEST(SimGridBackend, OneFlowOnOneLinkTakesLatencyPlusBytesOverBandwidth) {
  // A TPU ICI hop: one link, efficiency 1.
  const Network net = Network::build(preset("tpu-v5p"));
  const DeviceId a = net.device_at({0, 0, 0});
  const DeviceId b = net.device_at({1, 0, 0});
  const std::optional<LinkId> link = net.link_between(net.device_vertex(a), net.device_vertex(b));
  ASSERT_TRUE(link.has_value());
  const topology::Link& l = net.link(*link);
  auto backend = make_simgrid_backend(net);
  EXPECT_EQ(backend->name(), "simgrid");
  for (const Bytes bytes : {KB(1), MB(1), MB(256)}) {
    const Duration want = l.latency + bytes / l.bandwidth;
    const Duration got =
        one_step(*backend, step_of({Flow{net.device_vertex(a), net.device_vertex(b), bytes}}));
    EXPECT_LT(relative_error(got, want), 1e-3) << bytes.count() << " B: " << got.seconds();
  }
}

TEST(SimGridBackend, RingStepOnOneDgxMatchesClosedFormAndAnalytical) {
  const Network net = Network::build(dgx_h100(1));
  std::vector<Flow> flows;
  for (int64_t g = 0; g < 8; ++g) {
    flows.push_back(Flow{gpu(net, 0, g), gpu(net, 0, (g + 1) % 8), MB(64)});
  }
  const Step step = step_of(std::move(flows));
  auto simgrid = make_simgrid_backend(net);
  AnalyticalBackend analytical(net);
  const Duration sg = one_step(*simgrid, step);
  const Duration an = one_step(analytical, step);
  // device -> NVSwitch -> device: the whole NVLink bandwidth at NCCL's efficiency.
  const topology::Path path = net.route(gpu(net, 0, 0), gpu(net, 0, 1));
  const BytesPerSec bw =
      effective_bandwidth(net.link(path.front()), BandwidthEfficiency::defaults_for(net.spec()));
  EXPECT_LT(relative_error(sg, net.path_latency(path) + MB(64) / bw), 1e-3);
  EXPECT_LT(relative_error(sg, an), 0.05) << sg.seconds() << " vs " << an.seconds();
}

TEST(SimGridBackend, CrossNodeStepOnFourDgxAgreesWithAnalytical) {
  const Network net = Network::build(dgx_h100(4));
  auto simgrid = make_simgrid_backend(net);
  AnalyticalBackend analytical(net);
  for (const int64_t shift : {0, 1}) {
    const Step step = cross_node_step(net, 4, shift, MB(32));
    const Duration sg = one_step(*simgrid, step);
    const Duration an = one_step(analytical, step);
    EXPECT_LT(relative_error(sg, an), 0.05)
        << "shift " << shift << ": " << sg.seconds() << " vs " << an.seconds();
  }
}

TEST(SimGridBackend, TorusRingStepOnTpuV5pAgreesWithAnalytical) {
  const Network net = Network::build(topology::resize_torus(preset("tpu-v5p"), {4, 4, 4}));
  std::vector<Flow> flows;  // every chip to its +x neighbour (the x rings, wraparound included)
  for (int64_t z = 0; z < 4; ++z) {
    for (int64_t y = 0; y < 4; ++y) {
      for (int64_t x = 0; x < 4; ++x) {
        flows.push_back(Flow{net.device_vertex(net.device_at({x, y, z})),
                             net.device_vertex(net.device_at({(x + 1) % 4, y, z})), MB(16)});
      }
    }
  }
  const Step step = step_of(std::move(flows));
  auto simgrid = make_simgrid_backend(net);
  AnalyticalBackend analytical(net);
  const Duration sg = one_step(*simgrid, step);
  const Duration an = one_step(analytical, step);
  EXPECT_LT(relative_error(sg, an), 0.05) << sg.seconds() << " vs " << an.seconds();
}

// 8 DGX H100 nodes with leaves of 8 NIC ports, so that the leaf's uplinks decide: radix 16,
// non-blocking (8 down, 8 up) against radix 12, oversubscribed 2:1 (8 down, 4 up). (A radix-64
// leaf only runs short of uplinks once more than 32 nodes share it.)
ClusterSpec dgx_leaf_of_eight(double oversubscription, int64_t radix) {
  ClusterSpec spec = dgx_h100(1);
  spec.fat_tree->oversubscription = oversubscription;
  spec.fat_tree->switch_radix = radix;
  return topology::resize_nodes(spec, 8);
}

TEST(SimGridBackend, OversubscribedSpineHalvesCrossRailBandwidth) {
  const Network flat = Network::build(dgx_leaf_of_eight(1.0, 16));
  const Network thin = Network::build(dgx_leaf_of_eight(2.0, 12));
  const Bytes bytes = MB(64);
  // Every GPU sends to the next node on the next rail: all 64 flows cross the spine.
  const Step flat_step = cross_node_step(flat, 8, 1, bytes);
  const Step thin_step = cross_node_step(thin, 8, 1, bytes);
  auto sg_flat = make_simgrid_backend(flat);
  auto sg_thin = make_simgrid_backend(thin);
  const Duration t_flat = one_step(*sg_flat, flat_step);
  const Duration t_thin = one_step(*sg_thin, thin_step);
  const topology::Path path = thin.route(thin_step.flows[0].src, thin_step.flows[0].dst);
  const Duration latency = thin.path_latency(path);
  const double nic = thin.spec().fat_tree->nic_bandwidth.value();
  // Non-blocking: every flow at NIC speed. 2:1: half of it.
  EXPECT_LT(relative_error(t_flat, latency + bytes / BytesPerSec::of(nic)), 0.01);
  EXPECT_LT(relative_error(t_thin, latency + bytes / BytesPerSec::of(nic / 2)), 0.01);
  const double ratio = (t_thin - latency) / (t_flat - latency);
  EXPECT_NEAR(ratio, 2.0, 0.05);
  AnalyticalBackend analytical(thin);
  const Duration an = one_step(analytical, thin_step);
  EXPECT_LT(relative_error(an, t_thin), 0.10) << an.seconds() << " vs " << t_thin.seconds();
}

TEST(SimGridBackend, FlowsOfOnePairOnDifferentEcmpPathsUseDifferentSpines) {
  // Two flows from GPU (0, 0) to GPU (1, 1) take spines 0 and 1 (salts 0 and 1); three more
  // flows from rail 0 take spines 2, 3 and 0. Spine 0's uplink then carries two flows, not three
  // (as it would if both flows of the pair shared one path): every flow gets 25 GB/s.
  const Network net = Network::build(dgx_leaf_of_eight(2.0, 12));
  const Bytes bytes = MB(32);
  const Step step = step_of(
      {Flow{gpu(net, 0, 0), gpu(net, 1, 1), bytes}, Flow{gpu(net, 0, 0), gpu(net, 1, 1), bytes},
       Flow{gpu(net, 2, 0), gpu(net, 3, 1), bytes}, Flow{gpu(net, 4, 0), gpu(net, 5, 1), bytes},
       Flow{gpu(net, 6, 0), gpu(net, 7, 1), bytes}});
  const topology::Path p0 = net.route(step.flows[0].src, step.flows[0].dst, 0);
  const topology::Path p1 = net.route(step.flows[1].src, step.flows[1].dst, 1);
  const topology::Path p4 = net.route(step.flows[4].src, step.flows[4].dst, 4);
  ASSERT_NE(p0, p1);
  ASSERT_EQ(p0[2], p4[2]);  // device -> NIC -> leaf -> spine: the same leaf-to-spine link
  auto simgrid = make_simgrid_backend(net);
  AnalyticalBackend analytical(net);
  const Duration sg = one_step(*simgrid, step);
  const double half_nic = net.spec().fat_tree->nic_bandwidth.value() / 2;
  EXPECT_LT(relative_error(sg, net.path_latency(p0) + bytes / BytesPerSec::of(half_nic)), 0.01);
  EXPECT_LT(relative_error(sg, one_step(analytical, step)), 0.01);
}

TEST(SimGridBackend, ReSharesBandwidthWhenAFlowEnds) {
  // GPU 0 sends 1 MB to GPU 1 and 3 MB to GPU 2 through its one NVSwitch link (capacity C). Both
  // get C/2 until the first ends (2 MB / C), then the second gets all of C: 4 MB / C in all. The
  // analytical backend keeps rates fixed for the step, so it says 3 MB / (C/2) = 6 MB / C.
  const Network net = Network::build(dgx_h100(1));
  const Step step = step_of(
      {Flow{gpu(net, 0, 0), gpu(net, 0, 1), MB(1)}, Flow{gpu(net, 0, 0), gpu(net, 0, 2), MB(3)}});
  const topology::Path path = net.route(gpu(net, 0, 0), gpu(net, 0, 1));
  const BytesPerSec c =
      effective_bandwidth(net.link(path.front()), BandwidthEfficiency::defaults_for(net.spec()));
  auto simgrid = make_simgrid_backend(net);
  AnalyticalBackend analytical(net);
  EXPECT_LT(relative_error(one_step(*simgrid, step), net.path_latency(path) + MB(4) / c), 1e-6);
  EXPECT_LT(relative_error(one_step(analytical, step), net.path_latency(path) + MB(6) / c), 1e-6);
}

TEST(SimGridBackend, SameBatchTwiceGivesIdenticalTimes) {
  const Network net = Network::build(dgx_h100(4));
  const std::vector<Step> steps = {cross_node_step(net, 4, 0, MB(8)),
                                   cross_node_step(net, 4, 3, MB(8)),
                                   cross_node_step(net, 4, 5, KB(64))};
  auto backend = make_simgrid_backend(net);
  const std::vector<Duration> first = backend->step_times(steps);
  const std::vector<Duration> second = backend->step_times(steps);
  ASSERT_EQ(first.size(), 3u);
  EXPECT_EQ(first, second);
  // Steps of a batch run one after another: each takes what it takes alone.
  for (size_t i = 0; i < steps.size(); ++i) {
    EXPECT_EQ(one_step(*backend, steps[i]), first[i]) << "step " << i;
  }
}

TEST(SimGridBackend, TwoBackendsOnTwoNetworksInOneProcess) {
  const Network dgx = Network::build(dgx_h100(2));
  const Network tpu = Network::build(preset("tpu-v5p"));
  auto a = make_simgrid_backend(dgx);
  auto b = make_simgrid_backend(tpu);
  const Step on_dgx = cross_node_step(dgx, 2, 0, MB(4));
  const Step on_tpu = step_of({Flow{tpu.device_vertex(tpu.device_at({0, 0, 0})),
                                    tpu.device_vertex(tpu.device_at({2, 1, 3})), MB(4)}});
  const Duration a1 = one_step(*a, on_dgx);
  const Duration b1 = one_step(*b, on_tpu);
  const Duration a2 = one_step(*a, on_dgx);
  const Duration b2 = one_step(*b, on_tpu);
  EXPECT_EQ(a1, a2);
  EXPECT_EQ(b1, b2);
  AnalyticalBackend an_dgx(dgx);
  AnalyticalBackend an_tpu(tpu);
  EXPECT_LT(relative_error(a1, one_step(an_dgx, on_dgx)), 0.05);
  EXPECT_LT(relative_error(b1, one_step(an_tpu, on_tpu)), 0.05);
}

TEST(SimGridBackend, EmptyStepsLocalFlowsAndZeroBytesTakeNoTime) {
  const Network net = Network::build(dgx_h100(1));
  auto backend = make_simgrid_backend(net);
  const std::vector<Step> steps = {Step{}, step_of({Flow{gpu(net, 0, 3), gpu(net, 0, 3), MB(1)}}),
                                   step_of({Flow{gpu(net, 0, 0), gpu(net, 0, 1), Bytes::zero()}})};
  EXPECT_EQ(backend->step_times(steps), std::vector<Duration>(3, Duration::zero()));
  EXPECT_TRUE(backend->step_times({}).empty());
}

TEST(SimGridBackend, FlowOutsideTheNetworkIsAnInternalError) {
  const Network net = Network::build(dgx_h100(1));
  auto backend = make_simgrid_backend(net);
  const Step bad =
      step_of({Flow{gpu(net, 0, 0), VertexId(static_cast<uint32_t>(net.num_vertices())), MB(1)}});
  EXPECT_THROW(one_step(*backend, bad), InternalError);
}

// Every algorithm's all-reduce schedule, timed by both backends (STYLE D.14b: one suite over
// every implementation). They share routes and capacities; they differ only where SimGrid
// re-shares bandwidth as flows end, which these symmetric schedules barely exercise.
TEST(SimGridBackend, EveryAlgorithmsAllReduceAgreesWithAnalytical) {
  struct Case {
    ClusterSpec spec;
    int64_t ranks;
  };
  const std::vector<Case> cases = {{dgx_h100(1), 8},  // NVLS applies within one NVSwitch
                                   {dgx_h100(2), 16},
                                   {topology::resize_torus(preset("tpu-v5p"), {4, 4, 4}), 64}};
  for (const Case& c : cases) {
    const Network net = Network::build(c.spec);
    std::vector<DeviceId> group;
    for (int64_t r = 0; r < c.ranks; ++r) {
      group.push_back(DeviceId(static_cast<uint32_t>(r)));
    }
    auto simgrid = make_simgrid_backend(net);
    AnalyticalBackend analytical(net);
    for (const Algorithm a :
         {Algorithm::kRing, Algorithm::kBidirectionalRing, Algorithm::kDoubleBinaryTree,
          Algorithm::kHalvingDoubling, Algorithm::kHierarchical, Algorithm::kTorusRings,
          Algorithm::kNvls}) {
      if (!applicable(a, CollectiveKind::kAllReduce, group, net)) {
        continue;
      }
      const Schedule s = plan_collective(CollectiveKind::kAllReduce, MB(256), group, a, net);
      const Duration sg = schedule_time(s, *simgrid);
      const Duration an = schedule_time(s, analytical);
      EXPECT_LT(relative_error(sg, an), 0.05)
          << c.spec.name << " " << to_string(a) << ": " << sg.seconds() << " vs " << an.seconds();
    }
  }
}

// --- The SimGrid layer on a hand-made plan -------------------------------------------------------

std::vector<double> run_plan(const detail::SgPlan& plan) {
  return detail::run_in_child("test", [&plan] { return detail::run_plan_in_simgrid(plan); });
}

TEST(SimGridRun, SharesBandwidthMaxMinFairlyWhateverTheLatencies) {
  // Flows a (latency 1 us) and b (latency 10 us) share link X (1 GB/s); each also crosses a
  // private link of 0.6 GB/s. Plain max-min: a alone at 0.6 GB/s from 1 us to 10 us (5.4 kB),
  // then both at 0.5 GB/s until a ends (994.6 kB later), then b alone at 0.6 GB/s for its last
  // 5.4 kB: the step ends at 10 us + 1.9892 ms + 9 us. (CM02's own latency-weighted sharing would
  // give a 10/11 of X, capped at 0.6, and end the step at 2.23 ms.)
  detail::SgPlan plan;
  plan.links = {{LinkId(0), 1e9}, {LinkId(1), 0.6e9}, {LinkId(2), 0.6e9}};
  plan.routes = {{{1, 0}, 1e-6}, {{2, 0}, 10e-6}};
  plan.steps = {detail::SgStep{{{0, 1'000'000}, {1, 1'000'000}}}};
  const std::vector<double> t = run_plan(plan);
  ASSERT_EQ(t.size(), 1u);
  EXPECT_NEAR(t[0], 10e-6 + 1.9892e-3 + 9e-6, 1e-12);
}

TEST(SimGridRun, StepsRunOneAfterAnotherAndEmptyStepsTakeNothing) {
  detail::SgPlan plan;
  plan.links = {{LinkId(7), 2e9}};
  plan.routes = {{{0}, 5e-6}};
  plan.steps = {detail::SgStep{{{0, 2'000'000}}}, detail::SgStep{},
                detail::SgStep{{{0, 1'000'000}, {0, 1'000'000}}}};
  const std::vector<double> t = run_plan(plan);
  ASSERT_EQ(t.size(), 3u);
  EXPECT_NEAR(t[0], 5e-6 + 1e-3, 1e-12);
  EXPECT_EQ(t[1], 0.0);
  EXPECT_NEAR(t[2], 5e-6 + 1e-3, 1e-12);  // two flows on one route share its link
}

// --- The child process
// ----------------------------------------------------------------------------

size_t open_descriptors() {
  return static_cast<size_t>(std::distance(std::filesystem::directory_iterator("/proc/self/fd"),
                                           std::filesystem::directory_iterator{}));
}

TEST(RunInChild, ReturnsTheValuesAndLeaksNoDescriptor) {
  const size_t before = open_descriptors();
  for (int i = 0; i < 20; ++i) {
    const std::vector<double> v = detail::run_in_child("test", [i] {
      return std::vector<double>{1.5, static_cast<double>(i)};
    });
    EXPECT_EQ(v, (std::vector<double>{1.5, static_cast<double>(i)}));
  }
  EXPECT_TRUE(detail::run_in_child("test", [] { return std::vector<double>{}; }).empty());
  EXPECT_EQ(open_descriptors(), before);
}

TEST(RunInChild, AnExceptionInTheChildBecomesAnInternalErrorWithItsMessage) {
  try {
    detail::run_in_child("SimGrid backend",
                         []() -> std::vector<double> { throw std::runtime_error("no route"); });
    FAIL() << "no exception";
  } catch (const InternalError& e) {
    EXPECT_STREQ(e.what(), "SimGrid backend: no route");
  }
}

TEST(RunInChild, AChildThatDiesIsReportedWithItsOutput) {
  try {
    detail::run_in_child("test", []() -> std::vector<double> {
      std::fputs("assertion failed: something\n", stderr);
      std::fflush(stderr);
      std::abort();
    });
    FAIL() << "no exception";
  } catch (const InternalError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("killed by signal"), std::string::npos) << what;
    EXPECT_NE(what.find("assertion failed: something"), std::string::npos) << what;
  }
}

TEST(RunInChild, MuchOutputDoesNotBlockTheChild) {
  const std::vector<double> v = detail::run_in_child("test", [] {
    const std::string line(1000, 'x');
    for (int i = 0; i < 1000; ++i) {  // 1 MB, far more than a pipe holds
      std::fprintf(stderr, "%s\n", line.c_str());
    }
    return std::vector<double>(100'000, 2.0);  // and 800 kB of result
  });
  EXPECT_EQ(v, std::vector<double>(100'000, 2.0));
}

// Not a check: prints what SimGrid costs at scale (a 256-node DGX H100, every GPU sending across
// rails through the spines), for the record.
TEST(SimGridBackend, CostOf2048FlowSteps) {
  const Network net = Network::build(dgx_h100(256));
  auto backend = make_simgrid_backend(net);
  std::vector<Step> steps;
  for (int64_t i = 0; i < 16; ++i) {
    steps.push_back(cross_node_step(net, 256, 1 + i % 7, MB(16)));
  }
  using Clock = std::chrono::steady_clock;
  const auto t0 = Clock::now();
  const Duration one = one_step(*backend, steps[0]);
  const auto t1 = Clock::now();
  const std::vector<Duration> all = backend->step_times(steps);
  const auto t2 = Clock::now();
  EXPECT_EQ(all[0], one);
  const auto ms = [](auto d) { return std::chrono::duration<double, std::milli>(d).count(); };
  std::printf(
      "[ simgrid ] 256 x DGX H100, 2048 flows: 1 step %.1f ms wall, 16 steps %.1f ms wall\n",
      ms(t1 - t0), ms(t2 - t1));
}

}  // namespace
}  // namespace meshsim::collectives
