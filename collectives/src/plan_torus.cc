// Torus-ring schedules: per-axis rings on a TPU ICI torus, all of the group's axes at once.
//
// Applies when the group's devices are exactly an axis-aligned box of one slice: along every axis
// either one coordinate, or a contiguous range. A range that is the whole axis of a wrapping axis
// (extent >= 3) is a ring with wraparound links, run bidirectionally (half of every block each way
// round, both directions of every link busy). Any other range is a line, run as the folded ring
// 0, 2, 4, ..., 5, 3, 1 (every ring hop is one or two links, and each direction of each link
// carries exactly one flow), so per step a line moves one block per link direction.
//
// Multi-axis collectives (the scaling book, "How to Think About TPUs" / sharded matmuls: an
// AllGather over axes X and Y runs on both at once): for D axes the buffer is split into D parts;
// part j visits the axes in the rotated order j, j+1, ..., so at every phase each axis serves one
// part and all axes work concurrently. For an all-gather of n bytes over P = e_1 ... e_D chips,
// part j (n/D bytes) gathers its first axis on chunks of n/(D P), its next on chunks e times
// larger, and so on: per axis ring time (e-1)/e * chunk / (B * (2 if the axis wraps else 1)),
// phases in sequence, parts in parallel. With equal extents e on wrapping axes this is
//     D (e-1) alpha + (P-1)/P * n / (2 D B),
// exactly the bound set by each chip's 2D incoming links: the simpler "(e-1)/e * (n/D) per axis"
// would move less than the (P-1)/P n every chip must receive. Reduce-scatter is the mirror image
// (chunks shrink), all-reduce is reduce-scatter then all-gather in the reverse axis order.
// All-to-all runs axis after axis (dimension order): on each axis every chip sends n/e to each of
// the e-1 other chips of its line (routed by the torus), forwarding data bound for other lines.
// When parts' axes have different extents, their phases run in lock step until the shorter ring
// is done (an upper bound; exact for equal extents).
#include <fmt/format.h>

#include <algorithm>
#include <functional>
#include <limits>
#include <numeric>
#include <variant>

#include "meshsim/sim/error.h"
#include "planner_util.h"

