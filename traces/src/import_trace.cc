// import_trace: read the file (inflating gzip), parse, detect the framework, hand over to the
// framework's importer.
#include <fmt/format.h>

#include <algorithm>
#include <string>

#include "gzip.h"
#include "import_events.h"
#include "meshsim/sim/error.h"
#include "meshsim/sim/json_input.h"
#include "meshsim/traces/import.h"

namespace meshsim::traces {

namespace {

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
  if (detail::is_gzip(bytes)) {
    return import_trace_text(
        detail::gunzip(bytes, source, limits.max_text_bytes, "a trace's JSON text"), source,
        limits);
  }
  return import_trace_text(bytes, source, limits);
}

MeasuredTrace import_trace(const std::string& path, const ImportLimits& limits) {
  const std::string bytes = read_input_file(path, limits.max_file_bytes, "a trace file");
  return import_trace_bytes(bytes, path, limits);
}

}  // namespace meshsim::traces
