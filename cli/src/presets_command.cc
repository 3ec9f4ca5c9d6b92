#include "presets_command.h"

#include <fmt/format.h>

#include <string>
#include <string_view>

#include "meshsim/scenario/step.h"
#include "meshsim/topology/chip.h"
#include "meshsim/topology/cluster.h"
#include "meshsim/workloads/model.h"
#include "meshsim/workloads/stack.h"
#include "meshsim/workloads/stack_profile.h"

namespace meshsim::cli {
namespace {

// A stack's basis up to its first ": " (the framework and version; the kernel list follows).
std::string_view headline(std::string_view basis) {
  const size_t colon = basis.find(": ");
  return colon == std::string_view::npos ? basis : basis.substr(0, colon);
}

void print_models(std::ostream& out) {
  out << "models (--model NAME, or a model JSON or a Hugging Face config.json)\n";
  for (const std::string& name : workloads::model_preset_names()) {
    // "llama3-70b (70.55 B parameters, 80 layers)": the part in parentheses.
    std::string text = scenario::describe_model(workloads::load_model(name));
    const size_t open = text.find(" (");
    if (open != std::string::npos && text.back() == ')') {
      text = text.substr(open + 2, text.size() - open - 3);
    }
    out << fmt::format("  {:<17} {}\n", name, text);
  }
}

void print_clusters(std::ostream& out, const topology::Catalogue& catalogue) {
  out << "clusters (--cluster NAME, or a cluster JSON; resize with --nodes or --shape)\n";
  for (const std::string& name : topology::cluster_presets()) {
    const topology::ClusterSpec c = topology::load_cluster(name, catalogue);
    std::string size = fmt::format("{} node(s) x {} {} = {} devices", c.nodes, c.devices_per_node,
                                   c.chip.name, c.device_count());
    if (!c.torus_shape.empty()) {
      size += fmt::format(" (torus {})", fmt::join(c.torus_shape, "x"));
    }
    out << fmt::format("  {:<17} {}\n", name, size);
  }
}

void print_chips(std::ostream& out, const topology::Catalogue& catalogue) {
  out << "chips (topology/chips.json; --hardware-catalogue FILE for another)\n";
  for (const std::string& name : catalogue.names()) {
    const topology::Chip& chip = catalogue.chip(name);
    const double bf16 = chip.peak(Dtype::kBf16).value_or(FlopsPerSec{}).tflops();
    out << fmt::format("  {:<17} {}: {:.0f} TFLOP/s bf16 dense, {:.1f} GiB at {:.2f} TB/s\n",
                       name, chip.description, bf16,
                       chip.hbm_capacity.as_double() / (1024.0 * 1024.0 * 1024.0),
                       chip.hbm_bandwidth.value() * 1e-12);
  }
}

void print_stacks(std::ostream& out) {
  out << "stacks (--stack NAME; default: megatron on GPUs, maxtext on TPUs)\n";
  for (const auto& [stack, name] : enum_names(workloads::Stack{})) {
    // The basis does not depend on the accelerator; Hopper is one every stack runs on.
    const workloads::StackProfile p =
        workloads::stack_profile(stack, workloads::DeviceFamily::kHopper);
    out << fmt::format("  {:<17} {}\n", name, headline(p.basis));
  }
}

}  // namespace

void presets_command(std::ostream& out) {
  const topology::Catalogue catalogue = topology::Catalogue::builtin();
  print_models(out);
  print_clusters(out, catalogue);
  print_chips(out, catalogue);
  print_stacks(out);
}

}  // namespace meshsim::cli
