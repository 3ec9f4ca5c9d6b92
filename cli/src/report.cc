// Printing a simulated step (the summary `meshsim run` prints).
#include "report.h"

#include "meshsim/studies/plan_search.h"

#include <fmt/format.h>

namespace meshsim::cli {

using scenario::format_bytes;
using scenario::format_duration;
using scenario::memory_line;
using scenario::StepReport;

void print_summary(const StepReport& r, std::ostream& out) {
  out << fmt::format("meshsim: one training step\n");
  out << fmt::format("  model       {}\n", r.model_description);
  out << fmt::format("  cluster     {}\n", r.cluster_description);
  out << fmt::format("  plan        {}\n", r.plan_description);
  for (const std::string& c : r.caveats) {
    out << fmt::format("  caveat      {}\n", c);
  }
  out << "\n";
  if (r.oom) {
    out << fmt::format(
        "  OUT OF MEMORY{}: {} per device needed, {} available ({})\n",
        r.oom_stage.empty() ? "" : " on " + r.oom_stage, format_bytes(r.peak_memory),
        format_bytes(r.memory_capacity), memory_line(r.peak_breakdown));
    if (!r.simulated) {
      out << "  (not simulated: the configuration cannot run on this hardware)\n";
      return;
    }
  }
  out << fmt::format("  step time             {}\n", format_duration(r.step_time));
  out << fmt::format("  tokens/s              {:.0f} ({:.0f} per device)\n", r.tokens_per_s,
                     r.tokens_per_s_per_device);
  out << fmt::format("  MFU                   {:.1f} % (of {:.0f} TFLOP/s {} dense per device); "
                     "HFU {:.1f} %\n",
                     100.0 * r.mfu, r.peak_per_device.tflops(), to_string(r.peak_dtype),
                     100.0 * r.hfu);
  out << fmt::format("  compute               {} per rank\n", format_duration(r.compute));
  std::string kinds;
  Duration sum;
  for (const auto& [kind, d] : r.exposed_by_kind) {
    kinds += fmt::format("{}{} {}", kinds.empty() ? "" : ", ", kind, format_duration(d));
    sum += d;
  }
  out << fmt::format("  exposed communication {} per rank{}\n", format_duration(r.exposed_comm),
                     kinds.empty() ? "" : " (" + kinds + ")");
  // Kinds that run at the same time are each exposed for the whole span: say why they add up to
  // more than the total.
  if (sum.seconds() > r.exposed_comm.seconds() * 1.005 + 1e-6) {
    out << fmt::format("                        the kinds add up to {}, more than the total: "
                       "several are exposed at the same time (each counts the span)\n",
                       format_duration(sum));
  }
  // Only where the host held the device back noticeably (0.1 % of the step).
  if (r.host_wait.seconds() > 1e-3 * r.step_time.seconds()) {
    out << fmt::format("  host wait             {} per rank (the device idle until the host issued "
                       "its next kernel)\n",
                       format_duration(r.host_wait));
  }
  out << fmt::format("  bubble fraction       {:.1f} % (mean over stages)\n",
                     100.0 * r.bubble_fraction);
  out << fmt::format("  peak memory per rank  {} of {} ({})\n", format_bytes(r.peak_memory),
                     format_bytes(r.memory_capacity), memory_line(r.peak_breakdown));
  if (!r.oom && r.memory_capacity > Bytes::zero()) {
    out << fmt::format("  headroom              {:.1f} % of memory free (plan, sweep and the "
                       "out-of-memory suggestions keep at least {:.0f} %)\n",
                       100.0 * (1.0 - r.peak_memory.as_double() / r.memory_capacity.as_double()),
                       100.0 * studies::kDefaultHeadroom);
  }
  if (r.stages.size() > 1) {
    out << "  per stage             stage  bubble   compute     peak memory\n";
    for (const auto& st : r.stages) {
      out << fmt::format("                        {:>5}  {:>5.1f} %  {:>10}  {}\n", st.stage,
                         100.0 * st.bubble_fraction, format_duration(st.compute),
                         format_bytes(st.peak_memory));
    }
  }
  if (r.faults) {
    scenario::print_fault_effect(*r.faults, r.step_time, out);
  }
  out << fmt::format("  simulated             {} ranks ({} mode), {} events\n", r.simulated_ranks,
                     r.simulation_mode, r.events);
  if (!r.trace_path.empty()) {
    out << fmt::format("  trace                 {} ({} events; open it in ui.perfetto.dev)\n",
                       r.trace_path, r.trace_events);
    out << fmt::format("                        {}\n", r.trace_description);
  }
}

}  // namespace meshsim::cli
