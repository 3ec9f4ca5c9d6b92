// Degraded links and NICs (network.h: scale_bandwidth, device_links).
#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "meshsim/sim/error.h"
#include "network_impl.h"

namespace meshsim::topology {

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
  for (const LinkFault& f : faults) {
    const std::vector<LinkId> links = device_links(f.device, f.kind);
    SIM_CHECK(!links.empty(), "device {} has no {} links to degrade", f.device.value(),
              to_string(f.kind));
    for (const LinkId l : links) {
      scale_bandwidth(l, f.factor);
    }
  }
}

}  // namespace meshsim::topology
