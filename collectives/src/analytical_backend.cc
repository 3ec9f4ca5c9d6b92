// The analytical backend: max-min fair rates by progressive filling, one step at a time.
//
// Progressive filling (Bertsekas & Gallager, Data Networks, 6.5.2): raise the rate of every flow
// together; when a link fills, the flows crossing it are frozen at the current rate; continue with
// the rest. Here a flow f of weight w_f (1, or 1/in_switch for NVLS traffic) at rate r uses
// w_f * r of every link on its path, and a link of capacity C (bandwidth x efficiency) with
// capacity C' left and unfrozen weight W fills at level C'/W. The link with the lowest level
// fills first; freezing its flows only raises the levels of the other links they cross
// ((C' - w r)/(W - w) >= C'/W when r <= C'/W), so a min-heap of levels with lazy re-insertion
// visits each link O(1 + its flows) times: O(sum of path lengths * log links) per step.
// Ties are broken by the link's first appearance in the step's flow order, and flows are routed
// by route_step (deterministic D-mod-K ECMP), so results are deterministic.
#include <algorithm>
#include <functional>
#include <queue>

#include "meshsim/collectives/comm_model.h"
#include "meshsim/sim/error.h"

namespace meshsim::collectives {
namespace {

struct FlowState {
  std::vector<uint32_t> links;  // step-local link indices
  double weight = 1.0;
  double rate = 0.0;
  bool frozen = true;  // flows that cross no link (src == dst, no bytes) start frozen
  Duration latency;
};

struct LinkState {
  LinkId id;
  double capacity = 0.0;  // left, bytes/s
  double weight = 0.0;    // sum of weights of unfrozen flows
  int64_t unfrozen = 0;
  std::vector<uint32_t> flows;
};

using Level = std::pair<double, uint32_t>;
using LevelHeap = std::priority_queue<Level, std::vector<Level>, std::greater<>>;

void freeze_through(uint32_t l, double rate, std::vector<FlowState>& flows,
                    std::vector<LinkState>& links) {
  for (const uint32_t f : links[l].flows) {
    FlowState& fs = flows[f];
    if (fs.frozen) {
      continue;
    }
    fs.frozen = true;
    fs.rate = rate;
    for (const uint32_t m : fs.links) {
      LinkState& ls = links[m];
      ls.capacity -= fs.weight * rate;
      ls.weight -= fs.weight;
      if (--ls.unfrozen == 0) {
        ls.weight = 0.0;
      }
    }
  }
}

void fill(std::vector<FlowState>& flows, std::vector<LinkState>& links) {
  LevelHeap heap;
  for (uint32_t l = 0; l < links.size(); ++l) {
    heap.emplace(links[l].capacity / links[l].weight, l);
  }
  while (!heap.empty()) {
    const auto [level, l] = heap.top();
    heap.pop();
    const LinkState& ls = links[l];
    if (ls.unfrozen == 0) {
      continue;
    }
    const double now = std::max(ls.capacity, 0.0) / ls.weight;
    if (now > level * (1.0 + 1e-12)) {
      heap.emplace(now, l);  // stale: other links' freezes raised this level
      continue;
    }
    SIM_CHECK(now > 0.0, "link {} saturated with {} flows unserved", ls.id.value(), ls.unfrozen);
    freeze_through(l, now, flows, links);
  }
}

}  // namespace

AnalyticalBackend::AnalyticalBackend(const topology::Network& net)
    : AnalyticalBackend(net, BandwidthEfficiency::defaults_for(net.spec())) {}

AnalyticalBackend::AnalyticalBackend(const topology::Network& net, BandwidthEfficiency efficiency)
    : net_(net), efficiency_(efficiency), local_link_(net.num_links(), -1) {
  for (const double e : efficiency_.link) {
    SIM_CHECK(e > 0.0 && e <= 1.0, "link efficiency {} outside (0, 1]", e);
  }
  SIM_CHECK(efficiency_.in_switch > 0.0 && efficiency_.in_switch <= 1.0,
            "in-switch efficiency {} outside (0, 1]", efficiency_.in_switch);
}

std::vector<Duration> AnalyticalBackend::step_times(std::span<const Step> steps) {
  std::vector<Duration> out;
  out.reserve(steps.size());
  for (const Step& s : steps) {
    out.push_back(step_time(s));
  }
  return out;
}

Duration AnalyticalBackend::step_time(const Step& step) {
  std::vector<FlowState> flows(step.flows.size());
  std::vector<LinkState> links;
  const std::vector<topology::Path> routes = route_step(net_, step);
  for (size_t i = 0; i < step.flows.size(); ++i) {
    const Flow& f = step.flows[i];
    SIM_CHECK(f.bytes.count() >= 0, "flow of {} bytes in step '{}'", f.bytes.count(), step.label);
    const topology::Path& path = routes[i];
    if (path.empty()) {
      continue;
    }
    FlowState& fs = flows[i];
    fs.frozen = false;
    fs.weight = flow_weight(net_, f, efficiency_);
    fs.latency = net_.path_latency(path);
    for (const LinkId id : path) {
      int32_t& local = local_link_[id.index()];
      if (local < 0) {
        local = static_cast<int32_t>(links.size());
        links.push_back({id, effective_bandwidth(net_.link(id), efficiency_).value(), 0.0, 0, {}});
      }
      LinkState& ls = links[static_cast<size_t>(local)];
      ls.weight += fs.weight;
      ++ls.unfrozen;
      ls.flows.push_back(static_cast<uint32_t>(i));
      fs.links.push_back(static_cast<uint32_t>(local));
    }
  }
  for (const LinkState& ls : links) {
    local_link_[ls.id.index()] = -1;
  }
  fill(flows, links);
  Duration longest = Duration::zero();
  for (size_t i = 0; i < flows.size(); ++i) {
    const FlowState& fs = flows[i];
    if (fs.links.empty()) {
      continue;
    }
    SIM_CHECK(fs.rate > 0.0, "flow {} of step '{}' got no rate", i, step.label);
    longest = std::max(longest, fs.latency + step.flows[i].bytes / BytesPerSec::of(fs.rate));
  }
  return longest;
}

}  // namespace meshsim::collectives
