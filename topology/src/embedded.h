// Private: data files compiled into the library by meshsim_embed (see topology/CMakeLists.txt).
// Each table maps a file stem ("chips", "dgx-h100") to the file's contents.
#pragma once

#include <string_view>
#include <utility>
#include <vector>

namespace meshsim::topology::detail {

using EmbeddedFiles = std::vector<std::pair<std::string_view, std::string_view>>;

const EmbeddedFiles& embedded_chip_catalogue();   // topology/chips.json
const EmbeddedFiles& embedded_cluster_presets();  // topology/clusters/*.json

}  // namespace meshsim::topology::detail
