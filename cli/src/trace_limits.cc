#include "trace_limits.h"

#include <fmt/format.h>

#include "meshsim/sim/unit_parse.h"

namespace meshsim::cli {

Bytes positive_size(const std::string& flag, const std::string& size) {
  Bytes b;
  try {
    b = parse_bytes(size);
  } catch (const UnitParseError& e) {
    throw InputError(flag, "", e.what());
  }
  if (b <= Bytes::zero()) {
    throw InputError(flag, "",
                     fmt::format("\"{}\": expected a positive size such as 512MiB", size));
  }
  return b;
}

TraceLimit trace_limit_flag(const std::string& size) {
  TraceLimit limit;
  limit.flag = "--trace-limit";
  if (!size.empty()) {
    limit.bytes = positive_size(limit.flag, size).count();
  }
  return limit;
}

traces::ImportLimits trace_limits_from(const std::string& size) {
  const Bytes b = positive_size("--max-trace-size", size);
  traces::ImportLimits limits;
  limits.max_file_bytes = b.count();
  limits.max_text_bytes = b.count();
  return limits;
}

}  // namespace meshsim::cli
