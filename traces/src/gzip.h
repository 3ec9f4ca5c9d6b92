// Private: inflating gzip files (profiler traces, Chakra traces).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace meshsim::traces::detail {

// Whether `bytes` starts with gzip's magic bytes (1f 8b).
bool is_gzip(std::string_view bytes);

// Inflates a gzip file (one member or several concatenated, as `cat a.gz b.gz` makes), refusing
// to produce more than `max_text` bytes: a small file may inflate to gigabytes. Errors are
// InputErrors on `path` (at the byte where the stream broke); past the limit an InputSizeError
// that names the limit on `what` ("a trace's JSON text").
std::string gunzip(std::string_view bytes, const std::string& path, int64_t max_text,
                   std::string_view what);

}  // namespace meshsim::traces::detail
