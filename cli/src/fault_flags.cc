#include "fault_flags.h"

#include <fmt/format.h>

#include <cmath>

#include "meshsim/sim/error.h"
#include "meshsim/sim/unit_parse.h"

namespace meshsim::cli {

namespace {

// "a:b:c" split on ':'.
std::vector<std::string> fields(const std::string& value) {
  std::vector<std::string> out;
  size_t start = 0;
  while (true) {
    const size_t colon = value.find(':', start);
    out.push_back(value.substr(start, colon - start));
    if (colon == std::string::npos) {
      return out;
    }
    start = colon + 1;
  }
}

// A rank or device index: an integer in 0..2^32-1.
std::optional<uint32_t> to_index(const std::string& s) {
  const std::optional<int64_t> v = parse_integer(s);
  if (!v || *v < 0 || *v > UINT32_MAX) {
    return std::nullopt;
  }
  return static_cast<uint32_t>(*v);
}

}  // namespace

void set_slow_ranks_flag(const std::vector<std::string>& values, scenario::Faults& f) {
  f.compute.slow_ranks.clear();
  f.slow_rank_origins.clear();
  for (const std::string& v : values) {
    const std::vector<std::string> p = fields(v);
    const std::optional<uint32_t> rank = p.size() == 2 ? to_index(p[0]) : std::nullopt;
    const std::optional<double> factor = p.size() == 2 ? parse_number(p[1]) : std::nullopt;
    const double slowdown = factor.value_or(0.0);
    if (!rank || slowdown <= 0 || slowdown > scenario::kMaxSlowdown ||
        rank.value_or(0) >= topology::kMaxDevices) {
      throw InputError("--slow-rank", "",
                       fmt::format("\"{}\": expected RANK:FACTOR with RANK below {} and 0 < "
                                   "FACTOR <= {}, e.g. 5:1.5 (rank 5's kernels take 1.5x as long)",
                                   v, topology::kMaxDevices, scenario::kMaxSlowdown));
    }
    f.compute.slow_ranks.push_back({RankId(*rank), slowdown});
    f.slow_rank_origins.push_back(Origin::flag("--slow-rank"));
  }
}

void set_stragglers_flag(const std::string& value, scenario::Faults& f) {
  const std::vector<std::string> p = fields(value);
  const auto n = [&p](size_t i) { return p.size() == 3 ? parse_number(p[i]) : std::nullopt; };
  const std::optional<double> fraction = n(0);
  const std::optional<double> lo = n(1);
  const std::optional<double> hi = n(2);
  if (!fraction || !lo || !hi || *fraction <= 0 || *fraction > 1 || *lo <= 0 || *hi < *lo ||
      *hi > scenario::kMaxSlowdown) {
    throw InputError("--stragglers", "",
                     fmt::format("\"{}\": expected FRACTION:MIN:MAX with 0 < FRACTION <= 1 and "
                                 "0 < MIN <= MAX <= {}, e.g. 0.01:1.05:1.3",
                                 value, scenario::kMaxSlowdown));
  }
  f.compute.stragglers = {*fraction, *lo, *hi};
}

void set_kernel_jitter_flag(double cv, scenario::Faults& f) {
  if (!(cv >= 0 && cv <= scenario::kMaxJitterCv)) {
    throw InputError("--kernel-jitter", "",
                     fmt::format("{}: expected a coefficient of variation from 0 to {}, e.g. 0.03",
                                 cv, scenario::kMaxJitterCv));
  }
  f.compute.jitter_cv = cv;
}

// Drops the links that are down (`down`) or degraded (`!down`), with their origins.
void drop_links(scenario::Faults& f, bool down) {
  std::vector<topology::LinkFault> links;
  std::vector<Origin> origins;
  for (size_t i = 0; i < f.links.size(); ++i) {
    if (f.links[i].down() != down) {
      links.push_back(f.links[i]);
      origins.push_back(f.link_origins[i]);
    }
  }
  f.links = std::move(links);
  f.link_origins = std::move(origins);
}

void set_degrade_flag(const std::vector<std::string>& values, scenario::Faults& f) {
  drop_links(f, false);
  for (const std::string& v : values) {
    const std::vector<std::string> p = fields(v);
    const std::optional<uint32_t> device = p.size() == 3 ? to_index(p[0]) : std::nullopt;
    const auto kind = p.size() == 3 ? parse_enum<topology::LinkKind>(p[1]) : std::nullopt;
    const std::optional<double> factor = p.size() == 3 ? parse_number(p[2]) : std::nullopt;
    if (!device || !kind || !factor || *factor <= 0 || *factor > 1 ||
        device.value_or(0) >= topology::kMaxDevices) {
      throw InputError("--degrade", "",
                       fmt::format("\"{}\": expected DEVICE:LINK:FACTOR with LINK one of {} and "
                                   "0 < FACTOR <= 1, e.g. 12:network:0.5 (device 12's NIC at "
                                   "half its bandwidth; a link that is down is --fail)",
                                   v, describe_choices<topology::LinkKind>()));
    }
    f.links.push_back(topology::LinkFault::degraded(DeviceId(*device), *kind, *factor));
    f.link_origins.push_back(Origin::flag("--degrade"));
  }
}

void set_fail_flag(const std::vector<std::string>& values, scenario::Faults& f) {
  drop_links(f, true);
  for (const std::string& v : values) {
    const std::vector<std::string> p = fields(v);
    const bool shape = p.size() == 2 || p.size() == 3;
    const std::optional<uint32_t> device = shape ? to_index(p[0]) : std::nullopt;
    const auto kind = shape ? parse_enum<topology::LinkKind>(p[1]) : std::nullopt;
    bool ok = device && kind && *device < topology::kMaxDevices;
    topology::LinkFault fault = topology::LinkFault::failed(DeviceId(device.value_or(0)),
                                                            kind.value_or(topology::LinkKind{}));
    if (ok && p.size() == 3) {
      if (const auto dir = topology::parse_ici_link(p[2])) {
        fault.ici_axis = dir->first;
        fault.ici_direction = dir->second;
      } else if (p[2].starts_with("spine") && to_index(p[2].substr(5))) {
        fault.spine = *to_index(p[2].substr(5));
      } else if (const std::optional<uint32_t> nic = to_index(p[2])) {
        fault.nic = *nic;
      } else {
        ok = false;
      }
    }
    if (!ok) {
      throw InputError("--fail", "",
                       fmt::format("\"{}\": expected DEVICE:LINK[:WHICH] with LINK one of {} and "
                                   "WHICH a NIC index (network, pcie), spineJ (network: the "
                                   "uplinks of the device's leaf to spine J) or a torus "
                                   "direction x+, x-, y+, y-, z+, z- (ici), e.g. 12:network (all "
                                   "of device 12's NICs down), 0:network:spine1 or 5:ici:x+",
                                   v, describe_choices<topology::LinkKind>()));
    }
    f.links.push_back(fault);
    f.link_origins.push_back(Origin::flag("--fail"));
  }
}

}  // namespace meshsim::cli
