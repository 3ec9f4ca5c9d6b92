// Printing a simulated step.
#pragma once

#include <ostream>

#include "meshsim/studies/step_report.h"
#include "output_file.h"

namespace meshsim::cli {

using studies::format_bytes;
using studies::format_duration;

void print_summary(const studies::StepReport& r, std::ostream& out);

}  // namespace meshsim::cli
