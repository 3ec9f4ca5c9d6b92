// SimGrid's model of coupled transfers, behind the SharedNetwork seam (shared_network.h).
//
// Model: SimGrid 3.32's L07 host model ("ptask_L07"), whose parallel tasks are exactly coupled
// transfers: a ptask moves given bytes over given links and progresses at one rate, set by
// SimGrid's max-min sharing of every link among all ptasks in flight, re-shared whenever one
// starts or ends. One transfer is one ptask whose bytes on each link are its weight there times its bytes,
// plus, for a rate cap, the same bytes on a private link of the cap's bandwidth. The latency phase
// and the floor are played by the transfer's actor around the ptask (sleep, then the ptask, then
// sleep to the floor), SimGrid's own semantics of latency. Links carry no latency in SimGrid.
// Platform: one star zone; one SimGrid link per network link, each with a host whose route to a
// sink host is that link alone, so that a ptask's bytes between the link's host and the sink
// cross exactly that link; and a pool of private "cap" links and hosts whose bandwidth is set when
// a capped transfer starts. A ptask over k links holds a (k+2)^2 bytes matrix (SimGrid's format),
// so transfers over more than 1024 links are split (run_ptask).
// Process: SimGrid's engine is a process-wide singleton, so each network runs its engine in a
// child process (child_session.h), driven by requests: define a shape, start a transfer, advance
// to a time limit or the next completion. Inside, one driver actor serves the requests; every
// transfer is an actor that reports its completion through a condition variable.
// Configuration: surf/precision:1e-12 (the default 1e-9 s would merge events that meshsim's
// picoseconds keep apart); logging silenced.
#include <fmt/format.h>

#include <simgrid/s4u.hpp>

#include <algorithm>
#include <cmath>
#include <deque>
#include <limits>
#include <map>
#include <mutex>

#include "child_session.h"
#include "meshsim/collectives/shared_network.h"
#include "meshsim/sim/error.h"

