// Inflating gzip files (gzip.h).
#include "gzip.h"

#include <fmt/format.h>
#include <zlib.h>

#include <algorithm>

#include "meshsim/sim/error.h"
#include "meshsim/sim/json_input.h"

namespace meshsim::traces::detail {

bool is_gzip(std::string_view bytes) {
  return bytes.size() >= 2 && static_cast<unsigned char>(bytes[0]) == 0x1f &&
         static_cast<unsigned char>(bytes[1]) == 0x8b;
}

std::string gunzip(std::string_view bytes, const std::string& path, int64_t max_text,
                   std::string_view what) {
  z_stream zs{};
  // inflateInit2 is a macro with an old-style cast; call the function it expands to.
  if (inflateInit2_(&zs, 15 + 32, ZLIB_VERSION, static_cast<int>(sizeof(z_stream))) != Z_OK) {
    throw InputError(path, "", "cannot initialise zlib to read the gzip stream");
  }
  std::string out;
  std::string buffer(1 << 16, '\0');
  size_t consumed = 0;
  int rc = Z_OK;
  while (true) {
    const size_t chunk = std::min<size_t>(bytes.size() - consumed, 1u << 30);
    zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(bytes.data() + consumed));
    zs.avail_in = static_cast<uInt>(chunk);
    zs.next_out = reinterpret_cast<Bytef*>(buffer.data());
    zs.avail_out = static_cast<uInt>(buffer.size());
    rc = inflate(&zs, Z_NO_FLUSH);
    consumed += chunk - zs.avail_in;
    const size_t produced = buffer.size() - zs.avail_out;
    if (static_cast<int64_t>(out.size() + produced) > max_text) {
      inflateEnd(&zs);
      throw InputSizeError(path, fmt::format("byte {}", consumed),
                           fmt::format("the gzip stream inflates to more than the {} limit on {}",
                                       describe_limit(max_text), what));
    }
    out.append(buffer.data(), produced);
    if (rc == Z_STREAM_END) {
      if (consumed == bytes.size()) {
        break;
      }
      inflateReset(&zs);  // another gzip member follows
      continue;
    }
    if (rc != Z_OK && rc != Z_BUF_ERROR) {
      const std::string why = zs.msg != nullptr ? zs.msg : "zlib error";
      inflateEnd(&zs);
      throw InputError(path, fmt::format("byte {}", consumed),
                       fmt::format("corrupt gzip stream: {}", why));
    }
    if (consumed == bytes.size() && zs.avail_out != 0) {
      inflateEnd(&zs);
      throw InputError(path, fmt::format("byte {}", consumed),
                       "truncated gzip stream (the file ends inside the compressed data)");
    }
  }
  inflateEnd(&zs);
  return out;
}

}  // namespace meshsim::traces::detail
