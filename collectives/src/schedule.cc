#include "meshsim/collectives/schedule.h"

#include <array>
#include <map>
#include <utility>

#include "meshsim/sim/error.h"

namespace meshsim::collectives {
Duration schedule_time(const Schedule& schedule, NetworkBackend& backend) {
  const std::vector<Duration> times = backend.step_times(schedule.steps);
  SIM_CHECK(times.size() == schedule.steps.size(), "backend {} timed {} of {} steps",
            backend.name(), times.size(), schedule.steps.size());
  Duration total = Duration::zero();
  for (size_t i = 0; i < times.size(); ++i) {
    const Step& s = schedule.steps[i];
    SIM_CHECK(s.repeat >= 1, "step '{}' repeats {} times", s.label, s.repeat);
    total += (times[i] + s.overhead) * s.repeat;
  }
  return total;
}

std::vector<topology::Path> route_step(const topology::Network& net, const Step& step) {
  std::vector<topology::Path> routes(step.flows.size());
  std::map<std::pair<uint32_t, uint32_t>, uint64_t> repeats;  // (src, dst) -> flows seen
  for (size_t i = 0; i < step.flows.size(); ++i) {
    const Flow& f = step.flows[i];
    if (f.src == f.dst || f.bytes.count() == 0) {
      continue;
    }
    uint64_t salt = 0;
    if (net.path_count(f.src, f.dst) > 1) {
      const int64_t host = net.vertex(f.dst).node;
      salt = static_cast<uint64_t>(host < 0 ? 0 : host) + repeats[{f.src.value(), f.dst.value()}]++;
    }
    routes[i] = net.route(f.src, f.dst, salt);
  }
  return routes;
}

BytesPerSec effective_bandwidth(const topology::Link& link, const BandwidthEfficiency& efficiency) {
  return link.bandwidth * efficiency.link[static_cast<size_t>(link.kind)];
}

double flow_weight(const topology::Network& net, const Flow& flow,
                   const BandwidthEfficiency& efficiency) {
  const bool in_switch = net.vertex(flow.src).kind == topology::VertexKind::kNvSwitch ||
                         net.vertex(flow.dst).kind == topology::VertexKind::kNvSwitch;
  return in_switch ? 1.0 / efficiency.in_switch : 1.0;
}

}  // namespace meshsim::collectives