namespace meshsim::collectives {
namespace {

namespace sg4 = ::simgrid::s4u;
using detail::ChildSession;

constexpr double kDefine = 1;
constexpr double kStart = 2;
constexpr double kAdvance = 3;
constexpr size_t kCapPool = 1024;  // capped transfers in flight at once

const char* const kSimgridFlags[] = {
    "meshsim-simgrid",
    "--log=root.thres:critical",
    "--cfg=host/model:ptask_L07",
    "--cfg=surf/precision:1e-12",
};

struct ChildShape {
  std::vector<std::pair<uint32_t, double>> loads;
  double cap = 0;
};

// Everything the driver and the transfer actors of the child share.
struct ChildState {
  std::vector<sg4::Host*> link_hosts;  // by network link (null for a link of no capacity)
  std::vector<sg4::Host*> cap_hosts;
  std::vector<sg4::Link*> cap_links;
  std::vector<size_t> free_caps;
  sg4::Host* sink = nullptr;
  std::deque<ChildShape> shapes;  // a deque: actors hold references across simcalls
  std::vector<uint32_t> finished;
  sg4::MutexPtr mutex;
  sg4::ConditionVariablePtr cv;
  uint32_t next_id = 0;
};

void build_platform(ChildState& st, const std::vector<double>& capacities) {
  sg4::NetZone* zone = sg4::create_star_zone("meshsim");
  auto host_behind = [zone](const std::string& name, sg4::Link* link) {
    sg4::Host* h = zone->create_host(name, 1.0)->seal();
    const std::vector<sg4::LinkInRoute> up{sg4::LinkInRoute(link)};
    zone->add_route(h->get_netpoint(), nullptr, nullptr, nullptr, up, /*symmetrical=*/false);
    return h;
  };
  st.link_hosts.assign(capacities.size(), nullptr);
  for (size_t l = 0; l < capacities.size(); ++l) {
    if (capacities[l] > 0) {
      sg4::Link* link = zone->create_link(fmt::format("l{}", l), capacities[l])
                            ->set_sharing_policy(sg4::Link::SharingPolicy::SHARED)
                            ->set_latency(0.0)
                            ->seal();
      st.link_hosts[l] = host_behind(fmt::format("h{}", l), link);
    }
  }
  for (size_t k = 0; k < kCapPool; ++k) {
    sg4::Link* link = zone->create_link(fmt::format("cap{}", k), 1.0)
                          ->set_sharing_policy(sg4::Link::SharingPolicy::SHARED)
                          ->set_latency(0.0)
                          ->seal();
    st.cap_links.push_back(link);
    st.cap_hosts.push_back(host_behind(fmt::format("caphost{}", k), link));
    st.free_caps.push_back(kCapPool - 1 - k);
  }
  st.sink = zone->create_host("sink", 1.0)->seal();
  zone->seal();
}

// The ptasks of one transfer: hosts [sink, link hosts..., cap host], bytes from each to the sink.
// A transfer over more than kMaxPtaskLinks links runs as several ptasks of at most that many
// links each (a ptask's bytes matrix is dense, (k+2)^2 doubles), all started together: exact
// alone (it ends with its slowest part), coupled only within each part under contention.
constexpr size_t kMaxPtaskLinks = 1024;

void run_ptask(ChildState& st, const ChildShape& shape, double bytes) {
  std::optional<size_t> cap;
  if (shape.cap > 0) {
    SIM_CHECK(!st.free_caps.empty(), "more than {} capped transfers in flight", kCapPool);
    cap = st.free_caps.back();
    st.free_caps.pop_back();
    st.cap_links[*cap]->set_bandwidth(shape.cap);
  }
  std::vector<sg4::ExecPtr> parts;
  for (size_t first = 0; first < shape.loads.size() || (parts.empty() && cap);
       first += kMaxPtaskLinks) {
    std::vector<sg4::Host*> hosts{st.sink};
    std::vector<double> per_host;
    for (size_t i = first; i < std::min(shape.loads.size(), first + kMaxPtaskLinks); ++i) {
      const auto& [link, weight] = shape.loads[i];
      SIM_CHECK(st.link_hosts[link] != nullptr, "a load on link {} of no capacity", link);
      hosts.push_back(st.link_hosts[link]);
      per_host.push_back(weight * bytes);
    }
    if (cap && first == 0) {  // the first part carries the cap (sharing one cap link would
      hosts.push_back(st.cap_hosts[*cap]);  // divide it among the parts)
      per_host.push_back(bytes);
    }
    const size_t n = hosts.size();
    std::vector<double> matrix(n * n, 0.0);
    for (size_t i = 1; i < n; ++i) {
      matrix[i * n] = per_host[i - 1];  // host i -> sink (column 0)
    }
    parts.push_back(sg4::this_actor::exec_init(hosts, std::vector<double>(n, 0.0), matrix));
    parts.back()->start();
  }
  for (const auto& e : parts) {
    e->wait();
  }
  if (cap) {
    st.free_caps.push_back(*cap);
  }
}

void serve_start(ChildState& st, const ChildSession::Message& m, ChildSession::Channel& ch) {
  const double now = m[1];
  const auto shape = static_cast<size_t>(m[2]);
  const double bytes = m[3];
  const double latency = m[4];
  const double floor = m[5];
  SIM_CHECK(shape < st.shapes.size(), "unknown shape {}", shape);
  if (now > sg4::Engine::get_clock()) {
    sg4::this_actor::sleep_until(now);
  }
  const uint32_t id = st.next_id++;
  sg4::Actor::create(fmt::format("t{}", id), st.sink, [&st, id, shape, bytes, latency, floor] {
    const double start = sg4::Engine::get_clock();
    sg4::this_actor::sleep_for(latency);
    const ChildShape& s = st.shapes[shape];
    if (bytes > 0 && (!s.loads.empty() || s.cap > 0)) {
      run_ptask(st, s, bytes);
    }
    if (sg4::Engine::get_clock() < start + floor) {
      sg4::this_actor::sleep_until(start + floor);
    }
    const std::unique_lock lock(*st.mutex);
    st.finished.push_back(id);
    st.cv->notify_all();
  });
  ch.reply({static_cast<double>(id)});
}

void serve_advance(ChildState& st, double limit, ChildSession::Channel& ch) {
  {
    std::unique_lock lock(*st.mutex);
    if (st.finished.empty()) {
      if (std::isinf(limit)) {
        st.cv->wait(lock);
      } else if (limit > sg4::Engine::get_clock()) {
        st.cv->wait_until(lock, limit);
      }
    }
  }
  sg4::this_actor::yield();  // let the other completions of this instant report
  ChildSession::Message reply{sg4::Engine::get_clock(), 0};
  std::sort(st.finished.begin(), st.finished.end());
  for (const uint32_t id : st.finished) {
    reply.push_back(id);
  }
  reply[1] = static_cast<double>(st.finished.size());
  st.finished.clear();
  ch.reply(reply);
}

void serve(const std::vector<double>& capacities, ChildSession::Channel& ch) {
  std::vector<std::string> args(std::begin(kSimgridFlags), std::end(kSimgridFlags));
  std::vector<char*> argv;
  for (std::string& a : args) {
    argv.push_back(a.data());
  }
  argv.push_back(nullptr);
  int argc = static_cast<int>(args.size());
  // Never destroyed, on purpose: the process ends right after the run.
  sg4::Engine* const engine = new sg4::Engine(&argc, argv.data());
  ChildState st;
  build_platform(st, capacities);
  std::exception_ptr error;
  sg4::Actor::create("driver", st.sink, [&st, &ch, &error] {
    st.mutex = sg4::Mutex::create();
    st.cv = sg4::ConditionVariable::create();
    try {
      while (const auto m = ch.next()) {
        SIM_CHECK(!m->empty(), "empty request");
        if ((*m)[0] == kDefine) {
          ChildShape s;
          s.cap = (*m)[1];
          for (size_t i = 2; i + 1 < m->size(); i += 2) {
            s.loads.emplace_back(static_cast<uint32_t>((*m)[i]), (*m)[i + 1]);
          }
          st.shapes.push_back(std::move(s));
          ch.reply({static_cast<double>(st.shapes.size() - 1)});
        } else if ((*m)[0] == kStart) {
          serve_start(st, *m, ch);
        } else {
          serve_advance(st, (*m)[1], ch);
        }
      }
    } catch (const std::exception&) {  // not (...): SimGrid kills actors with its own exception
      error = std::current_exception();
    }
  });
  engine->run();
  if (error) {
    std::rethrow_exception(error);
  }
}

// A time past int64 picoseconds (a tiny bandwidth from input) is a LimitError.
SimTime to_time(double seconds) {
  return SimTime::from_ps(
      meshsim::detail::round_to_int64(seconds * 1e12, meshsim::detail::kTimeOverflow));
}

class SimGridNetwork final : public SharedNetwork {
 public:
  explicit SimGridNetwork(std::vector<double> capacities)
      : capacities_(std::move(capacities)),
        session_("SimGrid network", [caps = capacities_](ChildSession::Channel& ch) {
          serve(caps, ch);
        }) {}

