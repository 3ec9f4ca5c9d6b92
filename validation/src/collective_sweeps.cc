// Measured sweeps in (nccl-tests logs, meshsim's JSON tables) and the cluster fragment out
// (collective_fit.h).
#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "meshsim/collectives/volume.h"
#include "meshsim/sim/error.h"
#include "meshsim/sim/json_input.h"
#include "meshsim/validation/collective_fit.h"

namespace meshsim::validation {
namespace {

using collectives::Algorithm;
using collectives::NcclProtocol;
using collectives::NcclVersion;
using traces::NcclTest;

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

// A fact from the log, else the caller's; both, differing, is an error; neither is nullopt.
template <typename T>
std::optional<T> agree(const std::optional<T>& from_log, const std::optional<T>& given,
                       SweepField field, const std::string& label,
                       const std::function<std::string(const T&)>& show) {
  if (from_log && given && !(*from_log == *given)) {
    throw SweepError(field, fmt::format("{} says {}, but {} was given", label, show(*from_log),
                                        show(*given)));
  }
  return from_log ? from_log : given;
}

NcclTest test_of(const traces::NcclTestsLog& log, const traces::NcclTestsRun& run,
                 const SweepDefaults& d, const std::string& label) {
  const auto show = [](const NcclTest& t) { return std::string(to_string(t)); };
  if (std::optional<NcclTest> t = agree(run.test, d.test, SweepField::kTest, label,
                                        std::function<std::string(const NcclTest&)>(show))) {
    return *t;
  }
  if (std::optional<NcclTest> t =
          traces::nccl_test_named_in(std::filesystem::path(log.source).filename().string())) {
    return *t;
  }
  throw SweepError(SweepField::kTest,
                   fmt::format("{} does not say which test it is (nccl-tests before v2.16.7 print "
                               "no \"Collective test starting\" line, and the file name names "
                               "none of all_reduce, all_gather, reduce_scatter, alltoall, "
                               "sendrecv, broadcast, reduce)",
                               label));
}

NcclVersion nccl_of(const traces::NcclTestsLog& log, const traces::NcclTestsRun& run,
                    const SweepDefaults& d, const std::string& label) {
  std::optional<std::string> named = run.nccl_version ? run.nccl_version : log.nccl_version;
  if (run.nccl_version && log.nccl_version && *run.nccl_version != *log.nccl_version) {
    throw SweepError(SweepField::kNccl,
                     fmt::format("{} names NCCL {} (nccl-library) and {} (NCCL version line)",
                                 label, *run.nccl_version, *log.nccl_version));
  }
  std::optional<NcclVersion> from_log;
  if (named) {
    std::string why;
    from_log = modelled_release(*named, &why);
    if (!from_log) {
      throw SweepError(SweepField::kNccl, fmt::format("{} ran NCCL {}: {}", label, *named, why));
    }
  }
  const auto show = [](const NcclVersion& v) { return collectives::to_string(v); };
  const std::optional<NcclVersion> v = agree(
      from_log, d.nccl, SweepField::kNccl, label, std::function<std::string(const NcclVersion&)>(show));
  if (!v) {
    throw SweepError(SweepField::kNccl,
                     fmt::format("{} does not say which NCCL release ran (no \"nccl-library=\" in "
                                 "an \"# nccl-tests version\" line, no \"NCCL version\" line from "
                                 "NCCL_DEBUG=VERSION)",
                                 label));
  }
  return *v;
}

// NCCL_ALGO / NCCL_PROTO as NCCL acknowledged them: one name, NCCL's spelling.
template <typename E>
std::optional<E> forced(const std::optional<std::string>& value, SweepField field,
                        const std::string& label, std::string_view variable) {
  if (!value) {
    return std::nullopt;
  }
  const std::optional<E> e = parse_enum<E>(lower(*value));
  if (!e || value->find(',') != std::string::npos || value->front() == '^') {
    throw SweepError(field, fmt::format("{} ran with {}={}: meshsim models one forced {} or "
                                        "NCCL's own choice, not a restricted set",
                                        label, variable, *value, to_string(field)));
  }
  return e;
}

void add_points(const traces::NcclTestsRun& run, const SweepDefaults& d, const std::string& source,
                CollectiveSweep& s) {
  for (const traces::NcclTestsRow& row : run.rows) {
    if (row.bytes == 0) {
      continue;
    }
    const auto add = [&](const traces::NcclTestsTiming& t, const char* column) {
      if (t.time_us > 0) {
        s.points.push_back({row.bytes, Microseconds(t.time_us), column,
                            fmt::format("{}: line {}", source, row.line)});
      }
    };
    if (d.out_of_place) {
      add(row.out_of_place, "out-of-place");
    }
    if (d.in_place) {
      add(row.in_place, "in-place");
    }
  }
}

CollectiveSweep sweep_of(const traces::NcclTestsLog& log, const traces::NcclTestsRun& run,
                         const SweepDefaults& d) {
  CollectiveSweep s;
  const std::string where = fmt::format("{} (line {})", log.source, run.line);
  s.test = test_of(log, run, d, where);
  s.label = fmt::format("{} ({}, line {})", log.source, to_string(s.test), run.line);
  if (run.cpu_time) {
    throw SweepError(SweepField::kColumns,
                     fmt::format("{} reports cputime (nccl-tests -C 1): host time, not the "
                                 "collective's; run it without -C",
                                 s.label));
  }
  s.nccl = nccl_of(log, run, d, s.label);
  const std::function<std::string(const Algorithm&)> show_a = [](const Algorithm& a) {
    return std::string(collectives::to_string(a));
  };
  s.algorithm = agree(forced<Algorithm>(log.nccl_algo, SweepField::kAlgorithm, s.label,
                                        "NCCL_ALGO"),
                      d.algorithm, SweepField::kAlgorithm, s.label, show_a)
                    .value_or(Algorithm::kAuto);
  const std::function<std::string(const NcclProtocol&)> show_p = [](const NcclProtocol& p) {
    return std::string(collectives::to_string(p));
  };
  s.protocol = agree(forced<NcclProtocol>(log.nccl_proto, SweepField::kProtocol, s.label,
                                          "NCCL_PROTO"),
                     d.protocol, SweepField::kProtocol, s.label, show_p);
  const std::function<std::string(const int64_t&)> show_n = [](const int64_t& n) {
    return std::to_string(n);
  };
  const bool listed = !run.devices.empty();
  const std::optional<int64_t> ranks =
      agree(listed ? std::optional<int64_t>(static_cast<int64_t>(run.devices.size()))
                   : std::nullopt,
            d.ranks, SweepField::kRanks, s.label, show_n);
  const std::optional<int64_t> nodes =
      agree(listed ? std::optional<int64_t>(static_cast<int64_t>(run.hosts().size()))
                   : std::nullopt,
            d.nodes, SweepField::kNodes, s.label, show_n);
  if (!ranks || !nodes) {
    throw SweepError(ranks ? SweepField::kNodes : SweepField::kRanks,
                     fmt::format("{} lists no devices (no \"# Using devices\" lines), so it does "
                                 "not say how many {} ran",
                                 s.label, ranks ? "hosts" : "ranks"));
  }
  s.ranks = *ranks;
  s.nodes = *nodes;
  add_points(run, d, log.source, s);
  return s;
}

std::string duration_text(Duration d) {
  return fmt::format("{:.4f}us", d.microseconds());
}

}  // namespace

std::optional<NcclVersion> modelled_release(const std::string& version, std::string* why) {
  const std::optional<NcclVersion> v = collectives::parse_nccl_version(version);
  if (!v && why != nullptr) {
    *why = "meshsim models NCCL's tuner from release 2.18 on (collectives/src/nccl_constants.cc)";
  }
  return v;
}

std::vector<CollectiveSweep> sweeps_from_log(const traces::NcclTestsLog& log,
                                             const SweepDefaults& defaults) {
  if (!defaults.in_place && !defaults.out_of_place) {
    throw SweepError(SweepField::kColumns, "neither the in-place nor the out-of-place column");
  }
  std::vector<CollectiveSweep> out;
  for (const traces::NcclTestsRun& run : log.runs) {
    if (run.rows.empty()) {
      continue;
    }
    CollectiveSweep s = sweep_of(log, run, defaults);
    if (!s.points.empty()) {
      out.push_back(std::move(s));
    }
  }
  if (out.empty()) {
    throw InputError(log.source, "", "no row with a size above 0 bytes and a time above 0");
  }
  return out;
}

bool looks_like_sweep_json(std::string_view text) {
  for (const char c : text) {
    if (std::isspace(static_cast<unsigned char>(c)) == 0) {
      return c == '{';
    }
  }
  return false;
}

std::vector<CollectiveSweep> read_sweep_file(const std::string& path) {
  const nlohmann::json doc = load_json_file(path);
  JsonObject root(doc, path);
  CollectiveSweep s;
  root.string("source");  // the citation: required, for the reader
  s.test = root.choice<NcclTest>("test");
  s.ranks = root.positive_integer("ranks");
  s.nodes = root.positive_integer("nodes");
  if (s.ranks > topology::kMaxDevices || s.nodes > s.ranks) {
    root.fail("nodes", fmt::format("{} ranks on {} nodes: expected at most {} ranks, on at most "
                                   "as many nodes",
                                   s.ranks, s.nodes, topology::kMaxDevices));
  }
  const std::string nccl = root.string("nccl");
  std::string why;
  const std::optional<NcclVersion> v = modelled_release(nccl, &why);
  if (!v) {
    root.fail("nccl", fmt::format("\"{}\": expected an NCCL release such as 2.18.5 ({})", nccl,
                                  why));
  }
  s.nccl = *v;
  if (root.has("algorithm")) {
    s.algorithm = root.choice<Algorithm>("algorithm");
  }
  if (root.has("protocol")) {
    s.protocol = root.choice<NcclProtocol>("protocol");
  }
  s.label = fmt::format("{} ({})", path, to_string(s.test));
  const size_t n = root.object_array_length("points");
  if (n == 0 || static_cast<int64_t>(n) > traces::kMaxNcclTestsRows) {
    root.fail("points", fmt::format("expected 1 to {} points, got {}", traces::kMaxNcclTestsRows,
                                    n));
  }
  const std::optional<CollectiveKind> kind = collective_kind(s.test);
  const double factor = kind ? collectives::bus_bandwidth_factor(*kind, s.ranks) : 1.0;
  for (JsonObject p : root.object_array("points")) {
    const int64_t bytes = p.positive_integer("bytes");
    if (p.has("busbw_gbps") == p.has("time_us")) {
      p.fail("busbw_gbps", "expected one of busbw_gbps and time_us");
    }
    Duration t;
    if (p.has("time_us")) {
      t = Microseconds(p.positive_number("time_us"));
    } else {
      const double busbw = p.positive_number("busbw_gbps");
      t = Seconds(static_cast<double>(bytes) * factor / (busbw * 1e9));
    }
    p.finish();
    s.points.push_back({bytes, t, p.has("time_us") ? "time" : "busbw",
                        fmt::format("{}: {}", path, p.pointer())});
  }
  root.finish();
  return {std::move(s)};
}

nlohmann::json cluster_fragment(const CollectiveFit& fit, const std::string& base,
                                const std::string& description, const std::string& source) {
  nlohmann::json doc = {{"base", base}, {"description", description}};
  for (const ParameterResult& r : fit.parameters) {
    if (!r.pinned) {
      continue;
    }
    nlohmann::json value;
    if (r.parameter == PlatformParameter::kLaunchFloor ||
        r.parameter == PlatformParameter::kSimpleStepOverhead) {
      value = duration_text(Seconds(r.fitted));
    } else {
      value = std::round(r.fitted * 1e4) / 1e4;
    }
    const std::string pointer = cluster_pointer(r.parameter);
    doc[nlohmann::json::json_pointer(pointer)] = {{"value", value}, {"source", source}};
  }
  return doc;
}

}  // namespace meshsim::validation
