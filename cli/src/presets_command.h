// `meshsim presets`: the models, clusters, chips and software stacks compiled into the binary, one
// line each, read from the embedded catalogues themselves (workloads/models/, topology/clusters/,
// topology/chips.json, the stack profiles), so the list cannot fall behind them.
#pragma once

#include <ostream>

namespace meshsim::cli {

void presets_command(std::ostream& out);

}  // namespace meshsim::cli
