// Degraded and failed links and NICs (network.h: scale_bandwidth, device_links, degrade,
// apply_faults).
//
// A failure marks links down (NetworkData::down; GpuLayout::nic_down for whole NICs) and the
// routers avoid them (network_fat_tree.cc: a device's ports; network_torus.cc: the other way
// round a ring; network_search.cc: skipped edges). Every failure is checked here, when it is
// applied, against the structure of the fabric, so that no later route meets a dead end:
//  * fat tree: every device of a node with a failed NIC keeps a working port (its own NIC, or a
//    peer's in its node, reached over NVLink);
//  * torus: the failed link's axis wraps and its ring has no other link down, so the other way
//    round is open.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>

#include "meshsim/sim/error.h"
#include "network_impl.h"

namespace meshsim::topology {
namespace {

constexpr std::string_view kAxes = "xyz";

VertexId nic_vertex(const GpuLayout& g, int64_t device, int64_t k) {
  return VertexId(g.tree.first_nic + static_cast<uint32_t>(device * g.tree.nics_per_device + k));
}

// The two directions of the cable a -> b.
void add_both(const detail::NetworkData& impl, VertexId a, VertexId b, std::vector<LinkId>& out) {
  out.push_back(impl.link_or_die(a, b));
  out.push_back(impl.link_or_die(b, a));
}

// NIC k of device d's links of `kind` (pcie: device <-> NIC; network: NIC <-> leaf).
void nic_links(const detail::NetworkData& impl, int64_t d, int64_t k, LinkKind kind,
               std::vector<LinkId>& out) {
  const GpuLayout& g = *impl.gpu;
  const VertexId nic = nic_vertex(g, d, k);
  if (kind == LinkKind::kPcie) {
    add_both(impl, VertexId(static_cast<uint32_t>(d)), nic, out);
  } else {
    add_both(impl, nic, VertexId(g.tree.first_leaf + static_cast<uint32_t>(g.leaf_of(d, k))), out);
  }
}

// The leaf of device d's NIC k, and the vertex of spine j of its pod.
std::pair<VertexId, VertexId> leaf_and_spine(const GpuLayout& g, int64_t d, int64_t k,
                                             int64_t j) {
  const FatTreeLayout& t = g.tree;
  const int64_t leaf = g.leaf_of(d, k);
  return {VertexId(t.first_leaf + static_cast<uint32_t>(leaf)),
          VertexId(t.first_spine +
                   static_cast<uint32_t>(t.pod_of_leaf(leaf) * t.spines_per_pod + j))};
}

// The links a fault names, both directions; LinkFaultError (at `index`) where the device has none.
std::vector<LinkId> selected_links(const Network& net, const detail::NetworkData& impl,
                                   const LinkFault& f, size_t index) {
  const auto d = static_cast<int64_t>(f.device.value());
  std::vector<LinkId> out;
  if (f.spine) {
    const bool ok = f.kind == LinkKind::kNetwork && impl.gpu && impl.gpu->tree.tiers >= 2 &&
                    *f.spine >= 0 && *f.spine < impl.gpu->tree.spines_per_pod &&
                    f.nic.value_or(0) >= 0 && f.nic.value_or(0) < impl.gpu->tree.nics_per_device;
    if (!ok) {
      throw LinkFaultError(
          index, fmt::format("{}: expected a spine index below the {} spines of a leaf's pod, "
                             "on the network links of a fat tree of 2 or 3 tiers",
                             describe(f), impl.gpu ? impl.gpu->tree.spines_per_pod : 0));
    }
    const auto [leaf, spine] = leaf_and_spine(*impl.gpu, d, f.nic.value_or(0), *f.spine);
    add_both(impl, leaf, spine, out);
    return out;
  }
  if (f.nic) {
    const bool nic_kind = f.kind == LinkKind::kNetwork || f.kind == LinkKind::kPcie;
    if (!nic_kind || !impl.gpu || *f.nic < 0 || *f.nic >= impl.gpu->tree.nics_per_device) {
      throw LinkFaultError(
          index, fmt::format("{}: expected a NIC index below the device's {} NIC(s) of a GPU "
                             "cluster, on its network or pcie links",
                             describe(f), impl.gpu ? impl.gpu->tree.nics_per_device : 0));
    }
    nic_links(impl, d, *f.nic, f.kind, out);
  } else if (f.ici_axis) {
    const std::optional<LinkId> l =
        f.kind == LinkKind::kIci && impl.torus && *f.ici_axis >= 0 &&
                static_cast<size_t>(*f.ici_axis) < impl.torus->dims()
            ? impl.torus->link_from(d, static_cast<size_t>(*f.ici_axis), f.ici_direction)
            : std::nullopt;
    if (!l) {
      throw LinkFaultError(index, fmt::format("{}: the device has no such ICI link (expected an "
                                              "axis of the torus with more than one chip)",
                                              describe(f)));
    }
    out.push_back(*l);
    out.push_back(impl.link_or_die(impl.links[l->index()].dst, impl.links[l->index()].src));
  } else {
    out = net.device_links(f.device, f.kind);
  }
  if (out.empty()) {
    throw LinkFaultError(index, fmt::format("{}: the device has no {} links in this cluster",
                                            describe(f), to_string(f.kind)));
  }
  return out;
}

// scale_bandwidth on the links of each fault, but the failed ones when `skip_failed`.
void scale_faults(Network& net, const detail::NetworkData& impl,
                  const std::vector<LinkFault>& faults, bool skip_failed) {
  for (size_t i = 0; i < faults.size(); ++i) {
    if (skip_failed && faults[i].down()) {
      continue;
    }
    for (const LinkId l : selected_links(net, impl, faults[i], i)) {
      net.scale_bandwidth(l, faults[i].factor);
    }
  }
}

void mark_down(detail::NetworkData& impl, const std::vector<LinkId>& links) {
  if (impl.down.empty()) {
    impl.down.assign(impl.links.size(), 0);
  }
  for (const LinkId l : links) {
    impl.down[l.index()] = 1;
  }
}

// The working NICs of device d (ks), or, with none, the peers of its node that have one.
struct Ports {
  std::vector<int64_t> own;    // NIC indices of d that work
  std::vector<int64_t> peers;  // devices of d's node with a working NIC (when `own` is empty)
};
Ports ports_of(const GpuLayout& g, int64_t d) {
  Ports p;
  g.for_each_port(d, [&](int64_t via, int64_t k) {
    if (via == d) {
      p.own.push_back(k);
    } else if (p.peers.empty() || p.peers.back() != via) {
      p.peers.push_back(via);
    }
  });
  return p;
}

std::string fail_nic(detail::NetworkData& impl, const LinkFault& f, size_t index) {
  GpuLayout& g = *impl.gpu;
  const auto d = static_cast<int64_t>(f.device.value());
  const int64_t per = g.tree.nics_per_device;
  if (g.nic_down.empty()) {
    g.nic_down.assign(impl.num_devices() * static_cast<size_t>(per), 0);
  }
  std::vector<LinkId> links;
  for (int64_t k = f.nic.value_or(0); k < (f.nic ? *f.nic + 1 : per); ++k) {
    g.nic_down[static_cast<size_t>(d * per + k)] = 1;
    nic_links(impl, d, k, LinkKind::kPcie, links);
    nic_links(impl, d, k, LinkKind::kNetwork, links);
  }
  mark_down(impl, links);
  const int64_t node = d / g.devices_per_node;
  for (int64_t q = node * g.devices_per_node; q < (node + 1) * g.devices_per_node; ++q) {
    const Ports p = ports_of(g, q);
    if (p.own.empty() && p.peers.empty()) {
      throw LinkFaultError(
          index, fmt::format("{} down: no route is left for device {}'s traffic off the node: "
                             "node {} has no other working NIC to carry it",
                             describe(f), q, node));
    }
  }
  const Ports p = ports_of(g, d);
  if (!p.own.empty()) {
    return fmt::format("{} down: rerouted over the device's other NIC{} ({})", describe(f),
                       p.own.size() == 1 ? "" : "s", fmt::join(p.own, ", "));
  }
  return fmt::format("{} down: rerouted over NVLink to device{} {} of node {} and out through "
                     "their NICs (NCCL's PXN path)",
                     describe(f), p.peers.size() == 1 ? "" : "s", fmt::join(p.peers, ", "), node);
}

// The links of the ring along `axis` through device d, direction +1 (from d round to d).
std::vector<LinkId> ring_links(const detail::NetworkData& impl, const TorusLayout& t, int64_t d,
                               int64_t axis) {
  std::vector<LinkId> out;
  int64_t at = d;
  for (int64_t k = 0; k < t.shape[static_cast<size_t>(axis)]; ++k) {
    const std::optional<LinkId> l = t.link_from(at, static_cast<size_t>(axis), 1);
    if (!l) {
      break;
    }
    out.push_back(*l);
    at = impl.links[l->index()].dst.value();
  }
  return out;
}

std::string fail_ici(detail::NetworkData& impl, const Network& net, const LinkFault& f,
                     size_t index) {
  const TorusLayout& t = *impl.torus;
  if (!f.ici_axis) {
    throw LinkFaultError(index, fmt::format("{} down: a chip with every ICI link down is cut off "
                                            "from its slice, no route is left; name one link "
                                            "(axis and direction, e.g. x+)",
                                            describe(f)));
  }
  const std::vector<LinkId> links = selected_links(net, impl, f, index);
  const auto axis = static_cast<size_t>(*f.ici_axis);
  if (!t.wraps[axis]) {
    throw LinkFaultError(
        index, fmt::format("{} down: axis {} of the torus ({} chips) does not wrap around, so "
                           "there is no other way round for the traffic that crosses it",
                           describe(f), kAxes[axis], t.shape[axis]));
  }
  const auto d = static_cast<int64_t>(f.device.value());
  for (const LinkId l : ring_links(impl, t, d, *f.ici_axis)) {
    if (impl.link_down(l) && std::find(links.begin(), links.end(), l) == links.end()) {
      throw LinkFaultError(index, fmt::format("{} down: the {} ring through device {} already "
                                              "has a link down; a second cuts it in two, with "
                                              "no route left between the halves",
                                              describe(f), kAxes[axis], d));
    }
  }
  mark_down(impl, links);
  return fmt::format("{} down (to device {}): the traffic of its {} ring goes the other way "
                     "round ({} chips)",
                     describe(f), impl.links[links[0].index()].dst.value(), kAxes[axis],
                     t.shape[axis]);
}

// A leaf's uplinks to one spine: every other leaf must still share a working spine with it.
std::string fail_uplink(detail::NetworkData& impl, const Network& net, const LinkFault& f,
                        size_t index) {
  mark_down(impl, selected_links(net, impl, f, index));
  const FatTreeLayout& t = impl.gpu->tree;
  const int64_t la = impl.gpu->leaf_of(static_cast<int64_t>(f.device.value()), f.nic.value_or(0));
  const auto name = [&](int64_t leaf) {
    return net.vertex(VertexId(t.first_leaf + static_cast<uint32_t>(leaf))).name;
  };
  std::vector<int64_t> left;
  for (int64_t j = 0; j < t.spines_per_pod; ++j) {
    if (detail::uplink_works(impl, t, la, j)) {
      left.push_back(j);
    }
  }
  for (int64_t lb = 0; lb < t.leaves; ++lb) {
    const bool shared = lb == la || std::any_of(left.begin(), left.end(), [&](int64_t j) {
                          return detail::uplink_works(impl, t, lb, j);
                        });
    if (!shared) {
      throw LinkFaultError(index, fmt::format("{} down: {} and {} no longer reach a common "
                                              "spine, so no route is left between them",
                                              describe(f), name(la), name(lb)));
    }
  }
  return fmt::format("{} down: the traffic of {} through the spines takes ECMP over its other "
                     "spine{} ({})",
                     describe(f), name(la), left.size() == 1 ? "" : "s", fmt::join(left, ", "));
}

std::string fail_one(detail::NetworkData& impl, const Network& net, const LinkFault& f,
                     size_t index) {
  if (f.spine) {
    return fail_uplink(impl, net, f, index);
  }
  if (impl.gpu && (f.kind == LinkKind::kNetwork || f.kind == LinkKind::kPcie)) {
    selected_links(net, impl, f, index);  // checks the NIC index
    return fail_nic(impl, f, index);
  }
  if (impl.torus && f.kind == LinkKind::kIci) {
    return fail_ici(impl, net, f, index);
  }
  selected_links(net, impl, f, index);  // a device without such links says so first
  std::string why;
  if (!impl.gpu && !impl.torus) {
    why = "failed links are modelled on the built-in fabrics (GPU fat trees, TPU tori), not on "
          "explicit graphs";
  } else if (f.kind == LinkKind::kNvlink) {
    why = "a GPU's NVLink is its only path to the other GPUs of its NVLink domain (the model, "
          "like NCCL, does not send that traffic over the NICs), so no route is left around it";
  } else if (f.kind == LinkKind::kDcn) {
    why = "a chip's traffic to other slices leaves through its own DCN link (forwarding over ICI "
          "to another chip's DCN link is not modelled), so no route is left around it";
  } else {
    why = "no route is left around it";
  }
  throw LinkFaultError(index, fmt::format("{} down: {}", describe(f), why));
}

}  // namespace

std::string describe(const LinkFault& f) {
  std::string s = fmt::format("device {} {}", f.device.value(), to_string(f.kind));
  if (f.nic) {
    s += fmt::format(" (NIC {})", *f.nic);
  }
  if (f.spine) {
    s += fmt::format(" uplink to spine {}", *f.spine);
  }
  if (f.ici_axis && *f.ici_axis >= 0 && *f.ici_axis < 3) {
    s += fmt::format(" {}", ici_link_name(*f.ici_axis, f.ici_direction));
  }
  return s;
}

std::string ici_link_name(int64_t axis, int direction) {
  SIM_CHECK(axis >= 0 && static_cast<size_t>(axis) < kAxes.size(), "ICI axis {}", axis);
  return fmt::format("{}{}", kAxes[static_cast<size_t>(axis)], direction > 0 ? '+' : '-');
}

std::optional<std::pair<int64_t, int>> parse_ici_link(std::string_view name) {
  if (name.size() != 2 || kAxes.find(name[0]) == std::string_view::npos ||
      (name[1] != '+' && name[1] != '-')) {
    return std::nullopt;
  }
  return std::make_pair(static_cast<int64_t>(kAxes.find(name[0])), name[1] == '+' ? 1 : -1);
}

void Network::scale_bandwidth(LinkId link, double factor) {
  SIM_CHECK(link.index() < num_links(), "link {} of {}", link.value(), num_links());
  SIM_CHECK(std::isfinite(factor) && factor > 0 && factor <= 1,
            "link {}: bandwidth factor {} is not in (0, 1]", link.value(), factor);
  Link& l = impl_->links[link.index()];
  l.bandwidth = l.bandwidth * factor;
}

std::vector<LinkId> Network::device_links(DeviceId d, LinkKind kind) const {
  SIM_CHECK(d.index() < num_devices(), "device {} of {}", d.value(), num_devices());
  const VertexId dev = device_vertex(d);
  std::vector<VertexId> from = {dev};
  if (kind == LinkKind::kNetwork) {
    // Through the device's NICs (PCIe) to the leaves.
    from.clear();
    for (const LinkId l : out_links(dev)) {
      const Link& x = link(l);
      if (x.kind == LinkKind::kPcie && vertex(x.dst).kind == VertexKind::kNic) {
        from.push_back(x.dst);
      }
    }
  }
  std::vector<LinkId> out;
  for (const VertexId v : from) {
    for (const LinkId l : out_links(v)) {
      const Link& x = link(l);
      if (x.kind != kind) {
        continue;
      }
      out.push_back(l);
      if (const std::optional<LinkId> back = link_between(x.dst, x.src)) {
        out.push_back(*back);
      }
    }
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

void Network::degrade(const std::vector<LinkFault>& faults) {
  scale_faults(*this, *impl_, faults, false);
}

std::vector<std::string> Network::apply_faults(const std::vector<LinkFault>& faults) {
  scale_faults(*this, *impl_, faults, true);
  std::vector<std::string> reroutes;
  for (size_t i = 0; i < faults.size(); ++i) {
    if (faults[i].down()) {
      reroutes.push_back(fail_one(*impl_, *this, faults[i], i));
    }
  }
  return reroutes;
}

bool Network::is_down(LinkId link) const { return impl_->link_down(link); }

std::vector<LinkId> Network::detour_links(const LinkFault& f) const {
  std::vector<LinkId> out;
  const auto d = static_cast<int64_t>(f.device.value());
  if (impl_->gpu && f.spine) {  // the leaf's other uplinks
    const GpuLayout& g = *impl_->gpu;
    for (int64_t j = 0; j < g.tree.spines_per_pod; ++j) {
      const auto [leaf, spine] = leaf_and_spine(g, d, f.nic.value_or(0), j);
      if (j != *f.spine) {
        add_both(*impl_, leaf, spine, out);
      }
    }
  } else if (impl_->gpu && (f.kind == LinkKind::kNetwork || f.kind == LinkKind::kPcie)) {
    impl_->gpu->for_each_port(
        d, [&](int64_t via, int64_t k) { nic_links(*impl_, via, k, LinkKind::kNetwork, out); });
  } else if (impl_->torus && f.ici_axis) {
    for (const LinkId l : ring_links(*impl_, *impl_->torus, d, *f.ici_axis)) {
      if (!impl_->link_down(l)) {
        out.push_back(l);
        out.push_back(*link_between(link(l).dst, link(l).src));
      }
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace meshsim::topology
