// CSV text as rows by column name, for tests that read tables (the committed microbenchmarks,
// meshsim's own CSV output), split as meshsim splits its CSV input (meshsim/sim/csv.h).
#pragma once

#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "meshsim/sim/csv.h"
#include "meshsim/sim/error.h"

namespace meshsim::testing {

using CsvRow = std::map<std::string, std::string>;

// The rows of `text` under its first line's header; `source` names it in a failed check.
inline std::vector<CsvRow> csv_rows(const std::string& text, const std::string& source) {
  std::istringstream in(text);
  std::string line;
  std::getline(in, line);
  const std::vector<std::string> header = split_csv_line(line);
  std::vector<CsvRow> rows;
  while (std::getline(in, line)) {
    if (line.empty()) {
      continue;
    }
    const std::vector<std::string> cells = split_csv_line(line);
    SIM_CHECK(cells.size() == header.size(), "{}: {} cells in a row of {} columns", source,
              cells.size(), header.size());
    CsvRow row;
    for (size_t i = 0; i < header.size(); ++i) {
      row[header[i]] = cells[i];
    }
    rows.push_back(std::move(row));
  }
  return rows;
}

}  // namespace meshsim::testing
