// Private: data files compiled into the library by meshsim_embed (see validation/CMakeLists.txt).
#pragma once

#include <string_view>
#include <utility>
#include <vector>

namespace meshsim::validation::detail {

// validation/published/run_facts.json, as {"run_facts", contents}.
const std::vector<std::pair<std::string_view, std::string_view>>& embedded_run_facts();

}  // namespace meshsim::validation::detail
