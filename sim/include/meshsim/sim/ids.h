// Strong ids (STYLE B.7): distinct types over uint32_t that index arenas and tables. Absence is
// std::optional<Id>, never -1.
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
using StreamId = StrongId<struct StreamTag>;
using GroupId = StrongId<struct GroupTag>;
using TrackId = StrongId<struct TrackTag>;
using TransferId = StrongId<struct TransferTag>;  // a communication in flight (sim/comm_model.h)

}  // namespace meshsim

template <typename Tag>
struct std::hash<meshsim::StrongId<Tag>> {
  size_t operator()(meshsim::StrongId<Tag> id) const noexcept { return std::hash<uint32_t>{}(id.value()); }
};
