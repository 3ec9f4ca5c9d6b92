// Issue 12: meshsim's collective model against every nccl-tests sweep of
// validation/collectives/sweeps.json (dev sweeps read from validation/published/collectives.json by id prefix,
// check sweeps committed with their sources). Prints each sweep's errors (ctest -V -R
// CollectiveSweeps) and holds the targets: within 10% of the measured busbw at every size
// >= 64 KiB with a mean within 5%, within 20% below. A sweep whose platform meshsim has no
// calibration for records the errors it has today ("expect" in sweeps.json, with the reason), so
// that the test still fails on a regression and the miss stays visible.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <cmath>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "collective_test_util.h"
#include "meshsim/collectives/collective_planner.h"
#include "meshsim/collectives/shared_network.h"
#include "meshsim/collectives/volume.h"

namespace meshsim::collectives {
namespace {

const std::string kRoot = MESHSIM_SOURCE_DIR;

nlohmann::json read_json(const std::string& path) {
  std::ifstream in(path);
  EXPECT_TRUE(in.good()) << path;
  return nlohmann::json::parse(in);
}

struct Point {
  int64_t bytes = 0;
  double measured = 0;
};

topology::ClusterSpec cluster_of(const nlohmann::json& s) {
  std::string name = s.at("cluster");
  if (name.find('/') != std::string::npos) {
    name = kRoot + "/" + name;
  }
  topology::ClusterSpec c = topology::load_cluster(name, testing::catalogue());
  if (s.contains("nodes")) {
    c = topology::resize_nodes(std::move(c), s.at("nodes").get<int64_t>());
  }
  if (s.contains("shape")) {  // a TPU slice of this torus
    c = topology::resize_torus(std::move(c), s.at("shape").get<std::vector<int64_t>>());
  }
  return c;
}

// "all" or "A-B".
std::vector<DeviceId> group_of(const std::string& text, const topology::ClusterSpec& c) {
  if (text == "all") {
    return testing::devices(0, c.device_count());
  }
  const size_t dash = text.find('-');
  const int64_t lo = std::stoll(text.substr(0, dash));
  const int64_t hi = std::stoll(text.substr(dash + 1));
  return testing::devices(lo, hi - lo + 1);
}

std::vector<Point> points_of(const nlohmann::json& s) {
  std::vector<Point> out;
  if (s.contains("points")) {
    for (const auto& p : s.at("points")) {
      out.push_back({p.at("bytes").get<int64_t>(), p.at("busbw_gbps").get<double>()});
    }
    return out;
  }
  const std::string prefix = s.at("dev_id_prefix");
  for (const auto& r : read_json(kRoot + "/validation/published/collectives.json")) {
    const std::string id = r.at("id");
    if (id.rfind(prefix, 0) == 0 && r.at("message_size_bytes").is_number_integer()) {
      out.push_back({r.at("message_size_bytes").get<int64_t>(),
                     r.at("measured").at("value").get<double>()});
    }
  }
  return out;
}

CollectiveKind kind_of(const std::string& op) {
  if (op == "allgather") {
    return CollectiveKind::kAllGather;
  }
  return op == "alltoall" ? CollectiveKind::kAllToAll : CollectiveKind::kAllReduce;
}

CollectiveOptions options_of(const nlohmann::json& s) {
  CollectiveOptions o;
  o.nccl_version = *parse_nccl_version(s.at("nccl").get<std::string>());
  if (s.contains("algorithm")) {
    o.algorithm = *parse_enum<Algorithm>(s.at("algorithm").get<std::string>());
  }
  return o;
}

// busbw the model predicts for `bytes`.
double predict(const nlohmann::json& s, int64_t bytes, std::string* what = nullptr) {
  const topology::ClusterSpec c = cluster_of(s);
  const topology::Network net = topology::Network::build(c);
  const CollectivePlanner planner(net, options_of(s));
  const auto group = group_of(s.at("group"), c);
  const CollectiveKind kind = kind_of(s.at("collective"));
  const std::vector<std::vector<DeviceId>> groups = {group};
  const CommShape shape = planner.collective(kind, Bytes::of(bytes), groups);
  const auto network = make_fluid_network(planner.capacities());
  const Duration t = run_alone(*network, shape);
  if (what) {
    *what = fmt::format("{}/{}", to_string(shape.algorithm),
                        shape.protocol ? to_string(*shape.protocol) : "-");
  }
  const double algbw = static_cast<double>(bytes) / t.seconds() * 1e-9;
  return algbw * bus_bandwidth_factor(kind, static_cast<int64_t>(group.size()));
}

struct Errors {
  double max_abs_large = 0;  // >= 64 KiB
  double mean_large = 0;
  double max_abs_small = 0;  // < 64 KiB
};

Errors check_sweep(const nlohmann::json& s) {
  const std::vector<Point> pts = points_of(s);
  EXPECT_FALSE(pts.empty()) << s.at("id");
  // One network for the sweep: the planner is rebuilt per point by predict() only for brevity of
  // the test; the network is idle between points.
  std::string table;
  Errors e;
  double sum = 0;
  int n = 0;
  for (const Point& p : pts) {
    if (p.measured < 0.05) {
      continue;  // rounded away by nccl-tests' two decimals
    }
    std::string what;
    const double pred = predict(s, p.bytes, &what);
    const double err = pred / p.measured - 1;
    table += fmt::format("  {:>12} {:>9.2f} {:>9.2f} {:>+7.1f}%  {}\n", p.bytes, pred, p.measured,
                         err * 100, what);
    if (p.bytes >= 64 * 1024) {
      e.max_abs_large = std::max(e.max_abs_large, std::abs(err));
      sum += err;
      ++n;
    } else {
      e.max_abs_small = std::max(e.max_abs_small, std::abs(err));
    }
  }
  e.mean_large = n > 0 ? sum / n : 0;
  std::cout << fmt::format("sweep {} ({}): {}\n  {:>12} {:>9} {:>9} {:>8}  algorithm\n{}",
                           s.at("id").get<std::string>(), s.at("kind").get<std::string>(),
                           s.at("source").get<std::string>(), "bytes", "model", "measured",
                           "error", table)
            << fmt::format("  >= 64 KiB: max |error| {:.1f}%, mean {:+.1f}%; below: max |error| "
                           "{:.1f}%\n\n",
                           e.max_abs_large * 100, e.mean_large * 100, e.max_abs_small * 100);
  return e;
}

TEST(CollectiveSweeps, EverySweepWithinItsTarget) {
  const nlohmann::json doc = read_json(kRoot + "/validation/collectives/sweeps.json");
  for (const auto& s : doc.at("sweeps")) {
    SCOPED_TRACE(s.at("id").get<std::string>());
    const Errors e = check_sweep(s);
    double large = 0.10;
    double mean = 0.05;
    double small = 0.20;
    if (s.contains("expect")) {  // a documented miss: today's errors, as a regression bound
      const auto& x = s.at("expect");
      large = x.at("max_abs_large").get<double>();
      mean = x.at("max_abs_mean").get<double>();
      small = x.at("max_abs_small").get<double>();
      std::cout << fmt::format(
          "  misses the target (bounds here: {:.0f}% / mean {:.0f}% / below {:.0f}%): {}\n\n",
          large * 100, mean * 100, small * 100, x.at("reason").get<std::string>());
    }
    EXPECT_LE(e.max_abs_large, large);
    EXPECT_LE(std::abs(e.mean_large), mean);
    EXPECT_LE(e.max_abs_small, small);
  }
}

// A figure's measured busbw: as stated, or from the time it states (nccl-tests' convention: the
// algorithm bandwidth bytes / time times the collective's bus factor).
double measured_busbw(const nlohmann::json& f) {
  if (f.contains("busbw_gbps")) {
    return f.at("busbw_gbps").get<double>();
  }
  const auto bytes = static_cast<double>(f.at("bytes").get<int64_t>());
  const int64_t ranks = static_cast<int64_t>(group_of(f.at("group"), cluster_of(f)).size());
  return bytes / (f.at("time_us").get<double>() * 1e-6) * 1e-9 *
         bus_bandwidth_factor(kind_of(f.at("collective")), ranks);
}

// Every single figure within 10% of the model, but for documented misses ("expect": today's
// error as a regression bound, with the reason).
TEST(CollectiveSweeps, SingleFigures) {
  const nlohmann::json doc = read_json(kRoot + "/validation/collectives/sweeps.json");
  for (const auto& f : doc.at("figures")) {
    SCOPED_TRACE(f.at("id").get<std::string>());
    std::string what;
    const double pred = predict(f, f.at("bytes").get<int64_t>(), &what);
    const double meas = measured_busbw(f);
    std::cout << fmt::format("figure {} ({}): model {:.2f} GB/s busbw ({}), measured {:.2f}: "
                             "{:+.1f}%\n",
                             f.at("id").get<std::string>(), f.at("kind").get<std::string>(), pred,
                             what, meas, (pred / meas - 1) * 100);
    double bound = 0.10;
    if (f.contains("expect")) {
      bound = f.at("expect").at("max_abs").get<double>();
      std::cout << fmt::format("  misses the target (bound here: {:.0f}%): {}\n", bound * 100,
                               f.at("expect").at("reason").get<std::string>());
    }
    EXPECT_NEAR(pred / meas, 1.0, bound);
  }
}

}  // namespace
}  // namespace meshsim::collectives
