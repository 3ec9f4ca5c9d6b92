// Small text helpers the loaders share.
#pragma once

#include <cctype>
#include <string_view>

namespace meshsim {

// `s` without the white space (std::isspace: blanks, tabs, line ends) at either end.
inline std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front())) != 0) {
    s.remove_prefix(1);
  }
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back())) != 0) {
    s.remove_suffix(1);
  }
  return s;
}

}  // namespace meshsim
