// `meshsim help-markdown`: the command line as Markdown, generated from the CLI11 definitions
// themselves (every subcommand, option, value type, default and help text), so that docs/cli.md
// cannot drift from the binary. A CTest test regenerates it and fails on a difference.
#pragma once

#include <ostream>

#include "cli11_fwd.h"

namespace meshsim::cli {

void write_cli_markdown(const CLI::App& app, std::ostream& out);

}  // namespace meshsim::cli
