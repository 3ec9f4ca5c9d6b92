// Printing a simulated step.
#pragma once

#include <ostream>

#include "meshsim/studies/step_report.h"

namespace meshsim::cli {

using studies::format_bytes;
using studies::format_duration;
using studies::write_json_file;

void print_summary(const studies::StepReport& r, std::ostream& out);

}  // namespace meshsim::cli
