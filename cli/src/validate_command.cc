#include "validate_command.h"

#include <fmt/format.h>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>

#include "calibrate.h"
#include "meshsim/sim/error.h"
#include "meshsim/traces/import.h"

namespace meshsim::cli {

int validate_command(const ValidateArgs& args, std::ostream& out) {
  const Manifest m = load_manifest(args.manifest);
  if (args.hardware_profile.empty()) {
    throw InputError("--hardware-profile", "",
                     fmt::format("{} was measured on a {} machine; give its hardware profile (a "
                                 "one-chip catalogue such as validation/profiles/cpu-generic.json)",
                                 args.manifest, m.platform));
  }
  const Profile profile = load_profile(args.hardware_profile);
  const traces::MeasuredTrace trace = traces::import_trace(m.trace_path);
  const Measured measured = measure(trace);
  const StepReport sim = simulate_manifest(m, profile.document, profile.chip_name);

  const double simulated_s = sim.step_time.seconds();
  const double error = simulated_s / m.median_step_s - 1;
  out << fmt::format("validate {} ({})\n", m.case_name, args.manifest);
  out << fmt::format("  model     {}\n", sim.model_description);
  out << fmt::format("  hardware  {} ({}); {} {}{}\n", profile.chip.description, profile.path,
                     m.framework, m.framework_version,
                     m.threads ? fmt::format(", {} thread(s)", *m.threads) : "");
  out << fmt::format("  trace     {}: {} step(s), {} ops\n", m.trace_path, measured.steps,
                     measured.op_source);
  if (m.dtype == "fp32") {
    out << "  note      fp32 run: matmuls are simulated at the profile's bf16 peak (a CPU profile "
           "gives its FP32 FMA rate there)\n";
  }
  out << fmt::format("\nstep time  measured {:.6f} s (manifest median; trace median {:.6f} s), "
                     "simulated {:.6f} s, error {:+.1f}%\n\n",
                     m.median_step_s, measured.step_s, simulated_s, 100 * error);

  nlohmann::json classes = nlohmann::json::object();
  out << fmt::format("{:<14}{:>14}{:>14}{:>10}\n", "op class", "measured s", "simulated s",
                     "error");
  for (int c = 0; c < kNumOpClasses; ++c) {
    const auto k = static_cast<size_t>(c);
    const double ms = measured.by_class[k];
    const double ss = sim.time_by_class[k].seconds();
    if (ms == 0 && ss == 0) {
      continue;
    }
    const std::string name(to_string(static_cast<OpClass>(c)));
    nlohmann::json row = {{"measured_s", ms}, {"simulated_s", ss}};
    std::string err = "n/a";
    if (ms > 0) {
      row["error"] = ss / ms - 1;
      err = fmt::format("{:+.1f}%", 100 * (ss / ms - 1));
    } else {
      row["error"] = nullptr;
    }
    classes[name] = row;
    out << fmt::format("{:<14}{:>14.6f}{:>14.6f}{:>10}\n", name, ms, ss, err);
  }
  out << fmt::format("{:<14}{:>14.6f}  (no classification rule matched; counted as elementwise "
                     "above)\n",
                     "unclassified", measured.unclassified_s);

  out << "\nlargest measured ops (per step) next to their class's simulated total:\n";
  const size_t top = std::min<size_t>(10, measured.top_ops.size());
  nlohmann::json top_ops = nlohmann::json::array();
  for (size_t i = 0; i < top; ++i) {
    const auto& [name, secs] = measured.top_ops[i];
    const OpClass cls = measured.top_op_classes[i].second;
    const double class_sim = sim.time_by_class[static_cast<size_t>(cls)].seconds();
    out << fmt::format("  {:<48} {:>12.6f} s  {:<12} class simulated {:.6f} s\n", name, secs,
                       to_string(cls), class_sim);
    top_ops.push_back({{"name", name},
                       {"op_class", std::string(to_string(cls))},
                       {"measured_s", secs},
                       {"class_simulated_s", class_sim}});
  }

  if (args.json_path) {
    const nlohmann::json j = {{"manifest", args.manifest},
                              {"case", m.case_name},
                              {"hardware_profile", profile.path},
                              {"step_time_error", error},
                              {"measured_step_s", m.median_step_s},
                              {"measured_trace_step_s", measured.step_s},
                              {"simulated_step_s", simulated_s},
                              {"op_classes", classes},
                              {"unclassified_measured_s", measured.unclassified_s},
                              {"top_measured_ops", top_ops}};
    std::ofstream f(*args.json_path, std::ios::binary);
    if (!f) {
      throw InputError("--json", "", fmt::format("cannot write {}", *args.json_path));
    }
    f << j.dump(2) << "\n";
  }
  return 0;
}

}  // namespace meshsim::cli
