#include "collective_command.h"

#include <fmt/format.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "meshsim/scenario/comm_setup.h"
#include "meshsim/scenario/scenario.h"
#include "meshsim/scenario/step_report.h"
#include "output_file.h"
#include "report.h"
#include "scenario_flags.h"
#include "meshsim/collectives/collective_planner.h"
#include "meshsim/collectives/comm_model.h"
#include "meshsim/collectives/volume.h"
#include "meshsim/sim/error.h"
#include "meshsim/sim/unit_parse.h"
#include "meshsim/topology/network.h"

namespace meshsim::cli {

topology::ClusterSpec load_cluster_args(const ClusterArgs& a) {
  Scenario s;
  s.cluster = a.cluster;
  s.nodes = a.nodes;
  s.shape = a.shape;
  s.hardware_catalogue = a.hardware_catalogue;
  s.fabric = a.fabric;
  return located(s, [&] { return scenario::load_cluster(s); });
}

void topology_command(const ClusterArgs& args, std::ostream& out) {
  const topology::ClusterSpec spec = load_cluster_args(args);
  const topology::Network net = topology::Network::build(spec);
  out << topology::format_summary(spec, net.summary());
}

namespace {

[[noreturn]] void bad_group(const std::string& text, const std::string& why) {
  throw InputError("--group", "",
                   fmt::format("\"{}\": {} (expected all, a list such as 0-7,64, node:0-3 or "
                               "rail:K)",
                               text, why));
}

int64_t parse_int(const std::string& text, const std::string& whole) {
  const std::optional<int64_t> v = parse_integer(text);
  if (!v || *v < 0) {
    bad_group(whole, fmt::format("\"{}\" is not a non-negative integer", text));
  }
  return *v;
}

// "a-b" or "a" -> [a, b], with b < `count` (checked before anything is expanded, so that a range
// of 10^12 ranks is refused at once rather than enumerated); `what` names the things counted.
std::pair<int64_t, int64_t> parse_range(const std::string& item, const std::string& whole,
                                        int64_t count, const char* what) {
  const size_t dash = item.find('-');
  const int64_t lo = parse_int(item.substr(0, dash), whole);
  const int64_t hi = dash == std::string::npos ? lo : parse_int(item.substr(dash + 1), whole);
  if (hi < lo) {
    bad_group(whole, fmt::format("range {} runs backwards", item));
  }
  if (hi >= count) {
    bad_group(whole, fmt::format("the cluster has {} 0..{}", what, count - 1));
  }
  return {lo, hi};
}

}  // namespace

std::vector<int64_t> parse_group(const std::string& text, const topology::ClusterSpec& spec) {
  const int64_t devices = spec.device_count();
  const int64_t per_node = spec.devices_per_node;
  std::set<int64_t> ranks;
  if (text == "all") {
    for (int64_t r = 0; r < devices; ++r) {
      ranks.insert(r);
    }
  } else if (text.starts_with("node:")) {
    const auto [lo, hi] = parse_range(text.substr(5), text, spec.nodes, "nodes");
    for (int64_t n = lo; n <= hi; ++n) {
      for (int64_t d = 0; d < per_node; ++d) {
        ranks.insert(n * per_node + d);
      }
    }
  } else if (text.starts_with("rail:")) {
    const int64_t k = parse_int(text.substr(5), text);
    if (k >= per_node) {
      bad_group(text, fmt::format("a node has devices 0..{}", per_node - 1));
    }
    for (int64_t n = 0; n < spec.nodes; ++n) {
      ranks.insert(n * per_node + k);
    }
  } else {
    size_t start = 0;
    while (start <= text.size()) {
      const size_t comma = text.find(',', start);
      const std::string item = text.substr(start, comma - start);
      if (item.empty()) {
        bad_group(text, "empty item");
      }
      const auto [lo, hi] = parse_range(item, text, devices, "devices");
      for (int64_t r = lo; r <= hi; ++r) {
        ranks.insert(r);
      }
      if (comma == std::string::npos) {
        break;
      }
      start = comma + 1;
    }
  }
  if (ranks.empty() || *ranks.rbegin() >= devices) {
    bad_group(text, fmt::format("the cluster has devices 0..{}", devices - 1));
  }
  return {ranks.begin(), ranks.end()};
}

namespace {
constexpr Bytes kMaxCollectiveBytes = Bytes::of(int64_t{1} << 50);
}  // namespace

std::vector<Bytes> parse_sizes(const std::string& text, int64_t factor) {
  const size_t colon = text.find(':');
  auto fail = [&](const std::string& why) {
    throw InputError("--sizes", "",
                     fmt::format("\"{}\": {} (expected MIN:MAX such as 8B:8GiB)", text, why));
  };
  if (factor < 2) {
    throw InputError("--factor", "", fmt::format("expected an integer >= 2, got {}", factor));
  }
  Bytes lo;
  Bytes hi;
  try {
    lo = parse_bytes(text.substr(0, colon));
    hi = colon == std::string::npos ? lo : parse_bytes(text.substr(colon + 1));
  } catch (const UnitParseError& e) {
    fail(e.what());
  }
  if (lo <= Bytes::zero() || hi < lo) {
    fail("sizes must be positive and MIN <= MAX");
  }
  if (hi > kMaxCollectiveBytes) {
    fail("MAX is above the limit of 1 PiB (2^50 bytes) per collective, a million times the "
         "largest buffers nccl-tests sweeps");
  }
  // MIN, MIN x factor, ... up to MAX; never forming a product past MAX (near 2^63 it would not
  // fit).
  std::vector<Bytes> out{lo};
  while (out.back().count() <= hi.count() / factor) {
    out.push_back(out.back() * factor);
  }
  return out;
}

namespace {

CollectiveKind parse_op(const std::string& op, bool& sendrecv) {
  static const std::pair<const char*, CollectiveKind> kOps[] = {
      {"allreduce", CollectiveKind::kAllReduce},   {"reducescatter", CollectiveKind::kReduceScatter},
      {"allgather", CollectiveKind::kAllGather},   {"alltoall", CollectiveKind::kAllToAll},
      {"broadcast", CollectiveKind::kBroadcast},   {"reduce", CollectiveKind::kReduce}};
  sendrecv = op == "sendrecv";
  for (const auto& [name, kind] : kOps) {
    if (op == name) {
      return kind;
    }
  }
  if (sendrecv) {
    return CollectiveKind::kBroadcast;  // unused
  }
  throw InputError("--op", "",
                   fmt::format("\"{}\" is not one of allreduce, reducescatter, allgather, "
                               "alltoall, broadcast, reduce, sendrecv",
                               op));
}

struct Row {
  Bytes bytes;
  Duration time;
  collectives::CommShape shape;
};

Row time_one(CollectiveKind kind, bool sendrecv, Bytes bytes, const std::vector<DeviceId>& group,
             const collectives::CollectivePlanner& planner, collectives::SharedNetwork& network) {
  collectives::CommShape shape;
  if (sendrecv) {
    const std::pair<DeviceId, DeviceId> pair{group[0], group[1]};
    shape = planner.send_recv({&pair, 1}, bytes);
  } else {
    const std::vector<std::vector<DeviceId>> groups = {group};
    try {
      shape = planner.collective(kind, bytes, groups);
    } catch (const collectives::CommError& e) {
      throw locate(e);
    }
  }
  const Duration t = collectives::run_alone(network, shape);
  return {bytes, t, std::move(shape)};
}

std::string label(const collectives::CommShape& s) {
  if (s.protocol) {
    return fmt::format("{}/{}", collectives::to_string(s.algorithm),
                       collectives::to_string(*s.protocol));
  }
  return std::string(collectives::to_string(s.algorithm));
}

}  // namespace

void collective_command(const CollectiveArgs& a, std::ostream& out) {
  const topology::ClusterSpec spec = load_cluster_args(a.cluster);
  const topology::Network net = topology::Network::build(spec);
  bool sendrecv = false;
  const CollectiveKind kind = parse_op(a.op, sendrecv);
  const scenario::CommOptions options = comm_options(CommFlags{a.backend, a.algo, a.proto, a.nccl});
  const collectives::CollectivePlanner planner(net, options.collective);
  std::vector<DeviceId> group;
  for (const int64_t r : parse_group(a.group, spec)) {
    group.emplace_back(static_cast<uint32_t>(r));
  }
  if (group.size() < 2) {
    throw InputError("--group", "", fmt::format("\"{}\": a collective needs two ranks", a.group));
  }
  const std::vector<Bytes> sizes = parse_sizes(a.sizes, a.factor);
  const auto network = collectives::make_network(options.backend, planner);
  const auto p = static_cast<int64_t>(group.size());
  out << fmt::format("# meshsim collective: {} over {} ranks of {} ({} nodes x {} {}), {} backend, "
                     "NCCL {} model\n",
                     a.op, p, spec.name, spec.nodes, spec.devices_per_node, spec.chip.name,
                     network->name(), collectives::to_string(planner.options().nccl_version));
  out << fmt::format("# {:>12} {:>12} {:>12} {:>12} {:>12}  {}\n", "size(B)", "count", "time(us)",
                     "algbw(GB/s)", "busbw(GB/s)", "algorithm/protocol");
  nlohmann::json rows = nlohmann::json::array();
  const double factor = sendrecv ? 1.0 : collectives::bus_bandwidth_factor(kind, p);
  for (const Bytes b : sizes) {
    const Row row = time_one(kind, sendrecv, b, group, planner, *network);
    const double algbw = b.as_double() / row.time.seconds() * 1e-9;
    const double busbw = algbw * factor;
    out << fmt::format("  {:>12} {:>12} {:>12.2f} {:>12.2f} {:>12.2f}  {}\n", b.count(),
                       b.count() / 4, row.time.seconds() * 1e6, algbw, busbw, label(row.shape));
    nlohmann::json r = {{"bytes", b.count()},
                        {"time_s", row.time.seconds()},
                        {"algbw_gbps", algbw},
                        {"busbw_gbps", busbw},
                        {"algorithm", std::string(collectives::to_string(row.shape.algorithm))},
                        {"channels", row.shape.channels}};
    if (row.shape.protocol) {
      r["protocol"] = std::string(collectives::to_string(*row.shape.protocol));
    }
    rows.push_back(std::move(r));
  }
  if (a.json_path) {
    write_json_file(*a.json_path, rows, "--json");
  }
}

}  // namespace meshsim::cli
