#include "meshsim/sim/error.h"

namespace meshsim {

namespace {
std::string compose(const std::string& source, const std::string& location,
                    const std::string& message) {
  std::string out = source;
  if (!location.empty()) {
    out += ": " + location;
  }
  return out + ": " + message;
}
}  // namespace

InputError::InputError(std::string source, std::string location, std::string message)
    : std::runtime_error(compose(source, location, message)),
      source_(std::move(source)),
      location_(std::move(location)),
      message_(std::move(message)) {}

void fail_check(const char* file, int line, const char* cond, const std::string& msg) {
  throw InternalError(fmt::format("internal error at {}:{}: check '{}' failed: {}", file, line,
                                  cond, msg));
}

}  // namespace meshsim
