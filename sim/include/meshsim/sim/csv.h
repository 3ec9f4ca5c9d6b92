// Reading CSV rows (the tables meshsim takes as input: kernel-model's GEMM shapes).
//
// One line is split into its fields as RFC 4180 has them: fields are separated by commas; a field
// in double quotes may hold commas, and a doubled quote inside it stands for one quote. Blanks
// (spaces, tabs, a carriage return of a CRLF line end) around an unquoted field, or around the
// quotes of a quoted one, are dropped; what stands inside quotes is kept as it is. A line break
// inside quotes is not supported: the caller splits the text into lines first.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace meshsim {

// The fields of one CSV line, at least one (an empty line is one empty field). Never throws; an
// unterminated quote runs to the end of the line. O(line length).
std::vector<std::string> split_csv_line(std::string_view line);

}  // namespace meshsim
