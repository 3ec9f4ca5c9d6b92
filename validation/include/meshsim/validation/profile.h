// A hardware profile: a chip catalogue file in topology/chips.json's schema holding exactly one
// chip (validation/profiles/), the hardware a manifest's step is simulated on. Calibration
// (calibrate.h) writes one: the base profile with fitted efficiencies.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "meshsim/topology/chip.h"

namespace meshsim::validation {

struct Profile {
  std::string path;
  nlohmann::json document;  // the whole catalogue file
  std::string chip_name;
  topology::Chip chip;
};

// Reads and checks a profile: InputError naming the file, the JSON pointer and what was expected.
Profile load_profile(const std::string& path);
// A profile from a catalogue document in memory; `name` stands for its path in errors.
Profile profile_from(const nlohmann::json& document, const std::string& name);

// `base` with its chip's efficiency replaced by `efficiency` (matmul, memory, per-class memory,
// launch overhead; k_half and call overhead where the base has a matmul_shape) and `source` beside
// every replaced value. Throws InternalError unless the result loads as a profile.
nlohmann::json profile_document(const Profile& base, const topology::Efficiency& efficiency,
                                const std::string& source);

}  // namespace meshsim::validation
