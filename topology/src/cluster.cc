#include "meshsim/topology/cluster.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <utility>

#include "cluster_checks.h"
#include "meshsim/sim/checked.h"
#include "meshsim/sim/error.h"

namespace meshsim::topology {
namespace {

std::string shape_text(const std::vector<int64_t>& shape) {
  return fmt::format("{}", fmt::join(shape, "x"));
}

// The product of a validated shape (check_torus_size bounds it).
int64_t product(const std::vector<int64_t>& shape) {
  return checked_product(shape, "the chips of a torus slice");
}

// Each extent, and the chips of `slices` slices of `shape`, within kMaxDevices; `pointer` is the
// shape's JSON pointer.
void check_torus_size(const ClusterSpec& spec, const std::vector<int64_t>& shape, int64_t slices,
                      const std::string& pointer) {
  if (slices > kMaxDevices) {
    throw InputError(spec.source, "/slices",
                     fmt::format("{} slices are more than the {} chips meshsim simulates", slices,
                                 kMaxDevices));
  }
  int64_t chips = std::max<int64_t>(slices, 1);
  for (size_t i = 0; i < shape.size(); ++i) {
    const std::optional<int64_t> next = try_mul(chips, std::max<int64_t>(shape[i], 1));
    if (shape[i] > kMaxDevices || !next || *next > kMaxDevices) {
      throw InputError(spec.source, fmt::format("{}/{}", pointer, i),
                       fmt::format("the torus {} x {} slice(s) has more than {} chips, the most "
                                   "meshsim simulates (a network that size takes about a minute)",
                                   shape_text(shape), slices, kMaxDevices));
    }
    chips = *next;
  }
}

// Which axes of a TPU slice close into rings.
//  * 3D (v4, v5p): wraparound comes from the optical switches between 4x4x4 cubes, so a slice has
//    it on every axis iff it is made of whole cubes (Google Cloud TPU v5p docs: "All 4x4x4 and
//    larger slices have full 3D torus connectivity. Slices smaller than a full cube ... don't have
//    wrap-around links").
//  * 2D (v3, v5e, v6e): an axis wraps iff it spans the whole pod edge, the chip's ici.pod_edge (JAX
//    scaling book: "a TPU v5e 8x16 will have a wraparound on the longer axis"; smaller axes have
//    none). v3 (32x32 pod) is assumed to follow the same rule.
std::vector<bool> torus_wraparound(const std::vector<int64_t>& shape, const IciSpec& ici) {
  std::vector<bool> wrap(shape.size(), false);
  if (shape.size() == 3) {
    const bool cubes =
        std::all_of(shape.begin(), shape.end(), [](int64_t e) { return e % 4 == 0; });
    std::fill(wrap.begin(), wrap.end(), cubes);
  } else {
    for (size_t i = 0; i < shape.size(); ++i) {
      wrap[i] = shape[i] == ici.pod_edge;
    }
  }
  return wrap;
}

void check_torus(ClusterSpec& spec) {
  const int64_t dims = spec.chip.ici->torus_dims;
  if (static_cast<int64_t>(spec.torus_shape.size()) != dims) {
    detail::fail_spec(spec, "/scale_up/shape",
                      fmt::format("expected {} extents ({} has a {}D torus), got [{}]", dims,
                                  spec.chip.name, dims, fmt::join(spec.torus_shape, ", ")));
  }
  for (size_t i = 0; i < spec.torus_shape.size(); ++i) {
    if (spec.torus_shape[i] <= 0) {
      detail::fail_spec(spec, fmt::format("/scale_up/shape/{}", i),
                        fmt::format("expected a positive extent, got {}", spec.torus_shape[i]));
    }
    const std::optional<int64_t> edge = spec.chip.ici->pod_edge;
    if (dims == 2 && edge && spec.torus_shape[i] > *edge) {
      detail::fail_spec(
          spec, fmt::format("/scale_up/shape/{}", i),
          fmt::format("expected at most {0}: a {1} pod is a {0}x{0} torus (larger jobs use "
                      "several slices joined by DCN)",
                      *edge, spec.chip.name));
    }
  }
  if (spec.slices <= 0) {
    detail::fail_spec(spec, "/slices",
                      fmt::format("expected a positive number of slices, got {}", spec.slices));
  }
  check_torus_size(spec, spec.torus_shape, spec.slices, "/scale_up/shape");
  const int64_t chips = product(spec.torus_shape) * spec.slices;
  if (chips != spec.device_count()) {
    detail::fail_spec(
        spec, "/scale_up/shape",
        fmt::format("the torus {} x {} slice(s) has {} chips, but nodes x devices_per_node is "
                    "{} x {} = {} (they must be equal)",
                    shape_text(spec.torus_shape), spec.slices, chips, spec.nodes,
                    spec.devices_per_node, spec.device_count()));
  }
  spec.torus_wraparound = torus_wraparound(spec.torus_shape, *spec.chip.ici);
}

void check_nvlink_domain(const ClusterSpec& spec) {
  const int64_t domain = spec.nvlink_domain_devices;
  if (domain > kMaxDevices) {
    detail::fail_spec(
        spec, "/scale_up/domain_devices",
        fmt::format("{} devices in one NVLink domain, more than the {} devices meshsim simulates",
                    domain, kMaxDevices));
  }
  if (domain <= 0 || domain % spec.devices_per_node != 0) {
    detail::fail_spec(spec, "/scale_up/domain_devices",
                      fmt::format("expected a positive multiple of devices_per_node ({}), got {}",
                                  spec.devices_per_node, domain));
  }
  if (spec.device_count() % domain != 0) {
    detail::fail_spec(
        spec, "/nodes",
        fmt::format("{} nodes x {} devices = {} devices is not a whole number of {}-device NVLink "
                    "domains (expected a multiple of {} nodes)",
                    spec.nodes, spec.devices_per_node, spec.device_count(), domain,
                    domain / spec.devices_per_node));
  }
}

// What attaches `nics` NICs to a fat tree like `ft`: the least number of tiers the network model
// builds that does, else (at its most tiers) the least leaf oversubscription that does, else
// fewer devices. The field names the knob.
struct AttachRemedy {
  FabricField field;
  std::string text;
};
AttachRemedy attach_remedy(const FatTreeSpec& ft, int64_t nics) {
  FatTreeSpec t = ft;
  for (t.tiers = ft.tiers + 1; t.tiers <= kMaxNetworkTiers; ++t.tiers) {
    if (t.max_endpoints() >= nics) {
      return {FabricField::kTiers,
              fmt::format("expected {} tiers, which attach {} NICs", t.tiers, t.max_endpoints())};
    }
  }
  t.tiers = std::max(ft.tiers, kMaxNetworkTiers);
  // Oversubscription k keeps radix k / (k + 1) of each leaf's ports down; the least integer k
  // whose tree attaches them all, up to a leaf of one uplink.
  for (int64_t k = static_cast<int64_t>(std::ceil(ft.oversubscription)); k < ft.switch_radix;
       ++k) {
    t.oversubscription = static_cast<double>(k);
    if (t.max_endpoints() >= nics) {
      return {FabricField::kOversubscription,
              fmt::format("meshsim builds at most {} switch tiers: expected a leaf "
                          "oversubscription of at least {}:1, which attaches {} NICs, or fewer "
                          "nodes",
                          kMaxNetworkTiers, k, t.max_endpoints())};
    }
  }
  t.oversubscription = static_cast<double>(ft.switch_radix - 1);
  return {FabricField::kTiers,
          fmt::format("meshsim builds at most {} tiers of radix-{} switches, which attach at "
                      "most {} NICs even at oversubscription {}:1: expected fewer nodes",
                      kMaxNetworkTiers, ft.switch_radix, t.max_endpoints(), ft.switch_radix - 1)};
}

void check_fat_tree(const ClusterSpec& spec) {
  const FatTreeSpec& ft = *spec.fat_tree;
  const int64_t endpoints = spec.device_count() * ft.nics_per_device;
  if (endpoints > ft.max_endpoints()) {
    const AttachRemedy fix = attach_remedy(ft, endpoints);
    detail::fail_spec(
        spec,
        fix.field == FabricField::kOversubscription ? "/scale_out/oversubscription"
                                                    : "/scale_out/tiers",
        fmt::format(
            "a {}-tier fat tree of radix-{} switches (oversubscription {}) attaches at most "
            "{} NICs, but {} devices x {} NICs = {} ({})",
            ft.tiers, ft.switch_radix, ft.oversubscription, ft.max_endpoints(), spec.device_count(),
            ft.nics_per_device, endpoints, fix.text));
  }
}

}  // namespace

int64_t FatTreeSpec::max_endpoints() const {
  SIM_CHECK(tiers >= 1 && switch_radix >= 2 && oversubscription >= 1.0,
            "fat tree: tiers {} radix {} oversubscription {}", tiers, switch_radix,
            oversubscription);
  if (tiers == 1) {
    return switch_radix;
  }
  const double radix = static_cast<double>(switch_radix);
  const auto down = static_cast<int64_t>(radix * oversubscription / (oversubscription + 1.0));
  // Saturates: a tree too large for int64 attaches any cluster (kMaxDevices bounds those).
  std::optional<int64_t> endpoints = try_mul(down, switch_radix);
  for (int64_t t = 2; t < tiers && endpoints; ++t) {
    endpoints = try_mul(*endpoints, switch_radix / 2);
  }
  return endpoints.value_or(std::numeric_limits<int64_t>::max());
}

int64_t ClusterSpec::scale_up_domain_size() const {
  switch (scale_up) {
    case ScaleUpFabric::kNvSwitch:
      return devices_per_node;
    case ScaleUpFabric::kNvlinkDomain:
      return nvlink_domain_devices;
    case ScaleUpFabric::kIciTorus:
      return product(torus_shape);
  }
  return devices_per_node;
}

BytesPerSec ClusterSpec::scale_up_bandwidth() const {
  return scale_up_link_bandwidth * static_cast<double>(scale_up_links);
}

BytesPerSec ClusterSpec::intra_node_bandwidth() const {
  return scale_up == ScaleUpFabric::kIciTorus ? scale_up_link_bandwidth : scale_up_bandwidth();
}

BytesPerSec ClusterSpec::inter_node_bandwidth() const {
  if (scale_out == ScaleOutFabric::kDcn) {
    return dcn_bandwidth;
  }
  return fat_tree->nic_bandwidth * static_cast<double>(fat_tree->nics_per_device);
}

void detail::fail_spec(const ClusterSpec& spec, const std::string& pointer,
                       const std::string& msg) {
  throw InputError(spec.source, pointer, msg);
}

void detail::check_device_count(const ClusterSpec& spec) {
  if (spec.nodes <= 0) {
    detail::fail_spec(spec, "/nodes",
                      fmt::format("expected a positive number of nodes, got {}", spec.nodes));
  }
  if (spec.devices_per_node <= 0) {
    detail::fail_spec(spec, "/devices_per_node",
                      fmt::format("expected a positive number of devices per node, got {}",
                                  spec.devices_per_node));
  }
  const std::optional<int64_t> devices = try_mul(spec.nodes, spec.devices_per_node);
  if (!devices || *devices > kMaxDevices) {
    const bool per_node = spec.nodes <= kMaxDevices && spec.devices_per_node > kMaxDevices;
    detail::fail_spec(
        spec, per_node ? "/devices_per_node" : "/nodes",
        fmt::format("{} nodes x {} devices is more than {} devices, the most meshsim simulates "
                    "(a network that size takes about a minute)",
                    spec.nodes, spec.devices_per_node, kMaxDevices));
  }
}

void detail::finalize_cluster(ClusterSpec& spec) {
  check_device_count(spec);
  if (spec.scale_up == ScaleUpFabric::kIciTorus) {
    check_torus(spec);
  } else if (spec.scale_up == ScaleUpFabric::kNvlinkDomain) {
    check_nvlink_domain(spec);
  }
  if (spec.scale_out == ScaleOutFabric::kFatTree) {
    check_fat_tree(spec);
  }
}

namespace {

void forbid_graph(const ClusterSpec& spec) {
  if (spec.graph) {
    detail::fail_spec(
        spec, "/graph",
        fmt::format("cannot resize \"{}\": it has an explicit graph whose devices are wired by "
                    "name (edit the graph instead)",
                    spec.name));
  }
}

// A TPU cluster without an explicit graph, else an InputError at `pointer`: "cannot `what` ...".
void require_torus(const ClusterSpec& spec, const std::string& pointer, const std::string& what,
                   const std::string& why) {
  forbid_graph(spec);
  if (spec.scale_up != ScaleUpFabric::kIciTorus) {
    detail::fail_spec(spec, pointer,
                      fmt::format("cannot {} \"{}\": its scale-up fabric is {}, not ici_torus: {}",
                                  what, spec.name, to_string(spec.scale_up), why));
  }
}

}  // namespace

namespace {

// Sets the fat tree's knobs that `o` gives, each checked for its range; what changed, in words.
// Throws FabricError on the offending field (a GPU cluster without a fat tree included).
std::vector<std::string> set_fabric_knobs(ClusterSpec& spec, const FabricOverrides& o) {
  auto need = [](bool ok, FabricField f, std::string why) {
    if (!ok) {
      throw FabricError(f, std::move(why));
    }
  };
  need(spec.fat_tree.has_value(), o.oversubscription ? FabricField::kOversubscription
                                                     : FabricField::kTiers,
       fmt::format("cluster \"{}\" has no fat tree to change (its scale-out fabric is {})",
                   spec.name, to_string(spec.scale_out)));
  FatTreeSpec& ft = *spec.fat_tree;
  std::vector<std::string> changes;
  if (o.oversubscription) {
    const double most = static_cast<double>(ft.switch_radix - 1);
    need(*o.oversubscription >= 1.0 && *o.oversubscription <= most,
         FabricField::kOversubscription,
         fmt::format("expected a leaf down:up ratio from 1 (non-blocking) to {} (a radix-{} leaf "
                     "keeps at least one uplink), got {}",
                     most, ft.switch_radix, *o.oversubscription));
    ft.oversubscription = *o.oversubscription;
    changes.push_back(fmt::format("oversubscription {}:1", ft.oversubscription));
  }
  if (o.tiers) {
    need(*o.tiers >= 1 && *o.tiers <= kMaxNetworkTiers, FabricField::kTiers,
         fmt::format("expected 1 to {} switch tiers (the network model builds leaf, spine and "
                     "core; a cluster larger than {} tiers attach needs a leaf oversubscription "
                     "above 1 instead), got {}",
                     kMaxNetworkTiers, kMaxNetworkTiers, *o.tiers));
    ft.tiers = *o.tiers;
    changes.push_back(fmt::format("{} tiers", ft.tiers));
  }
  if (o.rail_optimized) {
    ft.rail_optimized = *o.rail_optimized;
    changes.push_back(ft.rail_optimized ? "rail-optimized" : "not rail-optimized");
  }
  if (o.nics_per_device) {
    need(*o.nics_per_device >= 1 && *o.nics_per_device <= kMaxNicsPerDevice,
         FabricField::kNicsPerDevice,
         fmt::format("expected 1 to {} NICs per device (real systems have one or two), got {}",
                     kMaxNicsPerDevice, *o.nics_per_device));
    ft.nics_per_device = *o.nics_per_device;
    changes.push_back(fmt::format("{} NICs per device", ft.nics_per_device));
  }
  if (o.nic_bandwidth) {
    need(o.nic_bandwidth->value() > 0, FabricField::kNicBandwidth,
         fmt::format("expected a positive bandwidth, got {} B/s", o.nic_bandwidth->value()));
    ft.nic_bandwidth = *o.nic_bandwidth;
    changes.push_back(fmt::format("{:.0f} Gb/s NICs", ft.nic_bandwidth.value() * 8e-9));
  }
  if (o.sharp) {
    ft.sharp = *o.sharp;
    changes.push_back(ft.sharp ? "SHARP" : "no SHARP");
  }
  return changes;
}

// The tree attaches every NIC, or a FabricError on the knob that can fix it: more tiers while the
// network model builds more, else a larger leaf oversubscription (the least that attaches them),
// else fewer nodes.
void require_attaches_every_nic(const ClusterSpec& spec) {
  const FatTreeSpec& ft = *spec.fat_tree;
  const int64_t nics = spec.device_count() * ft.nics_per_device;
  if (nics <= ft.max_endpoints()) {
    return;
  }
  const std::string what =
      fmt::format("a {}-tier fat tree of radix-{} switches (oversubscription {}) attaches at most "
                  "{} NICs, but {} devices x {} NICs = {}",
                  ft.tiers, ft.switch_radix, ft.oversubscription, ft.max_endpoints(),
                  spec.device_count(), ft.nics_per_device, nics);
  const AttachRemedy fix = attach_remedy(ft, nics);
  throw FabricError(fix.field, fmt::format("{} ({})", what, fix.text));
}

}  // namespace

ClusterSpec resize_nodes(ClusterSpec spec, int64_t nodes, const FabricOverrides& fabric) {
  forbid_graph(spec);
  if (spec.scale_up == ScaleUpFabric::kIciTorus) {
    detail::fail_spec(
        spec, "/nodes",
        fmt::format("cannot set nodes of TPU cluster \"{}\": a TPU slice is sized by its torus "
                    "shape, e.g. 8x16x16",
                    spec.name));
  }
  if (nodes <= 0) {
    detail::fail_spec(
        spec, "/nodes",
        fmt::format("cannot resize \"{}\" to {} nodes: expected a positive number of nodes",
                    spec.name, nodes));
  }
  if (nodes != spec.nodes) {
    spec.description += fmt::format(" (preset resized to {} nodes)", nodes);
  }
  spec.nodes = nodes;
  detail::check_device_count(spec);  // before the NIC count multiplies it
  // Fewer nodes than one NVLink domain holds are part of one domain (e.g. 16 of an NVL72 rack's
  // 18 trays, the 64 GPUs NVIDIA's GB200 benchmarks run on): every GPU still reaches every other
  // through the NVLink switches, and nothing else shares the domain.
  if (spec.scale_up == ScaleUpFabric::kNvlinkDomain &&
      spec.device_count() < spec.nvlink_domain_devices) {
    spec.description += fmt::format(" ({} of one {}-GPU NVLink domain)", spec.device_count(),
                                    spec.nvlink_domain_devices);
    spec.nvlink_domain_devices = spec.device_count();
  }
  if (!fabric.empty()) {
    set_fabric_knobs(spec, fabric);
  }
  if (fabric.tiers) {
    require_attaches_every_nic(spec);  // tiers given are kept: too few is that knob's fault
  } else if (spec.fat_tree) {
    FatTreeSpec& ft = *spec.fat_tree;
    const int64_t nics = spec.device_count() * ft.nics_per_device;
    const int64_t tiers = ft.tiers;
    while (ft.tiers < kMaxNetworkTiers && nics > ft.max_endpoints()) {
      ++ft.tiers;
    }
    if (ft.tiers != tiers) {
      spec.description += fmt::format(" ({} switch tiers for {} NICs)", ft.tiers, nics);
    }
    // At the most tiers the model builds: a larger oversubscription may still attach them (said
    // on that knob); if none does, the size is at fault (finalize_cluster refuses it).
    if (nics > ft.max_endpoints() &&
        attach_remedy(ft, nics).field == FabricField::kOversubscription) {
      require_attaches_every_nic(spec);
    }
  }
  detail::finalize_cluster(spec);
  return spec;
}

ClusterSpec resize_devices(ClusterSpec spec, int64_t devices, const FabricOverrides& fabric) {
  forbid_graph(spec);
  if (spec.scale_up == ScaleUpFabric::kIciTorus) {
    detail::fail_spec(spec, "/nodes",
                      fmt::format("cannot set the GPUs of TPU cluster \"{}\": a TPU slice is sized "
                                  "by its torus shape, e.g. 8x16x16",
                                  spec.name));
  }
  const int64_t per_node = spec.devices_per_node;
  if (devices > 0 && devices % per_node == 0) {
    return resize_nodes(std::move(spec), devices / per_node, fabric);
  }
  if (devices <= 0 || devices > per_node || per_node % devices != 0) {
    detail::fail_spec(spec, "/nodes",
                      fmt::format("cannot resize \"{}\" to {} GPUs: expected whole {}-GPU nodes "
                                  "(a multiple of {}) or part of one node (a divisor of {})",
                                  spec.name, devices, per_node, per_node, per_node));
  }
  // Part of one node: the GPUs keep their links to the node's switch (NVSwitch, or the NVLink
  // domain's), so each still reaches the others at its full NVLink bandwidth.
  spec.description += fmt::format(" ({} GPUs of one {}-GPU node)", devices, per_node);
  spec.devices_per_node = devices;
  if (spec.scale_up == ScaleUpFabric::kNvlinkDomain) {
    spec.nvlink_domain_devices = std::min(spec.nvlink_domain_devices, devices);
  }
  return resize_nodes(std::move(spec), 1, fabric);
}

ClusterSpec override_fabric(ClusterSpec spec, const FabricOverrides& o) {
  if (o.empty()) {
    return spec;
  }
  const std::vector<std::string> changes = set_fabric_knobs(spec, o);
  require_attaches_every_nic(spec);
  spec.description += fmt::format(" ({})", fmt::join(changes, ", "));
  detail::finalize_cluster(spec);
  return spec;
}

ClusterSpec resize_torus(ClusterSpec spec, std::vector<int64_t> shape) {
  require_torus(spec, "/scale_up/shape", "set a torus shape on",
                "a GPU cluster is sized by its number of nodes");
  check_torus_size(spec, shape, spec.slices, "/scale_up/shape");
  spec.torus_shape = std::move(shape);
  int64_t chips = spec.slices;
  for (const int64_t extent : spec.torus_shape) {
    chips *= std::max<int64_t>(extent, 1);  // non-positive extents are reported by the check
  }
  const int64_t per_host = std::min(spec.chip.ici->chips_per_host, chips);
  if (chips % per_host != 0) {
    detail::fail_spec(spec, "/scale_up/shape",
                      fmt::format("a {} slice has {} chips, which do not fill whole {}-chip hosts",
                                  shape_text(spec.torus_shape), chips, per_host));
  }
  spec.devices_per_node = per_host;
  spec.nodes = chips / per_host;
  spec.description += fmt::format(" (preset resized to a {} slice)", shape_text(spec.torus_shape));
  detail::finalize_cluster(spec);
  return spec;
}

ClusterSpec join_slices(ClusterSpec spec, int64_t slices) {
  require_torus(spec, "/slices", "join slices of", "only TPU slices are joined by DCN");
  if (slices <= 0) {
    detail::fail_spec(spec, "/slices",
                      fmt::format("expected a positive number of slices, got {}", slices));
  }
  check_torus_size(spec, spec.torus_shape, slices, "/scale_up/shape");
  const int64_t per_slice = product(spec.torus_shape);
  spec.slices = slices;
  const int64_t per_host = std::min(spec.chip.ici->chips_per_host, per_slice);
  spec.devices_per_node = per_host;
  spec.nodes = per_slice * slices / per_host;
  spec.description += fmt::format(" ({} slices joined by DCN)", slices);
  detail::finalize_cluster(spec);
  return spec;
}

}  // namespace meshsim::topology
