#include "meshsim/collectives/comm_shape.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "fluid_solver.h"
#include "meshsim/sim/error.h"

namespace meshsim::collectives {

std::vector<double> link_capacities(const topology::Network& net,
                                    const BandwidthEfficiency& efficiency) {
  std::vector<double> out(net.num_links());
  for (size_t l = 0; l < out.size(); ++l) {
    out[l] = effective_bandwidth(net.link(LinkId(static_cast<uint32_t>(l))), efficiency).value();
  }
  return out;
}

double isolated_rate(const CommShape& shape, const std::vector<double>& capacities) {
  // The fluid model's own solver on this shape alone, so that the two agree to the last bit.
  std::vector<uint32_t> links;
  std::vector<double> weights;
  std::vector<double> caps;
  for (const LinkLoad& l : shape.loads) {
    links.push_back(static_cast<uint32_t>(caps.size()));
    weights.push_back(l.weight);
    caps.push_back(capacities[l.link.index()]);
  }
  const detail::FluidEntity e{links, weights, shape.rate_cap ? shape.rate_cap->value() : 0.0};
  return detail::max_min_rates({&e, 1}, caps).front();
}

Duration isolated_time(const CommShape& shape, const std::vector<double>& capacities) {
  Duration t = shape.latency;
  if (shape.bytes.count() > 0) {
    const double rate = isolated_rate(shape, capacities);
    SIM_CHECK(rate > 0, "a shape of {} bytes with rate {}", shape.bytes.count(), rate);
    if (std::isfinite(rate)) {  // no link and no cap: the bytes take no time
      t += shape.bytes / BytesPerSec::of(rate);
    }
  }
  return std::max(t, shape.floor);
}

// Sparse: (link, bytes) in flow order, stably sorted by link and summed in that order, so each
// link's sum is the same as a dense per-link accumulator's, in O(k log k) for k link crossings
// instead of O(links in the network) per shape (which made planning every send of a full
// simulation quadratic in the cluster size).
std::vector<LinkLoad> schedule_loads(const topology::Network& net, const Schedule& schedule,
                                     const BandwidthEfficiency& efficiency, Bytes progress) {
  std::vector<std::pair<uint32_t, double>> crossings;
  for (const Step& step : schedule.steps) {
    const std::vector<topology::Path> routes = route_step(net, step);
    for (size_t i = 0; i < step.flows.size(); ++i) {
      const Flow& f = step.flows[i];
      const double b = f.bytes.as_double() * static_cast<double>(step.repeat) *
                       flow_weight(net, f, efficiency);
      for (const LinkId l : routes[i]) {
        crossings.emplace_back(l.value(), b);
      }
    }
  }
  std::stable_sort(crossings.begin(), crossings.end(),
                   [](const auto& x, const auto& y) { return x.first < y.first; });
  std::vector<LinkLoad> out;
  for (size_t i = 0; i < crossings.size();) {
    const uint32_t link = crossings[i].first;
    double bytes = 0.0;
    for (; i < crossings.size() && crossings[i].first == link; ++i) {
      bytes += crossings[i].second;
    }
    out.push_back(LinkLoad{LinkId(link), bytes / progress.as_double()});
  }
  return out;
}

std::vector<LinkLoad> merge_loads(std::vector<LinkLoad> a, const std::vector<LinkLoad>& b) {
  std::vector<LinkLoad> out;
  out.reserve(a.size() + b.size());
  size_t i = 0;
  size_t j = 0;
  while (i < a.size() || j < b.size()) {
    if (j == b.size() || (i < a.size() && a[i].link < b[j].link)) {
      out.push_back(a[i++]);
    } else if (i == a.size() || b[j].link < a[i].link) {
      out.push_back(b[j++]);
    } else {
      out.push_back(LinkLoad{a[i].link, a[i].weight + b[j].weight});
      ++i;
      ++j;
    }
  }
  return out;
}

Duration schedule_latency(const topology::Network& net, const Schedule& schedule) {
  Duration total = Duration::zero();
  for (const Step& step : schedule.steps) {
    const std::vector<topology::Path> routes = route_step(net, step);
    Duration longest = Duration::zero();
    for (const auto& r : routes) {
      longest = std::max(longest, net.path_latency(r));
    }
    total += (longest + step.overhead) * step.repeat;
  }
  return total;
}

}  // namespace meshsim::collectives
