#include "scenario_flags.h"

#include <fmt/format.h>

namespace meshsim::cli {

using workloads::ParallelPlan;
using workloads::PlanField;

namespace {

std::string dashed(std::string_view name) {
  std::string flag = "--" + std::string(name);
  for (char& c : flag) {
    c = c == '_' ? '-' : c;
  }
  return flag;
}

}  // namespace

std::string flag_of(PlanField field) {
  switch (field) {
    case PlanField::kOverlapGradReduce:
      return "--no-overlap-grad-reduce";
    case PlanField::kOverlapParamGather:
      return "--no-overlap-param-gather";
    case PlanField::kOverlapP2p:
      return "--no-overlap-p2p";
    default:
      return dashed(to_string(field));
  }
}

std::string flag_of(scenario::ScenarioField field) { return dashed(to_string(field)); }

std::string flag_of(topology::FabricField field) { return dashed(to_string(field)); }

Origin origin_of(const ParallelPlan& plan, PlanField field) {
  const Origin& o = plan.origins[field];
  return o.given() ? o : Origin::flag(flag_of(field));
}

Origin origin_of(const Scenario& s, scenario::ScenarioField field) {
  const Origin& o = s.origins[field];
  return o.given() ? o : Origin::flag(flag_of(field));
}

InputError locate(const ParallelPlan& plan, const workloads::PlanError& e) {
  return origin_of(plan, e.field()).error(e.message());
}

InputError locate(const Scenario& s, const scenario::ScenarioError& e) {
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

namespace {

// A named enum's value given to `flag`; InputError listing the choices otherwise.
template <NamedEnum E>
E parse_flag(const std::string& flag, const std::string& name) {
  const std::optional<E> value = parse_enum<E>(name);
  if (!value) {
    throw InputError(flag, "",
                     fmt::format("\"{}\" is not one of {}", name, describe_choices<E>()));
  }
  return *value;
}

}  // namespace

collectives::Algorithm parse_algo_flag(const std::string& name) {
  return parse_flag<collectives::Algorithm>("--algo", name);
}

collectives::NetworkBackend parse_backend_flag(const std::string& name) {
  return parse_flag<collectives::NetworkBackend>("--backend", name);
}

scenario::CommOptions comm_options(const CommFlags& flags) {
  scenario::CommOptions o;
  o.backend = parse_backend_flag(flags.backend);
  o.collective.algorithm = parse_algo_flag(flags.algorithm);
  if (flags.protocol != "auto") {
    o.collective.protocol = parse_flag<collectives::NcclProtocol>("--proto", flags.protocol);
  }
  const auto version = collectives::parse_nccl_version(flags.nccl);
  if (!version) {
    throw InputError("--nccl", "",
                     fmt::format("\"{}\" is not an NCCL release from 2.18 on (e.g. 2.30 or "
                                 "2.18.5)",
                                 flags.nccl));
  }
  o.collective.nccl_version = *version;
  return o;
}

}  // namespace meshsim::cli
