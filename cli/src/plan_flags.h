// The plan's flags on the command line, one per row of the plan field table
// (meshsim/scenario/plan_fields.h): a number's flag takes a number, a choice's one of its names
// (CLI11 refuses others, naming the flag and the choices), a list's comma-separated values, and a
// boolean's `--sp`, `--sp=true`, `--sp=false` or `--no-sp` (anything else is refused).
#pragma once

#include <array>
#include <string>
#include <utility>
#include <vector>

#include "cli11_fwd.h"
#include "meshsim/scenario/plan_fields.h"
#include "meshsim/workloads/parallel.h"

namespace CLI {
class Option;
}  // namespace CLI

namespace meshsim::cli {

class PlanFlags {
 public:
  PlanFlags();
  // Adds the flags to `app`. One PlanFlags may add them to several apps (`meshsim` and its `run`
  // and `goodput` share them); it must outlive their parsing.
  void add_to(CLI::App* app);
  // Whether the flag of `field` was given (on any of the apps).
  bool given(workloads::PlanField field) const;
  // Stores the value of every flag given into `plan`, with its origin: the flag as written
  // ("--no-overlap-p2p" for a boolean given false).
  void apply(workloads::ParallelPlan& plan) const;

 private:
  static constexpr size_t kFields = field_count<workloads::PlanField>();
  std::array<scenario::FieldValue, kFields> values_;
  std::array<std::string, kFields> words_;  // a boolean's "true" or "false"
  std::vector<std::pair<CLI::Option*, workloads::PlanField>> options_;
};

}  // namespace meshsim::cli
