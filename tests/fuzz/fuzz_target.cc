// One libFuzzer target (MESHSIM_FUZZ_TARGET names it, see tests/fuzz/CMakeLists.txt). An input
// error is a normal outcome; anything escaping run_target (and so reaching libFuzzer as an uncaught
// exception) is a finding, as are crashes, hangs, memory beyond -rss_limit_mb and sanitizer
// reports.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "fuzz_entries.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  meshsim::fuzz::run_target(MESHSIM_FUZZ_TARGET,
                            std::string_view(reinterpret_cast<const char*>(data), size));
  return 0;
}
