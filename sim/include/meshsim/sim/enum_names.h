// One mechanism for the names of enums (flags, JSON values, reports, traces).
//
// An enum opts in by declaring, in its own namespace, a constexpr function `enum_names(E)` that
// returns an array of EnumName<E>: every enumerator with its canonical name, optionally followed
// by aliases (a later entry for a value already named is an alias: parsed, never printed):
//
//   enum class Recompute { kNone, kSelective, kFull };
//   constexpr auto enum_names(Recompute) {
//     return std::to_array<EnumName<Recompute>>({{Recompute::kNone, "none"},
//                                                {Recompute::kSelective, "selective"},
//                                                {Recompute::kFull, "full"}});
//   }
//
// Then `to_string(e)`, `parse_enum<E>(text)` (nullopt for an unknown name: callers turn that into
// an error, never a default), `enum_values<E>()`, `enum_choices<E>()` (the canonical names, in
// table order), `enum_spellings<E>()` (with the aliases) and `describe_choices<E>()`
// ("double-binary-tree (tree, dbt), ...") work for it.
// Namespaces other than meshsim that declare named enums say `using meshsim::to_string;` so that
// argument-dependent lookup finds the template. Cost: a linear scan of the table (they are a handful of entries).
#pragma once

#include <array>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace meshsim {

template <typename E>
struct EnumName {
  E value;
  std::string_view name;
};

template <typename E>
concept NamedEnum = std::is_enum_v<E> && requires(E e) {
  { enum_names(e) };
};

// The canonical name of `e` (its first entry); "?" when the table misses it (a bug the tests of
// each table catch).
template <NamedEnum E>
constexpr std::string_view to_string(E e) {
  for (const auto& n : enum_names(E{})) {
    if (n.value == e) {
      return n.name;
    }
  }
  return "?";
}

// The value named `text` (canonical name or alias), exactly as spelt; nullopt otherwise.
template <NamedEnum E>
constexpr std::optional<E> parse_enum(std::string_view text) {
  for (const auto& n : enum_names(E{})) {
    if (n.name == text) {
      return n.value;
    }
  }
  return std::nullopt;
}

// The values, in table order (each once).
template <NamedEnum E>
std::vector<E> enum_values() {
  std::vector<E> out;
  for (const auto& n : enum_names(E{})) {
    if (to_string(n.value) == n.name) {
      out.push_back(n.value);
    }
  }
  return out;
}

// The canonical names, in table order.
template <NamedEnum E>
std::vector<std::string> enum_choices() {
  std::vector<std::string> out;
  for (const auto& n : enum_names(E{})) {
    if (to_string(n.value) == n.name) {
      out.emplace_back(n.name);
    }
  }
  return out;
}

// Every name a value may be given by, canonical names and aliases, in table order (what a flag
// accepts).
template <NamedEnum E>
std::vector<std::string> enum_spellings() {
  std::vector<std::string> out;
  for (const auto& n : enum_names(E{})) {
    out.emplace_back(n.name);
  }
  return out;
}

// "gpipe, 1f1b, interleaved, zb"; aliases in parentheses after their canonical name.
template <NamedEnum E>
std::string describe_choices() {
  std::string out;
  for (const auto& canonical : enum_names(E{})) {
    if (to_string(canonical.value) != canonical.name) {
      continue;
    }
    out += (out.empty() ? "" : ", ") + std::string(canonical.name);
    std::string aliases;
    for (const auto& n : enum_names(E{})) {
      if (n.value == canonical.value && n.name != canonical.name) {
        aliases += (aliases.empty() ? "" : ", ") + std::string(n.name);
      }
    }
    if (!aliases.empty()) {
      out += " (" + aliases + ")";
    }
  }
  return out;
}

}  // namespace meshsim
