#include "simgrid_run.h"

#include <exception>
#include <simgrid/s4u.hpp>
#include <string>

namespace meshsim::collectives::detail {

namespace sg4 = ::simgrid::s4u;

namespace {

// SimGrid's configuration, as command-line flags so that it is in place before the engine starts
// (see simgrid_run.h for why each one).
const char* const kSimgridFlags[] = {
    "meshsim-simgrid",
    "--log=root.thres:critical",  // silence SimGrid; critical errors still reach stderr
    "--cfg=network/model:CM02",
    "--cfg=network/latency-factor:1",
    "--cfg=network/bandwidth-factor:1",
    "--cfg=network/weight-S:0",
    "--cfg=network/TCP-gamma:0",
    "--cfg=network/crosstraffic:0",
    "--cfg=surf/precision:1e-12",
};

// The platform of one plan: the hosts that flows leave from (one per route) and the sink they
// all go to.
struct Platform {
  std::vector<sg4::Host*> route_hosts;
  sg4::Host* sink = nullptr;
};

Platform build_platform(const SgPlan& plan) {
  sg4::NetZone* zone = sg4::create_star_zone("meshsim");
  std::vector<sg4::Link*> links;
  links.reserve(plan.links.size());
  for (const SgLink& l : plan.links) {
    links.push_back(zone->create_link("link" + std::to_string(l.id.value()), l.bandwidth_bps)
                        ->set_sharing_policy(sg4::Link::SharingPolicy::SHARED)
                        ->set_latency(0.0)
                        ->seal());
  }
  Platform p;
  p.route_hosts.reserve(plan.routes.size());
  for (size_t r = 0; r < plan.routes.size(); ++r) {
    sg4::Host* host = zone->create_host("route" + std::to_string(r), 1.0)->seal();
    std::vector<sg4::LinkInRoute> up;
    up.reserve(plan.routes[r].links.size());
    for (uint32_t l : plan.routes[r].links) {
      up.emplace_back(links[l]);
    }
    // Source-to-everyone route (a star zone's "up" links); no reverse route.
    zone->add_route(host->get_netpoint(), nullptr, nullptr, nullptr, up, /*symmetrical=*/false);
    p.route_hosts.push_back(host);
  }
  // The sink gets the star zone's default empty "down" route when the zone is sealed.
  p.sink = zone->create_host("sink", 1.0)->seal();
  zone->seal();
  return p;
}

// Runs one step from inside the driver actor; returns its duration in seconds.
double run_step(const SgPlan& plan, const SgStep& step, const Platform& p) {
  const double start = sg4::Engine::get_clock();
  std::vector<sg4::CommPtr> comms;
  comms.reserve(step.flows.size());
  // Flows are sorted by latency: sleep to each flow's end of latency, then start it.
  for (const SgFlow& f : step.flows) {
    const double begin = start + plan.routes[f.route].latency_s;
    if (begin > sg4::Engine::get_clock()) {
      sg4::this_actor::sleep_until(begin);
    }
    comms.push_back(sg4::Comm::sendto_async(p.route_hosts[f.route], p.sink, f.bytes));
  }
  sg4::Comm::wait_all(comms);
  return sg4::Engine::get_clock() - start;
}

}  // namespace

std::vector<double> run_plan_in_simgrid(const SgPlan& plan) {
  std::vector<std::string> arg_storage(std::begin(kSimgridFlags), std::end(kSimgridFlags));
  std::vector<char*> argv;
  for (std::string& a : arg_storage) {
    argv.push_back(a.data());
  }
  argv.push_back(nullptr);
  int argc = static_cast<int>(arg_storage.size());
  // Never destroyed, on purpose: the process ends right after (simgrid_run.h), and tearing
  // SimGrid down takes tens of milliseconds for a platform of thousands of hosts.
  sg4::Engine* const engine = new sg4::Engine(&argc, argv.data());

  const Platform platform = build_platform(plan);
  std::vector<double> seconds;
  seconds.reserve(plan.steps.size());
  std::exception_ptr error;  // an exception must not escape an actor: carry it out of the run
  sg4::Actor::create("driver", platform.sink, [&plan, &platform, &seconds, &error] {
    try {
      for (const SgStep& step : plan.steps) {
        seconds.push_back(run_step(plan, step, platform));
      }
    } catch (const std::exception&) {  // not (...): SimGrid kills actors with its own exception
      error = std::current_exception();
    }
  });
  engine->run();
  if (error) {
    std::rethrow_exception(error);
  }
  return seconds;
}

}  // namespace meshsim::collectives::detail
