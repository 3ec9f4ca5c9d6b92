// --max-trace-size (meshsim validate and calibrate): the limit on a measured trace's file and its
// inflated JSON text (traces::ImportLimits, 64 MiB each by default; the parsed document takes 15
// to 35 times the text in memory).
#pragma once

#include <cstdint>
#include <string>

#include "meshsim/sim/error.h"
#include "meshsim/traces/import.h"

namespace meshsim::cli {

// A size flag's value ("512MiB"): InputError on `flag` unless a positive byte count.
Bytes positive_size(const std::string& flag, const std::string& size);

// "512MiB" -> limits of 512 MiB on the file and on its text; InputError on --max-trace-size.
traces::ImportLimits trace_limits_from(const std::string& size);

// The most a trace file meshsim writes may hold unless the command's --trace-limit says otherwise:
// Perfetto's UI opens traces of about 2 GB in a browser tab (trace_processor reads larger ones),
// and all 2048 ranks of the default step write 1.8 GB; a trace of every rank of a long-sequence
// step can pass 75 GB, which should not fill the disk before it fails.
inline constexpr int64_t kDefaultTraceLimit = int64_t{16} << 30;

// A written trace's size limit, and the flag that raises it (empty where the command has none).
struct TraceLimit {
  int64_t bytes = kDefaultTraceLimit;
  std::string flag;
};

// The limit of a command with --trace-limit: its value ("64GiB"; InputError on the flag unless a
// positive size), or the default where `size` is empty.
TraceLimit trace_limit_flag(const std::string& size);

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
