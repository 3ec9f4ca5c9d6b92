// `meshsim compare A.json B.json`: two run reports side by side (scenario/compare.h).
#pragma once

#include <ostream>
#include <string>

namespace meshsim::cli {

int compare_command(const std::string& a_path, const std::string& b_path, std::ostream& out);

}  // namespace meshsim::cli
