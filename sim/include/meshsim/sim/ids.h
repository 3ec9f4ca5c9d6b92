// Strong ids (docs/style.md B.7): distinct types over uint32_t that index arenas and tables.
// Absence is std::optional<Id>, never -1.
#pragma once

#include <compare>
#include <cstddef>
#include <cstdint>
#include <functional>

namespace meshsim {

template <typename Tag>
class StrongId {
 public:
  constexpr StrongId() = default;
  constexpr explicit StrongId(uint32_t v) : v_(v) {}
  constexpr uint32_t value() const { return v_; }
  constexpr size_t index() const { return v_; }
  constexpr auto operator<=>(const StrongId&) const = default;

 private:
  uint32_t v_ = 0;
};

using RankId = StrongId<struct RankTag>;
using DeviceId = StrongId<struct DeviceTag>;
using LinkId = StrongId<struct LinkTag>;
using OpId = StrongId<struct OpTag>;
using GroupId = StrongId<struct GroupTag>;
using ProgramIndex = StrongId<struct ProgramTag>;
// A grouping of ops for reports that the engine carries without knowing what it means: the
// planner that labels ops defines the categories and their names (workloads: the parallelism a
// communication op serves, see workloads::category_of).
using OpCategory = StrongId<struct OpCategoryTag>;
using TransferId = StrongId<struct TransferTag>;  // a communication in flight (sim/comm_model.h)

}  // namespace meshsim

template <typename Tag>
struct std::hash<meshsim::StrongId<Tag>> {
  size_t operator()(meshsim::StrongId<Tag> id) const noexcept { return std::hash<uint32_t>{}(id.value()); }
};
