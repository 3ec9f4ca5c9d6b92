// --max-trace-size (meshsim validate and calibrate): the limit on a measured trace's file and its
// inflated JSON text (traces::ImportLimits, 64 MiB each by default; the parsed document takes 15
// to 35 times the text in memory).
#pragma once

#include <string>

#include "meshsim/sim/error.h"
#include "meshsim/traces/import.h"

namespace meshsim::cli {

// A size flag's value ("512MiB"): InputError on `flag` unless a positive byte count.
Bytes positive_size(const std::string& flag, const std::string& size);

// "512MiB" -> limits of 512 MiB on the file and on its text; InputError on --max-trace-size.
traces::ImportLimits trace_limits_from(const std::string& size);

// Runs `import` (a trace import, or what runs one); a trace past its size limit is reported with
// how to raise the limit.
template <typename F>
auto with_trace_limit_hint(F&& import) {
  try {
    return import();
  } catch (const InputSizeError& e) {
    throw InputSizeError(e.source(), e.location(),
                         e.message() +
                             " (a larger trace needs --max-trace-size, e.g. 1GiB, and "
                             "15 to 35 times that in memory)");
  }
}

}  // namespace meshsim::cli