namespace meshsim::collectives::detail {
namespace {

struct AxisRange {
  size_t axis = 0;
  int64_t lo = 0;
  int64_t len = 0;
  bool wraps = false;
};

struct SubGrid {
  int64_t slice = 0;
  std::vector<int64_t> origin;  // the box's lowest corner, every torus axis
  std::vector<AxisRange> axes;  // the group's axes (len >= 2), in axis order
};

std::variant<SubGrid, std::string> find_subgrid(Group group, const topology::Network& net) {
  const auto& spec = net.spec();
  if (spec.scale_up != topology::ScaleUpFabric::kIciTorus) {
    return std::string("needs an ICI torus (a TPU slice); this cluster's scale-up fabric is ") +
           std::string(topology::to_string(spec.scale_up));
  }
  const auto& shape = spec.torus_shape;
  const int64_t slice_size =
      std::accumulate(shape.begin(), shape.end(), int64_t{1}, std::multiplies<>());
  SubGrid g;
  std::vector<int64_t> lo(shape.size(), std::numeric_limits<int64_t>::max());
  std::vector<int64_t> hi(shape.size(), std::numeric_limits<int64_t>::min());
  for (size_t i = 0; i < group.size(); ++i) {
    const auto c = net.torus_coords(group[i]);
    const int64_t slice = static_cast<int64_t>(group[i].value()) / slice_size;
    if (c.size() != shape.size() || net.device_at(c, slice) != group[i]) {
      return fmt::format("device {} has no torus coordinates", group[i].value());
    }
    if (i == 0) {
      g.slice = slice;
    } else if (slice != g.slice) {
      return std::string("needs a group inside one slice; this one spans slices (joined by DCN)");
    }
    for (size_t a = 0; a < c.size(); ++a) {
      lo[a] = std::min(lo[a], c[a]);
      hi[a] = std::max(hi[a], c[a]);
    }
  }
  int64_t box = 1;
  for (size_t a = 0; a < shape.size(); ++a) {
    const int64_t len = hi[a] - lo[a] + 1;
    box *= len;
    if (len >= 2) {
      const bool full = len == shape[a];
      g.axes.push_back({a, lo[a], len, full && shape[a] >= 3 && spec.torus_wraparound[a]});
    }
  }
  if (box != static_cast<int64_t>(group.size())) {
    return fmt::format(
        "needs the group's devices to form an axis-aligned sub-grid of the torus; "
        "their bounding box holds {} chips, the group {}",
        box, group.size());
  }
  g.origin = lo;
  return g;
}

// Ring order of the offsets 0..len-1 along an axis range: in order on a wrapping ring, folded
// (evens up, odds down) on a line.
std::vector<int64_t> ring_order(const AxisRange& r) {
  std::vector<int64_t> order;
  if (r.wraps) {
    for (int64_t i = 0; i < r.len; ++i) {
      order.push_back(i);
    }
    return order;
  }
  for (int64_t i = 0; i < r.len; i += 2) {
    order.push_back(i);
  }
  for (int64_t i = r.len % 2 == 0 ? r.len - 1 : r.len - 2; i >= 1; i -= 2) {
    order.push_back(i);
  }
  return order;
}

// Every line of the box along axis range `k` (the group's devices in ring order).
std::vector<std::vector<DeviceId>> lines(const SubGrid& g, size_t k, const topology::Network& net) {
  const AxisRange& along = g.axes[k];
  const auto order = ring_order(along);
  std::vector<std::vector<DeviceId>> out;
  std::vector<int64_t> pos(g.axes.size(), 0);  // offsets on the other group axes
  while (true) {
    std::vector<int64_t> c = g.origin;
    for (size_t i = 0; i < g.axes.size(); ++i) {
      c[g.axes[i].axis] = g.axes[i].lo + (i == k ? 0 : pos[i]);
    }
    std::vector<DeviceId> line;
    for (const int64_t off : order) {
      c[along.axis] = along.lo + off;
      line.push_back(net.device_at(c, g.slice));
    }
    out.push_back(std::move(line));
    size_t i = 0;  // odometer over the other axes
    for (; i < g.axes.size(); ++i) {
      if (i == k) {
        continue;
      }
      if (++pos[i] < g.axes[i].len) {
        break;
      }
      pos[i] = 0;
    }
    if (i == g.axes.size()) {
      return out;
    }
  }
}

// One ring step on axis range k moving `block` per chip.
void append_axis_flows(const SubGrid& g, size_t k, Bytes block, const topology::Network& net,
                       std::vector<Flow>& out) {
  const auto ls = lines(g, k, net);
  if (g.axes[k].wraps) {
    append_ring_flows(net, ls, 1, shard(block, 1, 2), out);
    append_ring_flows(net, ls, -1, shard(block, 1, 2), out);
  } else {
    append_ring_flows(net, ls, 1, block, out);
  }
}

struct PartPhase {
  size_t axis = 0;  // index into SubGrid::axes
  Bytes block;
};

// One phase: every part's ring on its axis, in lock step while their rings last.
void add_phase(Schedule& s, const SubGrid& g, const std::vector<PartPhase>& parts,
               const topology::Network& net, const std::string& label) {
  std::vector<int64_t> counts;
  for (const auto& pp : parts) {
    counts.push_back(g.axes[pp.axis].len - 1);
  }
  std::sort(counts.begin(), counts.end());
  counts.erase(std::unique(counts.begin(), counts.end()), counts.end());
  int64_t done = 0;
  for (const int64_t c : counts) {
    std::vector<Flow> flows;
    for (const auto& pp : parts) {
      if (g.axes[pp.axis].len - 1 > done) {
        append_axis_flows(g, pp.axis, pp.block, net, flows);
      }
    }
    s.steps.push_back(make_step(std::move(flows), c - done, label));
    done = c;
  }
}

// Axis (index into g.axes) that part j uses at phase t of D.
size_t part_axis(size_t j, size_t t, size_t d) { return (j + t) % d; }

void add_reduce_scatter(Schedule& s, const SubGrid& g, Bytes part, const topology::Network& net) {
  const size_t d = g.axes.size();
  std::vector<int64_t> done(d, 1);  // product of extents already reduced, per part
  for (size_t t = 0; t < d; ++t) {
    std::vector<PartPhase> parts;
    for (size_t j = 0; j < d; ++j) {
      const size_t a = part_axis(j, t, d);
      done[j] *= g.axes[a].len;
      parts.push_back({a, shard(part, 1, done[j])});
    }
    add_phase(s, g, parts, net, fmt::format("torus ring reduce-scatter step (phase {})", t + 1));
  }
}

// All-gather phases; `reversed` visits each part's axes in the reverse order (after a
// reduce-scatter, for all-reduce).
void add_all_gather(Schedule& s, const SubGrid& g, Bytes part, bool reversed,
                    const topology::Network& net) {
  const size_t d = g.axes.size();
  auto axis_at = [&](size_t j, size_t t) { return part_axis(j, reversed ? d - 1 - t : t, d); };
  for (size_t t = 0; t < d; ++t) {
    std::vector<PartPhase> parts;
    for (size_t j = 0; j < d; ++j) {
      int64_t remaining = 1;  // extents still to gather, this phase's included
      for (size_t u = t; u < d; ++u) {
        remaining *= g.axes[axis_at(j, u)].len;
      }
      parts.push_back({axis_at(j, t), shard(part, 1, remaining)});
    }
    add_phase(s, g, parts, net, fmt::format("torus ring all-gather step (phase {})", t + 1));
  }
}

void add_all_to_all(Schedule& s, const SubGrid& g, Bytes bytes, const topology::Network& net) {
  for (size_t k = 0; k < g.axes.size(); ++k) {
    const Bytes block = shard(bytes, 1, g.axes[k].len);
    std::vector<Flow> flows;
    for (const auto& line : lines(g, k, net)) {
      for (const DeviceId a : line) {
        for (const DeviceId b : line) {
          if (a != b) {
            flows.push_back(device_flow(net, a, b, block));
          }
        }
      }
    }
    s.steps.push_back(make_step(std::move(flows), 1,
                                fmt::format("torus all-to-all along axis {}", g.axes[k].axis)));
  }
}

}  // namespace

Reason torus_unsupported(CollectiveKind, Group group, const topology::Network& net) {
  auto g = find_subgrid(group, net);
  if (auto* why = std::get_if<std::string>(&g)) {
    return *why;
  }
  return std::nullopt;
}

Schedule plan_torus_rings(CollectiveKind kind, Bytes bytes, Group group,
                          const topology::Network& net) {
  Schedule s;
  s.algorithm = Algorithm::kTorusRings;
  auto found = find_subgrid(group, net);
  SIM_CHECK(std::holds_alternative<SubGrid>(found),
            "torus rings on a group that is not a sub-grid");
  const SubGrid& g = std::get<SubGrid>(found);
  const Bytes part = shard(bytes, 1, static_cast<int64_t>(g.axes.size()));
  switch (kind) {
    case CollectiveKind::kAllReduce:
      add_reduce_scatter(s, g, part, net);
      add_all_gather(s, g, part, true, net);
      break;
    case CollectiveKind::kReduceScatter:
      add_reduce_scatter(s, g, part, net);
      break;
    case CollectiveKind::kAllGather:
      add_all_gather(s, g, part, false, net);
      break;
    case CollectiveKind::kAllToAll:
      add_all_to_all(s, g, bytes, net);
      break;
    default:
      SIM_CHECK(false, "torus rings have no {} schedule", to_string(kind));
  }
  return s;
}

}  // namespace meshsim::collectives::detail
