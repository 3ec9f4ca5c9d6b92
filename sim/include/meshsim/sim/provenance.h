// Where an input value came from, and errors about a field before anyone knows that
// (docs/style.md D.13).
//
// Libraries below the edge (workloads/, collectives/, validation/) check typed inputs and throw
// `FieldError<Field>` naming the field of their own input type (a PlanField, say) and what is
// wrong; they never name a flag or a file. The edge (cli/, or a manifest loader) records an
// `Origin` for each field as it fills the input, in a `Provenance<Field>` table, and turns the
// error into an InputError located where the value was written:
//   scenario.json: /tp: tensor parallel 3 does not divide the 32 attention heads of llama3-8b
//   --tp: tensor parallel 3 does not divide the 32 attention heads of llama3-8b
//   manifest.json: /execution/kernels: ...
// A value nobody wrote (a library default, or a named preset's) has an Origin that says so; the
// edge decides how to name it (cli names the flag that would change it).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "meshsim/sim/enum_names.h"
#include "meshsim/sim/error.h"

namespace meshsim {

class Origin {
 public:
  enum class Kind : uint8_t {
    kDefault,  // nobody set it: the input type's default
    kPreset,   // a named preset's value ("the default scenario")
    kFlag,     // a command-line flag ("--tp")
    kFile,     // a file and a JSON pointer in it ("scenario.json", "/tp")
  };

  Origin() = default;
  static Origin preset(std::string name);
  static Origin flag(std::string flag);
  static Origin file(std::string path, std::string pointer);

  Kind kind() const { return kind_; }
  // A user wrote the value (a flag or a file), rather than a default or a preset.
  bool given() const { return kind_ == Kind::kFlag || kind_ == Kind::kFile; }
  // The flag, the file or the preset's name; empty for kDefault.
  const std::string& source() const { return source_; }
  // The JSON pointer inside the file; empty otherwise.
  const std::string& pointer() const { return pointer_; }
  // "--tp", "scenario.json: /tp", "the default scenario", "the default".
  std::string describe() const;
  // An InputError about the value, located here ("the default" and presets name themselves).
  InputError error(const std::string& message) const;

  bool operator==(const Origin&) const = default;

 private:
  Origin(Kind kind, std::string source, std::string pointer)
      : kind_(kind), source_(std::move(source)), pointer_(std::move(pointer)) {}

  Kind kind_ = Kind::kDefault;
  std::string source_;
  std::string pointer_;
};

// A library's complaint about one field of its typed input. what() is "<field>: <message>" (the
// field's name from its enum_names table); the edge uses field() and message() instead.
template <NamedEnum Field>
class FieldError : public std::runtime_error {
 public:
  FieldError(Field field, std::string message)
      : std::runtime_error(std::string(to_string(field)) + ": " + message),
        field_(field),
        message_(std::move(message)) {}
  Field field() const { return field_; }
  const std::string& message() const { return message_; }

 private:
  Field field_;
  std::string message_;
};

// The number of fields of a field enum: its names table has one entry per enumerator, numbered
// from 0, without aliases.
template <NamedEnum Field>
constexpr size_t field_count() {
  return enum_names(Field{}).size();
}

// Where each field of a typed input came from (all kDefault until set).
template <NamedEnum Field>
class Provenance {
 public:
  const Origin& operator[](Field f) const { return origins_[static_cast<size_t>(f)]; }
  void set(Field f, Origin origin) { origins_[static_cast<size_t>(f)] = std::move(origin); }
  // Sets every field's origin (e.g. to a preset's).
  void set_all(const Origin& origin) { origins_.fill(origin); }
  // The InputError that `e` is, located at its field's origin.
  InputError locate(const FieldError<Field>& e) const {
    return (*this)[e.field()].error(e.message());
  }

 private:
  std::array<Origin, field_count<Field>()> origins_{};
};

}  // namespace meshsim
