// Reading and parsing JSON input within bounds (json_input.h: JsonLimits).
#include <fmt/format.h>

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>

#include "meshsim/sim/error.h"
#include "meshsim/sim/json_input.h"

namespace meshsim {
namespace {

struct ScanFinding {
  size_t byte = 0;
  std::string message;
};

bool number_char(char c) {
  return (c >= '0' && c <= '9') || c == '-' || c == '+' || c == '.' || c == 'e' || c == 'E';
}

// A number token a double cannot hold (nlohmann throws out_of_range on it, without a location):
// only tokens with an exponent or of more than 300 characters can be one.
std::optional<std::string> out_of_range_number(std::string_view token) {
  if (token.size() <= 300 && token.find_first_of("eE") == std::string_view::npos) {
    return std::nullopt;
  }
  const std::string copy(token);
  errno = 0;
  const double v = std::strtod(copy.c_str(), nullptr);
  if (!std::isinf(v)) {
    return std::nullopt;
  }
  const std::string shown = copy.size() > 40 ? copy.substr(0, 37) + "..." : copy;
  return fmt::format("the number {} is beyond the range of a double (about 1.8e308)", shown);
}

// One linear pass over the text, before the parser: nesting deeper than `max_depth` and numbers
// out of a double's range, each with its byte offset. Syntax is the parser's business; this pass
// only has to be right on text the parser would accept.
std::optional<ScanFinding> scan(std::string_view text, int max_depth) {
  int depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') {
        ++i;
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > max_depth) {
        return ScanFinding{i, fmt::format("nested deeper than {} levels (the limit: meshsim's "
                                          "inputs nest a few levels; deeper nesting is refused "
                                          "before anything walks it)",
                                          max_depth)};
      }
    } else if (c == ']' || c == '}') {
      --depth;
    } else if (c == '-' || (c >= '0' && c <= '9')) {
      size_t end = i;
      while (end < text.size() && number_char(text[end])) {
        ++end;
      }
      if (auto why = out_of_range_number(text.substr(i, end - i))) {
        return ScanFinding{i, std::move(*why)};
      }
      i = end - 1;
    }
  }
  return std::nullopt;
}

}  // namespace

std::string describe_limit(int64_t bytes) {
  constexpr int64_t kKiB = 1024;
  for (const auto& [unit, scale] : {std::pair{"GiB", kKiB * kKiB * kKiB},
                                    std::pair{"MiB", kKiB * kKiB}, std::pair{"KiB", kKiB}}) {
    if (bytes >= scale) {
      const double v = static_cast<double>(bytes) / static_cast<double>(scale);
      return bytes % scale == 0 ? fmt::format("{} {}", bytes / scale, unit)
                                : fmt::format("{:.1f} {}", v, unit);
    }
  }
  return fmt::format("{} B", bytes);
}

std::string read_input_file(const std::string& path, int64_t max_bytes, std::string_view what) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    throw InputError(path, "", "is a directory, expected a file");
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    throw InputError(path, "", fmt::format("cannot open file: {}", std::strerror(errno)));
  }
  std::string out;
  std::string chunk(size_t{1} << 16, '\0');
  while (in) {
    in.read(chunk.data(), static_cast<std::streamsize>(chunk.size()));
    const auto got = static_cast<size_t>(in.gcount());
    if (static_cast<int64_t>(out.size() + got) > max_bytes) {
      throw InputSizeError(path, "",
                           fmt::format("larger than the {} limit on {} (an endless or runaway "
                                       "file is not read to the end)",
                                       describe_limit(max_bytes), what));
    }
    out.append(chunk.data(), got);
  }
  if (in.bad()) {
    throw InputError(path, "", "cannot read file");
  }
  return out;
}

nlohmann::json parse_json(std::string_view text, const std::string& source, int max_depth) {
  if (const auto finding = scan(text, max_depth)) {
    // 1-based, as the parser's own "byte N" (the first character is byte 1).
    throw InputError(source, fmt::format("byte {}", finding->byte + 1), finding->message);
  }
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::parse_error& e) {
    const bool at_end = e.byte >= text.size();
    throw InputError(
        source, fmt::format("byte {}", e.byte),
        at_end ? "not valid JSON: the text ends early (a truncated file?)" : "not valid JSON");
  } catch (const nlohmann::json::exception& e) {
    // out_of_range and the like that the scan did not foresee: still the input's fault.
    throw InputError(source, "", fmt::format("not valid JSON: {}", e.what()));
  }
}

nlohmann::json load_json_file(const std::string& path, const JsonLimits& limits) {
  return parse_json(read_input_file(path, limits.max_bytes, "a JSON input"), path,
                    limits.max_depth);
}

}  // namespace meshsim
