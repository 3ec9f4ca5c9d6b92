// A StepReport as exact JSON (integers for picoseconds and bytes, doubles that nlohmann
// round-trips, every field: the scalar ones through scenario/report_fields.h), so that processes
// exchanging reports (the plan search under MPI) rebuild the very values one process would hold.
// Private to studies.
#pragma once

#include <nlohmann/json.hpp>

#include "meshsim/scenario/step_report.h"

namespace meshsim::studies::detail {

using scenario::StepReport;

nlohmann::json report_state(const StepReport& r);
StepReport report_from_state(const nlohmann::json& j);

}  // namespace meshsim::studies::detail
