// The SimGrid network backend: times steps of flows with SimGrid's flow-level (max-min) model on
// the same graph and the same routes as the analytical backend.
//
// How a call works (each call to step_times is one batch):
//  1. make_plan (simgrid_plan.h), in this process: every flow is routed by Network::route with the
//     analytical backend's ECMP salt, link capacities and flow weights get the same bandwidth
//     efficiencies (BandwidthEfficiency::defaults_for the cluster, as AnalyticalBackend(net)), and
//     the links the batch uses and its distinct paths are collected. Pure, no SimGrid.
//  2. run_in_child (simgrid_fork.h): a forked child builds a SimGrid engine and a platform from
//     the plan, runs every step of the batch one after another, and sends back the seconds per
//     step (simgrid_run.h: model, configuration and platform).
//  3. Seconds become Durations, rounded to the nearest picosecond.
// A batch whose flows all stay on their vertex (or that has no flows) needs no SimGrid at all.
//
// Cost: a fork (about a millisecond for a large caller) plus SimGrid's own time: building the
// platform (a few microseconds per link and per route) and 10-20 us per flow per step, growing
// with the number of flows in flight (SimGrid 3.32 keeps host-to-host comms in one list that each
// completion scans). Measured on a 256-node DGX H100, every GPU sending across rails: one step of
// 2048 flows ~50 ms of CPU in all, 16 such steps in one batch ~0.45 s (the analytical backend:
// ~65 ms for the 16). Batch whole schedules; the analytical backend stays the default.
#include <memory>
#include <string_view>
#include <vector>

#include "meshsim/collectives/comm_model.h"
#include "meshsim/sim/error.h"
#include "simgrid_fork.h"
#include "simgrid_plan.h"
#include "simgrid_run.h"

namespace meshsim::collectives {

namespace {

class SimGridBackend final : public NetworkBackend {
 public:
  SimGridBackend(const topology::Network& net, BandwidthEfficiency efficiency)
      : net_(net), efficiency_(efficiency) {}

  std::string_view name() const override { return "simgrid"; }

  std::vector<Duration> step_times(std::span<const Step> steps) override {
    const detail::SgPlan plan = detail::make_plan(net_, efficiency_, steps);
    std::vector<Duration> times(steps.size(), Duration::zero());
    if (plan.num_flows() == 0) {
      return times;
    }
    const std::vector<double> seconds = detail::run_in_child(
        "SimGrid backend", [&plan] { return detail::run_plan_in_simgrid(plan); });
    SIM_CHECK(seconds.size() == steps.size(), "SimGrid backend: {} step times for {} steps",
              seconds.size(), steps.size());
    for (size_t i = 0; i < seconds.size(); ++i) {
      SIM_CHECK(seconds[i] >= 0 && seconds[i] < 1e6, "SimGrid backend: step {} took {} s", i,
                seconds[i]);
      times[i] = Seconds(seconds[i]);
    }
    return times;
  }

 private:
  const topology::Network& net_;
  BandwidthEfficiency efficiency_;
};

}  // namespace

std::unique_ptr<NetworkBackend> make_simgrid_backend(const topology::Network& net) {
  return std::make_unique<SimGridBackend>(net, BandwidthEfficiency::defaults_for(net.spec()));
}

}  // namespace meshsim::collectives
