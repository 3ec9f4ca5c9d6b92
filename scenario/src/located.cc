#include "meshsim/scenario/located.h"

#include "meshsim/scenario/plan_fields.h"

namespace meshsim::scenario {

using workloads::ParallelPlan;
using workloads::PlanField;

std::string flag_of(PlanField field) { return changing_flag(field); }

std::string flag_of(ScenarioField field) { return flag_of_key(to_string(field)); }

std::string flag_of(topology::FabricField field) { return flag_of_key(to_string(field)); }

Origin origin_of(const ParallelPlan& plan, PlanField field) {
  const Origin& o = plan.origins[field];
  return o.given() ? o : Origin::flag(flag_of(field));
}

Origin origin_of(const Scenario& s, ScenarioField field) {
  const Origin& o = s.origins[field];
  return o.given() ? o : Origin::flag(flag_of(field));
}

InputError locate(const ParallelPlan& plan, const workloads::PlanError& e) {
  return origin_of(plan, e.field()).error(e.message());
}

InputError locate(const Scenario& s, const ScenarioError& e) {
  return origin_of(s, e.field()).error(e.message());
}

InputError locate(const Scenario& s, const topology::FabricError& e) {
  const Origin& at = s.fabric.origins[e.field()];
  return (at.given() ? at : Origin::flag(flag_of(e.field()))).error(e.message());
}

InputError locate(const collectives::CommError& e) {
  return InputError(e.field() == collectives::CommField::kProtocol ? "--proto" : "--algo", "",
                    e.message());
}

}  // namespace meshsim::scenario
