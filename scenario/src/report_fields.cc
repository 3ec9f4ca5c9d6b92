// The report field table (report_fields.h).
#include "meshsim/scenario/report_fields.h"

#include <type_traits>
#include <vector>

#include "meshsim/sim/error.h"

namespace meshsim::scenario {

using nlohmann::json;

namespace {

using R = StepReport;

const std::vector<ReportFieldSpec>& report_table() {
  static const std::vector<ReportFieldSpec> kTable = {
      {"devices", "", "Devices of the cluster (ranks of the plan)", &R::devices, true, true,
       nullptr},
      {"parameters", "", "Parameters of the model", &R::parameters, true, false, nullptr},
      {"simulated", "", "Whether the step was simulated (false: out of memory before it)",
       &R::simulated, true, false, nullptr},
      {"step_time_s", "s", "Simulated time of one training step", &R::step_time, true, true,
       "step time"},
      {"tokens_per_step", "", "Tokens of one step (global batch x sequence)", &R::tokens_per_step,
       true, false, nullptr},
      {"tokens_per_s", "1/s", "Tokens per second of simulated time", &R::tokens_per_s, true, true,
       "tokens/s"},
      {"tokens_per_s_per_device", "1/s", "Tokens per second per device",
       &R::tokens_per_s_per_device, true, false, nullptr},
      {"mfu", "", "Model FLOPs (causal attention) over the peak of every device for the step",
       &R::mfu, true, true, "MFU"},
      {"hfu", "", "Executed FLOPs (recompute included) over the same peak", &R::hfu, true, false,
       nullptr},
      {"mfu_peak_flops_per_device", "FLOP/s", "The dense peak MFU is measured against",
       &R::peak_per_device, true, false, nullptr},
      {"model_flops_per_token", "FLOP", "Training FLOPs per token, as MFU counts them",
       &R::model_flops_per_token, false, false, nullptr},
      {"compute_s", "s", "Compute per rank (the union of its compute spans, worst rank)",
       &R::compute, true, true, "compute"},
      {"exposed_comm_s", "s", "Communication not hidden by compute, per rank (worst rank)",
       &R::exposed_comm, true, true, "exposed communication"},
      {"host_wait_s", "s",
       "Time the device waited for its host to issue work (launches, synchronisations), worst "
       "rank",
       &R::host_wait, true, false, nullptr},
      {"bubble_fraction", "", "Idle fraction of the step, the mean over pipeline stages",
       &R::bubble_fraction, true, true, "bubble fraction"},
      {"peak_memory_bytes", "B", "Peak memory of the worst rank (the ledger's, or the estimate)",
       &R::peak_memory, true, true, "peak memory"},
      {"memory_capacity_bytes", "B", "Memory of one device", &R::memory_capacity, true, true,
       nullptr},
      {"oom", "", "Whether the peak exceeds the device's memory", &R::oom, true, true, nullptr},
      {"events", "", "Events the engine processed", &R::events, true, false, nullptr},
      {"simulated_ranks", "", "Ranks simulated (one per class in representative mode)",
       &R::simulated_ranks, false, false, nullptr},
      {"chip", "", "Catalogue key of the devices", &R::chip, false, false, nullptr},
      {"model_description", "", "The model, as the report's header names it",
       &R::model_description, false, false, nullptr},
      {"cluster_description", "", "The cluster, as the report's header names it",
       &R::cluster_description, false, false, nullptr},
      {"plan_description", "", "The plan, as the report's header names it", &R::plan_description,
       false, false, nullptr},
      {"simulation_mode", "", "representative or full", &R::simulation_mode, false, false,
       nullptr},
      {"oom_stage", "", "The stage that does not fit, when out of memory", &R::oom_stage, false,
       false, nullptr},
  };
  return kTable;
}

}  // namespace

namespace {

// A member's value: seconds (or, `exact`, picoseconds) for a Duration, bytes for Bytes, the
// number or string itself otherwise.
json value_of(const StepReport& r, const ReportMember& m, bool exact) {
  return std::visit(
      [&r, exact](auto member) -> json {
        const auto& v = r.*member;
        using T = std::remove_cvref_t<decltype(v)>;
        if constexpr (std::is_same_v<T, Duration>) {
          return exact ? json(v.ps()) : json(v.seconds());
        } else if constexpr (std::is_same_v<T, Bytes> || std::is_same_v<T, Flops>) {
          return v.count();
        } else if constexpr (std::is_same_v<T, FlopsPerSec>) {
          return v.value();
        } else {
          return v;
        }
      },
      m);
}

}  // namespace

json ReportFieldSpec::value(const StepReport& r) const { return value_of(r, member, false); }

json ReportFieldSpec::exact(const StepReport& r) const { return value_of(r, member, true); }

void ReportFieldSpec::set_exact(StepReport& r, const json& j) const {
  std::visit(
      [&r, &j](auto m) {
        auto& v = r.*m;
        using T = std::remove_cvref_t<decltype(v)>;
        if constexpr (std::is_same_v<T, Duration>) {
          v = Duration::from_ps(j.get<int64_t>());
        } else if constexpr (std::is_same_v<T, Bytes>) {
          v = Bytes::of(j.get<int64_t>());
        } else if constexpr (std::is_same_v<T, FlopsPerSec>) {
          v = FlopsPerSec::of(j.get<double>());
        } else if constexpr (std::is_same_v<T, Flops>) {
          v = Flops::of(j.get<double>());
        } else {
          v = j.get<T>();
        }
      },
      member);
}

std::span<const ReportFieldSpec> report_fields() { return report_table(); }

const ReportFieldSpec& report_field(std::string_view key) {
  for (const ReportFieldSpec& f : report_table()) {
    if (f.key == key) {
      return f;
    }
  }
  SIM_CHECK(false, "no report field \"{}\"", key);
}

}  // namespace meshsim::scenario
