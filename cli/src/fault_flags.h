// The fault flags of `meshsim run` (scenario/faults.h has the scenario block they override):
// --slow-rank RANK:FACTOR (repeatable), --stragglers FRACTION:MIN:MAX, --kernel-jitter CV,
// --degrade DEVICE:LINK:FACTOR (repeatable; LINK is network, nvlink, ici or pcie),
// --fail DEVICE:LINK[:WHICH] (repeatable; WHICH a NIC index for network and pcie, spineJ for
// network (the device's leaf's uplinks to spine J), a torus direction x+, x-, y+, y-, z+ or z-
// for ici), --fault-seed N. --degrade and --fail each replace
// their own part of the block (degraded_links, failed_links).
#pragma once

#include <string>
#include <vector>

#include "meshsim/scenario/faults.h"

namespace meshsim::cli {

// Flag values, each parsed into `f` (InputError naming the flag).
void set_slow_ranks_flag(const std::vector<std::string>& values, scenario::Faults& f);
void set_stragglers_flag(const std::string& value, scenario::Faults& f);
void set_kernel_jitter_flag(double cv, scenario::Faults& f);
void set_degrade_flag(const std::vector<std::string>& values, scenario::Faults& f);
void set_fail_flag(const std::vector<std::string>& values, scenario::Faults& f);

}  // namespace meshsim::cli
