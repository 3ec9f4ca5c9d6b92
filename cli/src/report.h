// Printing a simulated step.
#pragma once

#include <ostream>

#include "meshsim/scenario/step_report.h"
#include "output_file.h"

namespace meshsim::cli {

using scenario::format_bytes;
using scenario::format_duration;

void print_summary(const scenario::StepReport& r, std::ostream& out);

}  // namespace meshsim::cli
