#include "calibrate.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>

#include "meshsim/sim/error.h"
#include "meshsim/traces/import.h"
#include "report.h"

namespace meshsim::cli {
namespace {

struct Loaded {
  Manifest manifest;
  FitCase fit_case;
};

std::string us(double s) { return fmt::format("{:.4f}us", s * 1e6); }

// The profile document with `p` as the chip's efficiency and `source` beside each fitted value.
nlohmann::json profile_document(const Profile& base, const Params& p, const std::string& source) {
  nlohmann::json doc = base.document;
  nlohmann::json& eff = doc["chips"][base.chip_name]["efficiency"];
  eff["matmul"] = {{"value", std::min(1.0, p.matmul)}, {"source", source}};
  eff["memory"] = {{"value", std::min(1.0, p.memory)}, {"source", source}};
  eff.erase("memory_by_class");
  for (size_t c = 0; c < p.class_memory.size(); ++c) {
    if (p.class_memory[c] > 0) {
      eff["memory_by_class"][std::string(to_string(static_cast<OpClass>(c)))] = {
          {"value", std::min(1.0, p.class_memory[c])}, {"source", source}};
    }
  }
  eff["launch_overhead"] = {{"value", us(p.launch_s)}, {"source", source}};
  if (base.chip.efficiency.matmul_shape) {
    nlohmann::json& shape = eff["matmul_shape"];
    shape["k_half"] = {{"value", p.k_half}, {"source", source}};
    shape["call_overhead"] = {{"value", us(p.call_s)}, {"source", source}};
  }
  return doc;
}

// The simulated step through the engine, with the profile's chip at `p`, relative to measured.
double engine_step_error(const Loaded& l, const Profile& base, const Params& p) {
  const RunResult r = ManifestRun(l.manifest, with_params(base.chip, p)).run();
  return r.end.seconds() / l.manifest.median_step_s - 1;
}

std::string params_text(const Params& p, bool shape) {
  std::string s = fmt::format("matmul {:.4f}, memory {:.4f}, launch {:.3f} us", p.matmul,
                              p.memory, p.launch_s * 1e6);
  if (shape) {
    s += fmt::format(", k_half {:.2f}, call {:.3f} us", p.k_half, p.call_s * 1e6);
  }
  std::vector<std::string> classes;
  for (size_t c = 0; c < p.class_memory.size(); ++c) {
    if (p.class_memory[c] > 0) {
      classes.push_back(
          fmt::format("{} {:.4f}", to_string(static_cast<OpClass>(c)), p.class_memory[c]));
    }
  }
  if (!classes.empty()) {
    s += fmt::format("; memory by class: {}", fmt::join(classes, ", "));
  }
  return s;
}

nlohmann::json params_json(const Params& p) {
  nlohmann::json by_class = nlohmann::json::object();
  for (size_t c = 0; c < p.class_memory.size(); ++c) {
    if (p.class_memory[c] > 0) {
      by_class[std::string(to_string(static_cast<OpClass>(c)))] = p.class_memory[c];
    }
  }
  return {{"matmul", p.matmul}, {"memory", p.memory},        {"launch_overhead_s", p.launch_s},
          {"k_half", p.k_half}, {"call_overhead_s", p.call_s}, {"memory_by_class", by_class}};
}

std::string class_errors(const FitCase& c, const Prediction& t, nlohmann::json* json) {
  std::string s;
  for (size_t k = 0; k < t.by_class.size(); ++k) {
    if (c.measured[k] > 0 && t.by_class[k] > 0) {
      const double e = t.by_class[k] / c.measured[k] - 1;
      const std::string name(to_string(static_cast<OpClass>(k)));
      s += fmt::format(" {} {:+.0f}%", name, 100 * e);
      if (json != nullptr) {
        (*json)[name] = e;
      }
    }
  }
  return s;
}

std::vector<Loaded> load_all(const CalibrateArgs& args, const Profile& base) {
  std::vector<Loaded> all;
  for (const std::string& path : args.manifests) {
    Loaded l;
    l.manifest = load_manifest(path);
    l.fit_case = make_fit_case(step_kernels(l.manifest), base.chip,
                               measure(l.manifest, traces::import_trace(l.manifest.trace_path)));
    all.push_back(std::move(l));
  }
  return all;
}

}  // namespace

int calibrate_command(const CalibrateArgs& args, std::ostream& out) {
  if (args.hardware_profile.empty()) {
    throw InputError("--hardware-profile", "",
                     "a base hardware profile is required (a one-chip catalogue such as "
                     "validation/profiles/cpu-amd-epyc-2c.json)");
  }
  const Profile base = load_profile(args.hardware_profile);
  const std::vector<Loaded> all = load_all(args, base);
  std::vector<const FitCase*> cases;
  for (const Loaded& l : all) {
    cases.push_back(&l.fit_case);
  }
  const bool shape = base.chip.efficiency.matmul_shape.has_value();
  const Params before = params_of(base.chip);
  const Params after = fit(cases, before, shape);

  out << fmt::format("calibrate {} ({}) from {} manifest(s){}\n", base.chip_name,
                     base.chip.description, all.size(),
                     shape ? "" : " (no matmul_shape in the profile: k_half and call overhead "
                                  "not fitted)");
  out << fmt::format("  before: {}; loss {:.4g}\n", params_text(before, shape),
                     fit_loss(cases, before));
  out << fmt::format("  after:  {}; loss {:.4g}\n", params_text(after, shape),
                     fit_loss(cases, after));

  nlohmann::json rows = nlohmann::json::array();
  out << "\nstep time, simulated / measured - 1 (through the engine); per op class after the fit:\n";
  out << fmt::format("  {:<28}{:>12}{:>10}{:>10}{:>10}\n", "case", "measured s", "before",
                     "after", "held out");
  std::vector<std::string> loo_text;
  double worst_loo = 0;
  for (size_t i = 0; i < all.size(); ++i) {
    const Loaded& l = all[i];
    nlohmann::json row = {{"case", l.manifest.case_name},
                          {"manifest", l.manifest.path},
                          {"measured_step_s", l.manifest.median_step_s},
                          {"step_time_error_before", engine_step_error(l, base, before)},
                          {"step_time_error_after", engine_step_error(l, base, after)}};
    std::string held = "n/a";
    if (all.size() > 1) {
      std::vector<const FitCase*> rest;
      for (size_t j = 0; j < all.size(); ++j) {
        if (j != i) {
          rest.push_back(&all[j].fit_case);
        }
      }
      const Params p = fit(rest, before, shape);
      const double e = engine_step_error(l, base, p);
      row["step_time_error_held_out"] = e;
      row["params_held_out"] = params_json(p);
      held = fmt::format("{:+.1f}%", 100 * e);
      worst_loo = std::max(worst_loo, std::fabs(e));
      loo_text.push_back(fmt::format("{} {:+.1f}%", l.manifest.case_name, 100 * e));
    }
    nlohmann::json classes = nlohmann::json::object();
    const std::string per_class = class_errors(l.fit_case, predict(l.fit_case, after), &classes);
    row["op_class_errors_after"] = classes;
    out << fmt::format("  {:<28}{:>12.6f}{:>+9.1f}%{:>+9.1f}%{:>10}\n", l.manifest.case_name,
                       l.manifest.median_step_s, 100 * row["step_time_error_before"].get<double>(),
                       100 * row["step_time_error_after"].get<double>(), held);
    out << fmt::format("  {:<28}{}\n", "", per_class);
    rows.push_back(row);
  }
  if (all.size() < 2) {
    out << "leave-one-out: impossible with one manifest (needs at least two)\n";
  } else {
    out << fmt::format("held out: each case predicted by a fit to the others; the largest "
                       "|error| is {:.1f}%\n",
                       100 * worst_loo);
  }

  std::string names;
  for (const Loaded& l : all) {
    names += (names.empty() ? "" : ", ") + l.manifest.case_name;
  }
  const std::string source = fmt::format(
      "fitted by meshsim calibrate (meshsim {}) from base profile {} to {} measured run(s): {}; "
      "least squares over step, op-class and GEMM-shape times (cli/src/calibrate.h){}",
      MESHSIM_VERSION, base.path, all.size(), names,
      loo_text.empty() ? "" : fmt::format("; leave-one-out step errors: {}",
                                          fmt::join(loo_text, ", ")));
  const nlohmann::json doc = profile_document(base, after, source);
  (void)profile_from(doc, args.out);  // the written profile must load
  write_json_file(args.out, doc, "--out");
  out << fmt::format("wrote {}\n", args.out);
  if (args.json_path) {
    write_json_file(*args.json_path, {{"hardware_profile", base.path},
                                 {"out", args.out},
                                 {"params_before", params_json(before)},
                                 {"params_after", params_json(after)},
                                 {"loss_before", fit_loss(cases, before)},
                                 {"loss_after", fit_loss(cases, after)},
                                 {"max_abs_held_out_step_error", worst_loo},
                                 {"cases", rows}},
                    "--json");
  }
  return 0;
}

}  // namespace meshsim::cli
