#include "plan_flags.h"

#include <CLI/CLI.hpp>

namespace meshsim::cli {

using scenario::FieldKind;
using scenario::FieldValue;
using scenario::PlanFieldSpec;
using workloads::PlanField;

PlanFlags::PlanFlags() {
  for (const PlanFieldSpec& f : scenario::plan_fields()) {
    FieldValue& v = values_[static_cast<size_t>(f.field)];
    switch (f.kind) {
      case FieldKind::kInteger:
        v = int64_t{0};
        break;
      case FieldKind::kNumber:
        v = 0.0;
        break;
      case FieldKind::kBoolean:
        v = false;
        break;
      case FieldKind::kChoice:
        v = std::string();
        break;
      case FieldKind::kIntegerList:
        v = std::vector<int64_t>();
        break;
      case FieldKind::kChoiceList:
        v = std::vector<std::string>();
        break;
    }
  }
}

void PlanFlags::add_to(CLI::App* app) {
  for (const PlanFieldSpec& f : scenario::plan_fields()) {
    const auto i = static_cast<size_t>(f.field);
    FieldValue& v = values_[i];
    CLI::Option* o = nullptr;
    switch (f.kind) {
      case FieldKind::kInteger:
        o = app->add_option(f.flag(), std::get<int64_t>(v), f.doc);
        break;
      case FieldKind::kNumber:
        o = app->add_option(f.flag(), std::get<double>(v), f.doc);
        break;
      case FieldKind::kBoolean:
        // "--sp" and "--sp=true" store "true", "--sp=false" and "--no-sp" "false"; anything
        // else ("--sp=on", "--sp=1") is refused.
        o = app->add_flag(f.flag() + ",!" + f.negated_flag(), words_[i], f.doc)
                ->check(CLI::IsMember({"true", "false"}))
                ->option_text("[=true|false]");
        break;
      case FieldKind::kChoice:
        o = app->add_option(f.flag(), std::get<std::string>(v), f.doc)
                ->check(CLI::IsMember(f.spellings()));
        break;
      case FieldKind::kIntegerList:
        o = app->add_option(f.flag(), std::get<std::vector<int64_t>>(v), f.doc)->delimiter(',');
        break;
      case FieldKind::kChoiceList:
        o = app->add_option(f.flag(), std::get<std::vector<std::string>>(v), f.doc)
                ->delimiter(',')
                ->check(CLI::IsMember(f.spellings()));
        break;
    }
    options_.emplace_back(o, f.field);
  }
}

bool PlanFlags::given(PlanField field) const {
  for (const auto& [option, f] : options_) {
    if (f == field && option->count() > 0) {
      return true;
    }
  }
  return false;
}

void PlanFlags::apply(workloads::ParallelPlan& plan) const {
  for (const PlanFieldSpec& f : scenario::plan_fields()) {
    if (!given(f.field)) {
      continue;
    }
    const auto i = static_cast<size_t>(f.field);
    const FieldValue v = f.kind == FieldKind::kBoolean ? FieldValue(words_[i] == "true")
                                                       : values_[i];
    scenario::set_plan_field(plan, f.field, v, Origin::flag(scenario::flag_for(f.field, v)));
  }
}

}  // namespace meshsim::cli
