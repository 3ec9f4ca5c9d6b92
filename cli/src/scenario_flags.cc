#include "scenario_flags.h"

#include <fmt/format.h>

namespace meshsim::cli {

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
