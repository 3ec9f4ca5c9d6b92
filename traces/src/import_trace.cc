// import_trace: read the file (inflating gzip), parse, detect the framework, hand over to the
// framework's importer.
#include <fmt/format.h>
#include <zlib.h>

#include <algorithm>
#include <string>

#include "import_events.h"
#include "meshsim/sim/error.h"
#include "meshsim/sim/json_input.h"
#include "meshsim/traces/import.h"

namespace meshsim::traces {

namespace {

bool is_gzip(std::string_view bytes) {
  return bytes.size() >= 2 && static_cast<unsigned char>(bytes[0]) == 0x1f &&
         static_cast<unsigned char>(bytes[1]) == 0x8b;
}

// Inflates a gzip file (one member or several concatenated, as `cat a.gz b.gz` makes), refusing
// to produce more than `max_text` bytes: a small file may inflate to gigabytes.
std::string gunzip(std::string_view bytes, const std::string& path, int64_t max_text) {
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
                           fmt::format("the gzip stream inflates to more than the {} limit on a "
                                       "trace's JSON text",
                                       describe_limit(max_text)));
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

bool looks_like_pytorch(const detail::EventTable& table) {
  if (table.legacy_array || table.has_top_level_key("schemaVersion") ||
      table.has_top_level_key("deviceProperties")) {
    return true;
  }
  for (const detail::Event& e : table.events) {
    if (e.name.starts_with("ProfilerStep#") || e.cat == "cpu_op" || e.cat == "user_annotation" ||
        e.cat == "cuda_runtime" || e.cat == "python_function" || e.cat == "Operator") {
      return true;
    }
  }
  return false;
}

bool looks_like_jax(const detail::EventTable& table) {
  for (const auto& [pid, name] : table.process_names) {
    if (name.starts_with("/host:") || name.starts_with("/device:")) {
      return true;
    }
  }
  return false;
}

}  // namespace

MeasuredTrace import_trace_text(std::string_view text, const std::string& source,
                                const ImportLimits& limits) {
  if (static_cast<int64_t>(text.size()) > limits.max_text_bytes) {
    throw InputSizeError(source, "",
                         fmt::format("larger than the {} limit on a trace's JSON text",
                                     describe_limit(limits.max_text_bytes)));
  }
  const detail::EventTable table = detail::parse_events(text, source, limits.max_depth);
  if (looks_like_pytorch(table)) {
    return detail::import_pytorch(table);
  }
  if (looks_like_jax(table)) {
    return detail::import_jax(table);
  }
  detail::fail_at_events(
      table,
      "cannot tell which profiler wrote this trace: expected PyTorch profiler events "
      "(ProfilerStep#N ranges, cat cpu_op/kernel) or JAX profiler processes (process_name "
      "\"/host:CPU\", \"/device:GPU:0\", \"/device:TPU:0\")");
}

MeasuredTrace import_trace_bytes(std::string_view bytes, const std::string& source,
                                 const ImportLimits& limits) {
  if (is_gzip(bytes)) {
    return import_trace_text(gunzip(bytes, source, limits.max_text_bytes), source, limits);
  }
  return import_trace_text(bytes, source, limits);
}

MeasuredTrace import_trace(const std::string& path, const ImportLimits& limits) {
  const std::string bytes = read_input_file(path, limits.max_file_bytes, "a trace file");
  return import_trace_bytes(bytes, path, limits);
}

}  // namespace meshsim::traces