  std::string_view name() const override { return "simgrid"; }

  ShapeId add_shape(const CommShape& shape) override {
    const double cap = shape.rate_cap ? shape.rate_cap->value() : 0.0;
    auto key = std::make_pair(shape.loads, cap);
    if (const auto it = index_.find(key); it != index_.end()) {
      return it->second;
    }
    ChildSession::Message m{kDefine, cap};
    for (const LinkLoad& l : shape.loads) {
      SIM_CHECK(l.link.index() < capacities_.size(), "load on link {}", l.link.value());
      m.push_back(l.link.value());
      m.push_back(l.weight);
    }
    const ShapeId id(static_cast<uint32_t>(session_.call(m).at(0)));
    index_.emplace(std::move(key), id);
    return id;
  }

  TransferId start(SimTime now, ShapeId shape, Bytes bytes, Duration latency,
                   Duration floor) override {
    SIM_CHECK(now >= clock_, "transfer started at {} ps, before the network's clock {} ps",
              now.ps(), clock_.ps());
    clock_ = now;
    const auto reply = session_.call({kStart, now.seconds(), static_cast<double>(shape.value()),
                                      bytes.as_double(), latency.seconds(), floor.seconds()});
    ++active_;
    return TransferId(static_cast<uint32_t>(reply.at(0)));
  }

  NetworkAdvance advance(SimTime limit) override {
    NetworkAdvance out;
    if (active_ == 0) {
      SIM_CHECK(limit < SimTime::max(), "advance without a limit or a transfer");
      clock_ = std::max(clock_, limit);
      out.time = clock_;
      return out;
    }
    const double limit_s =
        limit == SimTime::max() ? std::numeric_limits<double>::infinity() : limit.seconds();
    const auto reply = session_.call({kAdvance, limit_s});
    const auto n = static_cast<size_t>(reply.at(1));
    for (size_t i = 0; i < n; ++i) {
      out.finished.emplace_back(static_cast<uint32_t>(reply.at(2 + i)));
    }
    // SimGrid's seconds, back to picoseconds; never past the limit, never back in time.
    clock_ = std::max(clock_, std::min(limit, to_time(reply.at(0))));
    if (n == 0 && limit < SimTime::max()) {
      clock_ = limit;
    }
    active_ -= n;
    out.time = clock_;
    return out;
  }

  size_t active() const override { return active_; }
  SimTime now() const override { return clock_; }
  void on_rate(std::function<void(const TransferRate&)>) override {}

 private:
  std::vector<double> capacities_;
  ChildSession session_;
  std::map<std::pair<std::vector<LinkLoad>, double>, ShapeId> index_;
  SimTime clock_;
  size_t active_ = 0;
};

}  // namespace

std::unique_ptr<SharedNetwork> make_simgrid_network(std::vector<double> capacities) {
  return std::make_unique<SimGridNetwork>(std::move(capacities));
}

}  // namespace meshsim::collectives
