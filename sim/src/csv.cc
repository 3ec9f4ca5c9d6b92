#include "meshsim/sim/csv.h"

namespace meshsim {
namespace {

bool is_blank(char c) { return c == ' ' || c == '\t' || c == '\r'; }

// Appends the quoted text that starts at line[i] (just after the opening quote) to `field`, a
// doubled quote as one; returns the index just past the closing quote (the line's end without).
size_t read_quoted(std::string_view line, size_t i, std::string& field) {
  for (; i < line.size(); ++i) {
    if (line[i] != '"') {
      field += line[i];
    } else if (i + 1 < line.size() && line[i + 1] == '"') {
      field += '"';
      ++i;
    } else {
      return i + 1;
    }
  }
  return i;
}

}  // namespace

std::vector<std::string> split_csv_line(std::string_view line) {
  std::vector<std::string> fields;
  size_t i = 0;
  while (true) {
    std::string field;
    size_t keep = 0;  // the field's length without the unquoted blanks at its end
    for (; i < line.size() && line[i] != ','; ++i) {
      if (line[i] == '"') {
        i = read_quoted(line, i + 1, field) - 1;
        keep = field.size();
      } else if (!is_blank(line[i])) {
        field += line[i];
        keep = field.size();
      } else if (!field.empty()) {  // blanks inside a field stay; those before it are dropped
        field += line[i];
      }
    }
    field.resize(keep);
    fields.push_back(std::move(field));
    if (i == line.size()) {
      return fields;
    }
    ++i;  // past the comma
  }
}

}  // namespace meshsim
