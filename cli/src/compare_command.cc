#include "compare_command.h"

#include <fmt/format.h>

#include "meshsim/sim/json_input.h"
#include "meshsim/scenario/compare.h"

namespace meshsim::cli {
namespace {

std::string value_text(const nlohmann::json& m, const char* which) {
  const double v = m.at(which).get<double>();
  const std::string unit = m.at("unit").get<std::string>();
  if (unit == "s") {
    return v >= 1.0 ? fmt::format("{:.3f} s", v) : fmt::format("{:.2f} ms", v * 1e3);
  }
  if (unit == "B") {
    return fmt::format("{:.2f} GiB", v / (1024.0 * 1024.0 * 1024.0));
  }
  if (unit.empty()) {
    return fmt::format("{:.1f} %", 100.0 * v);
  }
  return fmt::format("{:.0f}", v);
}

std::string change_text(const nlohmann::json& m) {
  const double a = m.at("a").get<double>();
  const double d = m.at("delta").get<double>();
  const std::string unit = m.at("unit").get<std::string>();
  std::string abs;
  if (unit == "s") {
    abs = fmt::format("{:+.2f} ms", d * 1e3);
  } else if (unit == "B") {
    abs = fmt::format("{:+.2f} GiB", d / (1024.0 * 1024.0 * 1024.0));
  } else if (unit.empty()) {
    abs = fmt::format("{:+.1f} points", 100.0 * d);
  } else {
    abs = fmt::format("{:+.0f}", d);
  }
  return a != 0.0 && !unit.empty() ? fmt::format("{} ({:+.1f} %)", abs, 100.0 * d / a) : abs;
}

}  // namespace

int compare_command(const std::string& a_path, const std::string& b_path, std::ostream& out) {
  const nlohmann::json c = scenario::compare_reports(load_json_file(a_path), a_path,
                                                    load_json_file(b_path), b_path);
  out << fmt::format("meshsim compare: A = {}, B = {}\n", a_path, b_path);
  if (c.at("inputs_changed").empty()) {
    out << "  inputs changed        none\n";
  }
  for (const nlohmann::json& i : c.at("inputs_changed")) {
    out << fmt::format("  inputs changed        {}: {} -> {}\n", i.at("field").get<std::string>(),
                       i.at("a").get<std::string>(), i.at("b").get<std::string>());
  }
  out << fmt::format("\n  {:<22} {:>12} {:>12}  {}\n", "", "A", "B", "change");
  for (const nlohmann::json& m : c.at("metrics")) {
    out << fmt::format("  {:<22} {:>12} {:>12}  {}\n", m.at("name").get<std::string>(),
                       value_text(m, "a"), value_text(m, "b"), change_text(m));
  }
  out << fmt::format("\n  why the step moved: {}\n", c.at("verdict").get<std::string>());
  for (const nlohmann::json& p : c.at("parts")) {
    out << fmt::format("    {:<20} {:+10.2f} ms\n", p.at("part").get<std::string>(),
                       p.at("delta_s").get<double>() * 1e3);
  }
  out << "    (exposed communication by kind can overlap, so the parts need not add up)\n";
  std::string classes;
  int shown = 0;
  for (const nlohmann::json& k : c.at("op_classes")) {
    if (shown++ == 4 || k.at("delta_s").get<double>() == 0.0) {
      break;
    }
    classes += fmt::format("{}{} {:+.2f} ms", classes.empty() ? "" : ", ",
                           k.at("class").get<std::string>(), k.at("delta_s").get<double>() * 1e3);
  }
  if (!classes.empty()) {
    out << fmt::format("  kernel time (rank 0)  {}\n", classes);
  }
  return 0;
}

}  // namespace meshsim::cli
