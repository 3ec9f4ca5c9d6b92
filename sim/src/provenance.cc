#include "meshsim/sim/provenance.h"

namespace meshsim {

Origin Origin::preset(std::string name) { return Origin(Kind::kPreset, std::move(name), ""); }

Origin Origin::flag(std::string flag) { return Origin(Kind::kFlag, std::move(flag), ""); }

Origin Origin::file(std::string path, std::string pointer) {
  return Origin(Kind::kFile, std::move(path), std::move(pointer));
}

std::string Origin::describe() const {
  switch (kind_) {
    case Kind::kDefault:
      return "the default";
    case Kind::kPreset:
    case Kind::kFlag:
      return source_;
    case Kind::kFile:
      return pointer_.empty() ? source_ : source_ + ": " + pointer_;
  }
  return source_;
}

InputError Origin::error(const std::string& message) const {
  if (kind_ == Kind::kFile) {
    return InputError(source_, pointer_, message);
  }
  return InputError(describe(), "", message);
}

}  // namespace meshsim
