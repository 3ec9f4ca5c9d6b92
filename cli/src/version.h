// The version of this build of meshsim, with the git commit it was configured from.
//
// The text comes from one small source that CMake writes when it configures (cli/version.cc.in:
// `git describe --always --dirty` of the source tree, or "unknown" outside a git checkout), so a
// new commit recompiles that one file and relinks, and only when CMake runs again (run.sh and
// test.sh configure every time).
#pragma once

#include <string_view>

namespace meshsim::cli {

// "0.1.0 (commit 69deff6)": the release, then the commit ("-dirty" when the tree had changes).
// What `meshsim --version` prints after "meshsim ", and what traces and fitted profiles record.
std::string_view version();

// The commit alone: "69deff6", "69deff6-dirty" or "unknown".
std::string_view commit();

}  // namespace meshsim::cli
